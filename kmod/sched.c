// SPDX-License-Identifier: GPL-2.0
/*
 * Compute isolation: doorbell gating and a per-GPU scheduler
 * (docs/compute.md).
 *
 * Two levers, both held by a slice that must wait:
 *  - the doorbell: xpu learns the usermode objects a slice's clients allocate
 *    (RM_ALLOC), the file RM_MAP_MEMORY gives their mapping context to, and
 *    wraps the VMA that mmap of that file makes.  To gate, it zaps the
 *    file's PTEs (each driver file has its own address_space); the next
 *    doorbell write faults, and the fault sleeps until the slice may run,
 *    then defers to the driver's fault, which inserts the page again.
 *  - the channels: work already queued would run on (a channel whose ring is
 *    never empty needs no new doorbell), so xpu also disables the slice's
 *    channels through RM (NV2080 FIFO_DISABLE_CHANNELS on its own subdevice,
 *    as UVM does) and enables them again for the slice's turn.
 *
 * One kernel thread per GPU runs periods of turns.  fixed: each slice with
 * channels gets share x period, the rest of the period nobody runs.  weighted:
 * the slices that want the GPU share the period by share, and what the shares
 * leave by weight; a slice that does not want it keeps its channels enabled
 * (its queued work drains) with its doorbell zapped, so that its next
 * submission is noticed -- but beside a turn holder only for as much time
 * as it would earn if it wanted the GPU: xpu cannot tell queued work from
 * none, and work queued with one doorbell write must not run beside others
 * for free (docs/compute.md, "A silent slice").  priority: as weighted among
 * the wanting slices of the highest class present; lower classes wait.
 * native: nothing is gated.  Budgets (token buckets) make up for a turn that
 * ran long or short.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bsearch.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "file.h"
#include "handles.h"
#include "mem.h"
#include "nvabi.h"
#include "rmapi.h"
#include "retain.h"
#include "sched.h"
#include "uvm.h"

/* A slice wants the GPU while it has writers waiting or wrote lately. */
#define XPU_DEMAND_PERIODS	4
#define XPU_DEBT_PERIODS	4
#define XPU_MIN_STEP_NS		(100 * NSEC_PER_USEC)
#define XPU_SHARE_WINDOW_NS	NSEC_PER_SEC
#define XPU_ZAP_BATCH		64
/*
 * Every doorbell file of a waiting slice is zapped at every switch (under
 * the scheduler's mutex, with unmap_mapping_range() for each): a bound keeps
 * a tenant from making the switches of the whole GPU slow.  CUDA maps the
 * usermode region once or a few times per context.
 */
#define XPU_MAX_DOORBELL_FILES	1024

/*
 * Records of RM objects a slice's clients made, per slice and kind: a bound
 * keeps a tenant from making every RM_FREE and every switch walk thousands.
 * CUDA makes a few channels per context (and one usermode object).
 */
#define XPU_MAX_RECS		1024

/*
 * Both bounds are module parameters an admin may change at any time (a slice
 * over a bound lowered keeps what it has and is refused more), within
 * 1..XPU_MAX_BOUND: a pass over a slice's records copies them to one
 * allocation, and a switch zaps every doorbell file.
 */
#define XPU_MAX_BOUND		4096

static unsigned int max_records = XPU_MAX_RECS;
static struct xpu_uint_range max_records_range =
	XPU_UINT_RANGE(max_records, 1, XPU_MAX_BOUND);
module_param_cb(max_records, &xpu_uint_range_ops, &max_records_range, 0644);
MODULE_PARM_DESC(max_records,
		 "RM objects of one kind (devices, VA spaces, virtual allocations, TSGs, channels, usermode objects) one slice may hold (1..4096)");

/*
 * Channel ids a GPU's slices share out.  RM has NV_CHRAM_CHANNEL__SIZE_1,
 * 2048, a runlist from GA100 on; past them every process's channel
 * allocation fails.  xpu asks RM at load (FIFO_GET_PHYSICAL_CHANNEL_COUNT:
 * the fewest of any runlist's); the parameter, when set, lowers it.  Half
 * of them are owed in equal floors to each slice and to the processes
 * outside every slice; the other half goes to whoever asks first
 * (xpu_chan_share_room).  All of a slice's channels count, whatever their
 * engine's runlist: an over-count.
 */
#define XPU_CHANNEL_IDS_DEFAULT	2048	/* when RM does not say */
static unsigned int channel_ids;
static struct xpu_uint_range channel_ids_range =
	XPU_UINT_RANGE(channel_ids, 0, 65536);
module_param_cb(channel_ids, &xpu_uint_range_ops, &channel_ids_range, 0644);
MODULE_PARM_DESC(channel_ids,
		 "at most so many of a GPU's channel ids (0: all RM has) are shared out among its slices: half in equal floors, to each and to the processes outside them (0..65536)");

/* The channel ids GPU's slices share out. */
u32 xpu_gpu_chan_ids(const struct xpu_gpu *gpu)
{
	unsigned int cap = READ_ONCE(channel_ids);
	u32 rm = gpu->channel_ids;

	if (!rm)
		return cap ?: XPU_CHANNEL_IDS_DEFAULT;
	return cap ? min_t(u32, cap, rm) : rm;
}

static unsigned int max_doorbell_files = XPU_MAX_DOORBELL_FILES;
static struct xpu_uint_range max_doorbell_files_range =
	XPU_UINT_RANGE(max_doorbell_files, 1, XPU_MAX_BOUND);
module_param_cb(max_doorbell_files, &xpu_uint_range_ops, &max_doorbell_files_range, 0644);
MODULE_PARM_DESC(max_doorbell_files,
		 "files through which one slice may map its doorbell page (1..4096)");

/*
 * Video memory RM takes for a channel and a TSG and charges to no process
 * (issue 18, rule 5; docs/memory.md): a channel's instance block
 * (NV_RAMIN_ALLOC_SIZE), and a TSG's GR context buffers, whose size the GSP
 * firmware decides (not public: an estimate, a parameter).  A channel made
 * under a device gets a TSG of RM's own, so it is charged both.
 */
#define XPU_RAMIN_BYTES		4096
static unsigned int gr_context_kib = 2048;
static struct xpu_uint_range gr_context_kib_range =
	XPU_UINT_RANGE(gr_context_kib, 0, 1024 * 1024);
module_param_cb(gr_context_kib, &xpu_uint_range_ops, &gr_context_kib_range, 0444);
MODULE_PARM_DESC(gr_context_kib,
		 "video memory charged to a slice per TSG for RM's GR context buffers, KiB (0..1048576)");

/*
 * An RM object of a slice's client: a channel, usermode object, TSG, or a
 * virtual allocation or VA space that pins page tables.
 */
struct xpu_rec {
	struct list_head link;		/* in slice->recs[kind] */
	u32 h_client, h_parent, h_object;	/* h_parent: as RM says */
	u64 charge;			/* in slice->rec_bytes */
	/*
	 * A channel's context share or VA space, a TSG's or a virtual
	 * allocation's VA space, as RM read them (xpu's copy of the params):
	 * RM frees the object with it (one of its dependants, not a child).
	 */
	u32 h_dep;
	/*
	 * A duplicate TSG depends on whichever VA space object of its client
	 * under its parent has the group's VA space (kchangrpapiCopyConstruct),
	 * which xpu cannot name: any free in its client may take it.
	 */
	bool dep_any;
	struct file *ctl;		/* the control file it was made through */
	u32 gate_pass;			/* a channel's: the last gating pass */
	u64 seq;			/* this record, never another's */
};

/* Which records to drop (xpu_recs_drop). */
enum xpu_rec_key {
	XPU_REC_ALL,		/* every record */
	XPU_REC_OBJECT,		/* one object (h_client, h_object) */
	XPU_REC_ONE,		/* one record (seq), not a later one's handle */
	XPU_REC_FREED,		/* what RM_FREE of (h_client, h_object) may take */
	XPU_REC_CTL,		/* those made through the control file ctl */
};

struct xpu_rec_match {
	enum xpu_rec_key key;
	u32 h_client, h_object;
	struct file *ctl;
	u64 seq;
};

static bool xpu_rec_matches(const struct xpu_rec *r,
			    const struct xpu_rec_match *m)
{
	switch (m->key) {
	case XPU_REC_ALL:
		return true;
	case XPU_REC_OBJECT:
		return r->h_client == m->h_client && r->h_object == m->h_object;
	case XPU_REC_ONE:
		return r->seq == m->seq;
	case XPU_REC_FREED:	/* a client, a parent or what it depends on */
		return r->h_client == m->h_client &&
		       (m->h_object == m->h_client || r->h_object == m->h_object ||
			r->h_parent == m->h_object || r->dep_any ||
			(r->h_dep && r->h_dep == m->h_object));
	case XPU_REC_CTL:
		return r->ctl == m->ctl;
	}
	return false;
}

/*
 * Give back a charge of SLICE's records.  slice->used keeps it until the
 * memory side reads it anew: no lock here (list_lock may be held).
 */
static void xpu_recs_uncharge(struct xpu_slice *slice, u64 bytes)
{
	if (!bytes)
		return;
	atomic64_sub(bytes, &slice->rec_bytes);
	/* a reader that sees stale clear sees the charge gone (mem.c) */
	smp_mb__after_atomic();
	WRITE_ONCE(slice->stale, true);
}

/*
 * R, a record of SLICE's KIND, goes: a channel or TSG UVM retains keeps its
 * charge until UVM lets go (retain.c), or, where xpu does not see that
 * exactly, while a UVM file of the slice open at the free is (uvm.c).
 * Under list_lock.
 */
static bool xpu_recs_keep(struct xpu_slice *slice, int kind,
			  const struct xpu_rec *r)
{
	const struct xpu_rec *c;

	if (kind != XPU_REC_CHAN && kind != XPU_REC_TSG)
		return false;
	if (!xpu_retain_exact())
		return xpu_uvm_keep(slice, kind, r->charge);
	if (!xpu_retain_any())
		return false;
	/* a retained channel of the TSG, freed with it, may be recorded yet */
	if (kind == XPU_REC_TSG)
		list_for_each_entry(c, &slice->recs[XPU_REC_CHAN], link)
			if (c->h_client == r->h_client &&
			    c->h_parent == r->h_object)
				xpu_retain_note_tsg(c->h_client, c->h_object,
						    r->h_object);
	return xpu_retain_pin(slice, kind, r->h_client, r->h_object,
			      r->h_parent, r->charge);
}

/* Drop the records of SLICE's KIND that M matches (under list_lock). */
static void xpu_recs_drop(struct xpu_slice *slice, int kind,
			  const struct xpu_rec_match *m)
{
	struct xpu_rec *r, *tmp;
	u64 bytes = 0;

	list_for_each_entry_safe(r, tmp, &slice->recs[kind], link) {
		if (!xpu_rec_matches(r, m))
			continue;
		list_del(&r->link);
		slice->nr_recs[kind]--;
		/* a channel or TSG UVM retains stays charged (retain.c) */
		if (!xpu_recs_keep(slice, kind, r))
			bytes += r->charge;
		kfree(r);
	}
	xpu_recs_uncharge(slice, bytes);
}

/* Charge the slice's UVM files kept (uvm.c) given back. */
void xpu_sched_uncharge(struct xpu_slice *slice, u64 bytes)
{
	xpu_recs_uncharge(slice, bytes);
}

struct xpu_sched {
	struct xpu_gpu *gpu;
	struct task_struct *thread;
	wait_queue_head_t wq;
	bool kicked;
	u64 last_step, last_sample;
	struct mutex lock;		/* state changes; the slices list */
	spinlock_t list_lock;		/* the slices' chans, uobjs, dbfiles */
	wait_queue_head_t zap_wq;	/* a file's release waits its zap */
	struct list_head slices;
	u64 period_start;
	bool held;			/* the last step gave a slice a turn */
	u32 gate_pass;			/* xpu_gate_channels', under lock */
	u64 rec_seq;			/* the last record's, under list_lock */
};

static struct xpu_sched *xpu_scheds[XPU_MAX_GPUS];

/*
 * Whether a slice whose member PID is has a record of channel H_CHANNEL of
 * client H_CLIENT (retain.c: a retention of it whose outcome xpu did not
 * see may yet pin its free).  Takes the list locks, never under retain.c's.
 */
bool xpu_sched_chan_recorded(u32 h_client, u32 h_channel, struct pid *pid)
{
	struct xpu_slice *slice;
	const struct xpu_rec *r;
	bool found = false;
	unsigned int i;

	for (i = 0; i < XPU_MAX_GPUS && !found; i++) {
		struct xpu_sched *s = xpu_scheds[i];

		if (!s)
			continue;
		spin_lock(&s->list_lock);
		list_for_each_entry(slice, &s->slices, sched_link) {
			if (!xpu_mem_may_retain(slice, pid))
				continue;
			list_for_each_entry(r, &slice->recs[XPU_REC_CHAN], link)
				if (r->h_client == h_client &&
				    r->h_object == h_channel)
					found = true;
		}
		spin_unlock(&s->list_lock);
	}
	return found;
}

static unsigned int trace_turns;
module_param(trace_turns, uint, 0644);
MODULE_PARM_DESC(trace_turns, "log this many scheduler turns (debugging)");

/* The driver's VMA operations, and xpu's copy with the fault wrapped. */
static DEFINE_SPINLOCK(xpu_vm_ops_lock);
static const struct vm_operations_struct *xpu_drv_vm_ops;
static struct vm_operations_struct xpu_vm_ops;

/* The kind of record an object of H_CLASS gets; -1: none. */
static int xpu_rec_kind(u32 h_class)
{
	switch (h_class) {
	case VOLTA_USERMODE_A:
	case TURING_USERMODE_A:
	case AMPERE_USERMODE_A:
	case HOPPER_USERMODE_A:
	case BLACKWELL_USERMODE_A:
		return XPU_REC_UOBJ;
	case KEPLER_CHANNEL_GROUP_A:
		return XPU_REC_TSG;
	case VOLTA_CHANNEL_GPFIFO_A:
	case TURING_CHANNEL_GPFIFO_A:
	case AMPERE_CHANNEL_GPFIFO_A:
	case AMPERE_CHANNEL_GPFIFO_B:
	case HOPPER_CHANNEL_GPFIFO_A:
	case BLACKWELL_CHANNEL_GPFIFO_A:
	case BLACKWELL_CHANNEL_GPFIFO_B:
		return XPU_REC_CHAN;
	case NV50_MEMORY_VIRTUAL:
		return XPU_REC_VIRT;	/* those that pin tables (mem.c) */
	case FERMI_VASPACE_A:
		return XPU_REC_VAS;	/* those with RM's directories (mem.c) */
	case NV01_DEVICE_0:
		/*
		 * RM makes its default VA space, with a root directory (four
		 * more on GSP), when first used: one per device, and one
		 * device per GPU in a client, so clients would make them
		 * without bound.  Bounded by the records (1024 a slice, 20 MiB
		 * of directories at most), not charged: a slice's limit stays
		 * what its tenants can allocate.
		 */
		return XPU_REC_DEV;
	}
	return -1;
}

bool xpu_sched_tracks_class(u32 h_class)
{
	return xpu_rec_kind(h_class) >= 0;
}

bool xpu_sched_is_channel_class(u32 h_class)
{
	return xpu_rec_kind(h_class) == XPU_REC_CHAN;
}

/*
 * What a record of KIND is charged, the most (a channel under a device); a
 * virtual allocation or a VA space, the PINNED bytes of page tables or
 * directories it holds (mem.c).
 */
static u64 xpu_rec_charge(int kind, bool in_tsg, u64 pinned)
{
	u64 ctx = (u64)gr_context_kib << 10;

	switch (kind) {
	case XPU_REC_CHAN:
		return XPU_RAMIN_BYTES + (in_tsg ? 0 : ctx);
	case XPU_REC_TSG:
		return ctx;
	case XPU_REC_VIRT:
	case XPU_REC_VAS:
		return pinned;
	}
	return 0;
}

void xpu_sched_kick(struct xpu_gpu *gpu)
{
	struct xpu_sched *s = gpu->sched;

	if (!s)
		return;
	WRITE_ONCE(s->kicked, true);
	wake_up(&s->wq);
}

/* --- the two levers */

/*
 * Whether RM has (h_client, h_object) as a live object of KIND: not freed,
 * and not only an invalidated handle (a channel of a freed context share
 * keeps its handle and class, but no longer its memory).
 */
static bool xpu_rec_alive(const struct xpu_rec *r, int kind)
{
	return xpu_rec_kind(xpu_rm_object_class(r->h_client, r->h_object)) ==
	       kind && !xpu_rm_object_lost(r->h_client, r->h_object);
}

static int xpu_u32_cmp(const void *a, const void *b)
{
	u32 x = *(const u32 *)a, y = *(const u32 *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whether R matches M, or (a channel) lies under a TSG of M's client that
 * this pass found gone: GONE, N sorted handles.  A TSG RM frees or
 * invalidates takes its channels, children, with it (serverFreeResourceTree).
 */
static bool xpu_rec_matches_under(const struct xpu_rec *r,
				  const struct xpu_rec_match *m,
				  const u32 *gone, unsigned int n)
{
	if (xpu_rec_matches(r, m))
		return true;
	return n && r->h_client == m->h_client &&
	       bsearch(&r->h_parent, gone, n, sizeof(*gone), xpu_u32_cmp);
}

/*
 * Forget the records of SLICE that M matches and RM no longer has: freed,
 * or freed with a parent.  RM is asked about each (a class query, with
 * xpu's privilege but acting on nothing): what the caller's struct said was
 * freed is only a claim.  TSGs go first, so that the channels of one found
 * gone (freed or invalidated with what it depends on) are asked too.  At
 * most as many queries per list as it holds records (max_records, or more
 * where the bound was lowered since).
 */
static void xpu_recs_forget_gone(struct xpu_sched *s, struct xpu_slice *slice,
				 const struct xpu_rec_match *m)
{
	static const int order[XPU_REC_KINDS] = {
		XPU_REC_DEV, XPU_REC_VAS, XPU_REC_VIRT, XPU_REC_TSG,
		XPU_REC_CHAN, XPU_REC_UOBJ,
	};
	struct xpu_rec_match one = { .key = XPU_REC_ONE };
	unsigned int n, want, i, j, ngone = 0;
	struct xpu_rec *r, *pairs;
	struct list_head *list;
	u32 *gone = NULL;
	int k;

	for (j = 0; j < XPU_REC_KINDS; j++) {
		k = order[j];
		list = &slice->recs[k];
		/* most calls (a memory object's free) match nothing: no alloc */
		want = 0;
		spin_lock(&s->list_lock);
		list_for_each_entry(r, list, link)
			want += xpu_rec_matches_under(r, m, gone, ngone);
		spin_unlock(&s->list_lock);
		if (!want)
			continue;
		/* up to XPU_MAX_BOUND (224 KiB): vmalloc when pages are scattered */
		pairs = kvmalloc_array(want, sizeof(*pairs), GFP_KERNEL);
		if (!pairs)
			break;
		n = 0;
		spin_lock(&s->list_lock);
		list_for_each_entry(r, list, link)
			if (n < want && xpu_rec_matches_under(r, m, gone, ngone))
				pairs[n++] = *r;
		spin_unlock(&s->list_lock);
		if (k == XPU_REC_TSG && m->key == XPU_REC_FREED)
			gone = kmalloc_array(n, sizeof(*gone), GFP_KERNEL);
		for (i = 0; i < n; i++) {
			if (xpu_rec_alive(&pairs[i], k))
				continue;
			if (gone && k == XPU_REC_TSG)
				gone[ngone++] = pairs[i].h_object;
			/*
			 * the record asked about, not the handle: this sweep
			 * holds no mem_lock, and another thread may have made
			 * the handle again and recorded it since RM's answer
			 * (found by a review of sched.c in session 56)
			 */
			one.seq = pairs[i].seq;
			spin_lock(&s->list_lock);
			xpu_recs_drop(slice, k, &one);
			spin_unlock(&s->list_lock);
		}
		kvfree(pairs);
		if (ngone)
			sort(gone, ngone, sizeof(*gone), xpu_u32_cmp, NULL);
	}
	kfree(gone);
}

static void xpu_forget_stale(struct xpu_sched *s, struct xpu_slice *slice)
{
	struct xpu_rec_match all = { .key = XPU_REC_ALL };

	xpu_recs_forget_gone(s, slice, &all);
}

/*
 * The memory side, refused for want of room while records are charged:
 * records RM freed with a grandparent (a device takes a TSG that takes its
 * channels) are only found by asking.  No lock of sched's held.
 */
void xpu_sched_forget_stale(struct xpu_slice *slice)
{
	xpu_forget_stale(slice->gpu->sched, slice);
}

/*
 * Enable or disable every channel of SLICE, 64 to an RM call.  The list is
 * let go of during each call, and a free of the slice's (or a control
 * file's close) may take records from it meanwhile: the records a pass
 * took are marked with it, not counted by their place in the list, which
 * would skip as many of the rest as went before them (found by a review in
 * session 56: a free timed with the first call of a switch to waiting left
 * channels beyond the first 64 enabled for the whole wait).
 */
static void xpu_gate_channels(struct xpu_sched *s, struct xpu_slice *slice,
			      bool disable)
{
	u32 clients[NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES];
	u32 chans[NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES];
	struct xpu_rec *c;
	bool stale = false;
	u32 n, pass;

	lockdep_assert_held(&s->lock);
	/* never 0, which a new record has */
	pass = ++s->gate_pass ?: ++s->gate_pass;
	for (;;) {
		n = 0;
		spin_lock(&s->list_lock);
		list_for_each_entry(c, &slice->recs[XPU_REC_CHAN], link) {
			if (c->gate_pass == pass)
				continue;
			c->gate_pass = pass;
			clients[n] = c->h_client;
			chans[n] = c->h_object;
			if (++n == ARRAY_SIZE(chans))
				break;
		}
		spin_unlock(&s->list_lock);
		if (!n)
			break;
		if (xpu_rm_disable_channels(s->gpu, disable, clients, chans, n))
			stale = true;
	}
	if (stale)
		xpu_forget_stale(s, slice);
}

/*
 * Zap the doorbell PTEs of every file of SLICE, in every process: any file
 * left mapped is a doorbell that rings unseen.  unmap_mapping_range() sleeps,
 * so the files are taken a batch at a time under list_lock and zapped outside
 * it.  A file taken is marked busy until its zap is done, and its release
 * (xpu_sched_file_closing(), before the driver's) takes it off the list and
 * waits for that, so its address_space outlives the zap without a reference
 * on the file: a reference dropped here, in the scheduler's thread, would be
 * the last whenever the tenant closed the file meanwhile, and would put the
 * release off to a work item, leaving the file counted against the slice's
 * max_doorbell_files after its close returned.  Files come and go
 * meanwhile, so each pass has a generation: a file taken is stamped with it
 * and moved to the tail, and a file listed during the pass is stamped when
 * listed (its own mmap zaps what it maps, xpu_sched_mmap()).  The files not
 * yet taken are thus always at the head, and the pass ends after at most the
 * files listed at its start.
 */
static void xpu_gate_zap(struct xpu_sched *s, struct xpu_slice *slice)
{
	struct xpu_file *files[XPU_ZAP_BATCH];
	unsigned int n, i;
	struct xpu_file *xf;
	u64 gen;

	lockdep_assert_held(&s->lock);	/* one pass at a time */
	spin_lock(&s->list_lock);
	gen = ++slice->zap_gen;
	spin_unlock(&s->list_lock);
	do {
		n = 0;
		spin_lock(&s->list_lock);
		while (n < XPU_ZAP_BATCH && !list_empty(&slice->dbfiles)) {
			xf = list_first_entry(&slice->dbfiles, struct xpu_file,
					      db_link);
			if (xf->zap_gen == gen)
				break;
			xf->zap_gen = gen;
			xf->zapping = true;
			list_move_tail(&xf->db_link, &slice->dbfiles);
			files[n++] = xf;
		}
		spin_unlock(&s->list_lock);
		for (i = 0; i < n; i++) {
			unmap_mapping_range(files[i]->file->f_mapping, 0, 0, 1);
			/* pairs with the acquire in xpu_sched_file_closing() */
			smp_store_release(&files[i]->zapping, false);
		}
		if (n)
			wake_up_all(&s->zap_wq);
	} while (n == XPU_ZAP_BATCH);
}

static void xpu_gate_set(struct xpu_sched *s, struct xpu_slice *slice,
			 int state)
{
	int old = slice->state;

	lockdep_assert_held(&s->lock);
	if (old == state)
		return;
	switch (state) {
	case XPU_GATE_RUN:
		if (old == XPU_GATE_WAIT)
			xpu_gate_channels(s, slice, false);
		WRITE_ONCE(slice->idle, false);
		WRITE_ONCE(slice->allowed, true);
		wake_up_all(&slice->gate_wq);
		break;
	case XPU_GATE_WAIT:
		WRITE_ONCE(slice->allowed, false);
		WRITE_ONCE(slice->idle, false);
		xpu_gate_channels(s, slice, true);
		if (old == XPU_GATE_RUN)
			xpu_gate_zap(s, slice);
		break;
	case XPU_GATE_IDLE:
		if (old == XPU_GATE_WAIT)
			xpu_gate_channels(s, slice, false);
		WRITE_ONCE(slice->idle, true);
		WRITE_ONCE(slice->allowed, true);
		if (old == XPU_GATE_RUN)
			xpu_gate_zap(s, slice);
		wake_up_all(&slice->gate_wq);
		break;
	}
	slice->state = state;
}

/* --- the doorbell fault */

static bool xpu_gate_open(struct xpu_slice *slice)
{
	return READ_ONCE(slice->allowed) || READ_ONCE(slice->dead);
}

/*
 * The kernel touches a doorbell: a fault it takes (a system call given the
 * doorbell page as a buffer, get_user_pages()) or a write through the
 * VMA's access() (below).  It may hold locks the scheduler needs, so it
 * never waits.  It counts as activity, and is news for an idle slice; for
 * a slice that must wait it counts as demand, as a doorbell write would,
 * and the caller fails it: let through, a fault would insert the page
 * again and the next doorbell write would go unseen.  Returns whether the
 * slice may run.
 */
static bool xpu_gate_kernel_touch(struct xpu_slice *slice)
{
	WRITE_ONCE(slice->last_active, ktime_get_ns());
	if (xpu_gate_open(slice)) {
		if (READ_ONCE(slice->idle))
			xpu_sched_kick(slice->gpu);	/* news: it wants the GPU */
		return true;
	}
	atomic64_inc(&slice->gate_faults);
	/* a slice already wanting it gets its turn: no kick per system call */
	if (!READ_ONCE(slice->wants))
		xpu_sched_kick(slice->gpu);
	return false;
}

/* The system call returns EFAULT: honest programs never hand it the page. */
static vm_fault_t xpu_gate_kernel_fault(struct vm_fault *vmf,
					struct xpu_slice *slice)
{
	if (xpu_gate_kernel_touch(slice))
		return xpu_drv_vm_ops->fault(vmf);
	return VM_FAULT_SIGBUS;
}

static vm_fault_t xpu_gate_fault(struct vm_fault *vmf)
{
	struct xpu_file *xf = xpu_file_lookup(vmf->vma->vm_file);
	struct xpu_slice *slice = xf ? xf->slice : NULL;
	int ret;

	if (!slice)
		return xpu_drv_vm_ops->fault(vmf);
	if (!(vmf->flags & FAULT_FLAG_USER))
		return xpu_gate_kernel_fault(vmf, slice);
	WRITE_ONCE(slice->last_active, ktime_get_ns());
	if (xpu_gate_open(slice)) {
		if (READ_ONCE(slice->idle))
			xpu_sched_kick(slice->gpu);	/* news: it wants the GPU */
		return xpu_drv_vm_ops->fault(vmf);
	}

	/* Wait for the slice's turn; a kill ends the wait. */
	xpu_slice_get(slice);
	atomic_inc(&slice->waiters);
	atomic64_inc(&slice->gate_faults);
	if ((vmf->flags & FAULT_FLAG_ALLOW_RETRY) &&
	    !(vmf->flags & FAULT_FLAG_RETRY_NOWAIT)) {
		/* Do not hold the mm while asleep: wait, then have it retried. */
		release_fault_lock(vmf);
		wait_event_killable(slice->gate_wq, xpu_gate_open(slice));
		atomic_dec(&slice->waiters);
		xpu_slice_put(slice);
		return VM_FAULT_RETRY;
	}
	ret = wait_event_killable(slice->gate_wq, xpu_gate_open(slice));
	atomic_dec(&slice->waiters);
	xpu_slice_put(slice);
	if (ret)
		return VM_FAULT_SIGBUS;
	return xpu_drv_vm_ops->fault(vmf);
}

/*
 * ptrace and /proc/PID/mem reach a doorbell page through the driver's
 * access(): get_user_pages() refuses PFN maps, so the kernel falls back to
 * it, and the driver writes the page through a kernel mapping of its own
 * (nvidia_vma_access, nv-mmap.c) -- no PTE, no fault, so the gate never
 * sees it.  A write there is a doorbell write, touched as a kernel fault
 * touches the page: for a slice that must wait it fails (the write returns
 * EIO).  A read rings nothing and passes.
 */
static int xpu_gate_access(struct vm_area_struct *vma, unsigned long addr,
			   void *buf, int len, int write)
{
	struct xpu_file *xf = xpu_file_lookup(vma->vm_file);
	struct xpu_slice *slice = xf ? xf->slice : NULL;

	if (slice && write && !xpu_gate_kernel_touch(slice))
		return -EFAULT;
	return xpu_drv_vm_ops->access(vma, addr, buf, len, write);
}

/* A wrapped VMA holds the module: its operations are xpu's code. */
static void xpu_gate_vma_open(struct vm_area_struct *vma)
{
	__module_get(THIS_MODULE);
	if (xpu_drv_vm_ops->open)
		xpu_drv_vm_ops->open(vma);
}

static void xpu_gate_vma_close(struct vm_area_struct *vma)
{
	if (xpu_drv_vm_ops->close)
		xpu_drv_vm_ops->close(vma);
	/* unload waits for RCU tasks, so returning from here is safe */
	module_put(THIS_MODULE);
}

/*
 * Whether XF, a driver file, is a doorbell file of a slice: marked by
 * RM_MAP_MEMORY of a usermode object, or a GPU file of a slice with such a
 * call in flight, whose driver may have given the mapping's context to any
 * file the caller's threads put under the number it names (mem.c).  The
 * call marks every GPU file of its slice before it stops counting itself.
 */
static bool xpu_sched_is_doorbell(struct xpu_file *xf)
{
	if (!xf || !xf->slice)
		return false;
	if (xf->gpu && atomic_read_acquire(&xf->slice->uobj_maps))
		WRITE_ONCE(xf->doorbell, true);
	return READ_ONCE(xf->doorbell);
}

/*
 * Before the driver's mmap of FILE: a doorbell file is listed now, so that a
 * slice past max_doorbell_files is refused before anything is mapped.
 * A file listed before its mmap, or whose mmap fails, is zapped for nothing.
 */
int xpu_sched_mmap_prepare(struct file *file)
{
	struct xpu_file *xf = xpu_file_lookup(file);
	struct xpu_slice *slice;
	struct xpu_sched *s;
	int ret = 0;

	if (!xpu_sched_is_doorbell(xf))
		return 0;
	slice = xf->slice;
	s = slice->gpu->sched;
	spin_lock(&s->list_lock);
	if (list_empty(&xf->db_link)) {
		if (slice->nr_dbfiles >= READ_ONCE(max_doorbell_files)) {
			ret = -EMFILE;
		} else {
			xf->zap_gen = slice->zap_gen;	/* see xpu_gate_zap() */
			list_add_tail(&xf->db_link, &slice->dbfiles);
			slice->nr_dbfiles++;
		}
	}
	spin_unlock(&s->list_lock);
	if (ret)
		pr_warn_ratelimited("slice %u: pid %d maps more than %u doorbell files; refused\n",
				    slice->id, task_tgid_nr(current),
				    READ_ONCE(max_doorbell_files));
	return ret;
}

/* After the driver's mmap of FILE made VMA: wrap it if it is a doorbell. */
void xpu_sched_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct xpu_file *xf = xpu_file_lookup(file);
	struct xpu_slice *slice;
	struct xpu_sched *s;
	bool ok = true;

	if (!xpu_sched_is_doorbell(xf) || !vma->vm_ops)
		return;
	slice = xf->slice;
	s = slice->gpu->sched;

	spin_lock(&xpu_vm_ops_lock);
	if (!xpu_drv_vm_ops && vma->vm_ops->fault) {
		xpu_vm_ops = *vma->vm_ops;
		xpu_vm_ops.fault = xpu_gate_fault;
		xpu_vm_ops.open = xpu_gate_vma_open;
		xpu_vm_ops.close = xpu_gate_vma_close;
		if (vma->vm_ops->access)
			xpu_vm_ops.access = xpu_gate_access;
		xpu_drv_vm_ops = vma->vm_ops;
	}
	if (vma->vm_ops != xpu_drv_vm_ops)
		ok = false;
	spin_unlock(&xpu_vm_ops_lock);
	if (!ok) {
		pr_warn_once("a doorbell mapping with unexpected VMA operations (%ps): not gated\n",
			     vma->vm_ops);
		return;
	}

	/*
	 * The wrapped operations are xpu's until the mapping goes.  While
	 * xpu.ko is being unloaded (its hooks still in place until its exit
	 * takes them back) no reference can be taken: the mapping stays the
	 * driver's, as every mapping is once xpu.ko is gone.
	 */
	if (!try_module_get(THIS_MODULE))
		return;
	vma->vm_ops = &xpu_vm_ops;
	/* marked after xpu_sched_mmap_prepare() looked: list it here */
	spin_lock(&s->list_lock);
	if (list_empty(&xf->db_link)) {
		xf->zap_gen = slice->zap_gen;
		list_add_tail(&xf->db_link, &slice->dbfiles);
		slice->nr_dbfiles++;
	}
	spin_unlock(&s->list_lock);
	/* The driver mapped the page already; not yet in i_mmap, so zap here. */
	if (!READ_ONCE(slice->allowed) || READ_ONCE(slice->idle))
		zap_special_vma_range(vma, vma->vm_start,
				      vma->vm_end - vma->vm_start);
}

/* --- what the slice's clients allocate */

static int xpu_put_status(u32 __user *status, u32 value)
{
	return put_user(value, status) ? -EFAULT : 0;
}

/*
 * SLICE's records of KIND hold (h_client, h_object), charged *CHARGE;
 * under list_lock.
 */
static bool xpu_recs_charge_of(struct xpu_slice *slice, int kind,
			       u32 h_client, u32 h_object, u64 *charge)
{
	struct xpu_rec *r;

	list_for_each_entry(r, &slice->recs[kind], link)
		if (r->h_client == h_client && r->h_object == h_object) {
			*charge = r->charge;
			return true;
		}
	return false;
}

static bool xpu_recs_hold_kind(struct xpu_slice *slice, int kind,
			       u32 h_client, u32 h_object)
{
	u64 charge;

	return xpu_recs_charge_of(slice, kind, h_client, h_object, &charge);
}

/* The records of SLICE hold (h_client, h_object); under list_lock. */
static bool xpu_recs_hold(struct xpu_slice *slice, u32 h_client, u32 h_object)
{
	int k;

	for (k = 0; k < XPU_REC_KINDS; k++)
		if (xpu_recs_hold_kind(slice, k, h_client, h_object))
			return true;
	return false;
}

/*
 * A caller xpu cannot keep track of: what it made is unknown to xpu, so the
 * control file it made it through is refused from now on (every escape xpu
 * hooks) and the caller is killed; the file's clients go when it closes.
 */
static void xpu_sched_cheat(struct xpu_file *xf, const char *what)
{
	WRITE_ONCE(xf->poisoned, true);
	atomic64_inc(&xf->slice->killed);
	pr_warn_ratelimited("slice %u: pid %d %s; killed, its control file refused\n",
			    xf->slice->id, task_tgid_nr(current), what);
	send_sig(SIGKILL, current, 1);
}

/* The channel ids SLICE holds or is taking.  Under list_lock. */
static u32 xpu_slice_chan_ids(struct xpu_slice *slice)
{
	return slice->nr_recs[XPU_REC_CHAN] + slice->chans_pending +
	       xpu_uvm_kept(slice, XPU_REC_CHAN);
}

/*
 * Whether SLICE may take one more of its GPU's channel ids: below its
 * floor (half the ids over the slices and the processes outside them,
 * evenly), always; past it, only while every other slice's unmet floor
 * and the outside processes' floor stay free.  Taken (chans_pending) when
 * PENDING.  Under list_lock.
 */
static bool xpu_chan_share_room(struct xpu_sched *s, struct xpu_slice *slice,
				bool pending)
{
	u32 ids = xpu_gpu_chan_ids(slice->gpu);
	u64 used = 0, owed;
	struct xpu_slice *o;
	u32 n = 0, floor, c;
	bool room;

	list_for_each_entry(o, &s->slices, sched_link)
		n++;
	floor = ids / (2 * (n + 1));
	room = xpu_slice_chan_ids(slice) < floor;
	if (!room) {
		owed = floor;	/* the processes outside every slice */
		list_for_each_entry(o, &s->slices, sched_link) {
			c = xpu_slice_chan_ids(o);
			used += c;
			if (o != slice && c < floor)
				owed += floor - c;
		}
		room = used + 1 + owed <= ids;
	}
	if (room && pending)
		slice->chans_pending++;
	return room;
}

/*
 * An allocation SLICE was admitted for, of KIND, is recorded or failed: its
 * place under max_records, and a channel's id, are a record's or free.
 */
static void xpu_recs_pending_done(struct xpu_sched *s, struct xpu_slice *slice,
				  int kind)
{
	spin_lock(&s->list_lock);
	slice->recs_pending[kind]--;
	if (kind == XPU_REC_CHAN)
		slice->chans_pending--;
	spin_unlock(&s->list_lock);
}

/*
 * Whether SLICE holds fewer than max_records of KIND, with the allocations
 * admitted and in flight (TAKE: this one is, from now on).  Channels and
 * TSGs UVM may retain count as the slice's (uvm.c).  Counted and taken under
 * one lock: threads queued behind a stalled call of the slice's each passed
 * a look without it (found by a review in session 56).
 */
static bool xpu_recs_below(struct xpu_sched *s, struct xpu_slice *slice,
			   int kind, bool take)
{
	unsigned int bound = READ_ONCE(max_records);
	bool room;

	spin_lock(&s->list_lock);
	room = slice->nr_recs[kind] + slice->recs_pending[kind] +
	       xpu_uvm_kept(slice, kind) < bound;
	if (room && take)
		slice->recs_pending[kind]++;
	spin_unlock(&s->list_lock);
	return room;
}

/*
 * Whether SLICE has room for one more record of KIND (of class CLS, for the
 * log): at the bound, after the records RM no longer has are forgotten.  A
 * channel also needs a channel id of the GPU's share.  With PENDING, the
 * place (and the channel id) is taken until xpu_recs_pending_done().
 */
static bool xpu_recs_room(struct xpu_sched *s, struct xpu_slice *slice,
			  int kind, u32 cls, bool pending)
{
	bool room;

	if (!xpu_recs_below(s, slice, kind, pending)) {
		xpu_forget_stale(s, slice);
		if (!xpu_recs_below(s, slice, kind, pending)) {
			pr_warn_ratelimited("slice %u: pid %d has %u objects of class 0x%x; refused\n",
					    slice->id, task_tgid_nr(current),
					    READ_ONCE(max_records), cls);
			return false;
		}
	}
	if (kind != XPU_REC_CHAN)
		return true;
	spin_lock(&s->list_lock);
	room = xpu_chan_share_room(s, slice, pending);
	spin_unlock(&s->list_lock);
	if (room)
		return true;
	xpu_forget_stale(s, slice);
	spin_lock(&s->list_lock);
	room = xpu_chan_share_room(s, slice, pending);
	/* the place under max_records goes back with the refusal */
	if (!room && pending)
		slice->recs_pending[kind]--;
	spin_unlock(&s->list_lock);
	if (!room)
		pr_warn_ratelimited("slice %u: pid %d: its share of the GPU's %u channel ids is taken; refused\n",
				    slice->id, task_tgid_nr(current),
				    xpu_gpu_chan_ids(slice->gpu));
	return room;
}

/*
 * Put R, of KIND, on SLICE's records, charged CHARGE bytes of which RESERVED
 * were charged before the call that made it; false, R not taken, when the
 * slice holds its handle already.  Under mem_lock, from RM's answer on.
 */
static bool xpu_rec_add(struct xpu_slice *slice, struct xpu_rec *r, int kind,
			u64 charge, u64 reserved)
{
	struct xpu_sched *s = slice->gpu->sched;
	u32 hc = r->h_client, ho = r->h_object;
	bool known;

	lockdep_assert_held(&slice->mem_lock);
	mutex_lock(&s->lock);
	spin_lock(&s->list_lock);
	known = xpu_recs_hold(slice, hc, ho);
	if (!known) {
		if (charge > reserved) {
			/* the class changed under xpu: charged past the limit */
			atomic64_add(charge - reserved, &slice->rec_bytes);
			WRITE_ONCE(slice->stale, true);
		} else {
			xpu_recs_uncharge(slice, reserved - charge);
		}
		r->charge = charge;
		r->seq = ++s->rec_seq;
		list_add_tail(&r->link, &slice->recs[kind]);
		slice->nr_recs[kind]++;
	}
	spin_unlock(&s->list_lock);
	if (!known && kind == XPU_REC_CHAN && slice->state == XPU_GATE_WAIT)
		xpu_rm_disable_channels(slice->gpu, true, &hc, &ho, 1);
	mutex_unlock(&s->lock);
	return !known;
}

/*
 * RM_ALLOC of a channel, TSG or usermode class by a sliced file, made on
 * xpu's copy of the caller's struct, E (mem.c): RM makes the class xpu
 * read, and its handle and status come back where no thread of the
 * caller's can rewrite them, whatever the caller's struct then gets (a
 * read-only struct fails the copy-back with -EFAULT after RM made the
 * object: it is recorded all the same).  RM is asked the class of what it
 * made.  A page moved or handles rewritten after the driver's copy-back, a
 * success that names no object of these classes, or a live object xpu
 * already knows, mean the caller cheats.  A channel or TSG is charged its
 * video memory before the call (the most it can be: under a device, a
 * channel gets a TSG of RM's), and what RM made is charged after it.
 */
static long __xpu_sched_rm_alloc(struct xpu_file *xf, struct file *file,
				 unsigned int cmd, struct xpu_escape *e,
				 u32 h_class, u64 pinned, u32 h_vas,
				 int *pending)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_sched *s = slice->gpu->sched;
	u32 hc_pre, hp_pre, ho_pre, hc, ho, hp, cls, dep = 0;
	u64 reserved, charge;
	struct xpu_rec_match pre = { .key = XPU_REC_OBJECT };
	struct xpu_alloc_result res;
	const char *cheat = NULL;
	int kind;
	bool known, in_tsg, locked = false;
	struct xpu_rec *r;
	LIST_HEAD(spare);
	long ret;
	u32 st;

	xpu_escape_alloc_args(e, &hc_pre, &hp_pre, &ho_pre);
	kind = xpu_rec_kind(h_class);
	/*
	 * a channel names its context share, or (under a device) a VA space,
	 * a TSG its VA space: RM reads them from xpu's copy of the params
	 * (mem.c), and frees the object with them
	 */
	if (kind == XPU_REC_CHAN || kind == XPU_REC_TSG)
		dep = xpu_escape_alloc_dep(e, kind == XPU_REC_TSG);
	/* a virtual allocation goes with its VA space (RM reads xpu's copy) */
	if (kind == XPU_REC_VIRT)
		dep = h_vas;
	/*
	 * A handle RM freed with a parent (a TSG takes its channels) may be
	 * made again: forget a record RM no longer has before the call.
	 */
	if (ho_pre) {
		pre.h_client = hc_pre;
		pre.h_object = ho_pre;
		xpu_recs_forget_gone(s, slice, &pre);
	}
	if (!xpu_recs_room(s, slice, kind, h_class, true))
		return xpu_escape_alloc_status(e, NV_ERR_INSUFFICIENT_RESOURCES);
	*pending = kind;
	/* its handle, within the slice's bound (handles.c) */
	st = xpu_handles_reserve(slice, &spare, 1);
	if (st)
		return xpu_escape_alloc_status(e, st);
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r) {
		xpu_handles_cancel(slice, &spare);
		return -ENOMEM;
	}
	/*
	 * The parent is a claim, looked up under mem_lock, which every call
	 * that makes a handle in the slice's clients takes, and held until
	 * RM's call: the parent RM finds is the one looked up, or none.  It
	 * was looked up before the lock, so a TSG freed and its handle made a
	 * device meanwhile (by a thread queued first) put a channel under a
	 * device charged as one in a TSG, 2 MiB past the limit per race won
	 * (found by a review of sched.c in session 56).  RM's parent decides
	 * the charge after the call.
	 */
	if (mutex_lock_killable(&slice->mem_lock)) {
		kfree(r);
		xpu_handles_cancel(slice, &spare);
		return -EINTR;
	}
	spin_lock(&s->list_lock);
	in_tsg = kind == XPU_REC_CHAN &&
		 xpu_recs_hold_kind(slice, XPU_REC_TSG, hc_pre, hp_pre);
	spin_unlock(&s->list_lock);
	reserved = xpu_rec_charge(kind, in_tsg, pinned);
	/* the client may have gone since the entry's check (mem.c) */
	st = xpu_mem_client_check_locked(xf, hc_pre);
	if (!st && reserved)
		st = xpu_mem_charge_locked(slice, reserved);
	if (st) {
		mutex_unlock(&slice->mem_lock);
		kfree(r);
		xpu_handles_cancel(slice, &spare);
		return xpu_escape_alloc_status(e, st);
	}

	/*
	 * On xpu's copy: RM makes the class xpu read, and its handle and
	 * status come back where only xpu reads them, whatever the caller's
	 * struct then gets (mem.c).
	 */
	ret = xpu_mem_tracked_call(xf, file, cmd, e, &res);
	if (!res.made)
		goto out;
	/*
	 * mem_lock is held from the call until the record is made: no other
	 * call of the slice frees the handle and makes it again meanwhile,
	 * so a record stands for the object RM made (xpu_mem_map_dma
	 * relies on it)
	 */
	locked = true;
	hc = res.hc;
	ho = res.ho;
	if (res.cheated) {
		cheat = "moved or rewrote the page of a call xpu made for it";
		goto out;
	}
	/* RM's own answer: it made nothing */
	if (!res.drv_ret && res.status != NV_OK && res.trusted)
		goto out;
	cls = ho ? xpu_rm_object_class(hc, ho) : 0;
	/*
	 * a status another thread may have stored (mem.h): what RM made is
	 * RM's to say -- nothing new under the handle, nothing to record
	 */
	if (!res.trusted && (!cls || xpu_handles_known(slice, hc, ho)))
		goto out;
	if (!xpu_sched_tracks_class(cls)) {
		if (!res.drv_ret)
			cheat = "hid the handle of an object it made";
		goto out;
	}

	/* RM's class and parent decide the kind and the charge, not the struct */
	kind = xpu_rec_kind(cls);
	hp = xpu_rm_object_parent(hc, ho);
	xpu_handles_add(xf, &spare, hc, hp ? hp : hp_pre, ho);
	charge = xpu_rec_charge(kind, kind == XPU_REC_CHAN &&
				xpu_rm_object_class(hc, hp) ==
				KEPLER_CHANNEL_GROUP_A, pinned);
	r->h_client = hc;
	r->h_parent = hp ? hp : hp_pre;
	r->h_object = ho;
	r->h_dep = kind == XPU_REC_CHAN || kind == XPU_REC_VIRT ||
		   kind == XPU_REC_TSG ? dep : 0;
	r->ctl = file;
	known = !xpu_rec_add(slice, r, kind, charge, reserved);
	if (!known)
		reserved = 0;
	mutex_unlock(&slice->mem_lock);
	locked = false;
	if (!known)
		return ret;	/* SPARE is spent */
	/* RM never makes a live handle twice */
	if (!res.drv_ret)
		cheat = "named an object it made before";
out:
	xpu_handles_cancel(slice, &spare);
	if (locked)
		mutex_unlock(&slice->mem_lock);
	xpu_recs_uncharge(slice, reserved);
	kfree(r);
	if (!cheat)
		return ret;
	xpu_sched_cheat(xf, cheat);
	return xpu_escape_alloc_status(e, NV_ERR_INVALID_OBJECT_HANDLE);
}

long xpu_sched_rm_alloc(struct xpu_file *xf, struct file *file,
			unsigned int cmd, struct xpu_escape *e, u32 h_class,
			u64 pinned, u32 h_vas)
{
	struct xpu_slice *slice = xf->slice;
	int pending = -1;
	long ret;

	ret = __xpu_sched_rm_alloc(xf, file, cmd, e, h_class, pinned, h_vas,
				   &pending);
	/* the place (and channel id) it took is a record's now, or free */
	if (pending >= 0)
		xpu_recs_pending_done(slice->gpu->sched, slice, pending);
	return ret;
}

/*
 * An RM_DUP_OBJECT through XF, a slice's control file, made (HC, HO), of
 * CLS, a class xpu records, from (HC_SRC, HO_SRC) (mem.c: RM's answers,
 * from xpu's copy).  A duplicate shares what its source holds and keeps it
 * after the source goes (a usermode object's doorbell, a TSG's context, a
 * virtual allocation's pinned range: vaspaceIncAllocRefCnt, a VA space's
 * directories), so it is recorded as an allocation of its class: bounded,
 * and charged what the source's record is, in this slice or another (a
 * client may share an object with any other: RM_SHARE) -- so while both
 * live the slices pay twice, never less than RM holds.  A virtual
 * allocation or VA space no slice has a record of holds nothing xpu
 * charges for (a lazy range, an externally managed VA space, or an object
 * of an unsliced client): the duplicate is not recorded either (and so is
 * never mapped into, class 18); a TSG or channel is charged the most it
 * can hold.  HC_SRC 0 names no source (an import, mem.c): nothing is looked up.
 * Under mem_lock, from the call on.  NV_OK, or the status to undo it with.
 */
u32 xpu_sched_rm_dup(struct xpu_file *xf, u32 hc, u32 ho, u32 cls,
		     u32 hc_src, u32 ho_src)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_sched *s = slice->gpu->sched;
	int kind = xpu_rec_kind(cls);
	struct xpu_slice *other;
	struct xpu_rec *r;
	bool found;
	u64 charge = 0;
	u32 st;

	lockdep_assert_held(&slice->mem_lock);
	/*
	 * The source's record: the slice's own, or another slice's of the
	 * GPU (a client may share an object with any other, RM_SHARE; client
	 * handles are RM-wide).  Another slice's may be stale: at worst the
	 * duplicate is charged for what is gone.
	 */
	found = false;
	if (hc_src) {		/* an import's source is RM's own: no record */
		spin_lock(&s->list_lock);
		found = xpu_recs_charge_of(slice, kind, hc_src, ho_src,
					   &charge);
		list_for_each_entry(other, &s->slices, sched_link)
			if (!found && other != slice)
				found = xpu_recs_charge_of(other, kind, hc_src,
							   ho_src, &charge);
		spin_unlock(&s->list_lock);
	}
	if (!found) {
		if (kind == XPU_REC_VIRT || kind == XPU_REC_VAS)
			return NV_OK;
		charge = xpu_rec_charge(kind, false, 0);
	}
	if (!xpu_recs_room(s, slice, kind, cls, false))
		return NV_ERR_INSUFFICIENT_RESOURCES;
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return NV_ERR_NO_MEMORY;
	st = charge ? xpu_mem_charge_locked(slice, charge) : NV_OK;
	if (st) {
		kfree(r);
		return st;
	}
	r->h_client = hc;
	r->h_parent = xpu_rm_object_parent(hc, ho);
	r->h_object = ho;
	r->dep_any = kind == XPU_REC_TSG;
	r->ctl = xf->file;
	if (!xpu_rec_add(slice, r, kind, charge, charge)) {
		/* recorded already (the records are exact under mem_lock) */
		xpu_recs_uncharge(slice, charge);
		kfree(r);
	}
	return NV_OK;
}

/*
 * After an RM_FREE through a slice's file, whatever it returned: forget the
 * records of what it may have taken that RM no longer has.  Under mem_lock,
 * as the free: no call of the slice makes a handle again before its record
 * of the freed object is gone.
 */
void xpu_sched_rm_free(struct xpu_file *xf, u32 h_client, u32 h_object)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_rec_match m = { .key = XPU_REC_FREED, .h_client = h_client,
				   .h_object = h_object };

	lockdep_assert_held(&slice->mem_lock);
	xpu_recs_forget_gone(slice->gpu->sched, slice, &m);
}

/* Whether XF's slice has a record of KIND for (H_CLIENT, H_OBJECT). */
static bool xpu_sched_holds(struct xpu_file *xf, int kind, u32 h_client,
			    u32 h_object)
{
	struct xpu_sched *s = xf->slice->gpu->sched;
	bool found;

	spin_lock(&s->list_lock);
	found = xpu_recs_hold_kind(xf->slice, kind, h_client, h_object);
	spin_unlock(&s->list_lock);
	return found;
}

/* Whether (H_CLIENT, H_MEMORY) is a usermode object recorded in XF's slice. */
bool xpu_sched_is_usermode(struct xpu_file *xf, u32 h_client, u32 h_memory)
{
	return xpu_sched_holds(xf, XPU_REC_UOBJ, h_client, h_memory);
}

/*
 * Whether (H_CLIENT, H_DMA) is a virtual allocation of XF's slice whose page
 * tables RM pinned when it was made (and xpu charged).  Under mem_lock, which
 * every call that makes or frees a handle of the slice's clients holds.  A
 * virtual allocation's parent is always a device (resource_list.h), so a
 * free that takes it -- of it, its device or its client -- is matched at
 * once (xpu_sched_rm_free), and a record RM no longer has cannot wait for a
 * sweep while its handle is made again.
 */
bool xpu_sched_is_pinning_virtual(struct xpu_file *xf, u32 h_client, u32 h_dma)
{
	lockdep_assert_held(&xf->slice->mem_lock);
	return xpu_sched_holds(xf, XPU_REC_VIRT, h_client, h_dma);
}

/*
 * FIFO_DISABLE_CHANNELS is a non-privileged control: a sliced client must not
 * enable what xpu disabled, nor disable another slice's channels.  The
 * command is read here and again by the driver, so a racing thread could slip
 * one through; hence also: while the slice waits, every control it makes is
 * followed by disabling its channels again.
 */
long xpu_sched_rm_control(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	struct nvos54_parameters __user *p = (void __user *)arg;

	if (READ_ONCE(xf->slice->state) == XPU_GATE_WAIT)
		xpu_sched_reassert(xf->slice);
	return xpu_put_status(&p->status, NV_ERR_INSUFFICIENT_PERMISSIONS);
}

/*
 * A control made while the slice waits: see xpu_sched_rm_control().  A
 * pass that starts after the control's end covers it, so one pass is in
 * flight per slice: the control's thread runs passes while controls that
 * ended ask for one, and every other returns at once.  Each pass takes the
 * scheduler's lock anew.  Before (found by a review in session 58) each
 * control made a pass of its own, ceil(n/64) RM calls under the lock the
 * scheduler's turns and other slices' channel records need: a tenant's
 * threads looping on cheap controls queued on it without end.
 */
void xpu_sched_reassert(struct xpu_slice *slice)
{
	struct xpu_sched *s = slice->gpu->sched;

	atomic_set(&slice->reassert_wanted, 1);
	/* fully ordered: a runner that cleared the bit sees the wish */
	while (!test_and_set_bit_lock(0, &slice->reasserting)) {
		while (atomic_xchg(&slice->reassert_wanted, 0)) {
			if (mutex_lock_killable(&s->lock)) {
				/* left for the next control's thread */
				atomic_set(&slice->reassert_wanted, 1);
				break;
			}
			if (slice->state == XPU_GATE_WAIT)
				xpu_gate_channels(s, slice, true);
			mutex_unlock(&s->lock);
		}
		clear_bit_unlock(0, &slice->reasserting);
		/* a wish made while the bit was held, after the last look */
		smp_mb__after_atomic();
		if (!atomic_read(&slice->reassert_wanted) ||
		    fatal_signal_pending(current))
			break;
	}
}

/*
 * A driver file is being released, before the driver's release: it is no
 * longer a doorbell file of its slice, and a zap pass that took it is done
 * with its address_space when this returns (xpu_gate_zap(): one
 * unmap_mapping_range() of a file no VMA maps any more, so short).
 */
void xpu_sched_file_closing(struct xpu_file *xf)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_sched *s;

	if (!slice)
		return;
	s = slice->gpu->sched;
	spin_lock(&s->list_lock);
	if (!list_empty(&xf->db_link)) {
		list_del_init(&xf->db_link);
		slice->nr_dbfiles--;
	}
	spin_unlock(&s->list_lock);
	/* off the list: no pass takes it again, and the flag only falls */
	wait_event(s->zap_wq, !smp_load_acquire(&xf->zapping));
}

/* A driver file has gone: a control file's records. */
void xpu_sched_file_release(struct xpu_file *xf)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_rec_match m = { .key = XPU_REC_CTL, .ctl = xf->file };
	struct xpu_sched *s;
	int k;

	if (!slice || xf->gpu)
		return;
	s = slice->gpu->sched;
	spin_lock(&s->list_lock);
	for (k = 0; k < XPU_REC_KINDS; k++)
		xpu_recs_drop(slice, k, &m);
	spin_unlock(&s->list_lock);
}

/* --- slices */

void xpu_sched_slice_add(struct xpu_slice *slice)
{
	struct xpu_sched *s = slice->gpu->sched;

	int k;

	for (k = 0; k < XPU_REC_KINDS; k++)
		INIT_LIST_HEAD(&slice->recs[k]);
	INIT_LIST_HEAD(&slice->dbfiles);
	init_waitqueue_head(&slice->gate_wq);
	slice->state = XPU_GATE_RUN;
	slice->allowed = true;
	slice->win_start = ktime_get_ns();
	mutex_lock(&s->lock);
	spin_lock(&s->list_lock);
	list_add_tail(&slice->sched_link, &s->slices);
	spin_unlock(&s->list_lock);
	mutex_unlock(&s->lock);
	xpu_sched_kick(slice->gpu);
}

/* The slice is destroyed: open everything, forget its records. */
void xpu_sched_slice_remove(struct xpu_slice *slice)
{
	struct xpu_sched *s = slice->gpu->sched;
	struct xpu_rec_match all = { .key = XPU_REC_ALL };
	struct xpu_file *xf, *xtmp;
	int k;

	mutex_lock(&s->lock);
	xpu_gate_set(s, slice, XPU_GATE_RUN);
	spin_lock(&s->list_lock);
	list_del(&slice->sched_link);
	for (k = 0; k < XPU_REC_KINDS; k++)
		xpu_recs_drop(slice, k, &all);
	list_for_each_entry_safe(xf, xtmp, &slice->dbfiles, db_link)
		list_del_init(&xf->db_link);
	slice->nr_dbfiles = 0;
	spin_unlock(&s->list_lock);
	mutex_unlock(&s->lock);
	wake_up_all(&slice->gate_wq);
	xpu_sched_kick(slice->gpu);
}

/*
 * Under xpu_lock, which every open takes: the counters are read without
 * the scheduler's lock, which is held across RM calls (the gating of a
 * slice's channels, 64 to a call), so that a tenant whose reassertions keep
 * it busy does not make xpud's reads, and every open behind them, wait
 * (found by a review of sched.c in session 56).  The step writes runnable
 * time before run and gated time, which are read first.
 */
void xpu_sched_fill(struct xpu_slice *slice, struct xpu_slice_info *out)
{
	struct xpu_sched *s = slice->gpu->sched;

	out->run_ns = READ_ONCE(slice->run_ns);
	out->gated_ns = READ_ONCE(slice->gated_ns);
	/* pairs with xpu_step_account's smp_wmb() */
	smp_rmb();
	out->runnable_ns = READ_ONCE(slice->runnable_ns);
	out->share_obtained = READ_ONCE(slice->share_obtained);
	/* the records' counts, and the doorbell files', change under it */
	spin_lock(&s->list_lock);
	out->channels = slice->nr_recs[XPU_REC_CHAN];
	out->devices = slice->nr_recs[XPU_REC_DEV];
	out->vaspaces = slice->nr_recs[XPU_REC_VAS];
	out->virtuals = slice->nr_recs[XPU_REC_VIRT];
	out->tsgs = slice->nr_recs[XPU_REC_TSG];
	out->usermode = slice->nr_recs[XPU_REC_UOBJ];
	out->doorbell_files = slice->nr_dbfiles;
	spin_unlock(&s->list_lock);
	out->gate_faults = atomic64_read(&slice->gate_faults);
	xpu_uvm_fill(slice, out);
}

/* --- the scheduler */

/*
 * A slice wants the GPU while a doorbell writer of it waits, or it wrote one
 * lately.  A slice xpu holds back (WAIT) with channels keeps wanting: its
 * queued work cannot run, so it may have no reason to write a doorbell, and
 * letting it count as idle would enable its channels beside the turn holder.
 */
static bool xpu_wants(struct xpu_slice *slice, u64 now, u64 period_ns)
{
	if (slice->state == XPU_GATE_WAIT && slice->wants && slice->nr_recs[XPU_REC_CHAN])
		return true;
	return atomic_read(&slice->waiters) ||
	       now - READ_ONCE(slice->last_active) <
	       XPU_DEMAND_PERIODS * period_ns;
}

/* Sleep up to NS; a kick ends it early.  Returns whether kicked. */
static bool xpu_sched_sleep(struct xpu_sched *s, u64 ns)
{
	if (READ_ONCE(s->kicked))
		return true;
	wait_event_interruptible_hrtimeout(s->wq, READ_ONCE(s->kicked) ||
					   kthread_should_stop(),
					   ns_to_ktime(ns));
	return READ_ONCE(s->kicked);
}

/*
 * The rate, per mille, of a slice of SHARE and WEIGHT among N eligible
 * slices (itself included) of SHARES and WEIGHTS: its share, scaled down
 * when the shares exceed the GPU, and when SPLIT its part of what they leave,
 * by weight.
 */
static u64 xpu_rate_among(u64 share, u64 weight, u64 shares, u64 weights,
			  unsigned int n, bool split)
{
	u64 left = !split || shares >= XPU_SHARE_MAX ? 0 :
		   XPU_SHARE_MAX - shares;
	u64 rate = share;

	if (shares > XPU_SHARE_MAX)
		rate = div64_u64(rate * XPU_SHARE_MAX, shares);
	if (left && weights)
		rate += div64_u64(left * weight, weights);
	else if (left)
		rate += div64_u64(left, n);
	return rate;
}

/*
 * What SLICE, not eligible, would earn were it (beside SHARES and WEIGHTS of
 * N eligible slices, TOP the highest class wanting): what its channels may
 * have beside a turn holder while it is silent.
 */
static u32 xpu_rate_if_eligible(struct xpu_slice *slice, u32 policy, u32 top,
				u64 shares, u64 weights, unsigned int n)
{
	u64 share = READ_ONCE(slice->share), weight = READ_ONCE(slice->weight);
	u32 prio = READ_ONCE(slice->priority);

	if (policy == XPU_POLICY_PRIORITY && n && prio != top)
		return prio < top ? 0 : XPU_SHARE_MAX;
	return xpu_rate_among(share, weight, shares + share, weights + weight,
			      n + 1, policy != XPU_POLICY_FIXED);
}

/*
 * The rate at which each slice earns GPU time now, per mille, into
 * slice->rate; returns the sum.  fixed: its share, wanting or not (a slice
 * without channels earns nothing).  weighted: the wanting slices earn their
 * shares and split what those leave by weight.  priority: as weighted among
 * the wanting slices of the highest class present.
 */
static u32 xpu_rates(struct xpu_sched *s, u32 policy, u64 now, u64 period_ns)
{
	struct xpu_slice *slice;
	u64 shares = 0, weights = 0, sum = 0;
	unsigned int n = 0;
	u32 top = 0;

	list_for_each_entry(slice, &s->slices, sched_link) {
		/* read by the doorbell fault without the lock */
		WRITE_ONCE(slice->wants, xpu_wants(slice, now, period_ns));
		if (slice->wants)
			top = max(top, READ_ONCE(slice->priority));
	}
	list_for_each_entry(slice, &s->slices, sched_link) {
		slice->eligible = policy == XPU_POLICY_FIXED ?
			slice->nr_recs[XPU_REC_CHAN] && READ_ONCE(slice->share) :
			slice->wants && (policy != XPU_POLICY_PRIORITY ||
					 READ_ONCE(slice->priority) == top);
		if (!slice->eligible)
			continue;
		shares += READ_ONCE(slice->share);
		weights += READ_ONCE(slice->weight);
		n++;
	}
	list_for_each_entry(slice, &s->slices, sched_link) {
		u64 rate = 0;

		if (slice->eligible)
			rate = xpu_rate_among(READ_ONCE(slice->share),
					      READ_ONCE(slice->weight), shares,
					      weights, n,
					      policy != XPU_POLICY_FIXED);
		slice->rate = rate;
		sum += rate;
		slice->drain_rate = slice->eligible ? 0 :
			xpu_rate_if_eligible(slice, policy, top, shares,
					     weights, n);
	}
	return sum;
}

/* Charge the time since the last step; earn budgets; update the counters. */
static void xpu_step_account(struct xpu_sched *s, u64 dt, u64 now,
			     u64 period_ns)
{
	struct xpu_slice *slice;
	s64 cap;

	list_for_each_entry(slice, &s->slices, sched_link) {
		/*
		 * read without this lock (xpu_sched_fill): runnable_ns first,
		 * so that a reader never sees run or gated time above it
		 */
		if (slice->wants) {
			WRITE_ONCE(slice->runnable_ns, slice->runnable_ns + dt);
			/* pairs with xpu_sched_fill's smp_rmb() */
			smp_wmb();
			if (slice->state == XPU_GATE_WAIT)
				WRITE_ONCE(slice->gated_ns, slice->gated_ns + dt);
		}
		if (slice->state == XPU_GATE_RUN) {
			slice->budget_ns -= dt;
			/* holding the GPU counts when there is work to hold it for */
			if (slice->wants) {
				WRITE_ONCE(slice->run_ns, slice->run_ns + dt);
				slice->win_run += dt;
			}
		}
		slice->budget_ns += (s64)div64_u64(dt * slice->rate, XPU_SHARE_MAX);
		/* at most two turns saved up; debts of a few periods */
		cap = (s64)div64_u64(2 * period_ns * slice->rate, XPU_SHARE_MAX);
		slice->budget_ns = clamp_t(s64, slice->budget_ns,
					   -XPU_DEBT_PERIODS * (s64)period_ns, cap);
		if (!slice->eligible && slice->budget_ns > 0)
			slice->budget_ns = 0;
		/*
		 * A silent slice's channels beside a turn holder spend what
		 * it earns at the rate it would have if it wanted the GPU:
		 * queued work it never rang for runs, at most at that rate.
		 */
		if (!slice->eligible && READ_ONCE(slice->nr_recs[XPU_REC_CHAN])) {
			if (s->held && slice->state == XPU_GATE_IDLE)
				slice->drain_ns -= dt;
			slice->drain_ns += (s64)div64_u64(dt * slice->drain_rate,
							  XPU_SHARE_MAX);
			cap = (s64)div64_u64(2 * period_ns * slice->drain_rate,
					     XPU_SHARE_MAX);
			slice->drain_ns = clamp_t(s64, slice->drain_ns,
						  -XPU_DEBT_PERIODS * (s64)period_ns,
						  cap);
		} else {
			slice->drain_ns = 0;
		}
		if (now - slice->win_start >= XPU_SHARE_WINDOW_NS) {
			WRITE_ONCE(slice->share_obtained,
				   div64_u64(slice->win_run * 1000,
					     now - slice->win_start));
			slice->win_run = 0;
			slice->win_start = now;
		}
	}
}

/* Raise the budget of every eligible slice by NS. */
static void xpu_forgive(struct xpu_sched *s, s64 ns)
{
	struct xpu_slice *slice;

	list_for_each_entry(slice, &s->slices, sched_link)
		if (slice->eligible)
			slice->budget_ns += ns;
}

/* Put every slice but RUNNING (NULL: none) out of the GPU, as POLICY says. */
static void xpu_gate_others(struct xpu_sched *s, struct xpu_slice *running,
			    u32 policy)
{
	struct xpu_slice *slice;

	list_for_each_entry(slice, &s->slices, sched_link) {
		if (slice == running)
			continue;
		/* the eligible, and lower classes that want it, must wait */
		if (policy == XPU_POLICY_FIXED || slice->eligible ||
		    (policy == XPU_POLICY_PRIORITY && slice->wants))
			xpu_gate_set(s, slice, XPU_GATE_WAIT);
		/* and a silent slice with channels that spent its drain */
		else if (running && READ_ONCE(slice->nr_recs[XPU_REC_CHAN]) &&
			 slice->drain_ns <= 0)
			xpu_gate_set(s, slice, XPU_GATE_WAIT);
		else
			xpu_gate_set(s, slice, XPU_GATE_IDLE);
	}
}

/*
 * One step: account for the time since the last, pick the eligible slice
 * with the most budget, and if that budget is positive give it the GPU alone
 * for one whole turn (share x period); else leave the GPU to nobody until the
 * first debt is paid (fixed only: the others forgive).  What a turn took
 * beyond the budget is a debt paid before the next.
 */
static void xpu_sched_step(struct xpu_sched *s)
{
	u32 policy = READ_ONCE(s->gpu->policy);
	u64 period_ns = (u64)READ_ONCE(s->gpu->period_us) * NSEC_PER_USEC;
	struct xpu_slice *slice, *best = NULL;
	u64 now, dt, sleep_ns = period_ns;
	bool sample;

	mutex_lock(&s->lock);
	WRITE_ONCE(s->kicked, false);
	now = ktime_get_ns();
	dt = now - s->last_step;
	s->last_step = now;
	xpu_step_account(s, dt, now, period_ns);
	xpu_rates(s, policy, now, period_ns);
	sample = now - s->last_sample >= period_ns;
	if (sample)
		s->last_sample = now;

	if (policy == XPU_POLICY_NATIVE) {
		list_for_each_entry(slice, &s->slices, sched_link)
			xpu_gate_set(s, slice, XPU_GATE_RUN);
		s->held = false;
		goto sleep;
	}
	list_for_each_entry(slice, &s->slices, sched_link)
		if (slice->eligible &&
		    (!best || slice->budget_ns > best->budget_ns))
			best = slice;
	/*
	 * weighted and priority waste no time: when every slice that wants
	 * the GPU is in debt (turns overran: the thread wakes late), all are
	 * forgiven the same amount, which keeps what one owes the others.
	 * fixed pays debts by leaving the GPU idle.
	 */
	if (best && best->budget_ns <= 0 && policy != XPU_POLICY_FIXED)
		xpu_forgive(s, -best->budget_ns + 1);
	if (best && best->budget_ns <= 0)
		best = NULL;
	if (best) {
		/*
		 * A whole turn, whatever the budget left: a turn is what
		 * switching costs are paid for, and the budget takes the rest
		 * as a debt.  One turn at most, so that the others' come round.
		 */
		sleep_ns = div64_u64(period_ns * max(best->rate, 1U),
				     XPU_SHARE_MAX);
		sleep_ns = max_t(u64, sleep_ns, XPU_MIN_STEP_NS);
	} else {
		/*
		 * Until the first debt is paid: then that slice runs a whole
		 * turn.  (Waiting for a whole turn's budget would leave the
		 * GPU idle for up to a period after every late wake-up.)
		 */
		list_for_each_entry(slice, &s->slices, sched_link) {
			u64 debt = -slice->budget_ns;

			if (slice->eligible && slice->rate)
				sleep_ns = min_t(u64, sleep_ns, 1 +
						 div64_u64(debt * XPU_SHARE_MAX,
							   slice->rate));
		}
		sleep_ns = max_t(u64, sleep_ns, XPU_MIN_STEP_NS);
	}
	/* a slice that keeps the GPU re-samples its activity each period */
	if (best && best->state == XPU_GATE_RUN && sample)
		xpu_gate_zap(s, best);
	if (sample)
		list_for_each_entry(slice, &s->slices, sched_link)
			if (slice->state == XPU_GATE_IDLE)
				xpu_gate_zap(s, slice);
	/*
	 * Make before break: enable the next slice's channels before the last
	 * one's are disabled, so that the engine runs the last one until it
	 * sees the disable instead of idling through two RM calls.
	 */
	if (best)
		xpu_gate_set(s, best, XPU_GATE_RUN);
	xpu_gate_others(s, best, policy);
	s->held = !!best;
	if (READ_ONCE(trace_turns) && best) {
		WRITE_ONCE(trace_turns, trace_turns - 1);
		pr_info("step: gpu %u slice %u budget %lld us rate %u last %llu us\n",
			s->gpu->minor, best->id, best->budget_ns / 1000,
			best->rate, dt / 1000);
	}
sleep:
	mutex_unlock(&s->lock);
	xpu_sched_sleep(s, sleep_ns);
}

static int xpu_sched_thread(void *data)
{
	struct xpu_sched *s = data;

	s->last_step = ktime_get_ns();
	s->last_sample = s->last_step;
	while (!kthread_should_stop())
		xpu_sched_step(s);
	return 0;
}

int xpu_sched_init(void)
{
	struct xpu_sched *s;
	unsigned int i;

	for (i = 0; i < xpu_nr_gpus; i++) {
		s = kzalloc(sizeof(*s), GFP_KERNEL);
		if (!s)
			goto err;
		s->gpu = &xpu_gpus[i];
		init_waitqueue_head(&s->wq);
		init_waitqueue_head(&s->zap_wq);
		mutex_init(&s->lock);
		spin_lock_init(&s->list_lock);
		INIT_LIST_HEAD(&s->slices);
		xpu_scheds[i] = s;
		xpu_gpus[i].sched = s;
		s->thread = kthread_run(xpu_sched_thread, s, "xpu-sched/%u",
					xpu_gpus[i].minor);
		if (IS_ERR(s->thread)) {
			s->thread = NULL;
			goto err;
		}
	}
	return 0;
err:
	xpu_sched_exit();
	return -ENOMEM;
}

/* After the slices are gone. */
void xpu_sched_exit(void)
{
	unsigned int i;

	for (i = 0; i < XPU_MAX_GPUS; i++) {
		struct xpu_sched *s = xpu_scheds[i];

		if (!s)
			continue;
		if (s->thread)
			kthread_stop(s->thread);
		WARN_ON(!list_empty(&s->slices));
		xpu_gpus[i].sched = NULL;
		xpu_scheds[i] = NULL;
		kfree(s);
	}
}
