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
 * - below mmap_min_addr (65536 in Debian's and Ubuntu's kernels), at one of the
 *   XPU_CALL_SLOTS pages from 0x1000 up (page 0 never: a kernel NULL
 *   dereference must not read a caller's struct): a process without
 *   CAP_SYS_RAWIO may not map there (get_unmapped_area's security check,
 *   which mmap, MAP_FIXED, mremap, shmat and a stack's growth all go
 *   through), so no task of the caller's can put a page of its own where
 *   the driver reads the call; xpu maps it there with the kernel's
 *   credentials.  Unmapping it, or moving it away, leaves nothing there:
 *   the driver's read fails (EFAULT).  Where mmap_min_addr is lower and
 *   the caller could map the slot itself, or the slots hold the process's
 *   own mappings, the page is still used, and counted in the read-only
 *   parameter call_pages_exposed;
 * - sealed where the kernel can seal (VM_SEALED, 6.10+): no munmap, mremap,
 *   mmap over it or mprotect; xpu unseals it itself before its own munmap.
 *   Elsewhere mprotect is refused (5.11+), and an unmap or a move is seen
 *   afterwards: its VMA's close says the page went while the call was
 *   made; then the driver read nothing (or, where the caller could map
 *   the slot, perhaps a page of its own), and the caller (who alone can do
 *   that to its own address space) is treated as cheating;
 * - the driver's copy-back makes it writable for every thread of the
 *   process (a PTE is the process's, not the thread's): after the call xpu
 *   write-protects it again before it reads the results, and the caller
 *   checks the fields it relies on against what it wrote (mem.c).  It is
 *   write-protected in place (the PTE zapped and put back read-only at
 *   once), so that the next call's read of it takes no fault;
 * - while current is the only user of its address space (mm_users 1), no
 *   other task can store through the page's PTE: the process has no other
 *   thread, only current could make one, and current is in the call;
 *   get_user_pages, which a store from another process goes through,
 *   refuses PFN maps.  Then the page is left as the copy-back left it, and
 *   write-protected only at the start of a later call made when the
 *   address space has another user -- before xpu writes that call's
 *   parameters into it.  A single-threaded caller's calls thus take no
 *   fault and no TLB flush once its page is writable.  A process with an
 *   AIO context or an io_uring is never alone: a driver may complete its
 *   asynchronous I/O from a kernel thread that adopts its address space
 *   without counting in mm_users (kthread_use_mm; FunctionFS does).
 * Pages are the address space's, not a file's: a call takes one no other
 * call holds (found by its VMA in the slots, under the mmap lock; a bit of
 * the page's says which a call holds), or maps one in a free slot, or,
 * with all XPU_CALL_SLOTS held by calls of the process's (a process
 * stalling its own), waits, killable, for one.  They are kept between
 * calls, so a call costs a copy, the copy-back's fault and a
 * write-protection (a caller alone: the copy) instead of a mapping made
 * and torn down.  A page goes when the process unmaps it or exits, or
 * when a file of xpu's is released in that process (a page's mapping
 * holds a reference on xpu.ko, as a doorbell's does).  Nothing is held
 * across a call but the page itself: a call that must not wait on a
 * slice's lock (an RM_CONTROL, whose params the driver reads from the
 * caller's memory, which a tenant can stall) takes a page all the same.
 */

#include <linux/anon_inodes.h>
#include <linux/bitops.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/hash.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/moduleparam.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/user_namespace.h>
#include <linux/wait.h>

#include "callpage.h"
#include "compat.h"

struct xpu_callpage {
	refcount_t ref;			/* the mapping's file's, and the call's */
	struct page *page;
	struct task_struct *writer;	/* the caller during the call, else NULL */
	unsigned long addr;
	unsigned long busy;		/* bit 0: a call holds it */
	bool kept;			/* in a slot: stays mapped after the call */
	bool gone;			/* a VMA of the page was closed */
	bool written;			/* the writer made it writable */
	bool open;			/* its PTE may be writable (the call's) */
	bool sealed;			/* the caller was alone at the call's start */
};

/*
 * Calls waiting for a page (every slot of their process's held), by
 * address space: a queue of a few, a count of the waiters on it, and a
 * count bumped when a page of one of their address spaces may have come
 * free, with only that address space's waiters woken (the key).  Until
 * session 56 one queue served the host, so a tenant's threads parked
 * behind its own stalled calls were woken, at the expense of whoever made
 * it, by the end of every call on the host.  A call's end only reads
 * WAITERS: no store to a shared line on the ioctl's path.
 */
#define XPU_CALLPAGE_WAIT_BITS	6

static struct xpu_callpage_waits {
	wait_queue_head_t wq;
	atomic_t waiters;
	atomic_t seq;
} xpu_callpage_waits[1 << XPU_CALLPAGE_WAIT_BITS];

struct xpu_callpage_waiter {
	struct wait_queue_entry entry;
	struct mm_struct *mm;
};

void xpu_callpage_init(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(xpu_callpage_waits); i++)
		init_waitqueue_head(&xpu_callpage_waits[i].wq);
}

static struct xpu_callpage_waits *xpu_callpage_waits_of(struct mm_struct *mm)
{
	return &xpu_callpage_waits[hash_ptr(mm, XPU_CALLPAGE_WAIT_BITS)];
}

/* A waiter is woken by its own address space's pages only. */
static int xpu_callpage_wake(struct wait_queue_entry *entry,
			     unsigned int mode, int sync, void *key)
{
	struct xpu_callpage_waiter *w =
		container_of(entry, struct xpu_callpage_waiter, entry);

	if (key != w->mm)
		return 0;
	return default_wake_function(entry, mode, sync, key);
}

static void xpu_callpage_freed(struct mm_struct *mm)
{
	struct xpu_callpage_waits *w = xpu_callpage_waits_of(mm);

	/* the page let go of before the look at the waiters (their order) */
	smp_mb();
	if (!atomic_read(&w->waiters))
		return;
	atomic_inc(&w->seq);
	__wake_up(&w->wq, TASK_NORMAL, 0, mm);
}

/*
 * Until W's count moved from SEQ (a page of its queue's address spaces
 * may have come free), or a fatal signal: -EINTR.
 */
static int xpu_callpage_wait(struct xpu_callpage_waits *w,
			     struct mm_struct *mm, int seq)
{
	struct xpu_callpage_waiter waiter = { .mm = mm };
	int ret = 0;

	init_waitqueue_func_entry(&waiter.entry, xpu_callpage_wake);
	waiter.entry.private = current;
	add_wait_queue(&w->wq, &waiter.entry);
	for (;;) {
		set_current_state(TASK_KILLABLE);
		if (atomic_read(&w->seq) != seq)
			break;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	remove_wait_queue(&w->wq, &waiter.entry);
	return ret;
}

/*
 * What keeps a caller from unmapping or protecting the page of a call
 * (besides its place, below mmap_min_addr, which keeps a page of its own
 * from taking its address): 2 sealed (VM_SEALED, 6.10+), 1 mprotect
 * refused (5.11+), 0 neither (compat.h).
 */
static int call_page_guard = XPU_VMA_SEALS ? 2 : XPU_VMA_REFUSES_MPROTECT;
module_param(call_page_guard, int, 0444);
MODULE_PARM_DESC(call_page_guard,
		 "what keeps a process from unmapping or protecting the page of a call xpu makes for it: 2 sealed, 1 mprotect refused, 0 neither: an unmap or a move is seen after the call (read only)");

/*
 * Pages of calls mapped where the caller, without CAP_SYS_RAWIO, could have
 * mapped a page of its own instead: mmap_min_addr left no room below it, or
 * the slots were taken by the process's own mappings (a caller with
 * CAP_SYS_RAWIO, or mmap_min_addr lowered).  0 on a host that keeps
 * mmap_min_addr at 65536 (Debian's and Ubuntu's kernels; upstream's 4096 is
 * too low, unless an LSM refuses low mappings).
 */
static unsigned long call_pages_exposed;
module_param(call_pages_exposed, ulong, 0444);
MODULE_PARM_DESC(call_pages_exposed,
		 "pages of calls xpu made for a process at an address it could have mapped a page of its own at (mmap_min_addr too low); 0 is as it should be (read only)");

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
	xpu_callpage_freed(vma->vm_mm);		/* its slot */
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

	if (READ_ONCE(cp->writer) != current)
		return VM_FAULT_SIGBUS;
	WRITE_ONCE(cp->written, true);
	return 0;
}

#if XPU_VMA_REFUSES_MPROTECT
/*
 * Never: a page made read-only would fail the driver's copy-back, and xpu
 * would read its own copy of the call as RM's answer.
 */
static int xpu_callpage_mprotect(struct vm_area_struct *vma,
				 unsigned long start, unsigned long end,
				 unsigned long newflags)
{
	return -EPERM;
}
#endif

static const struct vm_operations_struct xpu_callpage_vm_ops = {
	.close = xpu_callpage_close,
	.fault = xpu_callpage_fault,
	.pfn_mkwrite = xpu_callpage_mkwrite,
#if XPU_VMA_REFUSES_MPROTECT
	.mprotect = xpu_callpage_mprotect,
#endif
};

static int xpu_callpage_mmap(struct file *file, struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE || vma->vm_pgoff ||
	    !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP |
		     VM_DONTCOPY | XPU_VM_SEALED);
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

/*
 * vm_mmap of FILE at ADDR, MAP_FIXED_NOREPLACE when ADDR is not 0.  Below
 * mmap_min_addr a caller without CAP_SYS_RAWIO may not map (the security
 * check of get_unmapped_area, which every mmap, mremap, shmat and
 * MAP_FIXED goes through): xpu maps its page there as the kernel, with the
 * kernel's credentials for that one mmap (the address and the file are
 * xpu's, nothing the caller named).  *EXPOSED: the caller could have
 * mapped there itself.
 */
static unsigned long xpu_callpage_mmap_at(struct file *file,
					  unsigned long addr, bool *exposed)
{
	unsigned long flags = MAP_SHARED | (addr ? MAP_FIXED_NOREPLACE : 0);
	const struct cred *old;
	unsigned long a;

	a = vm_mmap(file, addr, PAGE_SIZE, PROT_READ | PROT_WRITE, flags, 0);
	*exposed = !IS_ERR_VALUE(a);
	if (a != (unsigned long)-EPERM && a != (unsigned long)-EACCES)
		return a;
	old = override_creds(rcu_dereference_raw(init_task.cred));
	a = vm_mmap(file, addr, PAGE_SIZE, PROT_READ | PROT_WRITE, flags, 0);
	revert_creds(old);
	return a;
}

/*
 * A new page mapped in current's address space at ADDR (0: wherever mmap
 * puts it); the caller holds a ref.
 */
static struct xpu_callpage *xpu_callpage_new(unsigned long addr)
{
	struct xpu_callpage *cp;
	struct file *file;
	bool exposed;
	unsigned long a;

	cp = kzalloc(sizeof(*cp), GFP_KERNEL_ACCOUNT);
	if (!cp)
		return ERR_PTR(-ENOMEM);
	cp->page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!cp->page) {
		kfree(cp);
		return ERR_PTR(-ENOMEM);
	}
	refcount_set(&cp->ref, 2);
	cp->busy = 1;
	cp->kept = addr != 0;
	file = anon_inode_getfile("[xpu-call]", &xpu_callpage_fops, cp, O_RDWR);
	if (IS_ERR(file)) {
		xpu_callpage_put(cp);
		xpu_callpage_put(cp);
		return ERR_CAST(file);
	}
	a = xpu_callpage_mmap_at(file, addr, &exposed);
	fput(file);			/* the mapping holds its own */
	if (IS_ERR_VALUE(a)) {
		xpu_callpage_put(cp);
		return ERR_PTR((long)a);
	}
	if (exposed && !ns_capable_noaudit(&init_user_ns, CAP_SYS_RAWIO))
		call_pages_exposed++;
	cp->addr = a;
	return cp;
}

/* Whether CP is the VMA of current's at its address (mmap lock held). */
static struct vm_area_struct *xpu_callpage_vma(struct xpu_callpage *cp)
{
	struct vm_area_struct *vma = find_vma(current->mm, cp->addr);

	if (!vma || vma->vm_start != cp->addr ||
	    vma->vm_ops != &xpu_callpage_vm_ops || vma->vm_private_data != cp)
		return NULL;
	return vma;
}

/*
 * xpu's own munmap of CP in current's address space, if it is still there:
 * unsealed first (the seal is for the process, not for xpu).
 */
static void xpu_callpage_unmap(struct xpu_callpage *cp)
{
#if XPU_VMA_SEALS
	struct vm_area_struct *vma;

	/* killed: the page goes with the address space */
	if (mmap_write_lock_killable(current->mm))
		return;
	vma = xpu_callpage_vma(cp);
	if (vma)
		vm_flags_clear(vma, XPU_VM_SEALED);
	mmap_write_unlock(current->mm);
	if (!vma)
		return;
#endif
	vm_munmap(cp->addr, PAGE_SIZE);
}

/*
 * Whether current is alone in its address space: then no other task can
 * store through the PTE of a page of its (see the top of this file).  An
 * AIO context or an io_uring, once made, stays until the exit: a kernel
 * thread completing the I/O it started may adopt the mm uncounted.
 */
static bool xpu_callpage_alone(void)
{
	if (atomic_read(&current->mm->mm_users) != 1)
		return false;
#ifdef CONFIG_AIO
	if (rcu_access_pointer(current->mm->ioctx_table))
		return false;
#endif
#ifdef CONFIG_IO_URING
	if (READ_ONCE(current->io_uring))
		return false;
#endif
	return true;
}

/*
 * Write-protect CP's page in current's address space, which a copy-back
 * may have made writable: its PTE zapped (with the TLB flush), and when
 * AGAIN put back at once with the VMA's read-only protection, so that the
 * next call's read of it takes no fault.  Held by a call.
 */
static void xpu_callpage_protect(struct xpu_callpage *cp, bool again)
{
	struct vm_area_struct *vma;

	mmap_read_lock(current->mm);
	vma = xpu_callpage_vma(cp);
	if (vma) {
		zap_special_vma_range(vma, cp->addr, PAGE_SIZE);
		if (again)	/* a failure here leaves it to a fault */
			vmf_insert_pfn(vma, cp->addr, page_to_pfn(cp->page));
	}
	mmap_read_unlock(current->mm);
	cp->open = false;
}

/* The address of slot I (1 to XPU_CALL_SLOTS): page 0 is never used. */
static unsigned long xpu_callpage_slot(int i)
{
	return (unsigned long)i << PAGE_SHIFT;
}

/*
 * A page for a call in current's address space: a kept one no call holds,
 * else a new one in a free slot, else, with every slot held by a call, a
 * wait for one; with no slot xpu's (the process's own mappings there), a
 * page mapped for this call only.
 */
static struct xpu_callpage *xpu_callpage_get(void)
{
	struct mm_struct *mm = current->mm;
	struct xpu_callpage_waits *w = xpu_callpage_waits_of(mm);
	struct xpu_callpage *cp;
	bool waiting = false;
	unsigned long free;
	int i, ours, seq = 0;

	for (;;) {
		free = 0;
		ours = 0;
		if (mmap_read_lock_killable(mm))
			return ERR_PTR(-EINTR);
		for (i = 1; i <= XPU_CALL_SLOTS; i++) {
			unsigned long a = xpu_callpage_slot(i);
			struct vm_area_struct *vma = find_vma(mm, a);

			if (!vma || vma->vm_start >= a + PAGE_SIZE) {
				if (!free)
					free = a;
				continue;
			}
			if (vma->vm_start != a ||
			    vma->vm_ops != &xpu_callpage_vm_ops)
				continue;
			ours++;
			cp = vma->vm_private_data;
			/* the VMA's file holds a ref: alive under the lock */
			if (cp->kept && !test_and_set_bit(0, &cp->busy)) {
				refcount_inc(&cp->ref);
				mmap_read_unlock(mm);
				goto out;
			}
		}
		mmap_read_unlock(mm);
		if (free) {
			cp = xpu_callpage_new(free);
			/* another call of the process's took the slot first */
			if (cp == ERR_PTR(-EEXIST))
				continue;
			/* a security module that refuses even the kernel */
			if (cp == ERR_PTR(-EPERM) || cp == ERR_PTR(-EACCES))
				cp = xpu_callpage_new(0);
			goto out;
		}
		if (!ours) {
			cp = xpu_callpage_new(0);
			goto out;
		}
		if (!waiting) {
			atomic_inc(&w->waiters);
			/* counted before the pages are looked again at */
			smp_mb__after_atomic();
			waiting = true;
		} else if (xpu_callpage_wait(w, mm, seq)) {
			cp = ERR_PTR(-EINTR);
			goto out;
		}
		/* before the look at the pages (xpu_callpage_freed's order) */
		seq = atomic_read_acquire(&w->seq);
	}
out:
	if (waiting)
		atomic_dec(&w->waiters);
	return cp;
}

struct xpu_callpage *xpu_callpage_map(const void *data, size_t len,
				      unsigned long *addr)
{
	struct xpu_callpage *cp;

	if (!current->mm || len > PAGE_SIZE)
		return ERR_PTR(-EINVAL);
	cp = xpu_callpage_get();
	if (IS_ERR(cp))
		return cp;
	/*
	 * Alone now, alone until the call's end: only current could add a
	 * task that stores through the page, and current is in the call.
	 */
	cp->sealed = xpu_callpage_alone();
	/* left writable by a call made alone, and current is no longer */
	if (cp->open && !cp->sealed)
		xpu_callpage_protect(cp, true);
	memcpy(page_address(cp->page), data, len);
	WRITE_ONCE(cp->written, false);
	WRITE_ONCE(cp->writer, current);
	*addr = cp->addr;
	return cp;
}

void xpu_callpage_write(struct xpu_callpage *cp, size_t off, const void *data,
			size_t len)
{
	if (!WARN_ON_ONCE(off > PAGE_SIZE || len > PAGE_SIZE - off))
		memcpy(page_address(cp->page) + off, data, len);
}

bool xpu_callpage_done(struct xpu_callpage *cp, void *data, size_t len,
		       bool *sealed)
{
	bool kept;

	WRITE_ONCE(cp->writer, NULL);
	/* a close or a write allowed before the driver's return is seen here */
	smp_mb();
	/*
	 * The driver's copy-back made the page writable for every thread of
	 * the process: read-only again before xpu reads it, so that what it
	 * reads is what the driver wrote or what a store made before this
	 * (which the caller's check of the fields it relies on sees) --
	 * unless current is alone, when nobody else can have stored.
	 */
	if (READ_ONCE(cp->written))
		cp->open = true;
	if (cp->open && !xpu_callpage_alone())
		xpu_callpage_protect(cp, cp->kept);
	kept = !READ_ONCE(cp->gone);
	memcpy(data, page_address(cp->page), len);
	if (sealed)
		*sealed = cp->sealed && kept;
	if (!cp->kept) {
		if (kept)
			xpu_callpage_unmap(cp);		/* this call's only */
	} else {
		/* after the copy out of it */
		clear_bit_unlock(0, &cp->busy);
		xpu_callpage_freed(current->mm);
	}
	xpu_callpage_put(cp);
	return kept;
}

void xpu_callpages_release(void)
{
	struct xpu_callpage *cps[XPU_CALL_SLOTS];
	struct mm_struct *mm = current->mm;
	int i, n = 0;

	if (!mm || (current->flags & PF_EXITING))
		return;			/* the pages go with the address space */
	if (mmap_read_lock_killable(mm))
		return;
	for (i = 1; i <= XPU_CALL_SLOTS; i++) {
		unsigned long a = xpu_callpage_slot(i);
		struct vm_area_struct *vma = find_vma(mm, a);
		struct xpu_callpage *cp;

		if (!vma || vma->vm_start != a ||
		    vma->vm_ops != &xpu_callpage_vm_ops)
			continue;
		cp = vma->vm_private_data;
		/* one a call holds stays */
		if (cp->kept && !test_and_set_bit(0, &cp->busy)) {
			refcount_inc(&cp->ref);
			cps[n++] = cp;
		}
	}
	mmap_read_unlock(mm);
	while (n--) {
		xpu_callpage_unmap(cps[n]);
		xpu_callpage_put(cps[n]);
	}
}
