// SPDX-License-Identifier: GPL-2.0
/*
 * System memory RM allocates for a slice's clients (docs/security.md,
 * class 25).
 *
 * NV01_MEMORY_SYSTEM is pages the driver allocates itself, at the object's
 * construction, with plain GFP_KERNEL: charged to no memory cgroup, capped
 * by nothing.  A charge on the handle would not hold: the pages outlive it
 * wherever something else took a reference -- a duplicate UVM made when the
 * tenant mapped the memory (UVM_MAP_EXTERNAL_ALLOCATION), a CPU mapping
 * (vm_insert_page), a semaphore surface -- and RM says nothing of who
 * still holds them.  So xpu charges the pages themselves: after RM made
 * the object, xpu asks RM with its kernel privilege for the object's pages
 * (NV003E GET_SURFACE_PHYS_PAGES: struct page pointers, a control RM keeps
 * for kernel callers) and takes a reference on each (one per compound
 * page: the driver allocates high-order chunks as compound pages, "required
 * by vm_insert_page", nv-vm.c).  The slice is charged until xpu's
 * references are the pages' only ones, whoever held them last; xpu then
 * drops them, and the pages go back to the kernel.  A page the driver
 * keeps in a pool of its own after the object goes (590+,
 * NVreg_EnableSystemMemoryPools) holds a reference too, so it stays charged
 * until the pool lets it go: an over-count, never an escape.
 *
 * xpu's references keep the pages after RM let go, so records are looked
 * at again: a few of the oldest at every system-memory allocation and every
 * free through the slice (those RM let go of go, the rest move to the end,
 * so what a slice frees is given back after about a quarter as many calls
 * as it has live objects), all of them when a control file of the slice
 * closes, when the charge stands in the way (an allocation past
 * host_limit, the number of objects at its bound) and when the admin reads
 * the slice.  Before session 52 only the last three: in a slice without a
 * bound (the default) every page it freed stayed held until an admin read,
 * up to 65536 objects' worth.  Everything here is
 * under the slice's mem_lock, which every call of the slice's clients that
 * makes or frees an RM object holds, so the object is there while its
 * pages are asked for and referenced.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "hostmem.h"
#include "nvabi.h"
#include "rmapi.h"
#include "xpu.h"

/* One object's pages: the heads xpu holds a reference on. */
struct xpu_hostmem {
	struct list_head link;		/* in slice->hostmem */
	u64 bytes;			/* what RM said it holds */
	u32 n;
	struct page *heads[];
};

static void xpu_hostmem_drop(struct xpu_slice *slice, struct xpu_hostmem *h)
{
	u32 i;

	for (i = 0; i < h->n; i++)
		put_page(h->heads[i]);
	list_del(&h->link);
	slice->nr_hostmem--;
	WRITE_ONCE(slice->host_used, slice->host_used - h->bytes);
	kvfree(h);
}

/* Whether every page of H is held by xpu alone: RM let go of them all. */
static bool xpu_hostmem_alone(const struct xpu_hostmem *h)
{
	u32 i;

	for (i = 0; i < h->n; i++)
		if (page_count(h->heads[i]) > 1)
			return false;
	return true;
}

/* Let go of what nobody but xpu holds any longer. */
void xpu_hostmem_sweep(struct xpu_slice *slice)
{
	struct xpu_hostmem *h, *tmp;

	lockdep_assert_held(&slice->mem_lock);
	list_for_each_entry_safe(h, tmp, &slice->hostmem, link)
		if (xpu_hostmem_alone(h))
			xpu_hostmem_drop(slice, h);
}

/*
 * Look at up to N of SLICE's oldest records: those whose pages RM let go
 * of go, the others move to the end.  A live object's first page tells.
 */
void xpu_hostmem_sweep_some(struct xpu_slice *slice, unsigned int n)
{
	struct xpu_hostmem *h;

	lockdep_assert_held(&slice->mem_lock);
	while (n-- && !list_empty(&slice->hostmem)) {
		h = list_first_entry(&slice->hostmem, struct xpu_hostmem, link);
		if (xpu_hostmem_alone(h))
			xpu_hostmem_drop(slice, h);
		else
			list_move_tail(&h->link, &slice->hostmem);
	}
}

/* Whether BYTES more stay within SLICE's bound, as of the last sweep. */
static bool xpu_hostmem_under(const struct xpu_slice *slice, u64 bytes)
{
	u64 limit = READ_ONCE(slice->host_limit);

	return !limit || (bytes <= limit && slice->host_used <= limit - bytes);
}

/*
 * Whether WANT more bytes of system memory fit in SLICE, and one more
 * object: swept first when they would not.  In a slice with a bound an
 * object larger than xpu follows is refused here, before RM makes it (in
 * one without, it goes unrecorded).  A denial is counted.
 */
bool xpu_hostmem_fits(struct xpu_slice *slice, u64 want)
{
	lockdep_assert_held(&slice->mem_lock);
	if (READ_ONCE(slice->host_limit) &&
	    want > ((u64)XPU_HOSTMEM_MAX_PAGES << PAGE_SHIFT))
		goto denied;
	xpu_hostmem_sweep_some(slice, XPU_HOSTMEM_SWEEP_STEP);
	if (slice->nr_hostmem >= XPU_MAX_HOSTMEM ||
	    !xpu_hostmem_under(slice, want))
		xpu_hostmem_sweep(slice);
	if (slice->nr_hostmem < XPU_MAX_HOSTMEM && xpu_hostmem_under(slice, want))
		return true;
denied:
	slice->denied++;
	return false;
}

/*
 * System-memory object (HC, HO), which RM made for a caller of SLICE, goes
 * on record with a reference on each of its pages.  Returns 0; -ESRCH when
 * RM has no such object of that class (nothing to charge); -E2BIG for more
 * pages than xpu follows in one object; -ENOSPC past XPU_MAX_HOSTMEM;
 * -EDQUOT past the slice's host_limit; -EPERM for a page xpu cannot take
 * a reference on (one of a high-order block that is no compound page, as
 * dma_alloc_coherent() hands out: its tail pages count no references, so
 * when the block goes could not be told); -ENOMEM; -EIO when RM's two
 * answers disagree.  On an error other than -ESRCH the caller undoes the
 * allocation where the slice has a bound.
 */
int xpu_hostmem_record(struct xpu_slice *slice, u32 hc, u32 ho)
{
	struct xpu_hostmem *h;
	struct page **pages;
	u32 n, got, i, k;
	u32 status;
	u64 bytes;
	int ret;

	lockdep_assert_held(&slice->mem_lock);
	status = xpu_rm_sysmem_npages(hc, ho, &n);
	if (status != NV_OK || !n)
		return -ESRCH;
	if (n > XPU_HOSTMEM_MAX_PAGES)
		return -E2BIG;
	bytes = (u64)n << PAGE_SHIFT;
	if (!xpu_hostmem_under(slice, bytes)) {
		xpu_hostmem_sweep(slice);
		if (!xpu_hostmem_under(slice, bytes)) {
			slice->denied++;
			return -EDQUOT;
		}
	}
	if (slice->nr_hostmem >= XPU_MAX_HOSTMEM)
		return -ENOSPC;
	/* the heads go where the pages were: the array is the record's */
	h = kvmalloc(struct_size(h, heads, n), GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!h)
		return -ENOMEM;
	pages = h->heads;
	got = n;
	status = xpu_rm_sysmem_pages(hc, ho, pages, &got);
	if (status != NV_OK || got != n) {
		ret = status == NV_OK ? -EIO : -ESRCH;
		goto out_free;
	}
	for (i = 0, k = 0; i < n; i++) {
		struct page *head = compound_head(pages[i]);

		if (k && h->heads[k - 1] == head)
			continue;	/* one reference a compound page */
		/*
		 * A page of a live object counts a reference; one that counts
		 * none is a tail of a block that is no compound page.
		 */
		if (!get_page_unless_zero(head)) {
			ret = -EPERM;
			goto out_put;
		}
		h->heads[k++] = head;
	}
	h->n = k;
	h->bytes = bytes;
	list_add_tail(&h->link, &slice->hostmem);
	slice->nr_hostmem++;
	WRITE_ONCE(slice->host_used, slice->host_used + bytes);
	return 0;

out_put:
	while (k--)
		put_page(h->heads[k]);
out_free:
	kvfree(h);
	return ret;
}

/* SLICE goes: xpu's references go, the pages with them where RM's went. */
void xpu_hostmem_slice_release(struct xpu_slice *slice)
{
	struct xpu_hostmem *h, *tmp;

	list_for_each_entry_safe(h, tmp, &slice->hostmem, link)
		xpu_hostmem_drop(slice, h);
}
