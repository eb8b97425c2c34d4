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
 * duplicate of it into the slice's probe: a kernel client made as
 * NV01_ROOT_NON_PRIV by a thread of the slice's own, which GET_PID_INFO
 * counts under that thread's pid.  After the free, RM says whether the
 * probe's handle holds the memory alone; if so xpu lets go of it and the
 * memory goes, if not the slice keeps paying for it ("held") until a later
 * probe finds it alone.  Held duplicates live in the ledger's client (of
 * the thread xpu-ledger), so the readings of a slice's probe walk only the
 * slice's duplicates in flight (RM walks every memory object of each
 * client of the process asked about).
 *
 * The probe: RM exposes no duplicate count, but GET_PID_INFO sorts each
 * handle as private (the memory's only handle), shared-owned or shared-duped.
 * When the probe has one handle, its private figure says whether that
 * handle is alone.  Else one more duplicate of the handle turns it from
 * private to shared exactly when it was alone, so the probe's private
 * figure drops by its size.  Nothing but xpu acts on the probe's client
 * (the probe's lock serialises it), and other clients' frees only ever make
 * its handles more private, so a drop by the size means alone; anything else
 * means "ask again later", which errs on the side of charging.  The sum of
 * the three figures moves only with xpu's own dups and frees, so one reading
 * of it serves until then, and a new handle's size is what its dup added.
 * A duplicate of an object recorded at its allocation takes the recorded
 * size without a reading; the reading after the free measures it
 * (xpu_probe_alone), so what a caller skewed in the record is never what
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
	u32 h_dup;			/* in IN */
	/*
	 * The ledger's client while held (where the look for a held duplicate
	 * of the same memory compares), the slice's probe while in flight:
	 * also while held, if RM would not make its duplicate in the ledger's.
	 */
	struct xpu_rm_client *in;
	bool subdevice;			/* its parent is a subdevice */
	u64 size;			/* as RM counts it */
	u32 hc, ho;			/* the tenant's, while its free runs */
	/*
	 * On its probe's inflight from the duplicate made before the free
	 * until what follows the free begins (cascade_end), while in the
	 * probe: another free's reading moves it out first (xpu_probe_evict).
	 */
	struct list_head flight;
	/*
	 * While held: where RM placed its memory (xpu_rm_client_where), when
	 * RM said, in xpu_ledger_placed under the ledger lock.
	 */
	struct hlist_node where_link;
	u64 where;
	unsigned int gpu_nr;
	bool placed;
	/*
	 * While held: the slice paying for it, and the other slices that
	 * freed a handle of its memory meanwhile, which kept no duplicate of
	 * their own because this one held it (struct xpu_heir's on_held, in
	 * the order they came), all under the ledger lock.
	 */
	struct xpu_slice *owner;
	struct list_head heirs;
};

/*
 * A slice that freed a handle of memory another slice's held duplicate
 * keeps, and so kept none itself (xpu_ledger_held_elsewhere): when that
 * slice goes with the memory still held, its duplicate passes to the first
 * heir, which pays from then on (xpu_ledger_bequeath).  Before session 64
 * the duplicate went with its slice, and memory the heir's tenant kept
 * through UVM or a dma-buf was then charged to no slice.
 */
struct xpu_heir {
	struct list_head on_held;	/* held->heirs */
	struct list_head on_slice;	/* the heir's heir_of */
	struct xpu_slice *slice;
};

/*
 * A client of the ledger's and the thread that made it: RM names the
 * client's memory by the thread's pid, and the thread lives as long as the
 * client does, so the pid is never another's.
 */
struct xpu_lclient {
	struct xpu_rm_client c;
	struct task_struct *thread;
	struct xpu_gpu *gpu;		/* its only GPU, or NULL: every GPU */
	struct completion ready;
	int status;
};

/*
 * A slice's probe: the client where the slice's frees make their
 * duplicates and RM's figures say whether one holds its memory alone, so
 * that each reading walks the slice's own duplicates in flight, never what
 * other slices hold (before session 61 one client served every slice, and
 * every reading walked every slice's held duplicates).  PID_INFO is asked
 * by process, and RM walks every client of the process: a thread a probe.
 */
struct xpu_probe {
	struct xpu_lclient lc;
	/*
	 * Serialises what is done to the probe's client and every reading of
	 * RM's figures for it.  Taken outside the ledger lock, under the
	 * slice's mem_lock when that is held, never across a call that
	 * touches user memory.
	 */
	struct mutex lock;
	/*
	 * How many handles the probe has, and the sum of RM's three figures
	 * for them when known.  GET_PID_INFO counts each handle's length in
	 * exactly one of the three (_gpuCollectMemInfo), others' frees only
	 * move the probe's handles between them, and only xpu makes or frees
	 * its handles: so the sum moves only with xpu's own dups and frees,
	 * by the handle's length, and one reading stands until then.
	 */
	u32 handles;
	u64 sum;
	bool sum_known;
	/* the duplicates of frees in flight in it (struct xpu_held's flight) */
	struct list_head inflight;
};

/*
 * Serialises what is done to the ledger's client, where held duplicates
 * are kept, and the lists of them.  Taken under a slice's mem_lock and
 * probe lock, never across a call that touches user memory.
 */
static DEFINE_MUTEX(xpu_ledger_lock);
/*
 * Every slice's held duplicates, under the ledger lock: those RM placed by
 * where their memory begins, the others by GPU.
 */
static DEFINE_HASHTABLE(xpu_ledger_placed, 9);
static struct list_head xpu_ledger_held[XPU_MAX_GPUS];
static struct xpu_lclient xpu_ledger;
/*
 * Each GPU's orphans: held duplicates whose slice went, with no heir, while
 * something still kept their memory -- an export fd or a dma-buf the
 * tenant passed out of its slice, a keeper that never had a handle and so
 * is no heir (found in session 64).  Charged to the GPU (memory_orphaned,
 * which new limits are checked against) until alone.  By held->link, and
 * counted, under the ledger lock.  Their probe is the first orphaning
 * slice's, kept while the GPU has orphans: the pointer under
 * xpu_orphanage_lock, taken outside the probe's lock.
 */
static struct list_head xpu_ledger_orphans[XPU_MAX_GPUS];
static unsigned int xpu_ledger_nr_orphans[XPU_MAX_GPUS];
static struct xpu_probe *xpu_ledger_orphanage[XPU_MAX_GPUS];
static DEFINE_MUTEX(xpu_orphanage_lock);

/* HELD leaves its slice's (or its GPU's orphans') list and the lookups. */
static void xpu_held_unlink(struct xpu_held *held)
{
	list_del(&held->link);
	if (held->placed)
		hash_del(&held->where_link);
	else
		list_del(&held->gpu_link);
}

static int xpu_lclient_fn(void *data)
{
	struct xpu_lclient *lc = data;

	lc->status = xpu_rm_client_create(&lc->c, lc->gpu);
	complete(&lc->ready);
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/* LC's thread, NAME, makes its client, on GPU (NULL: every GPU). */
static int xpu_lclient_start(struct xpu_lclient *lc, struct xpu_gpu *gpu,
			     const char *name)
{
	struct task_struct *t;

	lc->gpu = gpu;
	init_completion(&lc->ready);
	t = kthread_run(xpu_lclient_fn, lc, "%s", name);
	if (IS_ERR(t))
		return PTR_ERR(t);
	wait_for_completion(&lc->ready);
	if (lc->status) {
		kthread_stop(t);
		return lc->status;
	}
	lc->thread = t;
	return 0;
}

/* The client goes with what it still holds, then its thread. */
static void xpu_lclient_stop(struct xpu_lclient *lc)
{
	if (!lc->thread)
		return;
	xpu_rm_client_destroy(&lc->c);
	kthread_stop(lc->thread);
	lc->thread = NULL;
}

int xpu_ledger_init(void)
{
	int i;

	for (i = 0; i < XPU_MAX_GPUS; i++) {
		INIT_LIST_HEAD(&xpu_ledger_held[i]);
		INIT_LIST_HEAD(&xpu_ledger_orphans[i]);
	}
	return xpu_lclient_start(&xpu_ledger, NULL, "xpu-ledger");
}

/*
 * After every slice is gone: the orphans' records go, the client with what
 * it still holds, then the orphans' probes (which hold nothing).
 */
void xpu_ledger_exit(void)
{
	struct xpu_held *held, *tmp;
	int i;

	for (i = 0; i < XPU_MAX_GPUS; i++)
		list_for_each_entry_safe(held, tmp, &xpu_ledger_orphans[i],
					 link) {
			xpu_held_unlink(held);
			kfree(held);
		}
	xpu_lclient_stop(&xpu_ledger);
	for (i = 0; i < XPU_MAX_GPUS; i++) {
		struct xpu_probe *probe = xpu_ledger_orphanage[i];

		if (!probe)
			continue;
		xpu_lclient_stop(&probe->lc);
		kfree(probe);
		xpu_ledger_orphanage[i] = NULL;
	}
}

/*
 * SLICE, to be made on GPU, gets its probe: a thread and a client.  0, or
 * an error (-ENOMEM, -EIO: RM would not make the client) that fails the
 * slice's creation.
 */
int xpu_ledger_slice_init(struct xpu_slice *slice, struct xpu_gpu *gpu)
{
	struct xpu_probe *probe;
	char name[XPU_NAME_LEN + 16];
	int ret;

	if (!xpu_ledger.thread)	/* the ledger is off */
		return 0;
	probe = kzalloc(sizeof(*probe), GFP_KERNEL);
	if (!probe)
		return -ENOMEM;
	mutex_init(&probe->lock);
	INIT_LIST_HEAD(&probe->inflight);
	snprintf(name, sizeof(name), "xpu-probe/%.*s",
		 (int)strnlen(slice->name, XPU_NAME_LEN), slice->name);
	ret = xpu_lclient_start(&probe->lc, gpu, name);
	if (ret) {
		kfree(probe);
		return ret;
	}
	slice->probe = probe;
	return 0;
}

static void xpu_ledger_slice_exit(struct xpu_slice *slice)
{
	if (!slice->probe)
		return;
	xpu_lclient_stop(&slice->probe->lc);
	kfree(slice->probe);
	slice->probe = NULL;
}

static u64 xpu_usage_sum(const struct xpu_vidmem_usage *u)
{
	return u->priv + u->owned + u->duped;
}

/* A reading of RM's figures for PROBE on GPU, which its sum follows. */
static int xpu_probe_read(struct xpu_probe *probe, struct xpu_vidmem_usage *u)
{
	int ret;

	lockdep_assert_held(&probe->lock);
	/* a reading walks no free's duplicates in flight (xpu_probe_evict) */
	WARN_ON_ONCE(!list_empty(&probe->inflight));
	ret = xpu_rm_client_usage(&probe->lc.c, probe->lc.gpu, u);
	probe->sum = ret ? 0 : xpu_usage_sum(u);
	probe->sum_known = !ret;
	return ret;
}

/*
 * A duplicate into PROBE of (HC, HO) -- HC 0: the probe's own; HC the
 * ledger's: a held one --, as *H.
 */
static u32 xpu_probe_dup(struct xpu_probe *probe, bool sub, u32 hc, u32 ho,
			 u32 *h)
{
	u32 status;

	lockdep_assert_held(&probe->lock);
	status = xpu_rm_client_dup(&probe->lc.c, probe->lc.gpu, sub, hc, ho, h);
	if (status == NV_OK)
		probe->handles++;
	return status;
}

/* PROBE lets go of its handle H, SIZE bytes by RM's count. */
static void xpu_probe_drop(struct xpu_probe *probe, u32 h, u64 size)
{
	lockdep_assert_held(&probe->lock);
	xpu_rm_client_free(&probe->lc.c, h);
	probe->handles--;
	if (probe->sum >= size)
		probe->sum -= size;
	else
		probe->sum_known = false;
}

static void xpu_probe_evict(struct xpu_probe *probe);

/*
 * A duplicate of the caller's (HC, HO) into PROBE, as *H: RM's size of it
 * -- what its dup added to the probe's figures --, or 0 when RM would not
 * make or measure it (then none is kept).
 */
static u64 xpu_probe_dup_measure(struct xpu_probe *probe, bool sub, u32 hc,
				 u32 ho, u32 *h)
{
	struct xpu_vidmem_usage u;
	u64 before, size = 0;

	lockdep_assert_held(&probe->lock);
	*h = 0;
	xpu_probe_evict(probe);
	if (!probe->sum_known && xpu_probe_read(probe, &u))
		return 0;
	before = probe->sum;
	if (xpu_probe_dup(probe, sub, hc, ho, h))
		return 0;
	if (!xpu_probe_read(probe, &u) && probe->sum > before)
		size = probe->sum - before;
	if (!size) {
		xpu_probe_drop(probe, *h, 0);
		*h = 0;
	}
	return size;
}

/*
 * A duplicate of the caller's (HC, HO) into PROBE, as *H, for an object
 * recorded at SIZE bytes (what RM's figure grew by when it was made, under
 * the slice's mem_lock), without a reading: SIZE, or 0 when RM would not
 * make it.  SIZE is a claim the reading after the free measures
 * (xpu_probe_alone), so the probe's sum is unknown until a reading: a
 * claim added to it would skew the size another duplicate measures.
 */
static u64 xpu_probe_dup_recorded(struct xpu_probe *probe, bool sub, u32 hc,
				  u32 ho, u64 size, u32 *h)
{
	lockdep_assert_held(&probe->lock);
	*h = 0;
	if (!size)
		return xpu_probe_dup_measure(probe, sub, hc, ho, h);
	if (xpu_probe_dup(probe, sub, hc, ho, h))
		return 0;
	probe->sum_known = false;
	return size;
}

/*
 * Whether PROBE's handle H is its memory's only one; *SIZE becomes the
 * memory's size as RM counts it (it may come in as the size recorded at the
 * allocation, which a caller can skew: what its creators' figures grew by,
 * while a free through an unsliced file lowered them).  GET_PID_INFO calls
 * a handle private exactly when it is its memory's only one.  When H is
 * the only handle the probe has, the probe's figures are H's alone: their
 * sum is its size, and it is alone when all of it is private.  Else one
 * more duplicate of H adds its size to the sum, and turns it from private
 * to shared exactly when it was alone, so the probe's private figure drops
 * by that size (others' frees meanwhile only raise it: anything else means
 * "ask again later", which errs on the side of charging).
 */
static bool xpu_probe_alone(struct xpu_probe *probe, bool sub, u32 h,
			    u64 *size)
{
	struct xpu_vidmem_usage a, b;
	bool alone = false;
	u64 sa, sb;
	u32 h2 = 0;

	lockdep_assert_held(&probe->lock);
	if (xpu_probe_read(probe, &a))
		return false;
	sa = xpu_usage_sum(&a);
	if (probe->handles == 1) {
		*size = sa;
		return a.priv == sa;
	}
	if (xpu_probe_dup(probe, sub, 0, h, &h2))
		return false;
	if (!xpu_probe_read(probe, &b)) {
		sb = xpu_usage_sum(&b);
		if (sb > sa) {
			*size = sb - sa;
			alone = a.priv >= *size && a.priv - b.priv == *size;
		}
	}
	xpu_probe_drop(probe, h2, *size);
	return alone;
}

/*
 * Whether every handle PROBE has holds its memory alone, by one reading:
 * GET_PID_INFO counts a handle as private exactly when it is its memory's
 * only one, so all of the probe's figures private means all alone.
 */
static bool xpu_probe_all_alone(struct xpu_probe *probe)
{
	struct xpu_vidmem_usage u;

	lockdep_assert_held(&probe->lock);
	return !xpu_probe_read(probe, &u) && u.priv == xpu_usage_sum(&u);
}

/*
 * HELD, in PROBE, moves into the ledger's client, where the look
 * for a held duplicate of the same memory compares (RM compares two handles
 * of one client only): a duplicate there, then the probe's goes, so the
 * memory is never without a handle of the ledger's.  If RM would not make
 * it, HELD stays in the probe (held there: a reading of the slice's walks
 * it, and no other slice's duplicate of its memory is found to be it, which
 * can only charge twice).
 */
static void xpu_ledger_keep(struct xpu_probe *probe, struct xpu_held *held)
{
	u32 h;

	lockdep_assert_held(&probe->lock);
	lockdep_assert_held(&xpu_ledger_lock);
	if (held->in != &probe->lc.c ||
	    xpu_rm_client_dup(&xpu_ledger.c, probe->lc.gpu, held->subdevice,
			      probe->lc.c.h, held->h_dup, &h) != NV_OK)
		return;
	xpu_probe_drop(probe, held->h_dup, held->size);
	/*
	 * the size may be a claim (the record's) a reading since has
	 * measured otherwise: the sum would be skewed for the next duplicate
	 * measured against it (found by a review in session 64)
	 */
	probe->sum_known = false;
	held->h_dup = h;
	held->in = &xpu_ledger.c;
}

/*
 * HELD, in the ledger's client, moves into PROBE, where a reading asks
 * about it: a duplicate there, then the ledger's goes.  Whether it is in
 * the probe (RM may not make the duplicate: then it stays).
 */
static bool xpu_ledger_fetch(struct xpu_probe *probe, struct xpu_held *held)
{
	u32 h;

	lockdep_assert_held(&probe->lock);
	lockdep_assert_held(&xpu_ledger_lock);
	if (held->in != &xpu_ledger.c)
		return true;
	if (xpu_probe_dup(probe, held->subdevice, xpu_ledger.c.h, held->h_dup,
			  &h) != NV_OK)
		return false;
	probe->sum_known = false;
	xpu_rm_client_free(&xpu_ledger.c, held->h_dup);
	held->h_dup = h;
	held->in = &probe->lc.c;
	return true;
}

/*
 * The duplicates of frees in flight in PROBE -- their objects' free still
 * in the driver, or what follows it not yet begun -- move into the
 * ledger's client before a reading, where no reading of the slice's walks
 * them: each reading walks every handle the probe has, so two processes
 * of a slice closing thousands each at once walked each other's, N * M
 * (found in session 62).  Each moves out once; its own free's end fetches
 * it back (xpu_ledger_cascade_end).
 */
static void xpu_probe_evict(struct xpu_probe *probe)
{
	struct xpu_held *held, *tmp;

	lockdep_assert_held(&probe->lock);
	list_for_each_entry_safe(held, tmp, &probe->inflight, flight) {
		list_del_init(&held->flight);
		mutex_lock(&xpu_ledger_lock);
		xpu_ledger_keep(probe, held);
		mutex_unlock(&xpu_ledger_lock);
	}
}

/* HELD's handle goes, from wherever it is: the ledger's client or PROBE. */
static void xpu_held_drop(struct xpu_probe *probe, struct xpu_held *held)
{
	if (held->in == &xpu_ledger.c)
		xpu_rm_client_free(&xpu_ledger.c, held->h_dup);
	else
		xpu_probe_drop(probe, held->h_dup, held->size);
}

/* SLICE keeps HELD, charged, until its memory is the ledger's alone. */
static void xpu_ledger_hold(struct xpu_slice *slice, struct xpu_held *held)
{
	lockdep_assert_held(&xpu_ledger_lock);
	list_add_tail(&held->link, &slice->held);
	held->owner = slice;
	INIT_LIST_HEAD(&held->heirs);
	if (held->placed)
		hash_add(xpu_ledger_placed, &held->where_link, held->where);
	else
		list_add_tail(&held->gpu_link,
			      &xpu_ledger_held[slice->gpu - xpu_gpus]);
	WRITE_ONCE(slice->held_bytes, slice->held_bytes + held->size);
}

static void xpu_heir_free(struct xpu_heir *h)
{
	list_del(&h->on_held);
	list_del(&h->on_slice);
	kfree(h);
}

/*
 * SLICE freed a handle of the memory OTHER, a held duplicate, keeps, and
 * keeps none itself: it is OTHER's heir, if another slice pays for OTHER.
 * Without the few bytes (charged to the caller's cgroup), it is not: the
 * memory is then charged to no one should OTHER's slice go first, as
 * before session 64.
 */
static void xpu_ledger_heir(struct xpu_slice *slice, struct xpu_held *other)
{
	struct xpu_heir *h;

	lockdep_assert_held(&xpu_ledger_lock);
	if (other->owner == slice)
		return;
	list_for_each_entry(h, &other->heirs, on_held)
		if (h->slice == slice)
			return;
	h = kzalloc(sizeof(*h), GFP_KERNEL_ACCOUNT);
	if (!h)
		return;
	h->slice = slice;
	list_add_tail(&h->on_held, &other->heirs);
	list_add_tail(&h->on_slice, &slice->heir_of);
}

/*
 * HELD, a held duplicate in PROBE or the ledger's client, goes with its
 * claims and its place in the lists.
 */
static void xpu_held_free(struct xpu_probe *probe, struct xpu_held *held)
{
	struct xpu_heir *h, *tmp;

	lockdep_assert_held(&xpu_ledger_lock);
	list_for_each_entry_safe(h, tmp, &held->heirs, on_held)
		xpu_heir_free(h);
	xpu_held_drop(probe, held);
	xpu_held_unlink(held);
	kfree(held);
}

/* Under the slice's probe lock, or when nothing else can use the slice. */
static void xpu_ledger_unhold(struct xpu_slice *slice, struct xpu_held *held)
{
	lockdep_assert_held(&xpu_ledger_lock);
	WRITE_ONCE(slice->held_bytes, slice->held_bytes - held->size);
	xpu_held_free(slice->probe, held);
}

/*
 * HELD, an orphan of GPU NR's (owner NULL), goes: in the ledger's client,
 * or in PROBE, the GPU's orphans' probe, under its lock.
 */
static void xpu_orphan_free(struct xpu_probe *probe, unsigned int nr,
			    struct xpu_held *held)
{
	struct xpu_gpu *gpu = &xpu_gpus[nr];

	lockdep_assert_held(&xpu_ledger_lock);
	WRITE_ONCE(gpu->memory_orphaned, gpu->memory_orphaned - held->size);
	xpu_ledger_nr_orphans[nr]--;
	xpu_held_free(probe, held);
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
	held->placed = xpu_rm_client_where(held->in, held->h_dup, &held->where);
}

/* Whether held duplicates A and B name one memory (RM asked of a client's). */
static bool xpu_held_same(const struct xpu_held *a, const struct xpu_held *b)
{
	return a->in == b->in && a->size == b->size &&
	       xpu_rm_client_same(a->in, a->h_dup, b->h_dup);
}

/*
 * Which slice's held duplicate on SLICE's GPU, if any, names the memory
 * HELD's does (a tenant shared it with another slice's, RM_SHARE, and both
 * freed their handles; or SLICE's own, when a handle of the caller's
 * duplicated memory it freed before): then that one keeps it, charged to
 * its slice (SLICE its heir, should that slice go first), and HELD is not
 * needed.  Two held handles of one memory would each keep
 * it from being the ledger's alone: neither would ever go.  Asked only
 * when a free leaves memory held, and of RM only for held duplicates of the
 * same size placed where HELD's memory is (xpu_ledger_place) or not placed:
 * before session 59 every held duplicate of the size was asked about under
 * the ledger lock, so a tenant holding thousands of one size slowed every
 * slice's such frees.
 */
static struct xpu_held *xpu_ledger_held_elsewhere(struct xpu_slice *slice,
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
			    xpu_held_same(other, held))
				return other;
	} else {
		/* RM did not place it: any placed one could be its memory */
		hash_for_each(xpu_ledger_placed, bkt, other, where_link)
			if (other->gpu_nr == nr && xpu_held_same(other, held))
				return other;
	}
	/* those RM did not place could be any memory */
	list_for_each_entry(other, &xpu_ledger_held[nr], gpu_link)
		if (xpu_held_same(other, held))
			return other;
	return NULL;
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
	struct xpu_probe *probe = slice->probe;
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
		held->in = &probe->lc.c;
		mutex_lock(&probe->lock);
		held->size = xpu_probe_dup_recorded(probe, held->subdevice, rc, ro,
						    r->size, &held->h_dup);
		if (held->size)
			list_add_tail(&held->flight, &probe->inflight);
		mutex_unlock(&probe->lock);
		if (!held->size) {
			kfree(held);
			continue;
		}
		list_add_tail(&held->link, taken);
	}
}

/*
 * Each of TAKEN, a free's duplicates, that a reading moved out of PROBE
 * while the free ran (xpu_probe_evict) comes back: whether all are in it.
 */
static bool xpu_ledger_fetch_all(struct xpu_probe *probe,
				 struct list_head *taken)
{
	struct xpu_held *held;
	bool all = true;

	lockdep_assert_held(&probe->lock);
	list_for_each_entry(held, taken, link) {
		if (held->in == &probe->lc.c)
			continue;
		mutex_lock(&xpu_ledger_lock);
		all &= xpu_ledger_fetch(probe, held);
		mutex_unlock(&xpu_ledger_lock);
	}
	return all;
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
 *
 * Each reading walks every handle the probe has, so a free that took many
 * is asked about as a whole first: one reading, and if every handle of the
 * probe is alone, every duplicate goes (a process's exit, or the free of a
 * client with thousands of allocations).  Otherwise each moves into the
 * ledger's client first, and back into the probe only while asked about:
 * before session 62 each of N was asked about with the others in the
 * probe, N * N handles walked (docs/security.md).  Other frees' duplicates
 * still in flight are moved out before each reading (xpu_probe_evict):
 * before session 63 two closes of one slice at once walked each other's.
 */
static bool xpu_ledger_cascade_end(struct xpu_file *xf, struct list_head *taken,
				   bool check, u64 *gone)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_probe *probe = slice->probe;
	struct xpu_held *held, *tmp;
	bool settled = true;
	u64 bytes = 0;

	if (!gone && !list_empty(taken) && !list_is_singular(taken)) {
		mutex_lock(&probe->lock);
		/* in flight no more: the free is over */
		list_for_each_entry(held, taken, link)
			list_del_init(&held->flight);
		xpu_probe_evict(probe);
		if (xpu_ledger_fetch_all(probe, taken) &&
		    xpu_probe_all_alone(probe)) {
			list_for_each_entry_safe(held, tmp, taken, link) {
				list_del(&held->link);
				xpu_probe_drop(probe, held->h_dup, 0);
				xpu_memrec_forget(xf, held->hc, held->ho);
				kfree(held);
			}
			/* the sizes were the records', claims */
			probe->sum_known = false;
			mutex_unlock(&probe->lock);
			return true;
		}
		mutex_lock(&xpu_ledger_lock);
		list_for_each_entry(held, taken, link)
			xpu_ledger_keep(probe, held);
		mutex_unlock(&xpu_ledger_lock);
		mutex_unlock(&probe->lock);
	}
	list_for_each_entry_safe(held, tmp, taken, link) {
		struct xpu_held *other;
		bool alone;

		list_del(&held->link);
		mutex_lock(&probe->lock);
		list_del_init(&held->flight);	/* the free is over */
		xpu_probe_evict(probe);
		if (held->in != &probe->lc.c) {
			mutex_lock(&xpu_ledger_lock);
			xpu_ledger_fetch(probe, held);
			mutex_unlock(&xpu_ledger_lock);
		}
		/*
		 * Alone, the probe's duplicate says that RM freed the object
		 * (a live one would share its memory), so RM is asked whether
		 * it is still there only when not.
		 */
		alone = held->in == &probe->lc.c &&
			xpu_probe_alone(probe, held->subdevice, held->h_dup,
					&held->size);
		if (alone) {
			xpu_probe_drop(probe, held->h_dup, held->size);
			mutex_unlock(&probe->lock);
			xpu_memrec_forget(xf, held->hc, held->ho);
			bytes += held->size;
			kfree(held);
			continue;
		}
		if (check &&
		    xpu_rm_object_class(held->hc, held->ho) ==
		    NV01_MEMORY_LOCAL_USER) {
			/* not freed: still the tenant's */
			mutex_lock(&xpu_ledger_lock);
			xpu_held_drop(slice->probe, held);
			mutex_unlock(&xpu_ledger_lock);
			mutex_unlock(&probe->lock);
			kfree(held);
			continue;
		}
		xpu_memrec_forget(xf, held->hc, held->ho);
		settled = false;
		mutex_lock(&xpu_ledger_lock);
		xpu_ledger_keep(probe, held);
		xpu_ledger_place(slice, held);
		other = xpu_ledger_held_elsewhere(slice, held);
		if (other && other->owner) {
			xpu_ledger_heir(slice, other);
			xpu_held_drop(slice->probe, held);
			kfree(held);
		} else {
			xpu_ledger_hold(slice, held);
			/*
			 * an orphan of the memory: the slice pays from now
			 * on, as it would have had the orphan not been there
			 */
			if (other)
				xpu_orphan_free(NULL, other->gpu_nr, other);
		}
		mutex_unlock(&xpu_ledger_lock);
		mutex_unlock(&probe->lock);
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

	if (xf->slice->probe)
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
	struct xpu_memrec *r;
	struct xpu_held *held;
	u32 h = 0, status, cls;
	LIST_HEAD(taken);
	u64 size = 0, recorded = 0;
	bool sub;

	lockdep_assert_held(&slice->mem_lock);
	*settled = false;
	*gone = U64_MAX;
	if (!slice->probe) {
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
	mutex_lock(&slice->probe->lock);
	size = xpu_probe_dup_recorded(slice->probe, sub, hc, ho, recorded,
				      &h);
	if (size) {
		held->hc = hc;
		held->ho = ho;
		held->h_dup = h;
		held->in = &slice->probe->lc.c;
		held->subdevice = sub;
		held->size = size;
		list_add_tail(&held->flight, &slice->probe->inflight);
	}
	mutex_unlock(&slice->probe->lock);
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
	list_add_tail(&held->link, &taken);
	*settled = xpu_ledger_cascade_end(xf, &taken, true,
					  recorded ? gone : NULL);
	return status;
}

/*
 * Whether the memory of HELD, a held duplicate (of a slice's, PROBE its
 * slice's, or an orphan, PROBE the GPU's orphans'), is nothing else's any
 * more: HELD moves into PROBE (a duplicate there, then the ledger's
 * goes) and is asked about there -- a reading of a slice's probe walks
 * nothing another slice holds --; if alone it stays there for its caller
 * to free, else it moves back.  Under the probe lock and the ledger lock throughout,
 * so that no other slice's look for a held duplicate of its memory finds
 * none while it is in the probe.
 */
static bool xpu_held_alone(struct xpu_probe *probe, struct xpu_held *held)
{
	u64 size = held->size;	/* measured when it was held */

	lockdep_assert_held(&probe->lock);
	lockdep_assert_held(&xpu_ledger_lock);
	if (!xpu_ledger_fetch(probe, held))
		return false;	/* ask again later */
	if (xpu_probe_alone(probe, held->subdevice, held->h_dup, &size))
		return true;
	xpu_ledger_keep(probe, held);
	return false;
}

/* SLICE's HELD goes if its memory is alone (xpu_held_alone): whether. */
static bool xpu_ledger_settle(struct xpu_slice *slice, struct xpu_held *held)
{
	if (!xpu_held_alone(slice->probe, held))
		return false;
	xpu_ledger_unhold(slice, held);
	return true;
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
	struct xpu_probe *probe = slice->probe;
	struct xpu_held *held, *tmp;
	bool any = false;

	lockdep_assert_held(&slice->mem_lock);
	list_for_each_entry_safe(held, tmp, &slice->held, link) {
		if (!max--) {
			/* the next call starts with the first not looked at */
			mutex_lock(&xpu_ledger_lock);
			list_rotate_to_front(&held->link, &slice->held);
			mutex_unlock(&xpu_ledger_lock);
			break;
		}
		mutex_lock(&probe->lock);
		xpu_probe_evict(probe);
		mutex_lock(&xpu_ledger_lock);
		any |= xpu_ledger_settle(slice, held);
		mutex_unlock(&xpu_ledger_lock);
		mutex_unlock(&probe->lock);
	}
	return any;
}

/*
 * HELD, a held duplicate of SLICE, which goes, passes to its first heir:
 * a slice that freed a handle of the memory while HELD kept it.  Whether
 * it did.  The heir pays from then on, and its next look at what it holds
 * (xpu_ledger_reprobe) lets it go once nothing else keeps the memory.  An
 * heir going meanwhile is no heir any more (its claims go first, under the
 * ledger lock held here), or takes HELD with it to its own heir.
 */
static bool xpu_ledger_bequeath(struct xpu_slice *slice, struct xpu_held *held)
{
	struct xpu_heir *h;
	struct xpu_slice *heir;

	lockdep_assert_held(&slice->probe->lock);
	lockdep_assert_held(&xpu_ledger_lock);
	if (list_empty(&held->heirs))
		return false;
	/* out of the slice's probe, which goes with it */
	xpu_ledger_keep(slice->probe, held);
	if (held->in != &xpu_ledger.c)
		return false;
	h = list_first_entry(&held->heirs, struct xpu_heir, on_held);
	heir = h->slice;
	xpu_heir_free(h);
	list_move_tail(&held->link, &heir->held);
	held->owner = heir;
	WRITE_ONCE(slice->held_bytes, slice->held_bytes - held->size);
	WRITE_ONCE(heir->held_bytes, heir->held_bytes + held->size);
	return true;
}

/*
 * HELD, a held duplicate of SLICE, which goes, with no heir and its memory
 * not alone: an orphan of the GPU's, charged to the GPU until alone
 * (xpu_ledger_orphans).  It stays findable by another slice's free of a
 * handle of its memory, which then holds the memory itself.  A duplicate
 * RM would not move out of the slice's probe goes, as before session 65.
 */
static bool xpu_ledger_orphan(struct xpu_slice *slice, struct xpu_held *held)
{
	unsigned int nr = slice->gpu - xpu_gpus;
	struct xpu_gpu *gpu = slice->gpu;

	lockdep_assert_held(&slice->probe->lock);
	lockdep_assert_held(&xpu_ledger_lock);
	if (held->in != &xpu_ledger.c)
		return false;
	list_move_tail(&held->link, &xpu_ledger_orphans[nr]);
	xpu_ledger_nr_orphans[nr]++;
	held->owner = NULL;
	WRITE_ONCE(slice->held_bytes, slice->held_bytes - held->size);
	WRITE_ONCE(gpu->memory_orphaned, gpu->memory_orphaned + held->size);
	return true;
}

/*
 * The slice goes: it is nobody's heir any more; each of its held
 * duplicates goes if its memory is alone, or passes to its heir, or is
 * left to the GPU (an orphan).  The ledger lock is taken for one duplicate
 * at a time, as in xpu_ledger_reprobe: the slice's tenant chose how many
 * it held.  Another slice's free may claim one meanwhile (an heir): it is
 * looked at under the lock.  Then its probe goes, or serves the GPU's
 * orphans, if it made the first.
 */
void xpu_ledger_slice_release(struct xpu_slice *slice)
{
	struct xpu_probe *probe = slice->probe;
	struct xpu_heir *h, *htmp;
	struct xpu_held *held;
	bool orphaned = false;

	if (probe) {
		mutex_lock(&probe->lock);
		xpu_probe_evict(probe);
		mutex_lock(&xpu_ledger_lock);
		list_for_each_entry_safe(h, htmp, &slice->heir_of, on_slice)
			xpu_heir_free(h);
		mutex_unlock(&xpu_ledger_lock);
		for (;;) {
			mutex_lock(&xpu_ledger_lock);
			held = list_first_entry_or_null(&slice->held,
							struct xpu_held, link);
			/*
			 * settled first: out of the probe when not alone,
			 * so that an heir's bequest cannot fail on it and
			 * leave the GPU an orphan with heirs
			 */
			if (held && !xpu_ledger_settle(slice, held) &&
			    !xpu_ledger_bequeath(slice, held)) {
				if (xpu_ledger_orphan(slice, held))
					orphaned = true;
				else
					xpu_ledger_unhold(slice, held);
			}
			mutex_unlock(&xpu_ledger_lock);
			if (!held)
				break;
			cond_resched();
		}
		WRITE_ONCE(slice->held_bytes, 0);
		mutex_unlock(&probe->lock);
	}
	if (orphaned) {
		unsigned int nr = slice->gpu - xpu_gpus;

		mutex_lock(&xpu_orphanage_lock);
		mutex_lock(&xpu_ledger_lock);
		/* a settle or a free may have let go of them meanwhile */
		if (!xpu_ledger_orphanage[nr] && xpu_ledger_nr_orphans[nr]) {
			xpu_ledger_orphanage[nr] = probe;
			slice->probe = NULL;
		}
		mutex_unlock(&xpu_ledger_lock);
		mutex_unlock(&xpu_orphanage_lock);
	}
	xpu_ledger_slice_exit(slice);
}

/*
 * Let go of GPU's orphans whose memory nothing else keeps any more, at
 * most MAX looked at (those looked at go to the back): the GPU stops
 * paying for them.  Asked where a new memory limit is checked against the
 * GPU, and by an admin's read of the GPU; outside xpu_lock.  With no
 * orphan left, their probe goes.
 */
void xpu_ledger_orphans_settle(struct xpu_gpu *gpu, unsigned int max)
{
	unsigned int nr = gpu - xpu_gpus;
	struct xpu_probe *probe;
	struct xpu_held *held;
	bool empty;

	mutex_lock(&xpu_orphanage_lock);
	probe = xpu_ledger_orphanage[nr];
	if (!probe)
		goto out;
	mutex_lock(&probe->lock);
	mutex_lock(&xpu_ledger_lock);
	max = min(max, xpu_ledger_nr_orphans[nr]);
	mutex_unlock(&xpu_ledger_lock);
	while (max--) {
		mutex_lock(&xpu_ledger_lock);
		held = list_first_entry_or_null(&xpu_ledger_orphans[nr],
						struct xpu_held, link);
		if (held && xpu_held_alone(probe, held))
			xpu_orphan_free(probe, nr, held);
		else if (held)
			list_rotate_left(&xpu_ledger_orphans[nr]);
		mutex_unlock(&xpu_ledger_lock);
		cond_resched();
	}
	mutex_lock(&xpu_ledger_lock);
	/* another slice's free may have taken the last (an adoption) */
	empty = !xpu_ledger_nr_orphans[nr];
	mutex_unlock(&xpu_ledger_lock);
	mutex_unlock(&probe->lock);
	if (empty) {
		xpu_ledger_orphanage[nr] = NULL;
		xpu_lclient_stop(&probe->lc);
		kfree(probe);
	}
out:
	mutex_unlock(&xpu_orphanage_lock);
}
