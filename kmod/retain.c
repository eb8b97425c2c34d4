// SPDX-License-Identifier: GPL-2.0
/*
 * UVM's retention of channels, seen where it happens (docs/security.md,
 * class 39; docs/compute.md).
 *
 * UVM_REGISTER_CHANNEL has nvidia.ko retain a channel for UVM: UVM calls
 * nvUvmInterfaceRetainChannel(vaSpace, hClient, hChannel, &retained, ...)
 * in the registering thread, and nvUvmInterfaceReleaseChannel(retained)
 * wherever it lets go (nv_uvm_interface.h, the same in 535 to 595; both
 * exported by nvidia.ko).  Between the two, RM keeps the channel's id and
 * instance block and its TSG's context, whoever frees the channel or TSG,
 * and charges them to no process.  RM tells a kernel client nothing of it,
 * and UVM's file operations cannot be wrapped, so xpu watches the two calls
 * with kprobes:
 *
 * - At the retain's entry, before RM acts, a kprobe makes a record of
 *   (hClient, hChannel), in flight (a kprobe has no instances to run out
 *   of); at the return, the kretprobe gives the calling thread's record
 *   UVM's pointer (NV_OK) or drops it (an error).  At the release's
 *   return, after RM let go, the record of that pointer goes.
 * - A slice's channel or TSG record dropped (sched.c: freed by RM, however)
 *   while a record of it is there leaves its charge pinned to that record,
 *   in rec_bytes and against max_records, until the record goes: then the
 *   charge moves to another record of the same channel or TSG, or is given
 *   back.  A free racing a retain finds the record in flight.
 *
 * Which UVM file the registration went through does not matter: one passed
 * in from another slice or from outside every slice, or opened before xpu
 * found UVM, retains in the open.  Nor is an honest slice charged for what
 * UVM already let go of.
 *
 * The probes' handlers run in the probed threads with preemption off: they
 * take one spinlock, allocate atomically and put slice, task and pid
 * references from a work item.  xpu needs the probes on ftrace (a
 * breakpoint's handler runs as an NMI, where the spinlock is no place to
 * be).  Where the probes cannot be placed, or a record could not be made
 * (an atomic allocation failed), the sight is not exact any more and
 * uvm.c's pinning by the slice's UVM files takes over for later frees.
 *
 * A kretprobe has uvm_probe_maxactive instances, and a thread inside the
 * retain holds one until it returns: threads blocked in RM's locks can
 * take them all, a tenant's among them.  A call that finds none is known
 * at its entry (the kretprobe's entry handler did not run before the
 * kprobe's post handler, which runs after every probe's pre handler):
 * its record is "unwatched", its outcome never seen.  It pins only frees
 * of the slices its process is a member of (a failing call of another
 * slice's tenant that names this slice's handles would otherwise pin its
 * frees for good).  Its call is over when its thread enters the retain
 * again or exits (looked at every second while there are such records);
 * RM may have retained the channel or not.  A record that pins keeps its
 * charge (an over-count of its slice's where RM did not, never an
 * escape) until UVM destroys the VA space the call named, which it does
 * only after it let go of every channel retained in it (a kprobe on
 * nvUvmInterfaceAddressSpaceDestroy); so does a record whose release the
 * kretprobe missed.  One that pins nothing stays while a slice its process is a
 * member of records the channel, one a pair (its free will pin it), or
 * while another record of the pair is there (it may inherit a pin); else
 * it goes, so unwatched calls leave at most one record a live channel.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <linux/kprobes.h>
#include <linux/llist.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "hook.h"
#include "mem.h"
#include "retain.h"
#include "sched.h"
#include "slice.h"
#include "xpu.h"

static bool uvm_probes = true;
module_param(uvm_probes, bool, 0444);
MODULE_PARM_DESC(uvm_probes,
		 "watch the driver's nvUvmInterfaceRetainChannel/ReleaseChannel, so that a channel UVM retains stays charged exactly while it does (at load)");

static unsigned int uvm_probe_maxactive = 4096;
static struct xpu_uint_range uvm_probe_maxactive_range =
	XPU_UINT_RANGE(uvm_probe_maxactive, 1, 65536);
module_param_cb(uvm_probe_maxactive, &xpu_uint_range_ops,
		&uvm_probe_maxactive_range, 0444);
MODULE_PARM_DESC(uvm_probe_maxactive,
		 "threads whose return from the driver's retain or release of a channel xpu watches at once (1..65536, at load); a call past it is unwatched (uvm_retains_unwatched)");

struct xpu_ret {
	struct hlist_node by_chan;	/* by (client, channel) */
	struct hlist_node by_tsg;	/* by (client, TSG), once known */
	struct hlist_node by_ptr;	/* once UVM's pointer is known */
	struct hlist_node by_task;	/* while its thread may be inside */
	struct hlist_node by_vas;	/* by UVM's GPU VA space */
	void *vas;			/* the retain's vaSpace (UVM's) */
	void *retained;			/* UVM's; NULL while in flight */
	/* the retaining thread (a reference), until its call is over */
	struct task_struct *task;
	struct pid *pid;		/* its process, a reference */
	bool unwatched;			/* its return will not be seen */
	bool over;			/* unwatched, and its call is over */
	bool live;			/* the sweep's: its channel recorded */
	bool dead;			/* its VA space went: nothing retained */
	struct list_head judge;		/* over, pinning nothing: to the sweep */
	u32 h_client, h_channel;
	u32 h_tsg;			/* the channel's parent, once known */
	bool pinned_chan, pinned_tsg;
	struct xpu_slice *slice;	/* a reference, with a charge pinned */
	u64 chan_bytes, tsg_bytes;	/* the charges pinned, and how many */
	u32 chans, tsgs;
	/*
	 * On xpu_ret_clock: the retain's entry, and the latest drop of a
	 * channel record whose charge it pins (0: none).  A retention that
	 * entered after a channel record went cannot hold that channel (RM
	 * looks the handle up inside the call): it is no heir of that pin.
	 */
	u64 entered, chan_died;
	struct llist_node put;		/* to the work item, for the put */
};

static DEFINE_SPINLOCK(xpu_ret_lock);
/* Orders retains' entries and records' drops (struct xpu_ret's entered). */
static atomic64_t xpu_ret_clock;
/*
 * Records by (client, channel) and (client, TSG), not by client alone: a
 * tenant's threads inside the retain naming another slice's client would
 * otherwise lengthen every lookup of that client's, under the lock.
 */
static DEFINE_HASHTABLE(xpu_ret_by_chan, 8);
static DEFINE_HASHTABLE(xpu_ret_by_tsg, 8);
static DEFINE_HASHTABLE(xpu_ret_by_ptr, 8);
static DEFINE_HASHTABLE(xpu_ret_by_task, 8);
static DEFINE_HASHTABLE(xpu_ret_by_vas, 8);
static unsigned int xpu_ret_nr;		/* under the lock */
static unsigned int xpu_ret_unwatched_nr;	/* in by_task; under the lock */
static LIST_HEAD(xpu_ret_judge);	/* under the lock */
static bool xpu_ret_probed, xpu_ret_lost, xpu_ret_vas_probed;

/* The record made at this CPU's entry, and whether the kretprobe took it. */
static DEFINE_PER_CPU(struct xpu_ret *, xpu_ret_entering);
static DEFINE_PER_CPU(bool, xpu_ret_hooked);

/* Seeded at load: names a tenant chooses cannot aim at another's chain. */
static u32 xpu_ret_seed;

static u32 xpu_ret_key(u32 h_client, u32 h_object)
{
	return jhash_2words(h_client, h_object, xpu_ret_seed);
}

/* RET's channel is of TSG H_TSG (if RET knows none yet).  Under the lock. */
static void xpu_ret_set_tsg(struct xpu_ret *ret, u32 h_tsg)
{
	if (ret->h_tsg || !h_tsg)
		return;
	ret->h_tsg = h_tsg;
	hash_add(xpu_ret_by_tsg, &ret->by_tsg,
		 xpu_ret_key(ret->h_client, h_tsg));
}

static LLIST_HEAD(xpu_ret_puts);
static void xpu_ret_put_fn(struct work_struct *work);
static DECLARE_WORK(xpu_ret_put_work, xpu_ret_put_fn);
static void xpu_ret_sweep_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(xpu_ret_sweep_work, xpu_ret_sweep_fn);

struct xpu_ret_args {
	u32 h_client, h_channel;
	void **out;			/* UVM's place for its pointer */
};

static struct kprobe xpu_ret_kp_retain;
static struct kretprobe xpu_ret_rp_retain;
static struct kretprobe xpu_ret_rp_release;

bool xpu_retain_exact(void)
{
	return READ_ONCE(xpu_ret_probed) && !READ_ONCE(xpu_ret_lost) &&
	       !READ_ONCE(xpu_ret_kp_retain.nmissed);
}

static int xpu_ret_exact_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%c\n", xpu_retain_exact() ? 'Y' : 'N');
}

static const struct kernel_param_ops xpu_ret_exact_ops = {
	.get = xpu_ret_exact_get,
};
module_param_cb(uvm_retentions_seen, &xpu_ret_exact_ops, NULL, 0444);
MODULE_PARM_DESC(uvm_retentions_seen,
		 "whether xpu sees every retention of a channel by UVM (the probes placed, none missed); if not, a freed channel's charge stays while a UVM file of its slice is open (read only)");

module_param_named(uvm_retains_unwatched, xpu_ret_rp_retain.nmissed, int,
		   0444);
MODULE_PARM_DESC(uvm_retains_unwatched,
		 "calls of the driver's retain of a channel whose return xpu could not watch (every instance of uvm_probe_maxactive taken); each pins only its own slice's frees, or a slice's that shared its clients wider (read only)");
module_param_named(uvm_retain_records, xpu_ret_nr, uint, 0444);
MODULE_PARM_DESC(uvm_retain_records,
		 "records of the driver's retentions of channels for UVM, in flight or held (read only)");

static void xpu_ret_lose(void)
{
	if (!xchg(&xpu_ret_lost, true))
		pr_warn("a retention of a channel by UVM was not recorded: channels and TSGs a slice frees stay charged while its UVM files are open, from now on\n");
}

static void xpu_ret_put_fn(struct work_struct *work)
{
	struct llist_node *list = llist_del_all(&xpu_ret_puts);
	struct xpu_ret *ret, *tmp;

	llist_for_each_entry_safe(ret, tmp, list, put) {
		if (ret->task)
			put_task_struct(ret->task);
		put_pid(ret->pid);
		if (ret->slice)
			xpu_slice_put(ret->slice);
		kfree(ret);
	}
}

/* RET goes: its references are put from the work item.  Under the lock. */
static void xpu_ret_free(struct xpu_ret *ret)
{
	llist_add(&ret->put, &xpu_ret_puts);
	schedule_work(&xpu_ret_put_work);
}

/*
 * Whether RET may carry a charge of SLICE's: a record that pins already
 * pins for its slice only; one whose return xpu cannot watch, for the
 * slices its process is a member of only (class 39; RM lets a process
 * retain only channels of clients it made, or was shared, so this takes
 * nothing from a call of RM's that succeeds, bar a share between slices,
 * docs/security.md).  Under the lock.
 */
static bool xpu_ret_may_pin(const struct xpu_ret *ret,
			    struct xpu_slice *slice)
{
	if (ret->slice)
		return ret->slice == slice;
	return !ret->unwatched || xpu_mem_may_retain(slice, ret->pid);
}

/* BYTES of NCHANS channels and NTSGS TSGs given back to SLICE. */
static void xpu_ret_give_back(struct xpu_slice *slice, u64 bytes, u32 nchans,
			      u32 ntsgs)
{
	spin_lock(&slice->uvm_lock);
	slice->uvm_bytes -= bytes;
	WRITE_ONCE(slice->uvm_chans, slice->uvm_chans - nchans);
	WRITE_ONCE(slice->uvm_tsgs, slice->uvm_tsgs - ntsgs);
	spin_unlock(&slice->uvm_lock);
	xpu_sched_uncharge(slice, bytes);
}

/*
 * Another record RET's pin of its channel (TSG false) or TSG moves to: a
 * retention of the same channel, or of another channel of the same TSG,
 * for the same slice.  Under the lock, RET off the table.
 */
static struct xpu_ret *xpu_ret_heir(const struct xpu_ret *ret, bool tsg)
{
	struct xpu_ret *o;

	if (tsg) {
		if (!ret->h_tsg)
			return NULL;
		hash_for_each_possible(xpu_ret_by_tsg, o, by_tsg,
				       xpu_ret_key(ret->h_client, ret->h_tsg))
			if (o->h_client == ret->h_client &&
			    o->h_tsg == ret->h_tsg &&
			    xpu_ret_may_pin(o, ret->slice))
				return o;
		return NULL;
	}
	/*
	 * Only one that entered before the channel's record went: a handle
	 * freed and made again (another channel, perhaps of another TSG) and
	 * retained anew is another object.  Before session 65 such a
	 * retention took the pin and the old channel's TSG, and the new
	 * channel's TSG was then charged to no one when freed.
	 */
	hash_for_each_possible(xpu_ret_by_chan, o, by_chan,
			       xpu_ret_key(ret->h_client, ret->h_channel))
		if (o->h_client == ret->h_client &&
		    o->h_channel == ret->h_channel &&
		    o->entered < ret->chan_died &&
		    xpu_ret_may_pin(o, ret->slice))
			return o;
	return NULL;
}

/* RET off every table it is in.  Under the lock. */
static void xpu_ret_unhash(struct xpu_ret *ret)
{
	hash_del(&ret->by_chan);
	hash_del(&ret->by_vas);
	if (!hlist_unhashed(&ret->by_tsg))
		hash_del(&ret->by_tsg);
	if (!hlist_unhashed(&ret->by_ptr))
		hash_del(&ret->by_ptr);
	if (!hlist_unhashed(&ret->by_task)) {
		hash_del(&ret->by_task);
		if (ret->unwatched)
			xpu_ret_unwatched_nr--;
	}
}

/*
 * RET goes (RM let go of it, or never retained): its pin of the channel
 * moves to another retention of that channel, its pin of the TSG to
 * another retention of a channel of that TSG, each or what is left given
 * back.  Under the lock; frees RET, its slice put later.
 */
static void xpu_ret_drop(struct xpu_ret *ret)
{
	struct xpu_ret *to;
	u64 back = 0;
	u32 nchans = 0, ntsgs = 0;

	xpu_ret_unhash(ret);
	WRITE_ONCE(xpu_ret_nr, xpu_ret_nr - 1);
	if (!ret->slice) {
		xpu_ret_free(ret);
		return;
	}
	if (ret->chans) {
		to = xpu_ret_heir(ret, false);
		if (to) {
			if (!to->slice)
				to->slice = xpu_slice_get(ret->slice);
			to->chan_bytes += ret->chan_bytes;
			to->chans += ret->chans;
			to->chan_died = max(to->chan_died, ret->chan_died);
			to->pinned_chan = true;
			xpu_ret_set_tsg(to, ret->h_tsg);
		} else {
			back += ret->chan_bytes;
			nchans = ret->chans;
		}
	}
	if (ret->tsgs) {
		to = xpu_ret_heir(ret, true);
		if (to) {
			if (!to->slice)
				to->slice = xpu_slice_get(ret->slice);
			to->tsg_bytes += ret->tsg_bytes;
			to->tsgs += ret->tsgs;
			to->pinned_tsg = true;
		} else {
			back += ret->tsg_bytes;
			ntsgs = ret->tsgs;
		}
	}
	if (back || nchans || ntsgs)
		xpu_ret_give_back(ret->slice, back, nchans, ntsgs);
	xpu_ret_free(ret);
}

/*
 * RET's call is over and its return was not seen (its thread entered the
 * retain again, or exits): it is unwatched from now on, if it was not (a
 * return the kretprobe missed).  One that pins keeps the charge, retained
 * or not (the outcome is RM's, unseen), for its slice only; one that pins
 * nothing goes to the sweep, which looks at its channel.  Under the lock.
 */
static void xpu_ret_over(struct xpu_ret *ret)
{
	hash_del(&ret->by_task);
	if (ret->unwatched)
		xpu_ret_unwatched_nr--;
	ret->unwatched = true;
	ret->over = true;
	if (!ret->slice) {
		list_add_tail(&ret->judge, &xpu_ret_judge);
		schedule_delayed_work(&xpu_ret_sweep_work, 0);
	}
}

/*
 * Whether RET, over and pinning nothing, may go: another unwatched record
 * of the pair is over too (it stands for both), or neither a slice its
 * process is in records the channel (ret->live, as the sweep found it)
 * nor is any other record of the pair there.  Under the lock.
 */
static bool xpu_ret_idle(const struct xpu_ret *ret)
{
	const struct xpu_ret *o;
	bool other = false;

	hash_for_each_possible(xpu_ret_by_chan, o, by_chan,
			       xpu_ret_key(ret->h_client, ret->h_channel)) {
		if (o == ret || o->h_client != ret->h_client ||
		    o->h_channel != ret->h_channel)
			continue;
		if (o->over)
			return true;
		other = true;
	}
	return !ret->live && !other;
}

/*
 * nvUvmInterfaceRetainChannel(vaSpace, hClient, hChannel, &retained, info):
 * at its entry, the record, in flight.
 */
static int xpu_ret_retain_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct xpu_ret *ret, *o;
	struct hlist_node *tmp;

	ret = kzalloc(sizeof(*ret), GFP_ATOMIC | __GFP_NOWARN);
	if (!ret) {
		xpu_ret_lose();
		return 0;
	}
	ret->vas = (void *)regs_get_kernel_argument(regs, 0);
	ret->h_client = regs_get_kernel_argument(regs, 1);
	ret->h_channel = regs_get_kernel_argument(regs, 2);
	ret->task = get_task_struct(current);
	ret->pid = get_pid(task_tgid(current));
	INIT_HLIST_NODE(&ret->by_ptr);
	INIT_HLIST_NODE(&ret->by_tsg);
	INIT_LIST_HEAD(&ret->judge);
	spin_lock(&xpu_ret_lock);
	/*
	 * A record of this thread's still here is of a call that is over:
	 * its return went unseen (a thread is inside the retain once at most)
	 */
	hash_for_each_possible_safe(xpu_ret_by_task, o, tmp, by_task,
				    (unsigned long)current)
		if (o->task == current)
			xpu_ret_over(o);
	ret->entered = atomic64_inc_return(&xpu_ret_clock);
	hash_add(xpu_ret_by_chan, &ret->by_chan,
		 xpu_ret_key(ret->h_client, ret->h_channel));
	hash_add(xpu_ret_by_vas, &ret->by_vas, (unsigned long)ret->vas);
	hash_add(xpu_ret_by_task, &ret->by_task, (unsigned long)current);
	WRITE_ONCE(xpu_ret_nr, xpu_ret_nr + 1);
	spin_unlock(&xpu_ret_lock);
	__this_cpu_write(xpu_ret_entering, ret);
	return 0;
}

/*
 * After every pre handler of the entry, the kretprobe's among them: if it
 * took no instance, the record made above will see no return.
 */
static void xpu_ret_retain_post(struct kprobe *kp, struct pt_regs *regs,
				unsigned long flags)
{
	struct xpu_ret *ret = __this_cpu_read(xpu_ret_entering);
	bool hooked = __this_cpu_read(xpu_ret_hooked);

	__this_cpu_write(xpu_ret_entering, NULL);
	__this_cpu_write(xpu_ret_hooked, false);
	if (!ret || hooked)
		return;
	/* RET is still there: only its own thread's calls take it away */
	spin_lock(&xpu_ret_lock);
	ret->unwatched = true;
	xpu_ret_unwatched_nr++;
	spin_unlock(&xpu_ret_lock);
	schedule_delayed_work(&xpu_ret_sweep_work, HZ);
}

/*
 * Unwatched records of threads that exit are over; over records that pin
 * nothing are judged (xpu_ret_idle).  Only the sweep and the unload take
 * over records away, so the judged ones stay while the lock is let go for
 * sched's list locks (taken before this lock, never under it).
 */
static void xpu_ret_sweep_fn(struct work_struct *work)
{
	struct xpu_ret *ret, *next;
	struct hlist_node *tmp;
	unsigned int bkt;
	LIST_HEAD(judge);
	bool more;

	spin_lock(&xpu_ret_lock);
	hash_for_each_safe(xpu_ret_by_task, bkt, tmp, ret, by_task)
		if (ret->unwatched && (READ_ONCE(ret->task->flags) & PF_EXITING))
			xpu_ret_over(ret);
	list_splice_init(&xpu_ret_judge, &judge);
	spin_unlock(&xpu_ret_lock);
	list_for_each_entry(ret, &judge, judge)
		ret->live = xpu_sched_chan_recorded(ret->h_client,
						    ret->h_channel, ret->pid);
	spin_lock(&xpu_ret_lock);
	list_for_each_entry_safe(ret, next, &judge, judge) {
		list_del_init(&ret->judge);
		/* pinned meanwhile, it keeps that, until its VA space goes */
		if (ret->dead || (!ret->slice && xpu_ret_idle(ret)))
			xpu_ret_drop(ret);
	}
	more = xpu_ret_unwatched_nr;
	spin_unlock(&xpu_ret_lock);
	if (more)
		schedule_delayed_work(&xpu_ret_sweep_work, HZ);
}

static int xpu_ret_retain_enter(struct kretprobe_instance *ri,
				struct pt_regs *regs)
{
	struct xpu_ret_args *a = (void *)ri->data;

	a->h_client = regs_get_kernel_argument(regs, 1);
	a->h_channel = regs_get_kernel_argument(regs, 2);
	a->out = (void **)regs_get_kernel_argument(regs, 3);
	__this_cpu_write(xpu_ret_hooked, true);
	return 0;
}

static int xpu_ret_retain_return(struct kretprobe_instance *ri,
				 struct pt_regs *regs)
{
	struct xpu_ret_args *a = (void *)ri->data;
	struct xpu_ret *ret, *found = NULL;
	void *retained = NULL;
	bool ok = (u32)regs_return_value(regs) == 0;	/* NV_OK */

	/* UVM's own variable, written by the driver before it returned */
	if (ok && (copy_from_kernel_nofault(&retained, a->out,
					    sizeof(retained)) || !retained)) {
		/* retained, but by what: its record stays in flight, pinning */
		xpu_ret_lose();
		return 0;
	}
	spin_lock(&xpu_ret_lock);
	/* this thread's record of the call */
	hash_for_each_possible(xpu_ret_by_task, ret, by_task,
			       (unsigned long)current) {
		if (ret->task == current && !ret->unwatched &&
		    ret->h_client == a->h_client &&
		    ret->h_channel == a->h_channel) {
			found = ret;
			break;
		}
	}
	if (found && ok) {
		found->retained = retained;
		hash_del(&found->by_task);
		/* current's own reference is not the last */
		put_task_struct(current);
		found->task = NULL;
		hash_add(xpu_ret_by_ptr, &found->by_ptr,
			 (unsigned long)retained);
	} else if (found) {
		xpu_ret_drop(found);
	}
	spin_unlock(&xpu_ret_lock);
	return 0;
}

/* nvUvmInterfaceReleaseChannel(retained): the record goes after RM let go */
static int xpu_ret_release_enter(struct kretprobe_instance *ri,
				 struct pt_regs *regs)
{
	void **retained = (void *)ri->data;

	*retained = (void *)regs_get_kernel_argument(regs, 0);
	return 0;
}

static int xpu_ret_release_return(struct kretprobe_instance *ri,
				  struct pt_regs *regs)
{
	void *retained = *(void **)ri->data;
	struct xpu_ret *ret, *found = NULL;

	spin_lock(&xpu_ret_lock);
	/*
	 * UVM's pointer may be its new retention's already (freed and taken
	 * again before this ran): the oldest record of it is the one let go
	 * of (hash_add puts the newest first)
	 */
	hash_for_each_possible(xpu_ret_by_ptr, ret, by_ptr,
			       (unsigned long)retained)
		if (ret->retained == retained)
			found = ret;
	if (found)
		xpu_ret_drop(found);
	spin_unlock(&xpu_ret_lock);
	return 0;
}

/*
 * nvUvmInterfaceAddressSpaceDestroy(vaSpace): UVM destroys a GPU VA space
 * of its own (the duplicate of the user's that a retain names) only after
 * it let go of every channel retained in it -- its deferred-free list is
 * in order, and remove_gpu_va_space and uvm_va_space_destroy put the
 * channels on it first -- and once no registration can name it (it left
 * the VA space under the lock for writing, after every registration that
 * held it for reading), 535 to 595.  So every retention recorded in it is
 * over and let go of: the records go, with what they pin.  Those whose
 * release xpu saw went already; this takes the others, an unwatched call's
 * (RM's outcome never seen) or a release the kretprobe missed, which
 * otherwise stayed until unload.  A record the sweep is judging is marked
 * for it.
 */
static int xpu_ret_vas_destroy_pre(struct kprobe *kp, struct pt_regs *regs)
{
	void *vas = (void *)regs_get_kernel_argument(regs, 0);
	struct xpu_ret *ret;
	struct hlist_node *tmp;
	bool judged = false;

	spin_lock(&xpu_ret_lock);
	hash_for_each_possible_safe(xpu_ret_by_vas, ret, tmp, by_vas,
				    (unsigned long)vas) {
		if (ret->vas != vas)
			continue;
		/* a watched call still inside: its return decides */
		if (!hlist_unhashed(&ret->by_task) && !ret->unwatched)
			continue;
		if (!list_empty(&ret->judge)) {
			ret->dead = true;
			judged = true;
			continue;
		}
		xpu_ret_drop(ret);
	}
	spin_unlock(&xpu_ret_lock);
	if (judged)
		schedule_delayed_work(&xpu_ret_sweep_work, 0);
	return 0;
}

static struct kprobe xpu_ret_kp_vas_destroy = {
	.symbol_name = "nvUvmInterfaceAddressSpaceDestroy",
	.pre_handler = xpu_ret_vas_destroy_pre,
};

static struct kprobe xpu_ret_kp_retain = {
	.symbol_name = "nvUvmInterfaceRetainChannel",
	.pre_handler = xpu_ret_retain_pre,
	.post_handler = xpu_ret_retain_post,
};

/* .maxactive: uvm_probe_maxactive, at registration */
static struct kretprobe xpu_ret_rp_retain = {
	.kp.symbol_name = "nvUvmInterfaceRetainChannel",
	.entry_handler = xpu_ret_retain_enter,
	.handler = xpu_ret_retain_return,
	.data_size = sizeof(struct xpu_ret_args),
};

static struct kretprobe xpu_ret_rp_release = {
	.kp.symbol_name = "nvUvmInterfaceReleaseChannel",
	.entry_handler = xpu_ret_release_enter,
	.handler = xpu_ret_release_return,
	.data_size = sizeof(void *),
};

/*
 * Before SLICE's records of channels under TSG H_TSG of client H_CLIENT
 * go: the retentions of channel H_CHANNEL are of that TSG.  Under sched's
 * list_lock.
 */
void xpu_retain_note_tsg(u32 h_client, u32 h_channel, u32 h_tsg)
{
	struct xpu_ret *ret;

	spin_lock(&xpu_ret_lock);
	hash_for_each_possible(xpu_ret_by_chan, ret, by_chan,
			       xpu_ret_key(h_client, h_channel))
		if (ret->h_client == h_client && ret->h_channel == h_channel)
			xpu_ret_set_tsg(ret, h_tsg);
	spin_unlock(&xpu_ret_lock);
}

bool xpu_retain_any(void)
{
	return READ_ONCE(xpu_ret_nr) != 0;
}

/*
 * SLICE's record of a channel (KIND XPU_REC_CHAN: H_OBJECT under H_PARENT)
 * or TSG (XPU_REC_TSG: H_OBJECT) of H_CLIENT goes with CHARGE: pinned to a
 * record of its retention if there is one (true).  Under sched's list_lock.
 */
bool xpu_retain_pin(struct xpu_slice *slice, int kind, u32 h_client,
		    u32 h_object, u32 h_parent, u64 charge)
{
	struct xpu_ret *ret, *found = NULL;

	spin_lock(&xpu_ret_lock);
	if (kind == XPU_REC_CHAN) {
		hash_for_each_possible(xpu_ret_by_chan, ret, by_chan,
				       xpu_ret_key(h_client, h_object)) {
			if (ret->h_client == h_client &&
			    ret->h_channel == h_object && !ret->pinned_chan &&
			    xpu_ret_may_pin(ret, slice)) {
				ret->pinned_chan = true;
				xpu_ret_set_tsg(ret, h_parent);
				found = ret;
				break;
			}
		}
	} else {
		hash_for_each_possible(xpu_ret_by_tsg, ret, by_tsg,
				       xpu_ret_key(h_client, h_object)) {
			if (ret->h_client == h_client &&
			    ret->h_tsg == h_object && !ret->pinned_tsg &&
			    xpu_ret_may_pin(ret, slice)) {
				ret->pinned_tsg = true;
				found = ret;
				break;
			}
		}
	}
	if (found) {
		if (!found->slice)
			found->slice = xpu_slice_get(slice);
		spin_lock(&slice->uvm_lock);
		slice->uvm_bytes += charge;
		if (kind == XPU_REC_CHAN) {
			found->chan_bytes += charge;
			found->chans++;
			/* later than every retain that entered so far */
			found->chan_died = atomic64_inc_return(&xpu_ret_clock);
			WRITE_ONCE(slice->uvm_chans, slice->uvm_chans + 1);
		} else {
			found->tsg_bytes += charge;
			found->tsgs++;
			WRITE_ONCE(slice->uvm_tsgs, slice->uvm_tsgs + 1);
		}
		spin_unlock(&slice->uvm_lock);
	}
	spin_unlock(&xpu_ret_lock);
	return found;
}

/* The driver's function, on ftrace (the handlers' context). */
static int xpu_ret_check(struct kprobe *kp, struct module *drv)
{
	if (within_module((unsigned long)kp->addr, drv) && kprobe_ftrace(kp))
		return 0;
	pr_warn("%s: not the driver's %s function on ftrace (%pS); not watched\n",
		kp->symbol_name, drv ? module_name(drv) : "?", kp->addr);
	return -ENOENT;
}

static int xpu_ret_register(struct kretprobe *rp, struct module *drv)
{
	int ret = register_kretprobe(rp);

	if (ret) {
		pr_warn("%s: no probe (%d)\n", rp->kp.symbol_name, ret);
		return ret;
	}
	ret = xpu_ret_check(&rp->kp, drv);
	if (ret)
		unregister_kretprobe(rp);
	return ret;
}

void xpu_retain_init(void)
{
	struct module *drv = xpu_hook_driver();
	int ret;

	if (!uvm_probes)
		return;
	xpu_ret_seed = get_random_u32();
	xpu_ret_rp_retain.maxactive = uvm_probe_maxactive;
	xpu_ret_rp_release.maxactive = uvm_probe_maxactive;
	ret = register_kprobe(&xpu_ret_kp_retain);
	if (ret) {
		pr_warn("%s: no probe (%d)\n", xpu_ret_kp_retain.symbol_name, ret);
		goto none;
	}
	if (xpu_ret_check(&xpu_ret_kp_retain, drv))
		goto kp;
	if (xpu_ret_register(&xpu_ret_rp_retain, drv))
		goto kp;
	if (xpu_ret_register(&xpu_ret_rp_release, drv))
		goto rp;
	WRITE_ONCE(xpu_ret_probed, true);
	pr_info("watching %s's retention of channels for UVM\n",
		module_name(drv));
	ret = register_kprobe(&xpu_ret_kp_vas_destroy);
	if (!ret && xpu_ret_check(&xpu_ret_kp_vas_destroy, drv)) {
		unregister_kprobe(&xpu_ret_kp_vas_destroy);
		ret = -ENOENT;
	}
	if (ret)
		pr_warn("%s: not watched (%d): a retention whose return or release xpu did not see keeps what it pins until xpu is unloaded\n",
			xpu_ret_kp_vas_destroy.symbol_name, ret);
	else
		xpu_ret_vas_probed = true;
	return;
rp:
	unregister_kretprobe(&xpu_ret_rp_retain);
kp:
	unregister_kprobe(&xpu_ret_kp_retain);
none:
	pr_warn("channels and TSGs a slice frees stay charged while its UVM files are open (UVM's retention not seen)\n");
}

/* At unload: no handler runs any more; what the records pin goes back. */
void xpu_retain_exit(void)
{
	struct xpu_ret *ret;
	struct hlist_node *tmp;
	unsigned int bkt;

	if (!xpu_ret_probed)
		return;
	if (xpu_ret_vas_probed)
		unregister_kprobe(&xpu_ret_kp_vas_destroy);
	unregister_kretprobe(&xpu_ret_rp_release);
	unregister_kretprobe(&xpu_ret_rp_retain);
	unregister_kprobe(&xpu_ret_kp_retain);
	cancel_delayed_work_sync(&xpu_ret_sweep_work);
	spin_lock(&xpu_ret_lock);
	hash_for_each_safe(xpu_ret_by_chan, bkt, tmp, ret, by_chan) {
		if (ret->slice)
			xpu_ret_give_back(ret->slice,
					  ret->chan_bytes + ret->tsg_bytes,
					  ret->chans, ret->tsgs);
		xpu_ret_unhash(ret);
		list_del(&ret->judge);
		llist_add(&ret->put, &xpu_ret_puts);
	}
	xpu_ret_nr = 0;
	xpu_ret_unwatched_nr = 0;
	spin_unlock(&xpu_ret_lock);
	flush_work(&xpu_ret_put_work);
	xpu_ret_put_fn(NULL);
}
