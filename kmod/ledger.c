// SPDX-License-Identifier: GPL-2.0
/*
 * The ledger: video memory a slice freed that RM still keeps, charged to the
 * slice until RM shows that nothing else holds it (docs/memory.md, "Memory
 * UVM keeps").
 *
 * RM charges memory to the process of its owning handle.  When the owner's
 * handle is freed while another handle duplicates the memory, ownership
 * passes to the next duplicate (mem.c, "Choose the new owner"), and UVM
 * duplicates every allocation it maps (UVM_MAP_EXTERNAL_ALLOCATION) into its
 * kernel client, which GET_PID_INFO charges to no process.  A tenant could
 * RM_FREE a mapped allocation, keep the memory through UVM and allocate
 * again, with its slice reading 0.
 *
 * So before a slice's free of a video-memory object reaches RM, xpu takes a
 * duplicate of it into the ledger's client: a kernel client made as
 * NV01_ROOT_NON_PRIV by the ledger's own thread, which GET_PID_INFO counts
 * under that thread's pid.  After the free, RM says whether the ledger's
 * handle holds the memory alone; if so xpu lets go of it and the memory goes,
 * if not the slice keeps paying for it ("held") until a later probe finds it
 * alone.
 *
 * The probe: RM exposes no duplicate count, but GET_PID_INFO sorts each
 * handle as private (the memory's only handle), shared-owned or shared-duped.
 * When the ledger has one handle on the GPU, its private figure says whether
 * that handle is alone.  Else one more duplicate of the handle turns it from
 * private to shared exactly when it was alone, so the ledger's private
 * figure drops by its size.  Nothing but xpu acts on the ledger's client
 * (the ledger lock serialises it), and other clients' frees only ever make
 * its handles more private, so a drop by the size means alone; anything else
 * means "ask again later", which errs on the side of charging.  The sum of
 * the three figures moves only with xpu's own dups and frees, so one reading
 * of it serves until then, and a new handle's size is what its dup added.
 * A duplicate of an object recorded at its allocation takes the recorded
 * size without a reading; the reading after the free measures it
 * (xpu_ledger_alone), so what a caller skewed in the record is never what
 * the slice is charged for memory the ledger holds.
 *
 * The duplicate is made with xpu's privilege on a handle the caller named,
 * but it only adds a reference: if the caller's free was not the caller's
 * to make (RM refused it: the object is still there), the duplicate goes
 * again at once, whoever's the object was.
 *
 * A free can also take video memory along with a bigger object: RM_FREE of
 * a client, of a device or subdevice, and the close of a control file free
 * every memory object under them, and UVM's duplicates keep what it maps.
 * RM lists no client's objects to a kernel client, so xpu records every
 * video-memory object a slice's control file makes (by the handles RM gave
 * it, checked with RM) and takes a duplicate of each such a free covers,
 * before it; after it, those RM freed are treated as one free each.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/hashtable.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "ledger.h"
#include "mem.h"
#include "nvabi.h"
#include "rmapi.h"
#include "xpu.h"

/* A duplicate the ledger keeps for a slice: memory someone else holds too. */
struct xpu_held {
	struct list_head link;		/* slice->held, under the ledger lock */
	struct list_head gpu_link;	/* xpu_ledger_held[], while held unplaced */
	u32 h_dup;			/* in the ledger's client */
	bool subdevice;			/* its parent is the ledger's subdevice */
	u64 size;			/* as RM counts it */
	u32 hc, ho;			/* the tenant's, while its free runs */
	/*
	 * While held: where RM placed its memory (xpu_rm_ledger_where), when
	 * RM said, in xpu_ledger_placed under the ledger lock.
	 */
	struct hlist_node where_link;
	u64 where;
	unsigned int gpu_nr;
	bool placed;
};

/*
 * Serialises everything done to the ledger's client and every reading of
 * RM's figures for it.  Taken under a slice's mem_lock, never across a call
 * that touches user memory.
 */
static DEFINE_MUTEX(xpu_ledger_lock);
/*
 * Every slice's held duplicates, under the ledger lock: those RM placed by
 * where their memory begins, the others by GPU.
 */
static DEFINE_HASHTABLE(xpu_ledger_placed, 9);
static struct list_head xpu_ledger_held[XPU_MAX_GPUS];
static struct task_struct *xpu_ledger_thread;
static DECLARE_COMPLETION(xpu_ledger_ready);
static int xpu_ledger_status;

/*
 * The thread whose pid RM names the ledger's memory by: it makes the client
 * and lives as long as the client does, so the pid is never reused.
 */
static int xpu_ledger_fn(void *unused)
{
	xpu_ledger_status = xpu_rm_ledger_create();
	complete(&xpu_ledger_ready);
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

int xpu_ledger_init(void)
{
	struct task_struct *t;
	int i;

	for (i = 0; i < XPU_MAX_GPUS; i++)
		INIT_LIST_HEAD(&xpu_ledger_held[i]);
	t = kthread_run(xpu_ledger_fn, NULL, "xpu-ledger");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wait_for_completion(&xpu_ledger_ready);
	if (xpu_ledger_status) {
		kthread_stop(t);
		return xpu_ledger_status;
	}
	xpu_ledger_thread = t;
	return 0;
}

/* After every slice is gone: the client goes with what it still holds. */
void xpu_ledger_exit(void)
{
	if (!xpu_ledger_thread)
		return;
	xpu_rm_ledger_destroy();
	kthread_stop(xpu_ledger_thread);
	xpu_ledger_thread = NULL;
}

/*
 * What the ledger holds on each GPU, under the ledger lock: how many handles,
 * and the sum of RM's three figures for them when known.  GET_PID_INFO counts
 * each handle's length in exactly one of the three (_gpuCollectMemInfo),
 * others' frees only move the ledger's handles between them, and only xpu
 * makes or frees its handles: so the sum moves only with xpu's own dups and
 * frees, by the handle's length, and one reading stands until then.
 */
static u32 xpu_ledger_handles[XPU_MAX_GPUS];
static u64 xpu_ledger_sum[XPU_MAX_GPUS];
static bool xpu_ledger_sum_known[XPU_MAX_GPUS];

static u64 xpu_usage_sum(const struct xpu_vidmem_usage *u)
{
	return u->priv + u->owned + u->duped;
}

/* A reading of RM's figures for the ledger on GPU, which the sum follows. */
static int xpu_ledger_read(struct xpu_gpu *gpu, struct xpu_vidmem_usage *u)
{
	unsigned int i = gpu - xpu_gpus;
	int ret;

	lockdep_assert_held(&xpu_ledger_lock);
	ret = xpu_rm_ledger_usage(gpu, u);
	xpu_ledger_sum[i] = ret ? 0 : xpu_usage_sum(u);
	xpu_ledger_sum_known[i] = !ret;
	return ret;
}

static u32 xpu_ledger_dup(struct xpu_gpu *gpu, bool sub, u32 hc, u32 ho,
			  u32 *h)
{
	u32 status;

	lockdep_assert_held(&xpu_ledger_lock);
	status = xpu_rm_ledger_dup(gpu, sub, hc, ho, h);
	if (status == NV_OK)
		xpu_ledger_handles[gpu - xpu_gpus]++;
	return status;
}

/* The ledger lets go of its handle H on GPU, SIZE bytes by RM's count. */
static void xpu_ledger_drop(struct xpu_gpu *gpu, u32 h, u64 size)
{
	unsigned int i = gpu - xpu_gpus;

	lockdep_assert_held(&xpu_ledger_lock);
	xpu_rm_ledger_free(h);
	xpu_ledger_handles[i]--;
	if (xpu_ledger_sum[i] >= size)
		xpu_ledger_sum[i] -= size;
	else
		xpu_ledger_sum_known[i] = false;
}

/*
 * A duplicate of the caller's (HC, HO) into the ledger, as *H: RM's size of
 * it -- what its dup added to the ledger's figures --, or 0 when RM would
 * not make or measure it (then none is kept).
 */
static u64 xpu_ledger_dup_measure(struct xpu_gpu *gpu, bool sub, u32 hc,
				  u32 ho, u32 *h)
{
	unsigned int i = gpu - xpu_gpus;
	struct xpu_vidmem_usage u;
	u64 before, size = 0;

	lockdep_assert_held(&xpu_ledger_lock);
	*h = 0;
	if (!xpu_ledger_sum_known[i] && xpu_ledger_read(gpu, &u))
		return 0;
	before = xpu_ledger_sum[i];
	if (xpu_ledger_dup(gpu, sub, hc, ho, h))
		return 0;
	if (!xpu_ledger_read(gpu, &u) && xpu_ledger_sum[i] > before)
		size = xpu_ledger_sum[i] - before;
	if (!size) {
		xpu_ledger_drop(gpu, *h, 0);
		*h = 0;
	}
	return size;
}

/*
 * A duplicate of the caller's (HC, HO) into the ledger, as *H, for an object
 * recorded at SIZE bytes (what RM's figure grew by when it was made, under
 * the slice's mem_lock), without a reading: SIZE, or 0 when RM would not
 * make it.  SIZE is a claim the reading after the free measures
 * (xpu_ledger_alone), so the ledger's sum is unknown until a reading: a
 * claim added to it would skew the size another duplicate measures.
 */
static u64 xpu_ledger_dup_recorded(struct xpu_gpu *gpu, bool sub, u32 hc,
				   u32 ho, u64 size, u32 *h)
{
	unsigned int i = gpu - xpu_gpus;

	lockdep_assert_held(&xpu_ledger_lock);
	*h = 0;
	if (!size)
		return xpu_ledger_dup_measure(gpu, sub, hc, ho, h);
	if (xpu_ledger_dup(gpu, sub, hc, ho, h))
		return 0;
	xpu_ledger_sum_known[i] = false;
	return size;
}

/*
 * Whether the ledger's handle H is its memory's only one; *SIZE becomes the
 * memory's size as RM counts it (it may come in as the size recorded at the
 * allocation, which a caller can skew: what its creators' figures grew by,
 * while a free through an unsliced file lowered them).  GET_PID_INFO calls
 * a handle private exactly when it is its memory's only one.  When H is
 * the only handle the ledger has on the GPU, the ledger's figures are H's
 * alone: their sum is its size, and it is alone when all of it is private.
 * Else one more duplicate of H adds its size to the sum, and turns it from
 * private to shared exactly when it was alone, so the ledger's private
 * figure drops by that size (others' frees meanwhile only raise it:
 * anything else means "ask again later", which errs on the side of
 * charging).
 */
static bool xpu_ledger_alone(struct xpu_gpu *gpu, bool sub, u32 h, u64 *size)
{
	struct xpu_vidmem_usage a, b;
	bool alone = false;
	u64 sa, sb;
	u32 h2 = 0;

	lockdep_assert_held(&xpu_ledger_lock);
	if (xpu_ledger_read(gpu, &a))
		return false;
	sa = xpu_usage_sum(&a);
	if (xpu_ledger_handles[gpu - xpu_gpus] == 1) {
		*size = sa;
		return a.priv == sa;
	}
	if (xpu_ledger_dup(gpu, sub, 0, h, &h2))
		return false;
	if (!xpu_ledger_read(gpu, &b)) {
		sb = xpu_usage_sum(&b);
		if (sb > sa) {
			*size = sb - sa;
			alone = a.priv >= *size && a.priv - b.priv == *size;
		}
	}
	xpu_ledger_drop(gpu, h2, *size);
	return alone;
}

/* SLICE keeps HELD, charged, until its memory is the ledger's alone. */
static void xpu_ledger_hold(struct xpu_slice *slice, struct xpu_held *held)
{
	lockdep_assert_held(&xpu_ledger_lock);
	list_add_tail(&held->link, &slice->held);
	if (held->placed)
		hash_add(xpu_ledger_placed, &held->where_link, held->where);
	else
		list_add_tail(&held->gpu_link,
			      &xpu_ledger_held[slice->gpu - xpu_gpus]);
	WRITE_ONCE(slice->held_bytes, slice->held_bytes + held->size);
}

static void xpu_ledger_unhold(struct xpu_slice *slice, struct xpu_held *held)
{
	lockdep_assert_held(&xpu_ledger_lock);
	xpu_ledger_drop(slice->gpu, held->h_dup, held->size);
	WRITE_ONCE(slice->held_bytes, slice->held_bytes - held->size);
	list_del(&held->link);
	if (held->placed)
		hash_del(&held->where_link);
	else
		list_del(&held->gpu_link);
	kfree(held);
}

/*
 * Where RM placed the memory of HELD's duplicate, on SLICE's GPU: asked
 * when a free leaves it held, so that finding the held duplicates of one
 * memory asks RM about those placed alike only.
 */
static void xpu_ledger_place(struct xpu_slice *slice, struct xpu_held *held)
{
	lockdep_assert_held(&xpu_ledger_lock);
	held->gpu_nr = slice->gpu - xpu_gpus;
	held->placed = xpu_rm_ledger_where(held->h_dup, &held->where);
}

/*
 * Whether any slice's held duplicate on SLICE's GPU names the memory HELD's
 * does (a tenant shared it with another slice's, RM_SHARE, and both freed
 * their handles; or SLICE's own, when a handle of the caller's duplicated
 * memory it freed before): then that one keeps it, charged to its slice,
 * and HELD is not needed.  Two held handles of one memory would each keep
 * it from being the ledger's alone: neither would ever go.  Asked only
 * when a free leaves memory held, and of RM only for held duplicates of the
 * same size placed where HELD's memory is (xpu_ledger_place) or not placed:
 * before session 59 every held duplicate of the size was asked about under
 * the ledger lock, so a tenant holding thousands of one size slowed every
 * slice's such frees.
 */
static bool xpu_ledger_held_elsewhere(struct xpu_slice *slice,
				      const struct xpu_held *held)
{
	unsigned int nr = slice->gpu - xpu_gpus, bkt;
	struct xpu_held *other;

	lockdep_assert_held(&xpu_ledger_lock);
	if (held->placed) {
		hash_for_each_possible(xpu_ledger_placed, other, where_link,
				       held->where)
			/*
			 * one memory is one size and one place for all its
			 * handles: one placed elsewhere is another memory
			 */
			if (other->gpu_nr == nr &&
			    other->where == held->where &&
			    other->size == held->size &&
			    xpu_rm_ledger_same(other->h_dup, held->h_dup))
				return true;
	} else {
		/* RM did not place it: any placed one could be its memory */
		hash_for_each(xpu_ledger_placed, bkt, other, where_link)
			if (other->gpu_nr == nr && other->size == held->size &&
			    xpu_rm_ledger_same(other->h_dup, held->h_dup))
				return true;
	}
	/* those RM did not place could be any memory */
	list_for_each_entry(other, &xpu_ledger_held[nr], gpu_link)
		if (other->size == held->size &&
		    xpu_rm_ledger_same(other->h_dup, held->h_dup))
			return true;
	return false;
}

/*
 * The video-memory objects one slice may have on record (below), at most
 * XPU_MAX_MEMRECS.  Lowered, records past it stay; allocations are
 * refused until the slice is under it again.
 */
static unsigned int max_memrecs = XPU_MAX_MEMRECS;
static struct xpu_uint_range max_memrecs_range =
	XPU_UINT_RANGE(max_memrecs, 1, XPU_MAX_MEMRECS);
module_param_cb(max_memrecs, &xpu_uint_range_ops, &max_memrecs_range, 0644);
MODULE_PARM_DESC(max_memrecs,
		 "video-memory objects one slice may hold (1..65536)");

/*
 * Whether SLICE may record one more video-memory object: asked before an
 * allocation reaches RM, under the slice's mem_lock, under which alone
 * records are made.  An allocation RM made that xpu then undoes can be
 * held meanwhile by a thread's UVM mapping of its handle, so the bound is
 * met before the call, not after it (found by a review in session 57).
 */
bool xpu_ledger_room(struct xpu_slice *slice)
{
	lockdep_assert_held(&slice->mem_lock);
	return atomic_read(&slice->nr_memrecs) < READ_ONCE(max_memrecs);
}

/* A video-memory object made through a slice's control file, and its size. */
struct xpu_memrec {
	struct hlist_node node;		/* in xf->memrecs */
	u32 hc, ho;
	u64 size;			/* what RM's figure grew by */
	bool sub;			/* its parent is a subdevice */
};

static u32 xpu_memrec_key(u32 hc, u32 ho)
{
	return hc ^ ho * 0x9e3779b9u;
}

static struct xpu_memrec *xpu_memrec_find(struct xpu_file *xf, u32 hc, u32 ho)
{
	struct xpu_memrec *r;

	hash_for_each_possible(xf->memrecs, r, node, xpu_memrec_key(hc, ho))
		if (r->hc == hc && r->ho == ho)
			return r;
	return NULL;
}

static void xpu_memrec_drop(struct xpu_file *xf, struct xpu_memrec *r)
{
	hash_del(&r->node);
	kfree(r);
	atomic_dec(&xf->slice->nr_memrecs);
}

static void xpu_memrec_forget(struct xpu_file *xf, u32 hc, u32 ho)
{
	struct xpu_memrec *r = xpu_memrec_find(xf, hc, ho);

	if (r)
		xpu_memrec_drop(xf, r);
}

/*
 * An allocation through XF, a control file of a slice, grew RM's figure for
 * the slice by SIZE, and the caller's struct names (HC, HO) as the new
 * object: a claim.  RM must say it is video memory, and xpu must not have
 * it already (RM never makes a live handle twice; a live recorded one named
 * instead of the new object is a lie).  SIZE stays with the record, for
 * xpu_ledger_unseen() and the ledger's duplicate at its free, and so does
 * what its parent HP is (as RM read it: the handles of the call are
 * checked on xpu's page), for the duplicate's parent.  Under the
 * slice's mem_lock, which every path that makes a handle in the slice's
 * clients takes.  MADE says the names are no claim: RM said, on a copy
 * nobody else could write, that it made HO as video memory (mem.c,
 * xpu_admit_call), so RM is not asked again.  0, -ESRCH for a claim that
 * does not hold, -ENOSPC past max_memrecs (lowered since xpu_ledger_room
 * said yes, or a call xpu did not take for video memory), -ENOMEM.
 */
int xpu_ledger_record(struct xpu_file *xf, u32 hc, u32 hp, u32 ho, u64 size,
		      bool made)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_memrec *r;

	lockdep_assert_held(&slice->mem_lock);
	if ((!made &&
	     xpu_rm_object_class(hc, ho) != NV01_MEMORY_LOCAL_USER) ||
	    xpu_memrec_find(xf, hc, ho))
		return -ESRCH;
	if (atomic_inc_return(&slice->nr_memrecs) > READ_ONCE(max_memrecs)) {
		atomic_dec(&slice->nr_memrecs);
		return -ENOSPC;
	}
	/* the caller's memory cgroup pays; failing it undoes the allocation */
	r = kmalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r) {
		atomic_dec(&slice->nr_memrecs);
		return -ENOMEM;
	}
	r->hc = hc;
	r->ho = ho;
	r->size = size;
	/* allocations come by the thousand under one device or subdevice */
	if (xf->parent_hc != hc || xf->parent_hp != hp) {
		xf->parent_sub = xpu_rm_object_class(hc, hp) ==
				 NV20_SUBDEVICE_0;
		xf->parent_hc = hc;
		xf->parent_hp = hp;
	}
	r->sub = xf->parent_sub;
	hash_add(xf->memrecs, &r->node, xpu_memrec_key(hc, ho));
	return 0;
}

/*
 * What went from XF's records with no free xpu made or stood by for it (a
 * call xpu made as the caller did not free what xpu asked for): the records
 * whose objects RM no longer has are forgotten, and their sizes returned,
 * for the slice to pay.  Under the slice's mem_lock.
 */
u64 xpu_ledger_unseen(struct xpu_file *xf)
{
	struct xpu_memrec *r;
	struct hlist_node *tmp;
	unsigned int bkt;
	u64 bytes = 0;

	lockdep_assert_held(&xf->slice->mem_lock);
	hash_for_each_safe(xf->memrecs, bkt, tmp, r, node) {
		if (xpu_rm_object_class(r->hc, r->ho) == NV01_MEMORY_LOCAL_USER)
			continue;
		bytes += r->size;
		xpu_memrec_drop(xf, r);
	}
	return bytes;
}

/*
 * Before a free that takes video memory along with a bigger object -- the
 * client HC itself (HO == HC), a device or subdevice HO of it (CLS), or
 * every client of XF (HC 0: the file's release) -- a duplicate of each
 * recorded object it covers goes into the ledger, on TAKEN.  Memory is
 * parented by a device or a subdevice (resource_list.h, VideoMemory).
 */
static void xpu_ledger_cascade_begin(struct xpu_file *xf, u32 hc, u32 ho,
				     u32 cls, struct list_head *taken)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_held *held;
	struct xpu_memrec *r;
	struct hlist_node *tmp;
	unsigned int bkt;

	hash_for_each_safe(xf->memrecs, bkt, tmp, r, node) {
		u32 rc = r->hc, ro = r->ho, parent, pcls;

		if (hc && rc != hc)
			continue;
		parent = xpu_rm_object_parent(rc, ro);
		if (!parent) {		/* gone some other way: forget it */
			xpu_memrec_drop(xf, r);
			continue;
		}
		pcls = xpu_rm_object_class(rc, parent);
		if (cls == NV20_SUBDEVICE_0 && parent != ho)
			continue;
		if (cls == NV01_DEVICE_0 && parent != ho &&
		    (pcls != NV20_SUBDEVICE_0 ||
		     xpu_rm_object_parent(rc, parent) != ho))
			continue;
		/*
		 * held past the free: the freer's memory cgroup pays, and a
		 * cgroup at its limit must not make the free go without the
		 * ledger standing by (xpu_ledger_free)
		 */
		held = kzalloc(sizeof(*held), GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
		held->hc = rc;
		held->ho = ro;
		held->subdevice = pcls == NV20_SUBDEVICE_0;
		mutex_lock(&xpu_ledger_lock);
		held->size = xpu_ledger_dup_recorded(slice->gpu,
						     held->subdevice, rc, ro,
						     r->size,
						     &held->h_dup);
		mutex_unlock(&xpu_ledger_lock);
		if (!held->size) {
			kfree(held);
			continue;
		}
		list_add_tail(&held->link, taken);
	}
}

/*
 * After that free: each object of TAKEN that RM freed (all of them when
 * CHECK is false: the file's clients are gone) is forgotten, and its
 * duplicate stays charged to the slice unless it holds the memory alone.
 * One the free did not take (RM refused it, or another device's) is still
 * the tenant's: its duplicate goes.  Handles in the slice's clients are made
 * only under its mem_lock, held by RM_FREE's caller: a live handle is the
 * one recorded.  Returns whether every duplicate went: nothing else held
 * the memory of TAKEN; then *GONE (if given) is how much memory went with
 * the free, by the sizes the ledger held.
 */
static bool xpu_ledger_cascade_end(struct xpu_file *xf, struct list_head *taken,
				   bool check, u64 *gone)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_held *held, *tmp;
	bool settled = true;
	u64 bytes = 0;

	list_for_each_entry_safe(held, tmp, taken, link) {
		list_del(&held->link);
		/*
		 * Alone, the ledger's duplicate says that RM freed the object
		 * (a live one would share its memory), so RM is asked whether
		 * it is still there only when not.
		 */
		mutex_lock(&xpu_ledger_lock);
		if (xpu_ledger_alone(slice->gpu, held->subdevice, held->h_dup,
				     &held->size)) {
			xpu_ledger_drop(slice->gpu, held->h_dup, held->size);
			mutex_unlock(&xpu_ledger_lock);
			xpu_memrec_forget(xf, held->hc, held->ho);
			bytes += held->size;
			kfree(held);
			continue;
		}
		mutex_unlock(&xpu_ledger_lock);
		if (check &&
		    xpu_rm_object_class(held->hc, held->ho) ==
		    NV01_MEMORY_LOCAL_USER) {
			/* not freed: still the tenant's */
			mutex_lock(&xpu_ledger_lock);
			xpu_ledger_drop(slice->gpu, held->h_dup, held->size);
			mutex_unlock(&xpu_ledger_lock);
			kfree(held);
			continue;
		}
		xpu_memrec_forget(xf, held->hc, held->ho);
		settled = false;
		mutex_lock(&xpu_ledger_lock);
		xpu_ledger_place(slice, held);
		if (xpu_ledger_held_elsewhere(slice, held)) {
			xpu_ledger_drop(slice->gpu, held->h_dup, held->size);
			kfree(held);
		} else {
			xpu_ledger_hold(slice, held);
		}
		mutex_unlock(&xpu_ledger_lock);
	}
	if (gone)
		*gone = settled ? bytes : 0;
	return settled;
}

/*
 * A slice's control file XF is being released (its clients go with it):
 * call RELEASE with the ledger standing by every video-memory object
 * recorded in it.  Nothing else can use the file now.
 */
int xpu_ledger_release(struct xpu_file *xf, int (*release)(struct inode *,
							   struct file *),
		       struct inode *inode, struct file *file)
{
	LIST_HEAD(taken);
	int ret;

	if (xpu_ledger_thread)
		xpu_ledger_cascade_begin(xf, 0, 0, 0, &taken);
	ret = release(inode, file);
	xpu_ledger_cascade_end(xf, &taken, false, NULL);
	xpu_ledger_file_exit(xf);
	return ret;
}

/* XF's records go (its release, or xpu.ko's unload). */
void xpu_ledger_file_exit(struct xpu_file *xf)
{
	struct xpu_memrec *r;
	struct hlist_node *tmp;
	unsigned int bkt;

	hash_for_each_safe(xf->memrecs, bkt, tmp, r, node)
		xpu_memrec_drop(xf, r);
}

/*
 * RM_FREE of (hc, hp, ho) for a caller through XF, a control file of a
 * slice: through FILE, as the caller (xpu_free_as_caller), with the ledger's
 * duplicate standing by when RM says the object is video memory, or
 * duplicates of every recorded object a client, device or subdevice takes
 * with it.  Called under the slice's mem_lock.  Returns the status RM gave
 * the caller's free.  *SETTLED says that only the figures of XF's creators
 * can have changed: the object was video memory that the ledger's
 * duplicate was found to hold alone after the free (so no other handle
 * took its ownership), or that RM did not free.  Then *GONE is how much
 * their figures dropped by: the size of the memory, recorded when XF made
 * it and confirmed by the ledger's reading after the free, or 0 when RM did
 * not free it; U64_MAX when only RM can say (no record).
 */
u32 xpu_ledger_free(struct xpu_file *xf, struct file *file,
		    u32 hc, u32 hp, u32 ho, bool *settled, u64 *gone)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_gpu *gpu = slice->gpu;
	struct xpu_memrec *r;
	struct xpu_held *held;
	u32 h = 0, status, cls;
	LIST_HEAD(taken);
	u64 size = 0, recorded = 0;
	bool sub;

	lockdep_assert_held(&slice->mem_lock);
	*settled = false;
	*gone = U64_MAX;
	if (!xpu_ledger_thread) {
		xf->parent_hc = 0;
		return xpu_free_as_caller(xf, file, hc, hp, ho);
	}
	/*
	 * A recorded object is video memory: handles in the slice's clients
	 * are made only under its mem_lock, and every free that takes a
	 * recorded object forgets it.  (Were it not, RM would refuse the
	 * ledger's duplicate, or the reading after the free would not find
	 * it alone: the slice would pay, never the others.)
	 */
	r = xpu_memrec_find(xf, hc, ho);
	cls = r ? NV01_MEMORY_LOCAL_USER : xpu_rm_object_class(hc, ho);
	if (cls != NV01_MEMORY_LOCAL_USER) {
		/* a parent's handle may name another object after this */
		xf->parent_hc = 0;
		if (ho == hc || cls == NV01_DEVICE_0 || cls == NV20_SUBDEVICE_0)
			xpu_ledger_cascade_begin(xf, hc, ho, ho == hc ? 0 : cls,
						 &taken);
		status = xpu_free_as_caller(xf, file, hc, hp, ho);
		xpu_ledger_cascade_end(xf, &taken, true, NULL);
		return status;
	}
	/*
	 * a few bytes, which must not fail: a free that left video memory
	 * without the duplicate standing by would let UVM keep it charged to
	 * no slice (xpu_mem_undo relies on it; found by a review in session 58);
	 * the caller's memory cgroup pays for it, as for xpu's other records
	 * (uncharged before session 60: a slice of 16 GiB can hold 262144)
	 */
	held = kzalloc(sizeof(*held), GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
	if (r) {
		recorded = r->size;
		sub = r->sub;
	} else {
		sub = xpu_rm_object_class(hc, xpu_rm_object_parent(hc, ho)) ==
		      NV20_SUBDEVICE_0;
	}
	/*
	 * Were the memory held by the ledger already (a handle of the
	 * caller's that duplicates one it freed before), the free leaves it
	 * held and the look for a held duplicate of it (cascade_end) finds
	 * that one: it stays charged once, and the ledger keeps one handle of
	 * it.  Until session 60 every free of a slice holding any asked first,
	 * of RM, among the slice's own (before 550, about each of them).
	 */
	mutex_lock(&xpu_ledger_lock);
	size = xpu_ledger_dup_recorded(gpu, sub, hc, ho, recorded, &h);
	mutex_unlock(&xpu_ledger_lock);
	if (!size) {
		/* charged by RM alone */
		kfree(held);
		status = xpu_free_as_caller(xf, file, hc, hp, ho);
		if (xpu_rm_object_class(hc, ho) != NV01_MEMORY_LOCAL_USER)
			xpu_memrec_forget(xf, hc, ho);
		return status;
	}

	/* may sleep on the caller's own memory: no ledger lock across it */
	status = xpu_free_as_caller(xf, file, hc, hp, ho);

	/* then as for each object a bigger free takes */
	held->hc = hc;
	held->ho = ho;
	held->h_dup = h;
	held->subdevice = sub;
	held->size = size;
	list_add_tail(&held->link, &taken);
	*settled = xpu_ledger_cascade_end(xf, &taken, true,
					  recorded ? gone : NULL);
	return status;
}

/*
 * Let go of the held duplicates of SLICE whose memory nothing else holds
 * any more, at most MAX of them looked at (from where the last call that
 * stopped short left off): the slice stops paying for them.  The ledger's
 * lock is taken for one duplicate at a time, so that a slice with thousands
 * held keeps no other slice's free or close waiting for all of them (found
 * by a review in session 56).  Only this slice's calls, which hold its
 * mem_lock, take from its list.  Returns whether any went.
 */
bool xpu_ledger_reprobe(struct xpu_slice *slice, unsigned int max)
{
	struct xpu_held *held, *tmp;
	bool any = false;

	lockdep_assert_held(&slice->mem_lock);
	list_for_each_entry_safe(held, tmp, &slice->held, link) {
		u64 size = held->size;	/* measured when it was held */
		bool alone;

		if (!max--) {
			/* the next call starts with the first not looked at */
			mutex_lock(&xpu_ledger_lock);
			list_rotate_to_front(&held->link, &slice->held);
			mutex_unlock(&xpu_ledger_lock);
			break;
		}
		mutex_lock(&xpu_ledger_lock);
		alone = xpu_ledger_alone(slice->gpu, held->subdevice,
					 held->h_dup, &size);
		if (alone)
			xpu_ledger_unhold(slice, held);
		mutex_unlock(&xpu_ledger_lock);
		any |= alone;
	}
	return any;
}

/* The slice goes: its held duplicates go too (the memory, if nobody else's). */
void xpu_ledger_slice_release(struct xpu_slice *slice)
{
	struct xpu_held *held, *tmp;

	mutex_lock(&xpu_ledger_lock);
	list_for_each_entry_safe(held, tmp, &slice->held, link)
		xpu_ledger_unhold(slice, held);
	WRITE_ONCE(slice->held_bytes, 0);
	mutex_unlock(&xpu_ledger_lock);
}
