// SPDX-License-Identifier: GPL-2.0
/*
 * The RM handles a slice's clients hold, counted and bounded per slice.
 *
 * Every RM client and object costs NVIDIA's driver kernel memory charged to
 * no cgroup, and RM caps neither the clients a file makes nor the objects
 * in a client (docs/security.md).  No control lists a client's handles, so
 * xpu mirrors them: every call that makes a handle in a slice's client is
 * made on xpu's copy of the caller's struct under the slice's mem_lock
 * (RM_ALLOC, RM_VID_HEAP_CONTROL, RM_ALLOC_MEMORY, RM_ALLOC_CONTEXT_DMA2,
 * RM_DUP_OBJECT, the import controls), so the handle RM made, and its
 * parent, are read where no thread of the caller's can rewrite them.  A
 * record goes on each, in a tree that follows RM's parents: RM takes a
 * handle only with an RM_FREE of it, of an ancestor or of its client, or
 * with the control file its client was made through (an object that
 * depends on another without descending from it is only invalidated when
 * that one goes, and keeps its handle: docs/nvstub.md), and each of those
 * takes the records of the subtree.
 * Where xpu cannot tell -- a parent it has no record of (a handle RM made
 * for itself) -- a record stays until its client goes: an over-count,
 * never an escape.  (RM frees no memory by offset: VID_HEAP's FREE needs
 * the handle.)  Handles RM makes for itself inside a
 * tenant's client (a TSG's context, a channel's TSG) come with objects
 * that are counted, so they are bounded with them.
 *
 * The bound is the module parameter max_handles, for every slice; a call
 * past it is refused NV_ERR_INSUFFICIENT_RESOURCES, RM not called.  The
 * count holds the records and the calls in flight that may make one, so
 * no race of the slice's threads passes it.  Records are charged to the
 * caller's memory cgroup.
 */
#include <linux/moduleparam.h>
#include <linux/rhashtable.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "handles.h"
#include "nvabi.h"
#include "xpu.h"

/*
 * Root may set both bounds at any time, within a range (EINVAL outside):
 * 0 would refuse a slice its first client, and a record is a few dozen
 * bytes of the caller's memory cgroup but RM's objects behind it are
 * charged to none.  A bound lowered below what a slice holds takes nothing
 * from it; the slice is refused more until it is under the bound.
 */
static unsigned int max_handles = XPU_MAX_HANDLES;
static struct xpu_uint_range max_handles_range =
	XPU_UINT_RANGE(max_handles, 1, 8 * XPU_MAX_HANDLES);
module_param_cb(max_handles, &xpu_uint_range_ops, &max_handles_range, 0644);
MODULE_PARM_DESC(max_handles,
		 "RM handles (clients and objects) one slice's clients may hold (1..1048576)");

struct xpu_hnd {
	struct rhash_head node;		/* in slice->handles, by key */
	u64 key;			/* client << 32 | handle */
	struct xpu_hnd *parent;		/* NULL for a client */
	/* a client's: the control file it was made through (compared only) */
	const struct xpu_file *owner;
	/* a client's: in its control file's clients; else in parent->kids */
	struct list_head sib;
	struct list_head kids;
	bool hashed;
};

/*
 * An OS event of a slice's client (NV_ESC_ALLOC_OS_EVENT): RM keeps one
 * for each (client, fd) in a list of the whole driver, tied to the file
 * the call came through, and checks neither the client nor the fd
 * (osapi.c allocate_os_event, 535 to 595).  RM takes it with a
 * FREE_OS_EVENT of (client, fd) through any file, with an RM_FREE of the
 * client, or with the close of its file; each drops the record here.
 */
struct xpu_osev {
	struct list_head link;		/* in slice->osevents */
	struct xpu_file *xf;		/* the file RM tied it to */
	u32 hc, fd;
};

/* RM walks its one list of them under a spinlock: at most 16 times 1024 */
static unsigned int max_os_events = XPU_MAX_OS_EVENTS;
static struct xpu_uint_range max_os_events_range =
	XPU_UINT_RANGE(max_os_events, 1, 16 * XPU_MAX_OS_EVENTS);
module_param_cb(max_os_events, &xpu_uint_range_ops, &max_os_events_range, 0644);
MODULE_PARM_DESC(max_os_events,
		 "OS events (NV_ESC_ALLOC_OS_EVENT) one slice's clients may hold (1..16384)");

static void xpu_osev_drop(struct xpu_slice *slice, struct xpu_osev *ev)
{
	list_del(&ev->link);
	WRITE_ONCE(slice->nr_osevents, slice->nr_osevents - 1);
	kfree(ev);
}

static const struct rhashtable_params xpu_hnd_params = {
	.key_len = sizeof(u64),
	.key_offset = offsetof(struct xpu_hnd, key),
	.head_offset = offsetof(struct xpu_hnd, node),
	.automatic_shrinking = true,
};

static struct kmem_cache *xpu_hnd_cache;

static u64 xpu_hnd_key(u32 hc, u32 h)
{
	return (u64)hc << 32 | h;
}

int xpu_handles_init(struct xpu_slice *slice)
{
	mutex_init(&slice->handles_lock);
	atomic_set(&slice->nr_handles, 0);
	INIT_LIST_HEAD(&slice->osevents);
	WRITE_ONCE(slice->nr_osevents, 0);
	return rhashtable_init(&slice->handles, &xpu_hnd_params);
}

/* Every file of the slice is gone, and with them every record. */
void xpu_handles_destroy(struct xpu_slice *slice)
{
	WARN_ON_ONCE(atomic_read(&slice->nr_handles));
	WARN_ON_ONCE(slice->nr_osevents);
	rhashtable_destroy(&slice->handles);
}

u32 xpu_handles_reserve(struct xpu_slice *slice, struct list_head *spare,
			u32 n)
{
	struct xpu_hnd *r;
	u32 i;

	INIT_LIST_HEAD(spare);
	if (atomic_add_return(n, &slice->nr_handles) >
	    READ_ONCE(max_handles)) {
		atomic_sub(n, &slice->nr_handles);
		return NV_ERR_INSUFFICIENT_RESOURCES;
	}
	for (i = 0; i < n; i++) {
		r = kmem_cache_zalloc(xpu_hnd_cache, GFP_KERNEL_ACCOUNT);
		if (!r) {
			atomic_sub(n - i, &slice->nr_handles);
			xpu_handles_cancel(slice, spare);
			return NV_ERR_NO_MEMORY;
		}
		INIT_LIST_HEAD(&r->kids);
		list_add(&r->sib, spare);
	}
	return NV_OK;
}

void xpu_handles_cancel(struct xpu_slice *slice, struct list_head *spare)
{
	struct xpu_hnd *r, *tmp;

	list_for_each_entry_safe(r, tmp, spare, sib) {
		list_del(&r->sib);
		kmem_cache_free(xpu_hnd_cache, r);
		atomic_dec(&slice->nr_handles);
	}
}

static struct xpu_hnd *xpu_hnd_find(struct xpu_slice *slice, u32 hc, u32 h)
{
	u64 key = xpu_hnd_key(hc, h);

	lockdep_assert_held(&slice->handles_lock);
	return rhashtable_lookup_fast(&slice->handles, &key, xpu_hnd_params);
}

/*
 * Whether SLICE has a record of handle H of client HC: an object the slice
 * made, or made and RM took out of xpu's sight.  Under the slice's
 * mem_lock, the records of its clients change only with it held.
 */
bool xpu_handles_known(struct xpu_slice *slice, u32 hc, u32 h)
{
	bool known;

	mutex_lock(&slice->handles_lock);
	known = xpu_hnd_find(slice, hc, h);
	mutex_unlock(&slice->handles_lock);
	return known;
}

static u32 xpu_hnd_drop_tree(struct xpu_slice *slice, struct xpu_hnd *root);

void xpu_handles_add(struct xpu_file *xf, struct list_head *spare, u32 hc,
		     u32 hp, u32 h)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_hnd *r, *client, *parent, *old;

	if (WARN_ON_ONCE(list_empty(spare)))
		return;
	r = list_first_entry(spare, struct xpu_hnd, sib);
	list_del_init(&r->sib);
	r->key = xpu_hnd_key(hc, h);
	mutex_lock(&slice->handles_lock);
	/*
	 * RM never makes a live handle twice: a record of the handle is of an
	 * object RM took out of xpu's sight, and goes
	 */
	old = xpu_hnd_find(slice, hc, h);
	if (old)
		atomic_sub(xpu_hnd_drop_tree(slice, old), &slice->nr_handles);
	if (h == hc) {
		/* a client: its control file's, freed with it by RM */
		list_add(&r->sib, &xf->hnd_clients);
		r->owner = xf;
	} else {
		client = xpu_hnd_find(slice, hc, hc);
		if (!client)
			goto drop;	/* no client of the slice's: not its */
		parent = hp == hc ? client : xpu_hnd_find(slice, hc, hp);
		/* a parent xpu has no record of: it goes with the client */
		r->parent = parent ?: client;
		list_add(&r->sib, &r->parent->kids);
	}
	/* a record whose hashing fails (memory) goes with its client */
	r->hashed = !rhashtable_insert_fast(&slice->handles, &r->node,
					    xpu_hnd_params);
	if (!r->hashed && h == hc)
		slice->hnd_unhashed = true;	/* xpu_handles_file_client */
	mutex_unlock(&slice->handles_lock);
	return;
drop:
	mutex_unlock(&slice->handles_lock);
	kmem_cache_free(xpu_hnd_cache, r);
	atomic_dec(&slice->nr_handles);
}

/* R and everything under it, leaves first: how many went. */
static u32 xpu_hnd_drop_tree(struct xpu_slice *slice, struct xpu_hnd *root)
{
	struct xpu_hnd *n = root, *up;
	u32 gone = 0;

	lockdep_assert_held(&slice->handles_lock);
	list_del(&root->sib);
	for (;;) {
		while (!list_empty(&n->kids))
			n = list_first_entry(&n->kids, struct xpu_hnd, sib);
		up = n->parent;
		if (n != root)
			list_del(&n->sib);
		if (n->hashed)
			rhashtable_remove_fast(&slice->handles, &n->node,
					       xpu_hnd_params);
		kmem_cache_free(xpu_hnd_cache, n);
		if (!(++gone % 1024))
			cond_resched();
		if (n == root)
			return gone;
		n = up;
	}
}

void xpu_handles_freed(struct xpu_slice *slice, u32 hc, u32 h)
{
	struct xpu_hnd *r;
	u32 gone = 0;

	mutex_lock(&slice->handles_lock);
	r = xpu_hnd_find(slice, hc, h);
	if (r)
		gone = xpu_hnd_drop_tree(slice, r);
	mutex_unlock(&slice->handles_lock);
	atomic_sub(gone, &slice->nr_handles);
}

void xpu_handles_file_release(struct xpu_file *xf)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_osev *ev, *tmp;
	u32 gone = 0;

	mutex_lock(&slice->handles_lock);
	/* RM took the OS events tied to the file (RmFreeUnusedClients) */
	list_for_each_entry_safe(ev, tmp, &slice->osevents, link)
		if (ev->xf == xf)
			xpu_osev_drop(slice, ev);
	while (!list_empty(&xf->hnd_clients))
		gone += xpu_hnd_drop_tree(slice,
					  list_first_entry(&xf->hnd_clients,
							   struct xpu_hnd, sib));
	mutex_unlock(&slice->handles_lock);
	atomic_sub(gone, &slice->nr_handles);
}

bool xpu_handles_is_client(struct xpu_slice *slice, u32 hc)
{
	bool ours;

	mutex_lock(&slice->handles_lock);
	ours = hc && xpu_hnd_find(slice, hc, hc);
	mutex_unlock(&slice->handles_lock);
	return ours;
}

/*
 * RM takes a call that names a client only through the file the client was
 * made through, or a file registered to that one (strict client validation,
 * on by default: rmclientValidate with the caller's file, or its REGISTER_FD
 * target, as OS info; NV_ERR_INVALID_CLIENT, 535 to 595).  A slice's control
 * file is registered to no other, and its GPU files only to a control file
 * of the slice.  So a call through XF naming another client makes nothing,
 * and what xpu asks of RM after it -- with its own privilege, which passes
 * that check -- would be about another tenant's objects (class 47).  A
 * control file's client must be its own, a GPU file's one of the slice's
 * (xpu does not keep which control file it is registered to).  Where a
 * client of the slice has no hashed record (memory), a client not found is
 * let through, as before.
 */
bool xpu_handles_file_client(struct xpu_file *xf, u32 hc)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_hnd *r;
	bool ours;

	mutex_lock(&slice->handles_lock);
	r = hc ? xpu_hnd_find(slice, hc, hc) : NULL;
	ours = r ? xf->gpu || r->owner == xf : slice->hnd_unhashed;
	mutex_unlock(&slice->handles_lock);
	return ours;
}

u32 xpu_osevents_admit(struct xpu_slice *slice, u32 hc,
		       struct xpu_osev **rec)
{
	u32 st = NV_OK;

	if (rec) {
		*rec = kzalloc(sizeof(**rec), GFP_KERNEL_ACCOUNT);
		if (!*rec)
			return NV_ERR_NO_MEMORY;
	}
	mutex_lock(&slice->handles_lock);
	if (!hc || !xpu_hnd_find(slice, hc, hc))
		st = NV_ERR_INVALID_CLIENT;
	else if (rec && slice->nr_osevents >= READ_ONCE(max_os_events))
		st = NV_ERR_INSUFFICIENT_RESOURCES;
	mutex_unlock(&slice->handles_lock);
	if (st && rec) {
		kfree(*rec);
		*rec = NULL;
	}
	return st;
}

void xpu_osevents_add(struct xpu_file *xf, struct xpu_osev *ev, u32 hc,
		      u32 fd)
{
	struct xpu_slice *slice = xf->slice;

	ev->xf = xf;
	ev->hc = hc;
	ev->fd = fd;
	mutex_lock(&slice->handles_lock);
	list_add(&ev->link, &slice->osevents);
	WRITE_ONCE(slice->nr_osevents, slice->nr_osevents + 1);
	mutex_unlock(&slice->handles_lock);
}

/*
 * Whether SLICE's records have the OS event of (HC, FD); with XF, that
 * record is tied to XF from now on (an allocation through XF whose answer
 * xpu could not read: RM's event, if it made one, is XF's, and if it did
 * not, the record only lasts longer).
 */
bool xpu_osevents_has(struct xpu_slice *slice, u32 hc, u32 fd,
		      struct xpu_file *xf)
{
	struct xpu_osev *ev;
	bool found = false;

	mutex_lock(&slice->handles_lock);
	list_for_each_entry(ev, &slice->osevents, link)
		if (ev->hc == hc && ev->fd == fd) {
			if (xf)
				ev->xf = xf;
			found = true;
			break;
		}
	mutex_unlock(&slice->handles_lock);
	return found;
}

void xpu_osevents_freed(struct xpu_slice *slice, u32 hc, u32 fd, bool all)
{
	struct xpu_osev *ev, *tmp;

	mutex_lock(&slice->handles_lock);
	list_for_each_entry_safe(ev, tmp, &slice->osevents, link) {
		if (ev->hc != hc || (!all && ev->fd != fd))
			continue;
		xpu_osev_drop(slice, ev);
		if (!all)
			break;
	}
	mutex_unlock(&slice->handles_lock);
}

u32 xpu_handles_count(struct xpu_slice *slice)
{
	return atomic_read(&slice->nr_handles);
}

u32 xpu_osevents_count(struct xpu_slice *slice)
{
	return READ_ONCE(slice->nr_osevents);	/* a figure; changed under handles_lock */
}

int xpu_handles_module_init(void)
{
	xpu_hnd_cache = KMEM_CACHE(xpu_hnd, SLAB_ACCOUNT);
	return xpu_hnd_cache ? 0 : -ENOMEM;
}

void xpu_handles_module_exit(void)
{
	kmem_cache_destroy(xpu_hnd_cache);
}
