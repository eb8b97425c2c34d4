// SPDX-License-Identifier: GPL-2.0
/*
 * The page of a call xpu.ko makes as the caller (mem.c, xpu_free_as_caller).
 *
 * Such a call goes through the caller's own file, in its context, so RM
 * checks it as any call of the caller's; its parameters must therefore lie
 * in the caller's address space, where the driver reads them.  An anonymous
 * page there lands where the caller can predict, and its other threads could
 * rewrite the parameters between xpu's write and the driver's read.  So the
 * page is one of xpu's (docs/security.md, "The page of a call made as the
 * caller"):
 * - shared, PFN-mapped and write-protected: a write to it faults to
 *   pfn_mkwrite, which lets only the task making the call write (the
 *   driver's copy-back); any other thread's store gets SIGBUS, mprotect
 *   cannot lift that, and get_user_pages (/proc/<pid>/mem,
 *   process_vm_writev, ptrace) refuses PFN maps;
 * - never copied by fork, never grown;
 * - its VMA's close says whether it was unmapped, moved or replaced while
 *   the call was made: then what the driver read is not known to be xpu's,
 *   and the caller (who alone can do that to its own address space) is
 *   treated as cheating.
 * The page, the small state and the file go when the mapping goes.
 */

#include <linux/anon_inodes.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "callpage.h"
#include "compat.h"

struct xpu_callpage {
	refcount_t ref;			/* the call's, and the file's */
	struct page *page;
	struct task_struct *writer;	/* the caller during the call, else NULL */
	unsigned long addr;
	bool gone;			/* a VMA of the page was closed */
};

static void xpu_callpage_put(struct xpu_callpage *cp)
{
	if (!refcount_dec_and_test(&cp->ref))
		return;
	__free_page(cp->page);
	kfree(cp);
}

/* Every close -- munmap, a move by mremap, MAP_FIXED over it, exit. */
static void xpu_callpage_close(struct vm_area_struct *vma)
{
	struct xpu_callpage *cp = vma->vm_private_data;

	WRITE_ONCE(cp->gone, true);
}

static vm_fault_t xpu_callpage_fault(struct vm_fault *vmf)
{
	struct xpu_callpage *cp = vmf->vma->vm_private_data;

	/* with vm_page_prot, which write notification keeps read-only */
	return vmf_insert_pfn(vmf->vma, vmf->vma->vm_start,
			      page_to_pfn(cp->page));
}

static vm_fault_t xpu_callpage_mkwrite(struct vm_fault *vmf)
{
	struct xpu_callpage *cp = vmf->vma->vm_private_data;

	return READ_ONCE(cp->writer) == current ? 0 : VM_FAULT_SIGBUS;
}

static const struct vm_operations_struct xpu_callpage_vm_ops = {
	.close = xpu_callpage_close,
	.fault = xpu_callpage_fault,
	.pfn_mkwrite = xpu_callpage_mkwrite,
};

static int xpu_callpage_mmap(struct file *file, struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE || vma->vm_pgoff ||
	    !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP |
		     VM_DONTCOPY);
	vma->vm_ops = &xpu_callpage_vm_ops;
	vma->vm_private_data = file->private_data;
	return 0;
}

static int xpu_callpage_release(struct inode *inode, struct file *file)
{
	xpu_callpage_put(file->private_data);
	return 0;
}

static const struct file_operations xpu_callpage_fops = {
	.owner = THIS_MODULE,
	.mmap = xpu_callpage_mmap,
	.release = xpu_callpage_release,
};

struct xpu_callpage *xpu_callpage_map(const void *data, size_t len,
				      unsigned long *addr)
{
	struct xpu_callpage *cp;
	struct file *file;
	unsigned long a;

	if (!current->mm || len > PAGE_SIZE)
		return ERR_PTR(-EINVAL);
	cp = kzalloc(sizeof(*cp), GFP_KERNEL);
	if (!cp)
		return ERR_PTR(-ENOMEM);
	cp->page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!cp->page) {
		kfree(cp);
		return ERR_PTR(-ENOMEM);
	}
	memcpy(page_address(cp->page), data, len);
	cp->writer = current;
	refcount_set(&cp->ref, 2);
	file = anon_inode_getfile("[xpu-call]", &xpu_callpage_fops, cp, O_RDWR);
	if (IS_ERR(file)) {
		xpu_callpage_put(cp);
		xpu_callpage_put(cp);
		return ERR_CAST(file);
	}
	a = vm_mmap(file, 0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	fput(file);			/* the mapping holds its own */
	if (IS_ERR_VALUE(a)) {
		xpu_callpage_put(cp);
		return ERR_PTR((long)a);
	}
	cp->addr = a;
	*addr = a;
	return cp;
}

bool xpu_callpage_done(struct xpu_callpage *cp, void *data, size_t len)
{
	bool kept;

	WRITE_ONCE(cp->writer, NULL);
	/* a close seen before the driver's read is seen here */
	smp_mb();
	kept = !READ_ONCE(cp->gone);
	memcpy(data, page_address(cp->page), len);
	if (kept)
		vm_munmap(cp->addr, PAGE_SIZE);
	xpu_callpage_put(cp);
	return kept;
}
