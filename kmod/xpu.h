/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The objects xpu.ko keeps: GPUs, slices, and a record per driver file.
 */
#ifndef XPU_XPU_H
#define XPU_XPU_H

#include <linux/hashtable.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/rhashtable-types.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <uapi/xpu.h>

#include "callpage.h"
#include "compat.h"

#define XPU_MAX_GPUS	32
/* Processes that may make RM clients through one control file of a slice. */
#define XPU_MAX_CREATORS	16
/*
 * Video-memory objects xpu records for one slice (ledger.c; the module
 * parameter max_memrecs lowers it): an allocation past it is refused
 * before RM (NV_ERR_INSUFFICIENT_RESOURCES).  CUDA sub-allocates from
 * 2 MiB chunks; 65536 of them are 128 GiB.
 */
#define XPU_MAX_MEMRECS		65536
#define XPU_MEMREC_BITS		6	/* buckets per control file, log2 */
/*
 * RM handles one slice's clients may hold (handles.c; the module parameter
 * max_handles): twice the video-memory objects, for the clients, devices,
 * channels and the rest CUDA makes beside them.
 */
#define XPU_MAX_HANDLES		(2 * XPU_MAX_MEMRECS)
/*
 * OS events one slice's clients may hold (handles.c; the module parameter
 * max_os_events).  RM keeps them in one list for the whole driver, walked
 * under a spinlock by every event allocation, free and binding; CUDA
 * makes a few a context.
 */
#define XPU_MAX_OS_EVENTS	1024

/*
 * A module parameter of xpu.ko taken only within [min, max]: anything else
 * (out of range, not a number) is EINVAL and leaves the value as it was --
 * at load, the load fails.  module_param_cb() with xpu_uint_range_ops and
 * an XPU_UINT_RANGE() of the variable.
 */
struct xpu_uint_range {
	unsigned int *val;
	unsigned int min, max;
};

extern const struct kernel_param_ops xpu_uint_range_ops;
#define XPU_UINT_RANGE(var, lo, hi) { .val = &(var), .min = (lo), .max = (hi) }

/*
 * A GPU of the driver.  Found at load through the kernel RM API and the
 * driver's /proc/driver/nvidia/gpus; the settable fields are under xpu_lock.
 */
struct xpu_gpu {
	u32 minor;
	u32 gpu_id;			/* the driver's id, as in CARD_INFO */
	u32 device_instance;		/* NV0080 deviceId */
	u64 memory_total;		/* bytes */
	u32 channel_ids;		/* RM's; 0 when RM did not say */
	char uuid[XPU_UUID_LEN];
	/* kernel RM objects of xpu's own client, for queries */
	u32 h_device, h_subdevice;
	/* under xpu_lock; mode and nr_slices also read without it (mem.c) */
	u32 mode, policy, period_us;
	u32 nr_slices;
	u64 memory_sliced;
	u32 share_sliced;
	/*
	 * Memory of destroyed slices something outside every slice still
	 * keeps (ledger.c, xpu_ledger_orphans): new limits are checked
	 * against what is neither sliced nor this.  Under the ledger's lock,
	 * read with READ_ONCE.
	 */
	u64 memory_orphaned;
	struct xpu_sched *sched;	/* compute: sched.c */
	/* serialises the per-process usage query and its buffer */
	struct mutex query_lock;
	void *query_buf;
};

/* A process that used a slice's files. */
struct xpu_member {
	struct list_head link;		/* in xpu_slice.members */
	struct pid *pid;		/* thread group */
	u64 usage;			/* bytes of video memory, as RM says */
	/*
	 * Control files of the slice it made RM clients through, still open:
	 * RM charges a client's memory to the process that made it, for the
	 * client's life, whoever uses it (a parent on its dead child's
	 * client).  A pinned member stays counted after it exits.
	 */
	atomic_t pins;
};

/* What xpu records of the RM objects a slice's clients make (sched.c). */
enum xpu_rec_kind {
	XPU_REC_CHAN,			/* a channel */
	XPU_REC_UOBJ,			/* a usermode (doorbell) object */
	XPU_REC_TSG,			/* a channel group */
	XPU_REC_VIRT,			/* a virtual allocation that pins tables */
	XPU_REC_VAS,			/* a VA space with RM's page directories */
	XPU_REC_DEV,			/* a device: bounded, not charged */
	XPU_REC_KINDS,
};

struct xpu_probe;

struct xpu_slice {
	struct kref ref;
	struct list_head link;		/* in xpu_slices, under xpu_lock */
	u32 id;
	char name[XPU_NAME_LEN];
	struct xpu_gpu *gpu;
	bool dead;			/* destroyed; lives on while files are open */

	/* settings: written under xpu_lock, read with READ_ONCE */
	u64 memory_limit;
	u32 share, weight, priority;

	/*
	 * mem_lock serialises the slice's memory decisions: admit, call the
	 * driver, read back what RM now attributes.  It protects the fields
	 * below (read locklessly with READ_ONCE by queries) and is held only
	 * by the slice's own callers, killably; others use mutex_trylock.  The
	 * member list changes under mem_lock and members_lock both, so either
	 * keeps it still; membership checks from other slices take only
	 * members_lock.
	 */
	struct mutex mem_lock;
	spinlock_t members_lock;	/* see mem_lock */
	struct list_head members;
	u32 nr_members;
	u64 used, peak;
	u64 denied;
	atomic64_t killed;		/* by mem.c and sched.c, without a lock */
	/* events.c: the denials told in the current second (mem_lock) */
	unsigned long deny_ev_start;
	u32 deny_ev_n;
	bool stale;			/* used may be high: read it anew */
	/*
	 * The ledger's duplicates of memory the slice freed that something
	 * else (UVM) still held: charged on top of the members' figure
	 * (ledger.c).  Under the ledger's lock; held_bytes read with
	 * READ_ONCE.
	 */
	struct list_head held;
	u64 held_bytes;
	/*
	 * Other slices' held duplicates of memory this slice freed a handle
	 * of, which pass to it should their slice go first (ledger.c, struct
	 * xpu_heir's on_slice).  Under the ledger's lock.
	 */
	struct list_head heir_of;
	/*
	 * The slice's own client of the ledger's, where its frees' duplicates
	 * are made and asked about (ledger.c, xpu_ledger_slice_init); NULL
	 * while the ledger is off.
	 */
	struct xpu_probe *probe;
	/* video-memory objects recorded in the slice's control files */
	atomic_t nr_memrecs;
	/*
	 * Video memory a caller of the slice made or freed out of xpu's sight
	 * (RM's answer named no new object, an allocation past the limit the
	 * undo did not bring back, the page of a call xpu made for it moved):
	 * charged until the slice goes, as xpu cannot know when RM lets go of
	 * it (mem.c, xpu_mem_unrecorded).
	 */
	atomic64_t lost_bytes;
	/*
	 * System memory RM allocated for the slice's clients (hostmem.c):
	 * each object's pages, a reference of xpu's on each, until xpu's are
	 * the pages' only references.  host_limit is a setting (as
	 * memory_limit; 0: no bound); the rest is under mem_lock, host_used
	 * read with READ_ONCE.
	 */
	u64 host_limit;
	u64 host_used;
	struct list_head hostmem;
	u32 nr_hostmem;
	/*
	 * The RM handles of the slice's clients (handles.c), by client and
	 * handle, in trees that follow RM's parents; nr_handles counts them
	 * and the calls in flight that may make one.
	 */
	struct rhashtable handles;
	struct mutex handles_lock;	/* the trees; taken under mem_lock */
	atomic_t nr_handles;
	bool hnd_unhashed;		/* a client's record is not hashed */
	/* the OS events of its clients (handles.c), under handles_lock */
	struct list_head osevents;
	u32 nr_osevents;

	atomic_t open_files;

	/*
	 * Compute (sched.c).  The lists are under the GPU's sched->list_lock;
	 * state and the time counters under sched->lock; allowed and idle are
	 * read locklessly by the doorbell fault.
	 */
	struct list_head sched_link;	/* in gpu->sched->slices */
	/* struct xpu_rec by kind: channels (to gate), usermode objects, TSGs */
	struct list_head recs[XPU_REC_KINDS];
	u32 nr_recs[XPU_REC_KINDS];
	/*
	 * Channel allocations admitted and not yet recorded or failed: they
	 * take channel ids from the GPU's share (sched.c).  Under list_lock.
	 */
	u32 chans_pending;
	/*
	 * Allocations admitted under max_records and not yet recorded or
	 * failed, by the kind their class claims (sched.c).  Under list_lock.
	 */
	u32 recs_pending[XPU_REC_KINDS];
	/*
	 * Video memory RM takes for the recorded channels and TSGs and
	 * charges to no process (issue 18, rule 5): xpu's estimate, charged
	 * on top of the members' figure (mem.c).  Added under mem_lock,
	 * taken back with the records (then used is stale).
	 */
	atomic64_t rec_bytes;
	/*
	 * UVM files opened through the slice's UVM node (uvm.c), oldest
	 * first, and the charge of channels and TSGs freed while any was
	 * open, which UVM may retain (class 39): kept in rec_bytes, and in
	 * uvm_chans/uvm_tsgs against max_records, until every UVM file of
	 * the slice opened before the free is gone.  Under uvm_lock (taken
	 * inside sched's list_lock); counts read with READ_ONCE.
	 */
	spinlock_t uvm_lock;
	struct list_head uvm_files;
	u32 nr_uvm_files;
	u32 uvm_chans, uvm_tsgs;
	u64 uvm_bytes;
	/*
	 * A tenant of the slice shared one of its clients' objects past RM's
	 * default (RM_SHARE, CLIENT_SET_INHERITED_SHARE_POLICY: mem.c,
	 * xpu_share_widens): another slice's process may then have UVM
	 * register its VA space and retain its channels, so retentions xpu
	 * could not watch may pin its frees (retain.c).  Set before the call
	 * that shares; never cleared.
	 */
	bool shares_widened;
	struct list_head dbfiles;	/* xpu_file with doorbell mappings */
	u32 nr_dbfiles;
	/*
	 * RM_MAP_MEMORY calls of a usermode object in flight: while there
	 * are any, every GPU file of the slice mmapped is a doorbell file
	 * (mem.c, xpu_mem_map_memory)
	 */
	atomic_t uobj_maps;
	u64 zap_gen;			/* the last zap pass (xpu_gate_zap) */
	wait_queue_head_t gate_wq;	/* doorbell writers waiting to run */
	int state;			/* XPU_GATE_* */
	/* a control's end awaits a pass, and one runs (xpu_sched_reassert) */
	atomic_t reassert_wanted;
	unsigned long reasserting;
	bool allowed;			/* doorbell writes may go through */
	bool idle;			/* ...and are news: wake the scheduler */
	atomic_t waiters;
	atomic64_t gate_faults;
	u64 last_active;		/* ktime ns of the last doorbell fault */
	s64 budget_ns;			/* GPU time earned and not used */
	u32 rate;			/* earned per mille of time, now */
	bool wants, eligible;		/* as of the last step */
	/*
	 * Not eligible, with channels: the time its channels may still run
	 * beside a turn holder, earned at drain_rate (per mille: what it
	 * would earn were it eligible) and spent while they do (sched.c)
	 */
	s64 drain_ns;
	u32 drain_rate;
	u64 run_ns, gated_ns, runnable_ns;
	u64 win_start, win_run;		/* for share_obtained */
	u32 share_obtained;
};

/* The record xpu keeps for a driver file it saw opened. */
struct xpu_file {
	struct hlist_node hash;		/* in xpu_files, by file */
	struct rcu_head rcu;
	struct file *file;
	struct xpu_slice *slice;	/* counted; NULL: unsliced */
	struct xpu_gpu *gpu;		/* NULL for the control node */
	struct pid *opener;		/* the thread group that opened it */
	bool doorbell;			/* its mapping context is a usermode region */
	bool poisoned;			/* a caller cheated: refuse every escape */
	struct list_head db_link;	/* in slice->dbfiles once mapped */
	u64 zap_gen;			/* the zap pass that last took it */
	bool zapping;			/* a zap pass works on its mapping */
	/* control files: who called RM_ALLOC through it; slice->members_lock */
	struct pid *creators[XPU_MAX_CREATORS];
	u32 nr_creators;
	/*
	 * Control files of slices: the video-memory objects of its clients
	 * (struct xpu_memrec, ledger.c), hashed by client and object; changed
	 * under the slice's mem_lock, or by the file's release, when nothing
	 * else can.  (An xarray by client << 32 | object took eleven node
	 * allocations to insert a key that sparse.)
	 */
	DECLARE_HASHTABLE(memrecs, XPU_MEMREC_BITS);
	/*
	 * The parent the last record had, and whether it is a subdevice
	 * (ledger.c); under the same lock, forgotten at any free of an
	 * object that is not memory.  parent_hc 0: none.
	 */
	u32 parent_hc, parent_hp;
	bool parent_sub;
	/*
	 * Calls xpu makes through an unsliced control file (its devices'
	 * allocations) are made one at a time, under call_lock.  (The pages
	 * of calls are the address space's: callpage.c.)
	 */
	struct mutex call_lock;
	u32 handle_gen;			/* handles xpu chose for RM (mem.c) */
	/* the records of the RM clients made through it (handles.c) */
	struct list_head hnd_clients;
};

/* Protects the slice list, node and cgroup bindings, GPU settings. */
extern struct mutex xpu_lock;
extern struct xpu_gpu xpu_gpus[XPU_MAX_GPUS];
extern unsigned int xpu_nr_gpus;

struct xpu_gpu *xpu_gpu_by_minor(u32 minor);
struct xpu_gpu *xpu_gpu_by_id(u32 gpu_id);

void xpu_slice_put(struct xpu_slice *slice);
struct xpu_slice *xpu_slice_get(struct xpu_slice *slice);

#endif /* XPU_XPU_H */
