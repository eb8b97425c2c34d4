// SPDX-License-Identifier: GPL-2.0
/*
 * Memory isolation (docs/memory.md).
 *
 * A slice's memory in use is what RM itself attributes to the slice's
 * processes on the slice's GPU, read through xpu's kernel-privileged RM
 * client after every call that can change it.  Nothing a user thread writes
 * into its parameters afterwards can change that figure, which is what makes
 * the limit hard: RM reads allocation parameters from user memory after xpu
 * has looked at them, and writes status and handles back where other threads
 * can overwrite them.
 *
 * An allocation is admitted by the size it asks for, rounded as RM rounds it,
 * under the slice's mem_lock; the lock is held across the driver's call, so
 * that the slice's usage read afterwards is exact.  If RM then attributes
 * more than the limit, the allocation is undone through the caller's own
 * file, in the caller's context (never with xpu's kernel privilege: the
 * handles are read from the caller's memory, and are only a claim), and the
 * caller sees the driver's own out-of-memory status; if that does not bring
 * the slice back under its limit (the caller lied about the size and about
 * the handle), the process is killed.
 *
 * mem_lock is the slice's own: only callers in the slice wait for it, and
 * killably (docs/security.md).  Nobody outside the slice takes it but with
 * mutex_trylock: membership has its own spinlock, and a refresh that cannot
 * take the lock marks the figure stale for the holder to read anew.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/memory.h>
#include <linux/mman.h>
#include <linux/pid.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>

#include "callpage.h"
#include "events.h"
#include "file.h"
#include "handles.h"
#include "hostmem.h"
#include "ledger.h"
#include "mem.h"
#include "nvabi.h"
#include "rmapi.h"
#include "sched.h"
#include "slice.h"

static struct xpu_member *xpu_member_find(struct xpu_slice *slice,
					  struct pid *pid)
{
	struct xpu_member *m;

	/* the list changes under both locks: either one keeps it still */
	lockdep_assert(lockdep_is_held(&slice->members_lock) ||
		       lockdep_is_held(&slice->mem_lock));
	list_for_each_entry(m, &slice->members, link)
		if (m->pid == pid)
			return m;
	return NULL;
}

/* Never waits for mem_lock: other slices' opens ask this (check_alone). */
bool xpu_mem_is_member(struct xpu_slice *slice, struct pid *pid)
{
	bool ret;

	spin_lock(&slice->members_lock);
	ret = !!xpu_member_find(slice, pid);
	spin_unlock(&slice->members_lock);
	return ret;
}

/*
 * Whether a process PID may have UVM retain a channel of SLICE's: RM
 * retains only channels of a VA space UVM duplicated for the calling
 * process, which RM's share policies allow only the process that made the
 * client (nvGpuOpsDupAddressSpace with REJECT_KERNEL_DUP_PRIVILEGE,
 * cliresShareCallback), unless a tenant of the slice shared past that
 * (xpu_share_widens).  A process is in one slice of a GPU at most.
 */
bool xpu_mem_may_retain(struct xpu_slice *slice, struct pid *pid)
{
	return READ_ONCE(slice->shares_widened) ||
	       xpu_mem_is_member(slice, pid);
}

#define XPU_MAX_MEMBERS	4096

int xpu_mem_join(struct xpu_slice *slice)
{
	struct pid *pid = task_tgid(current);
	struct xpu_member *m;
	int ret;

	if (xpu_mem_is_member(slice, pid))
		return 0;
	/* A process is in one slice of a GPU at most: RM counts per process. */
	ret = xpu_slice_check_alone(slice, pid);
	if (ret)
		return ret;
	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return -ENOMEM;
	if (mutex_lock_killable(&slice->mem_lock)) {
		kfree(m);
		return -EINTR;
	}
	spin_lock(&slice->members_lock);
	if (xpu_member_find(slice, pid)) {
		kfree(m);
	} else if (slice->nr_members >= XPU_MAX_MEMBERS) {
		kfree(m);
		ret = -ENOSPC;
	} else {
		m->pid = get_pid(pid);
		list_add_tail(&m->link, &slice->members);
		WRITE_ONCE(slice->nr_members, slice->nr_members + 1);
	}
	spin_unlock(&slice->members_lock);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

static void xpu_member_free(struct xpu_slice *slice, struct xpu_member *m)
{
	spin_lock(&slice->members_lock);
	list_del(&m->link);
	WRITE_ONCE(slice->nr_members, slice->nr_members - 1);
	spin_unlock(&slice->members_lock);
	put_pid(m->pid);
	kfree(m);
}

/* Whether the process PID names still exists (pid_task needs RCU). */
static bool xpu_pid_alive(struct pid *pid)
{
	bool alive;

	rcu_read_lock();
	alive = pid_task(pid, PIDTYPE_TGID);
	rcu_read_unlock();
	return alive;
}

/* Members asked of RM per query: bounded by the stack, not by RM's 200. */
#define XPU_PID_BATCH	32

static noinline_for_stack void xpu_refresh_batch(struct xpu_slice *slice,
						 struct xpu_member **batch,
						 u32 n)
{
	struct pid *pids[XPU_PID_BATCH];
	u64 bytes[XPU_PID_BATCH];
	u32 i;

	for (i = 0; i < n; i++)
		pids[i] = batch[i]->pid;
	if (xpu_rm_pid_usage(slice->gpu, pids, bytes, n))
		return;			/* keep what we knew */
	for (i = 0; i < n; i++)
		batch[i]->usage = bytes[i];
}

/* SLICE's figure becomes USED, its peak with it; under mem_lock. */
static void xpu_mem_set_used(struct xpu_slice *slice, u64 used)
{
	WRITE_ONCE(slice->used, used);
	if (used > slice->peak)
		WRITE_ONCE(slice->peak, used);
}

/*
 * Read every member's usage anew, XPU_PID_BATCH members per RM query; forget
 * exited members that hold nothing.
 */
static void xpu_refresh_locked(struct xpu_slice *slice)
{
	struct xpu_member *batch[XPU_PID_BATCH];
	struct xpu_member *m, *tmp;
	u64 used = 0;
	u32 n = 0;

	lockdep_assert_held(&slice->mem_lock);
	WRITE_ONCE(slice->stale, false);
	list_for_each_entry(m, &slice->members, link) {
		batch[n++] = m;
		if (n == XPU_PID_BATCH) {
			xpu_refresh_batch(slice, batch, n);
			n = 0;
		}
	}
	if (n)
		xpu_refresh_batch(slice, batch, n);
	list_for_each_entry_safe(m, tmp, &slice->members, link) {
		if (!m->usage && !atomic_read(&m->pins) &&
		    !xpu_pid_alive(m->pid)) {
			xpu_member_free(slice, m);
			continue;
		}
		used += m->usage;
	}
	used += READ_ONCE(slice->held_bytes) +
		atomic64_read(&slice->rec_bytes) +
		atomic64_read(&slice->lost_bytes);
	xpu_mem_set_used(slice, used);
}

/*
 * XF's one creator, whose figure xpu knows (not stale), or NULL: every client
 * reached through XF was made by it, so RM charges it for what XF's calls
 * make and free.  Under mem_lock, which members go only under, so the
 * member stays after the members' lock is dropped.
 */
static struct xpu_member *xpu_mem_sole_creator(struct xpu_slice *slice,
					       struct xpu_file *xf)
{
	struct xpu_member *m = NULL;

	lockdep_assert_held(&slice->mem_lock);
	spin_lock(&slice->members_lock);
	if (!READ_ONCE(slice->stale) && xf->nr_creators == 1)
		m = xpu_member_find(slice, xf->creators[0]);
	spin_unlock(&slice->members_lock);
	return m;
}

/*
 * After an allocation through XF, a control file of the slice: RM charges
 * a client's memory to the process that made the client, every client
 * reached through XF was made through it (RM ties a client to its control
 * file; a slice's control file cannot be REGISTER_FD'd), and whoever made
 * one is among XF's creators.  So only their figures can have grown: ask
 * RM for those (one query, at most XPU_MAX_CREATORS processes) rather than
 * for every member.  Frees can move ownership to another member's
 * duplicate, so they read the whole slice, unless the ledger found the
 * memory held by nothing else after the free (xpu_mem_free_through_ledger).
 * Returns how much RM's own figures grew (not what xpu charges on top:
 * held, lost, channels, which others' frees and releases change without
 * mem_lock).
 */
static u64 xpu_refresh_creators(struct xpu_slice *slice, struct xpu_file *xf)
{
	struct xpu_member *batch[XPU_MAX_CREATORS];
	struct xpu_member *m;
	u64 before = 0, after = 0;
	u32 n = 0, i;

	BUILD_BUG_ON(XPU_MAX_CREATORS > XPU_PID_BATCH);
	lockdep_assert_held(&slice->mem_lock);
	if (READ_ONCE(slice->stale)) {
		list_for_each_entry(m, &slice->members, link)
			before += m->usage;
		xpu_refresh_locked(slice);
		list_for_each_entry(m, &slice->members, link)
			after += m->usage;
		return after > before ? after - before : 0;
	}
	/* members go only under mem_lock, which we hold */
	spin_lock(&slice->members_lock);
	for (i = 0; i < xf->nr_creators; i++) {
		m = xpu_member_find(slice, xf->creators[i]);
		if (m)
			batch[n++] = m;
	}
	spin_unlock(&slice->members_lock);
	if (!n)
		return 0;
	for (i = 0; i < n; i++)
		before += batch[i]->usage;
	xpu_refresh_batch(slice, batch, n);
	for (i = 0; i < n; i++)
		after += batch[i]->usage;
	xpu_mem_set_used(slice, slice->used - before + after);
	return after > before ? after - before : 0;
}

/*
 * After something that may have lowered the slice's usage (a free, a file's
 * release): read it anew, or, if a caller of the slice holds mem_lock (it
 * may be asleep on its own stalled page), leave the figure marked stale for
 * the next holder.  Never waits.
 */
static void xpu_mem_refresh_try(struct xpu_slice *slice, bool host)
{
	WRITE_ONCE(slice->stale, true);
	if (!mutex_trylock(&slice->mem_lock))
		return;
	xpu_refresh_locked(slice);
	if (host)
		xpu_hostmem_sweep(slice);
	mutex_unlock(&slice->mem_lock);
}

void xpu_mem_refresh_all(struct xpu_slice *slice)
{
	xpu_mem_refresh_try(slice, false);
}

/*
 * A control file of SLICE closed, and RM freed its clients: usage read
 * anew, as xpu_mem_refresh_all does, and the system memory nothing else
 * holds goes back (hostmem.c), or both left to the slice's next calls.
 */
void xpu_mem_file_closed(struct xpu_slice *slice)
{
	xpu_mem_refresh_try(slice, true);
}

/* For the admin's queries: RM's figure if the slice's lock is free. */
void xpu_mem_fill(struct xpu_slice *slice, struct xpu_slice_info *out)
{
	if (mutex_trylock(&slice->mem_lock)) {
		/* under xpu_lock, which every open needs: a few at a time */
		xpu_ledger_reprobe(slice, XPU_LEDGER_REPROBE_STEP);
		xpu_refresh_locked(slice);
		xpu_hostmem_sweep(slice);
		mutex_unlock(&slice->mem_lock);
	}
	out->memory_used = READ_ONCE(slice->used);
	out->host_memory_limit = READ_ONCE(slice->host_limit);
	out->host_memory_used = READ_ONCE(slice->host_used);
	out->memory_peak = READ_ONCE(slice->peak);
	out->denied_allocs = READ_ONCE(slice->denied);
	out->killed = atomic64_read(&slice->killed);
	out->processes = READ_ONCE(slice->nr_members);
}

/*
 * The admin takes SLICE's mem_lock to lower its memory limit.  A caller of
 * the slice holds the lock across the driver's call, and so across the
 * driver's copies of its own memory, which it can stall for ever
 * (userfaultfd, a FUSE-backed mapping): the admin waits at most
 * XPU_ADMIN_WAIT for it, killably, then gets -EAGAIN.  xpud serves every
 * slice, and one slice's tenant must not hold it.  There is no timed
 * mutex_lock; this polls once a jiffy, on an admin's call only.
 */
#define XPU_ADMIN_WAIT	HZ

int xpu_mem_lock_admin(struct xpu_slice *slice)
{
	unsigned long end = jiffies + XPU_ADMIN_WAIT;

	while (!mutex_trylock(&slice->mem_lock)) {
		if (time_after(jiffies, end))
			return -EAGAIN;
		schedule_timeout_killable(1);
		if (fatal_signal_pending(current))
			return -EINTR;
	}
	return 0;
}

/*
 * Under xpu_lock.  Raising a limit needs nothing more: every admission
 * reads the limit under mem_lock, and a higher one lets nothing past that
 * the lower one kept out.  Lowering needs mem_lock (taken with
 * xpu_mem_lock_admin before xpu_lock), so that no allocation admitted
 * under the old limit is still in the driver, and RM's figure read anew.
 */
int xpu_mem_set_limit(struct xpu_slice *slice, u64 limit)
{
	if (limit < slice->memory_limit) {
		lockdep_assert_held(&slice->mem_lock);
		xpu_refresh_locked(slice);
		if (slice->used > limit)
			return -EBUSY;
	}
	WRITE_ONCE(slice->memory_limit, limit);
	return 0;
}

/* Whether LIMIT bounds SLICE's system memory more tightly than it is now. */
bool xpu_mem_host_limit_lowers(const struct xpu_slice *slice, u64 limit)
{
	return limit && (!slice->host_limit || limit < slice->host_limit);
}

/*
 * Whether SLICE may take LIMIT as its bound on system memory RM allocates
 * for its clients, one that lowers it (xpu_mem_host_limit_lowers), under
 * xpu_lock and mem_lock (kept until the bound is in place): refused
 * (-EBUSY) below what the slice holds now.
 */
int xpu_mem_host_limit_check(struct xpu_slice *slice, u64 limit)
{
	lockdep_assert_held(&slice->mem_lock);
	xpu_hostmem_sweep(slice);
	return slice->host_used > limit ? -EBUSY : 0;
}

/*
 * current calls RM_ALLOC through XF, a control file of a slice: it may be
 * making an RM client (the class is read from user memory, so any RM_ALLOC
 * counts).  RM will charge that client's memory to current for the client's
 * life, which ends with the file at the latest: so current joins the slice
 * and stays a member while the file is open, even after it exits.  Returns
 * an errno, or a positive NV status for the caller's struct.
 */
static long xpu_mem_creator(struct xpu_file *xf)
{
	struct xpu_slice *slice = xf->slice;
	struct pid *pid = task_tgid(current);
	struct xpu_member *m;
	long ret = 0;
	u32 i;

	spin_lock(&slice->members_lock);
	for (i = 0; i < xf->nr_creators; i++)
		if (xf->creators[i] == pid)
			break;
	spin_unlock(&slice->members_lock);
	if (i < xf->nr_creators)
		return 0;
	ret = xpu_mem_join(slice);
	if (ret)
		return ret;
	spin_lock(&slice->members_lock);
	for (i = 0; i < xf->nr_creators; i++)
		if (xf->creators[i] == pid)
			goto out;
	m = xpu_member_find(slice, pid);
	if (!m) {
		ret = -EAGAIN;	/* forgotten meanwhile: it has exited */
	} else if (xf->nr_creators == XPU_MAX_CREATORS) {
		ret = NV_ERR_INSUFFICIENT_RESOURCES;
	} else {
		xf->creators[xf->nr_creators++] = get_pid(pid);
		atomic_inc(&m->pins);
	}
out:
	spin_unlock(&slice->members_lock);
	return ret;
}

/* A control file of a slice went, and its clients with it: unpin. */
void xpu_mem_file_release(struct xpu_file *xf)
{
	struct xpu_slice *slice = xf->slice;
	struct xpu_member *m;
	u32 i;

	spin_lock(&slice->members_lock);
	for (i = 0; i < xf->nr_creators; i++) {
		m = xpu_member_find(slice, xf->creators[i]);
		if (m)
			atomic_dec(&m->pins);
	}
	spin_unlock(&slice->members_lock);
	for (i = 0; i < xf->nr_creators; i++)
		put_pid(xf->creators[i]);
	xf->nr_creators = 0;
}

void xpu_mem_slice_release(struct xpu_slice *slice)
{
	struct xpu_member *m, *tmp;

	list_for_each_entry_safe(m, tmp, &slice->members, link)
		xpu_member_free(slice, m);
	xpu_ledger_slice_release(slice);
	xpu_hostmem_slice_release(slice);
}

/*
 * The bytes RM will take for a video-memory allocation of size with these
 * attributes: memmgrDeterminePageSize()'s choice of page, at least the 64 KiB
 * of the physical allocator.  An estimate for admission only.
 */
static u64 xpu_rm_rounded(u64 size, u32 attr, u32 attr2)
{
	u32 ps = (attr & NVOS32_ATTR_PAGE_SIZE_MASK) >> NVOS32_ATTR_PAGE_SIZE_SHIFT;
	u32 huge = (attr2 & NVOS32_ATTR2_PAGE_SIZE_HUGE_MASK) >>
		   NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT;
	u64 page = SZ_64K;

	if (ps == NVOS32_ATTR_PAGE_SIZE_HUGE ||
	    (ps == NVOS32_ATTR_PAGE_SIZE_DEFAULT && size >= SZ_2M))
		page = huge == NVOS32_ATTR2_PAGE_SIZE_HUGE_512MB ? SZ_512M : SZ_2M;
	if (size > U64_MAX - page)
		return U64_MAX;
	return round_up(size, page);
}

/*
 * Whether attr asks for video memory: location VIDMEM only.  RM's class 0x40
 * refuses any other (vidmemConstruct), and RM_VID_HEAP_CONTROL allocates
 * system memory for ANY (rmapi_deprecated_vidheapctrl.c).
 */
static bool xpu_is_vidmem(u32 attr)
{
	u32 loc = (attr & NVOS32_ATTR_LOCATION_MASK) >> NVOS32_ATTR_LOCATION_SHIFT;

	return loc == NVOS32_ATTR_LOCATION_VIDMEM;
}

static int xpu_put_status(u32 __user *status, u32 value)
{
	return put_user(value, status) ? -EFAULT : 0;
}

/*
 * The common path of the allocating escapes: admit want bytes, call the
 * driver, read RM's figure, undo or kill past the limit.  The site locates
 * the status and the new object's handles in the escape's struct, by
 * offset.
 */
struct xpu_alloc_site {
	size_t status;
	size_t h_client;
	size_t h_parent;
	size_t h_object;
	/*
	 * Where RM takes the new object's handle from the caller only with
	 * NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED (VID_HEAP_CONTROL's
	 * allocations), the flags' offset; else 0, and a handle of 0 is RM's
	 * to choose (RM_ALLOC).
	 */
	size_t handle_flags;
	bool vidmem;			/* the call claims video memory */
	bool record;			/* xpu records the new object's handle */
	/*
	 * The call makes an RM client: RM takes the handle from hRoot (0: its
	 * own choice) and writes it into hObjectNew whatever that held
	 * (serverAllocClient), so hObjectNew is never the caller's to name.
	 */
	bool client;
	/*
	 * The call may make system memory (NV01_MEMORY_SYSTEM): admitted at
	 * host_want bytes against the slice's host_limit, and its pages
	 * recorded after it (hostmem.c).
	 */
	bool host;
	u64 host_want;
	/*
	 * Where RM writes back the size of the video memory it made, for a
	 * call xpu admitted as video memory (xpu_mem_grown): an offset in
	 * the params (RM_ALLOC) when SIZE_IN_PARAMS, else in the struct
	 * (VID_HEAP_CONTROL); 0 where there is none to read.
	 */
	size_t size;
	bool size_in_params;
};

/*
 * An escape of a slice's control file, made on xpu's copy of the caller's
 * struct: the driver reads the copy from a page only the driver can write
 * (callpage.c), so the class, the function and the handles RM reads are the
 * ones xpu read, and RM's results -- the new handle, the status -- are read
 * by xpu where no thread of the caller's can rewrite them.  The caller's
 * struct gets them after.  The alloc params of a device or of video memory
 * lie on the same page, after the struct, and pAllocParms in xpu's copy
 * points there (xpu_escape_params): the device id and the size RM reads are
 * the ones xpu read.  Other classes' params RM reads from the caller's
 * memory: what they claim is read back.
 */
#define XPU_ESCAPE_PARAMS_OFF	256	/* in the page: past any struct */
/* the largest params xpu copies: a channel's, then video memory's */
#define XPU_ESCAPE_PARAMS_MAX					\
	(sizeof(struct nv_channel_alloc_params) >			\
	 sizeof(struct nv_memory_allocation_params) ?			\
	 sizeof(struct nv_channel_alloc_params) :			\
	 sizeof(struct nv_memory_allocation_params))

struct xpu_escape {
	void __user *uarg;		/* the caller's struct */
	size_t size;
	union {
		struct nvos21_parameters p21;
		struct nvos64_parameters p64;
		struct nvos32_parameters p32;
		struct nvos33_with_fd p33;
		struct nvos46_parameters_v580 p46;	/* the fields before flags2 */
		struct nvos55_parameters p55;
		struct nvos02_with_fd p02;
		struct nvos39_parameters p39;
		struct nvos05_parameters p05;
		struct nv_ioctl_os_event osev;
		struct nv_ioctl_sys_params sysp;
		u8 raw[sizeof(struct nvos32_parameters)];
	} u;
	/* RM_ALLOC: the params RM reads, copied from UPARAMS; none when 0 */
	u32 params_size;
	u64 uparams;
	size_t status;			/* the status's offset in the struct */
	/*
	 * After the call: what E got is what the driver wrote, as no thread
	 * of the caller's could store into the page (xpu_callpage_done).
	 */
	bool sealed;
	/*
	 * A slice's client allocation: the handle it asked RM for (the
	 * caller's hRoot, or xpu's), and whether no client had it just
	 * before the call (xpu_escape_call).
	 */
	u32 client_h;
	bool client_new;
	/*
	 * The client's handle asked free again just before the driver's
	 * call, with xpu_client_lock held across it (xpu_escape_ioctl); 0:
	 * no client allocation.
	 */
	u32 client_check;
	u8 params[XPU_ESCAPE_PARAMS_MAX];
};

/*
 * Held by a slice's client allocation from the last look at its handle
 * (free) to the driver's return, on xpu's page, which no tenant can
 * stall: no other slice's client allocation comes between.  Found by a
 * review in session 58: the look was made before the page of the call,
 * for which a tenant holding its slots parks a call as long as it likes,
 * and a client made meanwhile under that handle -- another tenant's, or
 * an unsliced process's given the next of RM's own handles -- was
 * recorded as the caller's from RM's refusal (class 50 again).
 */
static DEFINE_MUTEX(xpu_client_lock);

static u32 xpu_escape_u32(const struct xpu_escape *e, size_t off)
{
	u32 v;

	memcpy(&v, e->u.raw + off, sizeof(v));
	return v;
}

/* The handles RM wrote back for the new object, from E. */
static void xpu_escape_handles(const struct xpu_escape *e,
			       const struct xpu_alloc_site *site,
			       u32 *hc, u32 *hp, u32 *ho)
{
	*hc = xpu_escape_u32(e, site->h_client);
	*hp = xpu_escape_u32(e, site->h_parent);
	*ho = xpu_escape_u32(e, site->h_object);
}

static int xpu_escape_status(const struct xpu_escape *e,
			     const struct xpu_alloc_site *site, u32 value)
{
	return xpu_put_status(e->uarg + site->status, value);
}

/* The caller's struct at ARG, SIZE bytes, into E: 0 or -EFAULT. */
static int xpu_escape_copy(struct xpu_escape *e, unsigned long arg,
			   size_t size)
{
	BUILD_BUG_ON(sizeof(struct nvos64_parameters) >
		     sizeof(struct nvos32_parameters) ||
		     sizeof(struct nvos33_with_fd) >
		     sizeof(struct nvos32_parameters) ||
		     sizeof(struct nvos46_parameters_v580) >
		     sizeof(struct nvos32_parameters) ||
		     sizeof(struct nvos55_parameters) >
		     sizeof(struct nvos32_parameters) ||
		     sizeof(struct nvos02_with_fd) >
		     sizeof(struct nvos32_parameters) ||
		     sizeof(struct nvos39_parameters) >
		     sizeof(struct nvos32_parameters));
	if (size > sizeof(e->u))
		return -EINVAL;
	e->uarg = (void __user *)arg;
	e->size = size;
	e->params_size = 0;
	e->sealed = false;
	e->client_h = 0;
	e->client_new = false;
	e->client_check = 0;
	return copy_from_user(e->u.raw, e->uarg, size) ? -EFAULT : 0;
}

static void xpu_escape_set_u32(struct xpu_escape *e, size_t off, u32 v)
{
	memcpy(e->u.raw + off, &v, sizeof(v));
}

/*
 * The handle of the client a call of SITE made (after xpu_escape_call):
 * RM takes it from hRoot and writes it into hObjectNew, which a thread of
 * the caller's may rewrite after the driver's copy-back, so it is taken
 * from what xpu checked -- hRoot as the caller named it, unchanged on the
 * page -- or, when xpu named it, from xpu's own write.  (Until session 57
 * a caller's own hRoot was taken from hObjectNew: a thread's store there
 * kept the new client out of the slice's records, or -- another tenant's
 * client handle -- made that client pass as the caller's file's, class
 * 47's check.)
 */
static u32 xpu_client_made(const struct xpu_escape *e,
			   const struct xpu_alloc_site *site)
{
	return e->client_h;
}

/* Whether the caller names the new object of SITE, not RM. */
static bool xpu_site_named(const struct xpu_escape *e,
			   const struct xpu_alloc_site *site)
{
	if (site->client)
		return false;
	if (site->handle_flags)
		return xpu_escape_u32(e, site->handle_flags) &
		       NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED;
	return xpu_escape_u32(e, site->h_object);
}

/*
 * The driver's escape CMD, through XF's FILE, on E's copy; E gets what the
 * driver wrote back.  *CHEATED says the page did not stay where xpu mapped
 * it (what the driver read is not known), or that a thread of the caller's
 * rewrote the handles of SITE that RM reads and never changes -- the
 * client, the parent and, when NAMED, the new object's -- after the
 * driver's copy-back made the page writable.  A call with no SITE has no
 * handles xpu reads after it.  The caller's struct is not written.
 */
static long xpu_escape_ioctl(struct xpu_file *xf, struct file *file,
			     unsigned int cmd, struct xpu_escape *e,
			     const struct xpu_alloc_site *site, bool named,
			     bool *cheated)
{
	struct xpu_callpage *cp;
	unsigned long addr;
	u32 hc, hp, ho, hc2, hp2, ho2;
	bool taken = false;
	long ret;

	u8 img[XPU_ESCAPE_PARAMS_OFF + sizeof(e->params)];
	void *data = e->u.raw;
	size_t len = e->size;
	u64 pparams;

	BUILD_BUG_ON(sizeof(e->u) > XPU_ESCAPE_PARAMS_OFF);
	*cheated = false;
	e->sealed = false;
	if (site)
		xpu_escape_handles(e, site, &hc, &hp, &ho);
	if (e->params_size) {
		memset(img, 0, XPU_ESCAPE_PARAMS_OFF);
		memcpy(img, e->u.raw, e->size);
		memcpy(img + XPU_ESCAPE_PARAMS_OFF, e->params, e->params_size);
		data = img;
		len = XPU_ESCAPE_PARAMS_OFF + e->params_size;
	}
	cp = xpu_callpage_map(data, len, &addr);
	if (IS_ERR(cp))
		return PTR_ERR(cp);
	if (e->params_size) {
		/* NVOS21 and NVOS64 agree up to pAllocParms */
		pparams = addr + XPU_ESCAPE_PARAMS_OFF;
		xpu_callpage_write(cp, offsetof(struct nvos21_parameters,
						p_alloc_parms),
				   &pparams, sizeof(pparams));
	}
	/* a client's handle: free still, as the driver is called */
	if (e->client_check) {
		if (mutex_lock_killable(&xpu_client_lock)) {
			ret = -EINTR;
			goto done;
		}
		if (xpu_rm_client_exists(e->client_check)) {
			mutex_unlock(&xpu_client_lock);
			taken = true;
			ret = 0;
			goto done;
		}
	}
	ret = xpu_drv.unlocked_ioctl(file, cmd, addr);
	if (e->client_check)
		mutex_unlock(&xpu_client_lock);
done:
	*cheated = !xpu_callpage_done(cp, data, len, &e->sealed);
	if (e->params_size) {
		memcpy(e->u.raw, img, e->size);
		memcpy(e->params, img + XPU_ESCAPE_PARAMS_OFF, e->params_size);
		/* the caller's struct keeps its own pointer */
		e->u.p21.p_alloc_parms = e->uparams;
	}
	/* RM's own refusal, RM not called: nothing was made */
	if (taken) {
		e->client_new = false;
		xpu_escape_set_u32(e, site->status,
				   NV_ERR_INSERT_DUPLICATE_NAME);
	}
	if (site) {
		xpu_escape_handles(e, site, &hc2, &hp2, &ho2);
		if (hc2 != hc || hp2 != hp || (named && ho2 != ho))
			*cheated = true;
	}
	return ret;
}

/*
 * The caller's struct gets E: -EFAULT if it cannot, as the driver's
 * copy-back.  Params xpu copied go back first, when RM says the call
 * succeeded, as RM copies them (serverAllocApiCopyOut): params that cannot
 * be copied out make the call fail, the object made all the same.  That
 * status is the caller's only: E keeps RM's, which says what RM made.
 * (Until session 57 it was written into E, where the callers took it for
 * RM's word that nothing was made: params on a read-only page made a TSG,
 * a channel or system memory no slice counted.)
 */
static long xpu_escape_return(struct xpu_escape *e, long ret)
{
	bool lost = e->params_size && xpu_escape_u32(e, e->status) == NV_OK &&
		    copy_to_user(u64_to_user_ptr(e->uparams), e->params,
				 e->params_size);

	if (copy_to_user(e->uarg, e->u.raw, e->size) ||
	    (lost && xpu_put_status(e->uarg + e->status,
				    NV_ERR_INVALID_ADDRESS)))
		return -EFAULT;
	return ret;
}

/* The classes of RM's EventApi (resource_list.h): allowed on any file. */
static bool xpu_is_event_class(u32 h_class)
{
	return h_class == NV01_EVENT || h_class == NV01_EVENT_OS_EVENT ||
	       h_class == NV01_EVENT_KERNEL_CALLBACK ||
	       h_class == NV01_EVENT_KERNEL_CALLBACK_EX;
}

/*
 * RM_ALLOC of H_CLASS on E, whose status lies at STATUS: the params RM would
 * read from pAllocParms go onto the page of the call with the struct, for
 * a device (its id says which GPU), for video memory (its size and
 * location), for a virtual allocation (its size and flags: the page
 * tables it pins), for a VA space (its index and flags: whether it gets
 * page directories of RM's) and for a channel or TSG (the context share or
 * VA space RM frees it with, which its record follows), so that RM reads what
 * xpu read.  Sizes are the driver's (rmapiGetClassAllocParamSize).  NV_OK,
 * or RM's status for params it could not copy in.
 */
static u32 xpu_escape_params(struct xpu_escape *e, u32 h_class, size_t status)
{
	u64 up = e->u.p21.p_alloc_parms;
	u32 size;

	BUILD_BUG_ON(sizeof(struct nv0080_alloc_parameters) >
		     sizeof(e->params));
	BUILD_BUG_ON(sizeof(e->params) + XPU_ESCAPE_PARAMS_OFF > PAGE_SIZE);
	if (h_class == NV01_DEVICE_0)
		size = sizeof(struct nv0080_alloc_parameters);
	else if (h_class == NV01_MEMORY_LOCAL_USER ||
		 h_class == NV01_MEMORY_SYSTEM ||
		 h_class == NV50_MEMORY_VIRTUAL)
		size = min_t(u32, xpu_rm_alloc_params_size(), sizeof(e->params));
	else if (h_class == FERMI_VASPACE_A)
		size = min_t(u32, xpu_rm_vaspace_params_size(), sizeof(e->params));
	else if (xpu_sched_is_channel_class(h_class))
		size = min_t(u32, xpu_rm_channel_params_size(), sizeof(e->params));
	else if (h_class == KEPLER_CHANNEL_GROUP_A)
		size = sizeof(struct nv_channel_group_allocation_parameters);
	else if (xpu_is_event_class(h_class))
		size = sizeof(struct nv0005_alloc_parameters);
	else
		return NV_OK;
	if (!up)
		return NV_OK;			/* RM's rule for no params */
	memset(e->params, 0, sizeof(e->params));
	if (copy_from_user(e->params, u64_to_user_ptr(up), size))
		return NV_ERR_INVALID_ADDRESS;	/* as RM's own copy-in */
	e->uparams = up;
	e->params_size = size;
	e->status = status;
	return NV_OK;
}

/*
 * The driver's escape CMD on E's copy (xpu_escape_ioctl), and the caller's
 * struct gets the results.  RM chooses a new object's handle when not given
 * one (clientGenResourceHandle: the next of its range the client does not
 * use), and writes it back where a thread of the caller's can rewrite it
 * before xpu reads it, so it could not be checked.  So for what xpu
 * records (SITE's record), xpu names the handle itself, as RM would choose
 * it -- from RM's own range, from its top down, the next while RM says the
 * client has it -- and the caller's struct reads as if RM had chosen it.
 * *DRV_RET, unless NULL, gets what the driver returned.
 */
#define XPU_HANDLE_TRIES	16

/* The next handle xpu names for XF's caller, as RM would choose one. */
static u32 xpu_next_handle(struct xpu_file *xf)
{
	return RS_UNIQUE_HANDLE_BASE + RS_UNIQUE_HANDLE_RANGE - 1 -
	       xf->handle_gen++ % RS_UNIQUE_HANDLE_RANGE;
}

/*
 * A handle xpu names for a new client, as RM would choose one: in RM's
 * range for user clients (RS_CLIENT_HANDLE_BASE), at random (a client's
 * handle is the host's, not a client's, to keep unique).  A count down
 * the range, as before session 57, let a tenant make the next handles
 * first, so that every other slice's client allocation found its tries
 * taken and failed (a review of rmapi.c); at random a tenant within its
 * max_handles holds an eighth of the range at most.
 */
static u32 xpu_next_client_handle(void)
{
	return RS_CLIENT_HANDLE_BASE + get_random_u32() % RS_CLIENT_HANDLE_MAX;
}

/*
 * A slice's RM_ALLOC of a client that leaves its handle to RM (hRoot 0) is
 * named the same way: RM writes the handle it chose into hObjectNew, where
 * a thread of the caller's could rewrite it to a handle the slice knows,
 * and the new client, with every object made in it, would go unrecorded
 * (docs/security.md, class 42).  So xpu names it in hRoot
 * (RS_COMPATABILITY_MODE: RM takes a client's handle from hRoot), and the
 * caller's struct reads as RM leaves it when it chose: hRoot 0, the new
 * handle in hObjectNew -- the one xpu named, whatever the page says.
 */
static long xpu_escape_call(struct xpu_file *xf, struct file *file,
			    unsigned int cmd, struct xpu_escape *e,
			    const struct xpu_alloc_site *site, bool *cheated,
			    long *drv_ret)
{
	u8 orig[sizeof(e->u)];
	const u32 provided = NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED;
	bool named = site && xpu_site_named(e, site);
	bool client = site && site->client && xf->slice &&
		      !xpu_escape_u32(e, site->h_client);
	unsigned int tries;
	size_t fl, at;
	long ret;
	u32 h;

	/*
	 * A client's handle is the host's, not the slice's: one that exists
	 * after the call may be another tenant's, so xpu asks whether it is
	 * free just before the driver's call (xpu_escape_ioctl, under
	 * xpu_client_lock), and one that is taken gets RM's own refusal, RM
	 * not called.  (Until session 57 a threaded caller naming another
	 * tenant's client had it recorded as its own file's from RM's
	 * refusal: class 50; until session 58 the look came before the page
	 * of the call, where a tenant can park it: class 51.)
	 */
	if (site && site->client && xf->slice && !client) {
		e->client_h = xpu_escape_u32(e, site->h_client);
		e->client_new = true;
		e->client_check = e->client_h;
	}
	if (!client && (!site || !site->record || named)) {
		ret = xpu_escape_ioctl(xf, file, cmd, e, site, named, cheated);
		goto out;
	}
	fl = client ? 0 : site->handle_flags;
	at = client ? site->h_client : site->h_object;
	memcpy(orig, e->u.raw, e->size);
	for (tries = 0; ; tries++) {
		h = client ? xpu_next_client_handle() : xpu_next_handle(xf);
		xpu_escape_set_u32(e, at, h);
		if (fl)
			xpu_escape_set_u32(e, fl, xpu_escape_u32(e, fl) | provided);
		/*
		 * RM writes a client's handle into hObjectNew: not checked; one
		 * found taken reads as RM's refusal, and the next is tried
		 */
		e->client_check = client ? h : 0;
		e->client_new = client;
		ret = xpu_escape_ioctl(xf, file, cmd, e, site, !client, cheated);
		if (fl)
			xpu_escape_set_u32(e, fl, xpu_escape_u32(e, fl) & ~provided);
		if (ret || *cheated || tries == XPU_HANDLE_TRIES - 1 ||
		    xpu_escape_u32(e, site->status) !=
		    NV_ERR_INSERT_DUPLICATE_NAME)
			break;
		memcpy(e->u.raw, orig, e->size);
	}
	if (client) {
		/* client_new: not when the last try found it taken */
		e->client_h = h;
		xpu_escape_set_u32(e, site->h_client, 0);
		if (!ret && !*cheated &&
		    xpu_escape_u32(e, site->status) == NV_OK)
			xpu_escape_set_u32(e, site->h_object, h);
	}
out:
	/* the caller named its client: RM wrote that handle, not a thread */
	if (site && site->client && !ret && !*cheated &&
	    xpu_escape_u32(e, site->h_client) &&
	    xpu_escape_u32(e, site->status) == NV_OK)
		xpu_escape_set_u32(e, site->h_object,
				   xpu_escape_u32(e, site->h_client));
	if (drv_ret)
		*drv_ret = ret;
	return xpu_escape_return(e, ret);
}

/*
 * Whether WANT more bytes fit in SLICE, under mem_lock; a denial is counted
 * when not.  used is RM's figure as of the last change, all of which took
 * mem_lock, plus what xpu charges; it is read anew where it may be high.
 */
static bool xpu_mem_fits(struct xpu_slice *slice, u64 want)
{
	u64 limit = READ_ONCE(slice->memory_limit);

	lockdep_assert_held(&slice->mem_lock);
	/* a free or release that could not take the lock left it stale */
	if (READ_ONCE(slice->stale))
		xpu_refresh_locked(slice);
	/* memory the slice freed and UVM kept may have gone since */
	if (READ_ONCE(slice->held_bytes) && slice->used + want > limit &&
	    xpu_ledger_reprobe(slice, UINT_MAX))
		xpu_refresh_locked(slice);
	/*
	 * channels and TSGs RM freed with a grandparent are still charged:
	 * ask RM, when their charge is what stands in the way
	 */
	if (slice->used + want > limit &&
	    slice->used - min_t(u64, slice->used, atomic64_read(&slice->rec_bytes)) +
	    want <= limit) {
		xpu_sched_forget_stale(slice);
		if (READ_ONCE(slice->stale))
			xpu_refresh_locked(slice);
	}
	if (want <= limit && slice->used <= limit - want)
		return true;
	slice->denied++;
	xpu_event_denied(slice, want);
	return false;
}

/*
 * The caller of XF is killed and XF refused from now on, for WHY; the
 * slice keeps BYTES charged until destroyed (the caller says which figure).
 */
static void xpu_mem_kill_caller(struct xpu_file *xf, const char *why,
				u64 bytes)
{
	struct xpu_slice *slice = xf->slice;

	WRITE_ONCE(xf->poisoned, true);
	atomic64_inc(&slice->killed);
	pr_warn_ratelimited("slice %u '%s': pid %d %s: killed, its %s file refused, the slice charged %llu bytes until destroyed\n",
			    slice->id, slice->name, task_tgid_nr(current), why,
			    xf->gpu ? "GPU" : "control", bytes);
	kill_pid(task_tgid(current), SIGKILL, 1);
}

/*
 * The caller made BYTES of video memory xpu has no record of, or made RM
 * free recorded memory behind xpu's back, so the ledger cannot follow them
 * through a free that takes them (with their client) while UVM maps them:
 * the slice pays for them, on top of RM's figure (which still has them
 * while the file is open), until destroyed; the control file is refused
 * from now on and the caller killed.  WHY is for the log.
 */
static void xpu_mem_unrecorded(struct xpu_file *xf, u64 bytes, const char *why)
{
	struct xpu_slice *slice = xf->slice;

	lockdep_assert_held(&slice->mem_lock);
	atomic64_add(bytes, &slice->lost_bytes);
	WRITE_ONCE(slice->used, slice->used + bytes);
	xpu_mem_kill_caller(xf, why, bytes);
}

/*
 * The page of a call xpu made for XF's caller moved, or a thread rewrote
 * the handles RM read there (REWROTE): what RM did is not known, so what
 * RM now counts for XF's creators beyond the slice's records stays
 * charged and the caller is killed (xpu_mem_unrecorded).  Under mem_lock.
 */
static void xpu_mem_page_lost(struct xpu_file *xf, bool rewrote)
{
	xpu_mem_unrecorded(xf, xpu_refresh_creators(xf->slice, xf), rewrote ?
			   "moved or rewrote the page of a call xpu made for it" :
			   "moved the page of a call xpu made for it");
}

/*
 * RM_FREE of (hc, hp, ho) as the caller itself would make it: through FILE,
 * in the caller's context, with parameters in a page of the caller's
 * address space that only xpu and the driver can write (callpage.c).  RM
 * checks it as any user call (the client must be one of FILE's), so handles
 * read back from the caller's memory -- a claim, which a racing thread may
 * have pointed at another tenant's objects -- let xpu free only what the
 * caller could free itself.  If the page did not stay where xpu mapped it
 * until the driver had read it, the caller made RM free what it chose: what
 * went from XF's records unseen is charged until the slice is destroyed,
 * and the caller killed.  Under the slice's mem_lock.  Returns RM's status,
 * as the driver wrote it back.  For a caller not alone in its address
 * space that is a claim (class 42), taken at its word: RM refuses a free
 * through the file the client was made through only when the client is
 * missing (resserv's compatibility mode: a missing object is NV_OK), and
 * a call naming a client not the file's is refused before RM (class 47).
 */
u32 xpu_free_as_caller(struct xpu_file *xf, struct file *file,
		       u32 hc, u32 hp, u32 ho)
{
	struct nvos00_parameters p = {
		.h_root = hc, .h_object_parent = hp, .h_object_old = ho,
	};
	struct xpu_callpage *cp;
	unsigned long addr;
	long ret;

	lockdep_assert_held(&xf->slice->mem_lock);
	cp = xpu_callpage_map(&p, sizeof(p), &addr);
	if (IS_ERR(cp))
		return NV_ERR_NO_MEMORY;
	ret = xpu_drv.unlocked_ioctl(file, _IOWR(NV_IOCTL_MAGIC, NV_ESC_RM_FREE,
						 struct nvos00_parameters),
				     addr);
	if (!xpu_callpage_done(cp, &p, sizeof(p), NULL)) {
		xpu_mem_unrecorded(xf, xpu_ledger_unseen(xf),
				   "moved the page of a free xpu made as it");
		return NV_ERR_INVALID_ARGUMENT;
	}
	return ret ? NV_ERR_GENERIC : p.status;
}

/*
 * A free through XF settled by the ledger took GONE bytes from the figures
 * of XF's creators, by RM's count (ledger.c).  With one creator, whose
 * figure xpu knows, that figure drops by as much without a reading: every
 * client reached through XF was made by it, so RM charged it for that
 * memory, and the reading after the allocation that made it counted it.
 * Else (several creators, a stale figure, no record: GONE is U64_MAX) RM
 * is asked for the creators' figures.  A figure that is off all the same
 * (a member's own unsliced calls meanwhile) is read anew after the next
 * allocation through XF, which is undone if that reading is over the limit.
 */
static void xpu_mem_freed(struct xpu_slice *slice, struct xpu_file *xf,
			  u64 gone)
{
	struct xpu_member *m;

	lockdep_assert_held(&slice->mem_lock);
	if (!gone)
		return;				/* RM freed nothing */
	m = gone == U64_MAX ? NULL : xpu_mem_sole_creator(slice, xf);
	if (!m || m->usage < gone || slice->used < gone) {
		xpu_refresh_creators(slice, xf);
		return;
	}
	m->usage -= gone;
	WRITE_ONCE(slice->used, slice->used - gone);
}

/*
 * Undo (hc, hp, ho), which RM made for XF's caller and xpu will not keep
 * (past a bound, or past the limit), through the ledger, as a slice's free
 * is made (xpu_mem_free_through_ledger): between RM's call and this one a
 * thread of the caller's can have mapped the new handle into UVM
 * (UVM_MAP_EXTERNAL_ALLOCATION takes no lock of xpu's), which keeps the
 * memory past its free; freed as the caller alone, it was then charged to
 * no slice (found by a review in session 57).  The ledger's duplicate
 * stands by, and memory something else still holds stays charged to the
 * slice while it does.  The slice's figure follows.  Under mem_lock.
 * Returns whether the memory went with the free (or RM did not free it).
 */
static bool xpu_mem_undo(struct xpu_file *xf, struct file *file,
			 u32 hc, u32 hp, u32 ho)
{
	bool settled;
	u64 gone;

	/* a handle the caller named that RM found taken is freed too */
	if (xpu_ledger_free(xf, file, hc, hp, ho, &settled, &gone) == NV_OK)
		xpu_handles_freed(xf->slice, hc, ho);
	if (settled)
		xpu_mem_freed(xf->slice, xf, gone);
	else
		xpu_refresh_locked(xf->slice);
	return settled;
}

/*
 * What a video-memory allocation through XF made goes on record for the
 * ledger (ledger.c) by the handles RM wrote back into xpu's copy of the
 * struct, E, and RM confirms, at GROWN bytes (what RM's figure grew by) or
 * WANT (what xpu admitted, at the size RM read from xpu's page), whichever
 * is more: a member's free through an unsliced file between the readings
 * can make GROWN anything down to 0, and an allocation left unrecorded
 * would escape the ledger at a free of its client.  One that does
 * not hold (RM made memory it did not name) leaves xpu unable to follow
 * that memory through a free that takes it with its client: so the caller
 * is killed (its control file refused from now on), and the slice pays for
 * the memory until it goes.  One xpu cannot record (past max_memrecs, met
 * before the call for video memory, or a record it could not allocate) is
 * undone through the ledger.
 * A call of another class is recorded if RM says it made video memory, and
 * else left to RM's figure (which a member's call through another file may
 * have grown meanwhile).  MADE: RM said it made the video memory, on a copy
 * nobody else could write (xpu_admit_call).  Returns NV_OK or a status for
 * the caller.
 */
static u32 xpu_mem_record(struct xpu_file *xf, struct file *file,
			  const struct xpu_escape *e,
			  const struct xpu_alloc_site *site, u64 grown, u64 want,
			  bool made)
{
	u64 size = max(grown, want);
	u32 hc, hp, ho;
	int err;

	xpu_escape_handles(e, site, &hc, &hp, &ho);
	err = xpu_ledger_record(xf, hc, hp, ho, size, made);
	/* RM made nothing: a failed allocation, or one of another class */
	if (!err || (err == -ESRCH && (!site->vidmem || !grown)))
		return NV_OK;
	if (err != -ESRCH) {
		xpu_mem_undo(xf, file, hc, hp, ho);
		return err == -ENOSPC ? NV_ERR_INSUFFICIENT_RESOURCES :
					NV_ERR_NO_MEMORY;
	}
	xpu_mem_unrecorded(xf, grown, "made video memory and named no new object");
	return NV_OK;
}

/*
 * System memory RM made for a caller of XF's slice by the call on E (RM
 * said NV_OK on xpu's copy): its pages go on record (hostmem.c), by the
 * handles RM read from xpu's copy.  In a slice with no bound that is all:
 * what xpu cannot record is left out of host_memory_used.  In one with a
 * bound, one xpu cannot record is undone, as the caller, through a control
 * file.  A GPU file's (RM_ALLOC_MEMORY) RM
 * does not free through: then the slice pays WANT bytes until it goes, the
 * file is refused from now on and the caller killed, as for video memory
 * xpu cannot follow (xpu_mem_unrecorded).  Only a failure to allocate
 * xpu's record, or an answer of RM's that changed between two queries,
 * gets there: the bounds are checked before the call.  NV_OK or a status
 * for the caller.
 */
static u32 xpu_mem_host_record(struct xpu_file *xf, struct file *file,
			       const struct xpu_escape *e,
			       const struct xpu_alloc_site *site)
{
	struct xpu_slice *slice = xf->slice;
	u32 hc, hp, ho;
	int err;

	xpu_escape_handles(e, site, &hc, &hp, &ho);
	err = xpu_hostmem_record(slice, hc, ho);
	/* -ESRCH: RM made something else (VID_HEAP's LOCATION_ANY) */
	if (!err || err == -ESRCH || !READ_ONCE(slice->host_limit))
		return NV_OK;
	if (xf->gpu) {
		WRITE_ONCE(slice->host_used, slice->host_used + site->host_want);
		xpu_mem_kill_caller(xf, "made system memory xpu could not record",
				    site->host_want);
		return NV_ERR_NO_MEMORY;
	}
	xpu_free_as_caller(xf, file, hc, hp, ho);
	return err == -ENOSPC ? NV_ERR_INSUFFICIENT_RESOURCES :
				NV_ERR_NO_MEMORY;
}

/*
 * RM made the object of SITE on E (its status NV_OK on xpu's copy): its
 * handle goes on record (handles.c), from SPARE.  A client's handle is
 * xpu_client_made()'s.
 */
static void xpu_mem_handle_made(struct xpu_file *xf, struct list_head *spare,
				const struct xpu_escape *e,
				const struct xpu_alloc_site *site)
{
	u32 hc, hp, ho;

	xpu_escape_handles(e, site, &hc, &hp, &ho);
	if (site->client) {
		ho = xpu_client_made(e, site);
		xpu_handles_add(xf, spare, ho, 0, ho);
	} else if (ho) {
		xpu_handles_add(xf, spare, hc, hp, ho);
	}
}

/*
 * Whether RM made the object the call on E names at SITE (its handles as
 * xpu checked them), by RM's status where that is the driver's own word:
 * the caller was alone in its address space from the call's start, so no
 * thread of its stored into the page after the driver's copy-back made it
 * writable, and the driver returned 0, so the copy-back was made.  Else
 * the status on E is a claim -- a store of another thread's, or what the
 * caller put there when the copy-back failed.  Then a handle the slice
 * has a record of is not new (handles in its clients are made only under
 * its mem_lock, which the caller holds: a failed call under a live handle
 * must not replace its record), and a failure is asked of RM: an object
 * under the handle now.  A claimed NV_OK is taken without asking (what a
 * lie gets the caller is a record of a handle that does not exist, its own
 * slice's to pay).  Before session 52 a thread that stored a failure there
 * in that window kept what RM made out of the slice's records: its handle,
 * its system memory, a duplicate of a usermode object or TSG.
 */
static bool xpu_mem_rm_made(struct xpu_file *xf, const struct xpu_escape *e,
			    const struct xpu_alloc_site *site, long drv_ret)
{
	u32 hc, hp, ho;

	if (e->sealed && !drv_ret)
		return xpu_escape_u32(e, site->status) == NV_OK;
	/*
	 * A client: made by this call if it exists now and did not just
	 * before it (class 50), whatever the status says.
	 */
	if (site->client) {
		ho = xpu_client_made(e, site);
		return e->client_new && !xpu_handles_known(xf->slice, ho, ho) &&
		       xpu_rm_client_exists(ho);
	}
	xpu_escape_handles(e, site, &hc, &hp, &ho);
	if (!ho || xpu_handles_known(xf->slice, hc, ho))
		return false;
	return xpu_escape_u32(e, site->status) == NV_OK ||
	       xpu_rm_object_class(hc, ho);
}

/*
 * Whether the allocation on E (SITE's) made video memory, by RM's word on a
 * copy nobody but the driver can have written: the driver returned 0
 * (DRV_RET: else RM may never have run, and the status is the caller's)
 * and RM said NV_OK on xpu's copy,
 * for a class and attributes that make video memory (SITE's size), the
 * handles are the ones xpu wrote (not CHEATED), and E is sealed -- the
 * caller was alone in its address space, so no thread of its stored into
 * the page after the driver's copy-back made it writable.
 */
static bool xpu_mem_made(const struct xpu_escape *e,
			 const struct xpu_alloc_site *site, bool cheated,
			 long drv_ret)
{
	return site->size && !cheated && !drv_ret && e->sealed &&
	       xpu_escape_u32(e, site->status) == NV_OK &&
	       (!site->size_in_params ||
		e->params_size >= site->size + sizeof(u64));
}

/*
 * After an allocation through XF on E (SITE's): how much RM's figures for
 * XF's creators grew.  RM writes the size of the video memory it made back
 * into the params it read (vidmemConstruct: the memdesc's size, rounded as
 * RM chose; VID_HEAP_CONTROL's ALLOC_SIZE copies it back from the params it
 * built), and GET_PID_INFO's figure for the client's creator grows by just
 * that (memConstructCommon takes the Memory's length from the same memdesc;
 * docs/memory.md).  So when RM MADE the memory (xpu_mem_made) and XF has
 * one creator, whose figure xpu knows, that figure grows by the size
 * without a reading, as a settled free lowers it (xpu_mem_freed).  Else RM
 * is asked (xpu_refresh_creators).
 */
static u64 xpu_mem_grown(struct xpu_slice *slice, struct xpu_file *xf,
			 const struct xpu_escape *e,
			 const struct xpu_alloc_site *site, bool made)
{
	struct xpu_member *m;
	u64 size;

	lockdep_assert_held(&slice->mem_lock);
	if (!made)
		return xpu_refresh_creators(slice, xf);
	memcpy(&size, (site->size_in_params ? e->params : e->u.raw) + site->size,
	       sizeof(size));
	m = xpu_mem_sole_creator(slice, xf);
	if (!m || !size || size > READ_ONCE(slice->memory_limit))
		return xpu_refresh_creators(slice, xf);
	m->usage += size;
	xpu_mem_set_used(slice, slice->used + size);
	return size;
}

/*
 * Class 47's check again, under the slice's mem_lock, where a client's
 * record changes (its free takes it): between the check at a call's entry
 * and the lock, a thread of the caller's can free the client, and RM give
 * its handle to another process (the next of RM's own handles, which a
 * tenant can name); a call then naming it would have what xpu asks of RM
 * afterwards, with its own privilege, be about that process's objects
 * (found by a review in session 58).  NV_OK, or RM's answer to a client
 * not the file's.
 */
u32 xpu_mem_client_check_locked(struct xpu_file *xf, u32 hc)
{
	lockdep_assert_held(&xf->slice->mem_lock);
	return xpu_handles_file_client(xf, hc) ? NV_OK : NV_ERR_INVALID_CLIENT;
}

static long xpu_admit_call(struct xpu_file *xf, struct file *file,
			   unsigned int cmd, struct xpu_escape *e, u64 want,
			   const struct xpu_alloc_site *site)
{
	struct xpu_slice *slice = xf->slice;
	u32 hc, hp, ho, st;
	u64 grown, before;
	LIST_HEAD(spare);
	bool cheated, made, rm_made, settled;
	long ret, drv_ret;

	ret = xpu_mem_join(slice);
	if (ret)
		return ret;
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	st = site->client ? NV_OK :
	     xpu_mem_client_check_locked(xf, xpu_escape_u32(e, site->h_client));
	if (st) {
		mutex_unlock(&slice->mem_lock);
		return xpu_escape_status(e, site, st);
	}
	if (!xpu_mem_fits(slice, want) ||
	    (site->host && !xpu_hostmem_fits(slice, site->host_want))) {
		mutex_unlock(&slice->mem_lock);
		/* The driver's own failure: the call succeeds, status says why. */
		return xpu_escape_status(e, site, NV_ERR_NO_MEMORY);
	}
	/*
	 * a video-memory record it may need, and a handle it may make: past
	 * the slice's bounds, RM is not called
	 */
	if ((site->vidmem || want) && !xpu_ledger_room(slice)) {
		mutex_unlock(&slice->mem_lock);
		return xpu_escape_status(e, site,
					 NV_ERR_INSUFFICIENT_RESOURCES);
	}
	st = xpu_handles_reserve(slice, &spare, 1);
	if (st) {
		mutex_unlock(&slice->mem_lock);
		return xpu_escape_status(e, site, st);
	}
	/*
	 * Whatever the driver returns -- a failed copy-back into the caller's
	 * struct is -EFAULT after RM made the object -- RM's figure below is
	 * what counts.
	 */
	before = slice->used;
	ret = xpu_escape_call(xf, file, cmd, e, site, &cheated, &drv_ret);
	made = xpu_mem_made(e, site, cheated, drv_ret);
	grown = xpu_mem_grown(slice, xf, e, site, made);
	if (cheated) {
		xpu_mem_unrecorded(xf, grown,
				   "moved or rewrote the page of a call xpu made for it");
		goto out;
	}
	rm_made = xpu_mem_rm_made(xf, e, site, drv_ret);
	if (site->host && rm_made) {
		st = xpu_mem_host_record(xf, file, e, site);
		if (st) {
			ret = xpu_escape_status(e, site, st);
			goto out;
		}
	}
	if (slice->used <= READ_ONCE(slice->memory_limit)) {
		st = grown || want ?
		     xpu_mem_record(xf, file, e, site, grown, want, made) :
		     NV_OK;
		if (st)
			ret = xpu_escape_status(e, site, st);
		else if (rm_made)
			xpu_mem_handle_made(xf, &spare, e, site);
		goto out;
	}

	/*
	 * Over the limit: RM gave more than was asked for (rounding xpu did
	 * not foresee, or a size changed under us).  Undo it by the handles
	 * RM wrote back, as the caller, through the ledger; an honest caller
	 * sees NV_ERR_NO_MEMORY.
	 */
	xpu_escape_handles(e, site, &hc, &hp, &ho);
	settled = xpu_mem_undo(xf, file, hc, hp, ho);
	if (slice->used <= READ_ONCE(slice->memory_limit)) {
		slice->denied++;
		xpu_event_denied(slice, want);
		ret = xpu_escape_status(e, site, NV_ERR_NO_MEMORY);
		goto out;
	}
	/*
	 * held past its free by another handle (a thread's UVM mapping of
	 * it), and charged while it is: the caller goes, and with it the
	 * mapping that keeps the slice past its limit
	 */
	if (!settled) {
		xpu_mem_kill_caller(xf, "kept memory past the limit through another handle",
				    0);
		ret = xpu_escape_status(e, site, NV_ERR_NO_MEMORY);
		goto out;
	}
	/* only allocations within the limit are recorded: what is left is not */
	xpu_mem_unrecorded(xf, slice->used > before ? slice->used - before : 0,
			   "holds memory past the limit and hid it");
out:
	xpu_handles_cancel(slice, &spare);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

/*
 * Charge BYTES of RM's own video memory (a channel's or TSG's, sched.c) to
 * SLICE before the call that makes it, under mem_lock: NV_OK, or
 * NV_ERR_NO_MEMORY past the limit.  Taken back with xpu_recs_uncharge()
 * (sched.c), without this lock.
 */
u32 xpu_mem_charge_locked(struct xpu_slice *slice, u64 bytes)
{
	lockdep_assert_held(&slice->mem_lock);
	if (!xpu_mem_fits(slice, bytes))
		return NV_ERR_NO_MEMORY;
	atomic64_add(bytes, &slice->rec_bytes);
	xpu_mem_set_used(slice, slice->used + bytes);
	return NV_OK;
}

/* After a call that can only lower usage (free, dup, close): read anew. */
static long xpu_call_refresh(struct xpu_file *xf, struct file *file,
			     unsigned int cmd, unsigned long arg)
{
	long ret = xpu_drv.unlocked_ioctl(file, cmd, arg);

	if (xf->slice)
		xpu_mem_refresh_all(xf->slice);
	return ret;
}

/*
 * Exclusive mode covers the control node too (docs/security.md, class 2).
 * RM lets any control file make a device on a GPU whose file is in the
 * caller's fd table (osIsGpuAccessible); on an exclusive GPU with slices
 * the only such files a tenant can hold are slices' own, so without this an
 * unsliced control file -- or another slice's -- reaches the GPU past every
 * limit.  A slice's control file makes devices on its own GPU only; an
 * unsliced one on an exclusive GPU with slices only for root on the host,
 * as for the GPU's own node.  INST is the device id of xpu's copy of the
 * params, which RM reads (xpu_escape_params); no params means instance 0,
 * as RM takes them before 550.
 */
static u32 xpu_mem_device_check(struct xpu_file *xf, u32 inst)
{
	struct xpu_gpu *gpu = NULL;
	unsigned int i;
	u32 status = NV_OK;

	if (xf->slice)
		return inst == xf->slice->gpu->device_instance ?
		       NV_OK : NV_ERR_INSUFFICIENT_PERMISSIONS;
	for (i = 0; i < xpu_nr_gpus; i++)
		if (xpu_gpus[i].device_instance == inst)
			gpu = &xpu_gpus[i];
	if (!gpu)
		return NV_OK;		/* not a GPU xpu serves: RM says */
	mutex_lock(&xpu_lock);
	if (gpu->mode == XPU_MODE_EXCLUSIVE && gpu->nr_slices &&
	    !capable(CAP_SYS_ADMIN))
		status = NV_ERR_INSUFFICIENT_PERMISSIONS;
	mutex_unlock(&xpu_lock);
	return status;
}

/* The device id RM reads from E's params: 0 without any. */
static u32 xpu_escape_device_id(const struct xpu_escape *e)
{
	const struct nv0080_alloc_parameters *d = (const void *)e->params;

	return e->params_size ? d->device_id : 0;
}

/*
 * Whether a device made through an unsliced control file must be checked:
 * some GPU is exclusive with slices, and the caller is not root on the
 * host.  Otherwise RM alone decides, with the caller's own struct.  Asked
 * of every unsliced allocation (class 34), so without a lock -- the state
 * may change just after a look under one too; xpu_mem_device_check() is
 * the locked answer -- and the capability last and unaudited, so that a
 * host with no exclusive GPU pays a loop and nothing is logged for it.
 */
bool xpu_mem_device_guarded(void)
{
	unsigned int i;

	for (i = 0; i < xpu_nr_gpus; i++)
		if (READ_ONCE(xpu_gpus[i].mode) == XPU_MODE_EXCLUSIVE &&
		    READ_ONCE(xpu_gpus[i].nr_slices))
			return !ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
	return false;
}

/* RM_ALLOC's site in an NVOS21 or NVOS64 of SIZE bytes (they agree but for status). */
static void xpu_rm_alloc_site(struct xpu_alloc_site *site, size_t size,
			      bool record)
{
	*site = (struct xpu_alloc_site) {
		.status = size == sizeof(struct nvos21_parameters) ?
			  offsetof(struct nvos21_parameters, status) :
			  offsetof(struct nvos64_parameters, status),
		.h_client = offsetof(struct nvos21_parameters, h_root),
		.h_parent = offsetof(struct nvos21_parameters, h_object_parent),
		.h_object = offsetof(struct nvos21_parameters, h_object_new),
		.record = record,
	};
}

void xpu_escape_alloc_args(const struct xpu_escape *e, u32 *hc, u32 *hp,
			   u32 *ho)
{
	*hc = e->u.p21.h_root;
	*hp = e->u.p21.h_object_parent;
	*ho = e->u.p21.h_object_new;
}

/*
 * What an allocation on E of a channel or TSG depends on (RM frees it with
 * that object: refAddDependant), as RM reads it from xpu's copy of its
 * params: a channel's context share, else (under a device) its VA space; a
 * TSG's VA space.  0 without a copy: a GPU file's call, which the driver
 * refuses, or one with no params, which RM refuses.
 */
u32 xpu_escape_alloc_dep(const struct xpu_escape *e, bool tsg)
{
	const struct nv_channel_group_allocation_parameters *gp =
		(const void *)e->params;
	const struct nv_channel_alloc_params *cp = (const void *)e->params;

	if (!e->params_size)
		return 0;
	if (tsg)
		return gp->h_va_space;
	return cp->h_context_share ? cp->h_context_share : cp->h_va_space;
}

long xpu_escape_alloc_status(struct xpu_escape *e, u32 value)
{
	struct xpu_alloc_site site;

	xpu_rm_alloc_site(&site, e->size, false);
	return xpu_escape_status(e, &site, value);
}

/*
 * A channel's or TSG's memory, named in xpu's copy of its params (which RM
 * reads), that RM would reach by a physical address it never checks.
 * RM takes any Memory of the client as a channel's USERD
 * (kchannelCreateUserdMemDesc_GV100: the memdesc's "physical" address at
 * the offset, whatever its address space) and as a channel's or TSG's
 * error notifier (kchannelGetNotifierInfo).  A usermode object and
 * register memory are BAR0 (ADDR_REGMEM), which the GMMU's aperture
 * encodes as video memory (kgmmuGetMemAperture: NV_ASSERT, 0); hardware
 * resources lie at RM's invalid offset; virtual memory's address is a GPU
 * VA the tenant chose.  So USERD must be video or system memory (CUDA's,
 * and what the stub takes; pinned pages of the caller's too, which is
 * all OS-descriptor memory a slice makes, class 35), and an error
 * notifier no BAR0 or hardware-resource object (a virtual one is looked
 * up as a GPU mapping; class 37).  Asked of RM under mem_lock, which every
 * call of the slice that makes or frees an object under a client of the
 * slice takes, so the class RM finds is the one asked.  A client that is
 * not the slice's is RM's to refuse.
 *
 * Whether H of client HC, named as an error notifier, is refused:
 */
static bool xpu_notifier_refused(u32 hc, u32 h)
{
	switch (h ? xpu_rm_object_class(hc, h) : 0) {
	case NV01_MEMORY_LOCAL_PRIVILEGED:
	case NV01_MEMORY_HW_RESOURCES:
	case VOLTA_USERMODE_A:
	case TURING_USERMODE_A:
	case AMPERE_USERMODE_A:
	case HOPPER_USERMODE_A:
	case BLACKWELL_USERMODE_A:
		return true;
	default:
		return false;
	}
}

/* ... and as a channel's USERD */
static bool xpu_userd_refused(u32 hc, u32 h)
{
	switch (h ? xpu_rm_object_class(hc, h) : 0) {
	case 0:		/* none: RM's own refusal (NV_ERR_OBJECT_NOT_FOUND) */
	case NV01_MEMORY_LOCAL_USER:
	case NV01_MEMORY_SYSTEM:
	case NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
		return false;
	default:
		return true;
	}
}

static u32 xpu_channel_memory_check(struct xpu_file *xf,
				    const struct xpu_escape *e)
{
	const struct nv_channel_group_allocation_parameters *gp =
		(const void *)e->params;
	const struct nv_channel_alloc_params *cp = (const void *)e->params;
	u32 hc = e->u.p21.h_root, h_class = e->u.p21.h_class, i;

	lockdep_assert_held(&xf->slice->mem_lock);
	if (!e->params_size || !xpu_handles_is_client(xf->slice, hc))
		return NV_OK;
	if (h_class == KEPLER_CHANNEL_GROUP_A)
		return xpu_notifier_refused(hc, gp->h_object_error) ||
		       xpu_notifier_refused(hc, gp->h_object_ecc_error) ?
		       NV_ERR_INSUFFICIENT_PERMISSIONS : NV_OK;
	if (!xpu_sched_is_channel_class(h_class))
		return NV_OK;
	if (xpu_notifier_refused(hc, cp->h_object_error) ||
	    xpu_notifier_refused(hc, cp->h_object_ecc_error))
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	for (i = 0; i < NV_MAX_SUBDEVICES; i++)
		if (xpu_userd_refused(hc, cp->h_userd_memory[i]))
			return NV_ERR_INSUFFICIENT_PERMISSIONS;
	return NV_OK;
}

long xpu_mem_tracked_call(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, struct xpu_escape *e,
			  struct xpu_alloc_result *r)
{
	struct xpu_alloc_site site;
	long ret;
	u32 st;

	lockdep_assert_held(&xf->slice->mem_lock);
	xpu_rm_alloc_site(&site, e->size, true);
	memset(r, 0, sizeof(*r));
	st = xpu_channel_memory_check(xf, e);
	if (st) {
		mutex_unlock(&xf->slice->mem_lock);
		return xpu_escape_status(e, &site, st);
	}
	ret = xpu_escape_call(xf, file, cmd, e, &site, &r->cheated,
			      &r->drv_ret);
	r->made = true;		/* mem_lock stays held: the caller's to drop */
	r->hc = xpu_escape_u32(e, site.h_client);
	r->ho = xpu_escape_u32(e, site.h_object);
	r->status = xpu_escape_u32(e, site.status);
	r->trusted = e->sealed && !r->drv_ret;
	return ret;
}

static bool xpu_is_client_class(u32 h_class)
{
	return h_class == NV01_ROOT || h_class == NV01_ROOT_NON_PRIV ||
	       h_class == NV01_ROOT_CLIENT;
}

/* An unsliced caller moved the page of a call xpu made for it. */
static void xpu_unsliced_cheated(struct xpu_file *xf)
{
	WRITE_ONCE(xf->poisoned, true);
	pr_warn_ratelimited("pid %d moved or rewrote the page of an allocation xpu made for it: killed, its control file refused\n",
			    task_tgid_nr(current));
	kill_pid(task_tgid(current), SIGKILL, 1);
}

/*
 * RM_ALLOC through an unsliced control file while a device could reach an
 * exclusive GPU with slices (class 2), of any class: made on xpu's copy of
 * the struct and of a device's params, in a page of xpu's, so that the
 * class and the device id RM reads are the ones checked (class 34: a class
 * read first and passed on was turned into a device).  A caller that moves
 * that page during the call is killed and its control file refused, as in
 * a slice: what RM read is not known.
 */

static long xpu_mem_unsliced_device(struct xpu_file *xf, struct file *file,
				    unsigned int cmd, unsigned long arg,
				    struct xpu_alloc_site *site)
{
	struct xpu_escape e;
	bool cheated;
	long ret;
	u32 st;

	ret = xpu_escape_copy(&e, arg, _IOC_SIZE(cmd));
	if (ret)
		return ret;
	/* the class of the copy, which RM reads, whatever it was before */
	site->client = xpu_is_client_class(e.u.p21.h_class);
	st = xpu_escape_params(&e, e.u.p21.h_class, site->status);
	if (!st && e.u.p21.h_class == NV01_DEVICE_0)
		st = xpu_mem_device_check(xf, xpu_escape_device_id(&e));
	if (st)
		return xpu_escape_status(&e, site, st);
	if (mutex_lock_killable(&xf->call_lock))
		return -EINTR;
	ret = xpu_escape_call(xf, file, cmd, &e, site, &cheated, NULL);
	mutex_unlock(&xf->call_lock);
	if (cheated)
		xpu_unsliced_cheated(xf);
	return ret;
}

/*
 * The most page-table memory RM pins for a virtual allocation of SIZE bytes
 * (nv_virtual_pins_tables), as RM's own reservation reckons it: 4 KiB pages
 * at every level -- a directory of 4 KiB per 2^56, 2^47, 2^38 and 2^29
 * bytes of VA (Hopper's five levels), a 4 KiB page table per 2 MiB -- and a
 * big-page table of 256 bytes per 2 MiB beside it (the default page size
 * locks both), each one more for a range that straddles a boundary
 * (gpu_vaspace.c gvaspaceAlloc, kern_gmmu.c kgmmuGetSizeOfPageTables/Dirs).
 */
static u64 xpu_pinned_bytes(u64 size)
{
	static const u8 shift[] = { 56, 47, 38, 29, 21 };
	u64 tables = 0, last = size ? size - 1 : 0;
	unsigned int i;

	if (!size)
		return 0;
	for (i = 0; i < ARRAY_SIZE(shift); i++)
		tables += (last >> shift[i]) + 2;
	return tables * SZ_4K + ((last >> 21) + 2) * 256;
}

/*
 * The page directories RM pins for a VA space of its own, the most: the
 * root (gvaspaceConstruct), and on a GSP client the four directories down
 * to PD0 over the range the split VA space keeps for GSP's RM
 * (gvaspaceReserveSplitVaSpace, _gvaspaceReserveVaForClientRm: 512 MiB at
 * 4 GiB, one PD0's reach), 4 KiB each on Hopper's five levels.
 */
#define XPU_VAS_PINNED_BYTES	(5 * SZ_4K)

/*
 * An event object's notifier, on xpu's copy of its params, which RM reads:
 * RM attaches the event to hSrcResource of client hParentClient, any
 * client, owner unchecked (eventapiInit: "remove support for this after
 * per-client locking is enabled"; RS_FLAGS_DUAL_CLIENT_LOCK, 535 to 595).
 * Passed through, a slice's tenant hung events on another tenant's (or
 * xpu's) subdevice, channels or client, got their notifications, and
 * lengthened the lists RM walks to post them (docs/security.md, class
 * 30).  So the notifier's client must be the allocating one (0 says so) or
 * another client of the slice's: NV_ERR_INVALID_CLIENT otherwise, RM not
 * called.  No params: RM refuses them (RS_REQUIRED).
 */
static u32 xpu_mem_event_check(struct xpu_file *xf, const struct xpu_escape *e)
{
	const struct nv0005_alloc_parameters *p = (const void *)e->params;
	u32 hpc;

	if (!e->params_size)
		return NV_OK;
	hpc = p->h_parent_client;
	if (!hpc || hpc == e->u.p21.h_root ||
	    xpu_handles_is_client(xf->slice, hpc))
		return NV_OK;
	return NV_ERR_INVALID_CLIENT;
}

/*
 * Whether an RM_ALLOC of H_CLASS, on xpu's copy E of the caller's struct
 * and params (which RM reads), goes the records' way (sched.c): channels,
 * TSGs and usermode objects, and what pins page tables whatever it maps --
 * a virtual allocation by its size and flags, a VA space of RM's own.
 * *PINNED gets the bytes of tables charged for it, *DEP what RM frees it
 * with beside its parent.
 */
static bool xpu_alloc_recorded(u32 h_class, const struct xpu_escape *e,
			       u64 *pinned, u32 *dep)
{
	const struct nv_memory_allocation_params *mp = (const void *)e->params;
	const struct nv_vaspace_allocation_parameters *vp = (const void *)e->params;

	*pinned = 0;
	*dep = 0;
	switch (h_class) {
	case NV50_MEMORY_VIRTUAL:
		if (!e->params_size || !nv_virtual_pins_tables(mp->flags))
			return false;
		*pinned = xpu_pinned_bytes(mp->size);
		*dep = mp->h_va_space;
		return true;
	case FERMI_VASPACE_A:
		/* no params: RM's to refuse, charged the same meanwhile */
		if (e->params_size && !nv_vaspace_pins_root(vp->index, vp->flags))
			return false;
		*pinned = XPU_VAS_PINNED_BYTES;
		return true;
	}
	return xpu_sched_tracks_class(h_class);
}

/*
 * The classes a slice's files do not make by RM_ALLOC, decided on xpu's copy
 * of the struct, whose class RM reads: NV_OK, or the status the caller gets
 * (RM not called).
 */
static u32 xpu_slice_class_refused(const struct xpu_slice *slice, u32 h_class)
{
	switch (h_class) {
	/*
	 * UVM's access-counter buffer is one a GPU: a tenant holding it
	 * would keep UVM from adding the GPU for every process on the host
	 * (docs/security.md, class 23).
	 */
	case ACCESS_COUNTER_NOTIFY_BUFFER:
	/*
	 * OS-descriptor memory: RM takes the params' descriptor as what the
	 * caller's descriptor type says -- a kernel array of struct page
	 * pointers (OS_PAGE_ARRAY, for any client), a physical address
	 * (OS_IO_MEMORY, with PeerMappingOverride or CAP_SYS_ADMIN) -- and
	 * nothing asks that a user's value be one the kernel made
	 * (os_desc_mem.c osdescConstruct, osmemdesc.c
	 * osCreateMemFromOsDescriptor, 535 to 595).  CUDA registers host
	 * memory with RM_ALLOC_MEMORY, whose escape builds the page array
	 * itself from pages it pinned (xpu_os_desc_cached); gVisor's
	 * nvproxy, which runs CUDA, passes no RM_ALLOC of the class
	 * (class 35).
	 */
	case NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
	/*
	 * An event buffer looks its params' notificationHandle up as the
	 * caller's OS event of that fd, keeps the caller's value when none
	 * is found (the lookup's status is not checked), and dereferences it
	 * as a kernel pointer when the buffer goes (event_buffer.c
	 * eventbufferConstruct, eventbufferDestruct: osDereferenceObjectCount
	 * decrements and may free what it points at; 535 to 595).  An event
	 * freed by another thread between a check of xpu's and RM's lookup
	 * leaves the same, so the class is not made at all.  CUDA does not
	 * allocate it (gVisor's nvproxy, which runs CUDA and NVML, passes no
	 * such class); FECS and video tracing do (class 36).
	 */
	case NV_EVENT_BUFFER:
	/*
	 * Register memory: all of BAR0, as an ADDR_REGMEM memdesc, for any
	 * client (reg_mem.c, 535 to 595).  A user client can map it neither
	 * to the CPU (mapping_cpu.c: an administrator's client only) nor to a
	 * GPU VA space (virtual_mem.c virtmemMapTo), but a channel takes any
	 * memory object as its error notifier or USERD without asking its
	 * aperture (kernel_channel.c kchannelGetNotifierInfo,
	 * kernel_channel_gv100.c kchannelCreateUserdMemDesc_GV100), and a
	 * REGMEM memdesc there is written as video memory at its BAR0 offset
	 * (kern_gmmu.c kgmmuGetMemAperture: NV_ASSERT, an aperture of 0).
	 * CUDA does not allocate it; gVisor's nvproxy passes it by
	 * RM_ALLOC_MEMORY for graphics only (class 37).
	 */
	case NV01_MEMORY_LOCAL_PRIVILEGED:
	/*
	 * Hardware resources (comptags, ZBC): RM describes them as video or
	 * system memory at its "invalid offset" 0xdead000000000000 and of the
	 * caller's size (hw_resources.c hwresConstruct), and nothing on the
	 * GPU's or the CPU's mapping path asks for a real address; a PTE's
	 * address field keeps the low bits, 0 on the GMMU's version 2 (Volta
	 * to Ada): a mapping of video memory from physical 0 on, other
	 * tenants' (class 37).  Not CUDA's (nvproxy passes neither the class
	 * nor VID_HEAP_CONTROL's HW_ALLOC).
	 */
	case NV01_MEMORY_HW_RESOURCES:
	/*
	 * A host vGPU device registers a guest with the caller's gfid,
	 * vGPU type and VM (kernel_hostvgpudeviceapi.c
	 * kvgpumgrGuestRegister): a vGPU host's plugin's, not a tenant's.
	 */
	case NVA084_KERNEL_HOST_VGPU_DEVICE:
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	/*
	 * Deviceless memory (event buffers' backing) is system memory RM
	 * allocates like NV01_MEMORY_SYSTEM, but RM tells no kernel caller
	 * its pages (it exports no NV003E control): a slice bounded in
	 * system memory cannot follow it, so it is not made there (class 25).
	 */
	case NV01_MEMORY_DEVICELESS:
		return READ_ONCE(slice->host_limit) ? NV_ERR_NOT_SUPPORTED : NV_OK;
	default:
		return NV_OK;
	}
}

long xpu_mem_rm_alloc(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg)
{
	struct nvos21_parameters __user *p21 = (void __user *)arg;
	const struct nv_memory_allocation_params *mp;
	struct xpu_alloc_site site;
	struct xpu_escape e;
	size_t size = _IOC_SIZE(cmd);
	u32 h_class, st, dep;
	u64 want = 0, pinned;
	long ret;

	if (size != sizeof(*p21) && size != sizeof(struct nvos64_parameters))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	xpu_rm_alloc_site(&site, size, false);
	if (!xf->slice) {
		/*
		 * While a GPU is guarded, every allocation is made on xpu's
		 * copy: a class read here and passed on is read again by the
		 * driver, and a thread could make it a device in between
		 * (docs/security.md, class 34).
		 */
		if (xf->gpu || !xpu_mem_device_guarded())
			return xpu_drv.unlocked_ioctl(file, cmd, arg);
		return xpu_mem_unsliced_device(xf, file, cmd, arg, &site);
	}
	/*
	 * A slice's: read once, and the driver reads the same (xpu_escape),
	 * params included for devices and video memory.  NVOS21 and NVOS64
	 * agree up to pAllocParms.
	 */
	ret = xpu_escape_copy(&e, arg, size);
	if (ret)
		return ret;
	h_class = e.u.p21.h_class;
	st = xpu_slice_class_refused(xf->slice, h_class);
	if (!st && !xpu_is_client_class(h_class) &&
	    !xpu_handles_file_client(xf, e.u.p21.h_root))
		st = NV_ERR_INVALID_CLIENT;	/* RM's answer: class 47 */
	if (st)
		return xpu_escape_status(&e, &site, st);
	/*
	 * A GPU file's RM_ALLOC is the driver's to refuse, params unread,
	 * but for events, which RM makes through any file.
	 */
	st = xf->gpu && !xpu_is_event_class(h_class) ? NV_OK :
	     xpu_escape_params(&e, h_class, site.status);
	if (!st && !xf->gpu && h_class == NV01_DEVICE_0)
		st = xpu_mem_device_check(xf, xpu_escape_device_id(&e));
	if (!st && xpu_is_event_class(h_class))
		st = xpu_mem_event_check(xf, &e);
	if (st)
		return xpu_escape_status(&e, &site, st);
	if (!xf->gpu) {
		ret = xpu_mem_creator(xf);
		if (ret > 0)
			return xpu_escape_status(&e, &site, ret);
		if (ret)
			return ret;
	}
	if (xpu_alloc_recorded(h_class, &e, &pinned, &dep))
		return xpu_sched_rm_alloc(xf, file, cmd, &e, h_class, pinned, dep);
	mp = (const void *)e.params;

	/*
	 * RM reads the size and the location from xpu's copy of the params,
	 * so video memory is admitted at the size RM will make, rounded as
	 * RM rounds, and anything else at 0 bytes.  RM's figure is read back
	 * after it all the same, as for any allocation: other classes may
	 * make video memory too.
	 */
	if (h_class == NV01_MEMORY_LOCAL_USER && e.params_size &&
	    !(mp->flags & NVOS32_ALLOC_FLAGS_VIRTUAL) && xpu_is_vidmem(mp->attr)) {
		want = xpu_rm_rounded(mp->size, mp->attr, mp->attr2);
		site.size = offsetof(struct nv_memory_allocation_params, size);
		site.size_in_params = true;
	}

	site.vidmem = h_class == NV01_MEMORY_LOCAL_USER;
	/* system memory by its size in xpu's copy, which RM reads */
	site.host = h_class == NV01_MEMORY_SYSTEM;
	if (site.host && e.params_size)
		site.host_want = PAGE_ALIGN(mp->size);
	site.record = site.vidmem || site.host;
	site.client = xpu_is_client_class(h_class);
	return xpu_admit_call(xf, file, cmd, &e, want, &site);
}

/*
 * RM_ALLOC_OBJECT: an allocation with no parameters (Nv01AllocObject).
 * CUDA does not send it (gVisor's nvproxy, which runs CUDA, does not pass
 * it), and xpu.ko tracks objects only by RM_ALLOC's layout, so a slice's
 * control file refuses it whatever the class: a class read before RM reads
 * it is only a claim.  Unsliced, it is RM's, but for devices (class 2).
 */
long xpu_mem_alloc_object(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	struct nvos05_parameters __user *p = (void __user *)arg;
	struct xpu_escape e;
	bool cheated;
	u32 status;
	long ret;

	if (xf->gpu || _IOC_SIZE(cmd) != sizeof(*p))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	if (xf->slice)
		return xpu_put_status(&p->status, NV_ERR_NOT_SUPPORTED);
	/* as RM_ALLOC: on xpu's copy while a GPU is guarded (class 34) */
	if (!xpu_mem_device_guarded())
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(*p));
	if (ret)
		return ret;
	if (e.u.p05.h_class == NV01_DEVICE_0) {
		status = xpu_mem_device_check(xf, 0);
		if (status)
			return xpu_put_status(&p->status, status);
	}
	if (mutex_lock_killable(&xf->call_lock))
		return -EINTR;
	ret = xpu_escape_call(xf, file, cmd, &e, NULL, &cheated, NULL);
	mutex_unlock(&xf->call_lock);
	if (cheated)
		xpu_unsliced_cheated(xf);
	return ret;
}

/*
 * A slice's free of (hc, hp, ho), made by xpu as the caller once the ledger
 * stands by (ledger.c); the status goes to STATUS in the caller's struct.
 * The slice's figure follows: by what went (xpu_mem_freed) when the ledger
 * found that no other handle held the memory (so no member's figure but
 * the owner's moved), else read anew for every member.  RM_FREE (not
 * VID_HEAP's FREE) of a client takes its OS events too (escape.c).
 */
static long xpu_mem_free_through_ledger(struct xpu_file *xf, struct file *file,
					u32 hc, u32 hp, u32 ho, bool rm_free,
					u32 __user *status)
{
	struct xpu_slice *slice = xf->slice;
	bool settled;
	u64 gone;
	u32 st;

	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	st = xpu_ledger_free(xf, file, hc, hp, ho, &settled, &gone);
	if (settled)
		xpu_mem_freed(slice, xf, gone);
	else
		xpu_refresh_locked(slice);
	/*
	 * whatever it returned: RM is asked what went (sched.c), before any
	 * other call of the slice can make a handle again (a record must
	 * never stand for another object of the handle it names)
	 */
	xpu_sched_rm_free(xf, hc, ho);
	/* a missing handle is NV_OK too: its record, if any, was stale */
	if (st == NV_OK)
		xpu_handles_freed(slice, hc, ho);
	if (st == NV_OK && rm_free && ho == hc)
		xpu_osevents_freed(slice, hc, 0, true);
	/* system memory RM let go of (hostmem.c): xpu's references go too */
	xpu_hostmem_sweep_some(slice, XPU_HOSTMEM_SWEEP_STEP);
	mutex_unlock(&slice->mem_lock);
	return xpu_put_status(status, st);
}

/*
 * An escape of a slice that allocates nothing (VID_HEAP's INFO, a free by
 * offset and the others; RM_MAP_MEMORY), on xpu's copy E as an allocation
 * is: what RM reads is what xpu read.  With REFRESH, the slice's figure is
 * read after, as after any call that may lower it (INFO cannot).
 */
static long xpu_escape_plain_locked(struct xpu_file *xf, struct file *file,
				    unsigned int cmd, struct xpu_escape *e,
				    bool refresh)
{
	struct xpu_slice *slice = xf->slice;
	bool moved;
	long ret;

	lockdep_assert_held(&slice->mem_lock);
	ret = xpu_escape_call(xf, file, cmd, e, NULL, &moved, NULL);
	if (moved)
		xpu_mem_page_lost(xf, false);
	if (refresh)
		xpu_refresh_locked(slice);
	return ret;
}

static long xpu_escape_plain(struct xpu_file *xf, struct file *file,
			     unsigned int cmd, struct xpu_escape *e,
			     bool refresh)
{
	struct xpu_slice *slice = xf->slice;
	long ret;

	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	ret = xpu_escape_plain_locked(xf, file, cmd, e, refresh);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

/*
 * RM_MAP_MEMORY_DMA through a slice's control file goes only into a virtual
 * allocation whose page tables RM pinned when it was made and xpu charged
 * (a recorded pinning NV50_MEMORY_VIRTUAL, docs/memory.md): RM reserved
 * every level of the range then (gvaspaceAlloc, mmuWalkReserveEntries), so
 * a mapping inside it makes no table.  Into anything else -- a lazy range,
 * an NV01_MEMORY_VIRTUAL, whose mapping makes a VA block of its own -- RM
 * would make page tables for each mapping, video memory charged to no one
 * and capped by nothing, which xpu cannot follow: a mapping's status and
 * address come back where the caller's threads can rewrite them, and RM
 * answers no query about one.  So that is refused, NV_ERR_NOT_SUPPORTED,
 * RM never called.  CUDA maps through UVM, never this way (gVisor's nvproxy
 * lets only graphics and video workloads make this call).  The call is made
 * on xpu's copy under mem_lock, which every call that makes or frees a
 * handle of the slice's clients holds, so the allocation RM maps into is
 * the one xpu found recorded.  An unmap makes no table: not hooked.
 */
long xpu_mem_map_dma(struct xpu_file *xf, struct file *file,
		     unsigned int cmd, unsigned long arg)
{
	struct xpu_slice *slice = xf->slice;
	size_t size = _IOC_SIZE(cmd);
	struct xpu_escape e;
	long ret;

	if (!slice || xf->gpu || size != xpu_rm_map_dma_params_size())
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, size);
	if (ret)
		return ret;
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	/* NVOS46 before and from 580 agree up to flags; the status is last */
	if (!xpu_sched_is_pinning_virtual(xf, e.u.p46.h_client, e.u.p46.h_dma))
		ret = xpu_put_status(e.uarg + size - 8, NV_ERR_NOT_SUPPORTED);
	else
		ret = xpu_escape_plain_locked(xf, file, cmd, &e, false);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

/*
 * OS-descriptor memory (host memory the GPU may reach) asked with COHERENCY
 * (NVOS02's or NVOS32's: the values agree): RM pins the caller's range if
 * it can and makes a page array of it, which takes cached or write-back
 * memory only; a range it cannot pin -- a VM_IO or VM_PFNMAP mapping, as
 * xpu's call pages and doorbells are -- it looks up without a reference
 * and takes as I/O memory, uncached only, for a caller with
 * PeerMappingOverride or CAP_SYS_ADMIN (escape.c RmCreateOsDescriptor,
 * os-mlock.c os_lookup_user_io_memory, osmemdesc.c, 535 to 595).  A slice
 * asks the first only: any other coherency could succeed as I/O memory
 * alone, whose pages the GPU would keep after their owner freed them
 * (docs/security.md, class 35).  The coherency is xpu's copy's, which RM
 * reads.
 */
static bool xpu_os_desc_cached(u32 coherency)
{
	return coherency == NVOS32_ATTR_COHERENCY_CACHED ||
	       coherency == NVOS32_ATTR_COHERENCY_WRITE_BACK;
}

long xpu_mem_vid_heap(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg)
{
	struct nvos32_parameters __user *p = (void __user *)arg;
	struct nvos32_parameters *q;
	struct xpu_alloc_site site = {
		.status = offsetof(struct nvos32_parameters, status),
		.h_client = offsetof(struct nvos32_parameters, h_root),
		.h_parent = offsetof(struct nvos32_parameters, h_object_parent),
		.h_object = offsetof(struct nvos32_parameters,
				     data.alloc_size.h_memory),
		/* the same place in the three layouts that allocate */
		.handle_flags = offsetof(struct nvos32_parameters,
					 data.alloc_size.flags),
		.vidmem = true,
		.record = true,
	};
	struct xpu_escape e;
	u32 attr, attr2;
	u64 want, free, limit, used;
	long ret;

	BUILD_BUG_ON(offsetof(struct nvos32_alloc_tiled, flags) !=
		     offsetof(struct nvos32_alloc_size, flags) ||
		     offsetof(struct nvos32_alloc_range, flags) !=
		     offsetof(struct nvos32_alloc_size, flags) ||
		     offsetof(struct nvos32_alloc_tiled, h_memory) !=
		     offsetof(struct nvos32_alloc_size, h_memory) ||
		     offsetof(struct nvos32_alloc_range, h_memory) !=
		     offsetof(struct nvos32_alloc_size, h_memory));
	if (!xf->slice || _IOC_SIZE(cmd) != sizeof(*p))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	/* read once, and the driver reads the same: the function too */
	ret = xpu_escape_copy(&e, arg, sizeof(*p));
	if (ret)
		return ret;
	q = &e.u.p32;
	if (!xpu_handles_file_client(xf, q->h_root))
		return xpu_escape_status(&e, &site, NV_ERR_INVALID_CLIENT);
	switch (q->function) {
	case NVOS32_FUNCTION_ALLOC_SIZE:
	case NVOS32_FUNCTION_ALLOC_SIZE_RANGE:
	case NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT:
		/* The three layouts keep attr and size in different places. */
		if (q->function == NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT) {
			/*
			 * RM ignores size here and takes height * pitch, in
			 * the same arithmetic (rmapi_deprecated_vidheapctrl.c,
			 * _nvos32FunctionAllocTiledPitchHeight).
			 */
			attr = q->data.alloc_tiled.attr;
			attr2 = q->data.alloc_tiled.attr2;
			want = (u64)q->data.alloc_tiled.height *
			       q->data.alloc_tiled.pitch;
		} else if (q->function == NVOS32_FUNCTION_ALLOC_SIZE_RANGE) {
			attr = q->data.alloc_range.attr;
			attr2 = q->data.alloc_range.attr2;
			want = q->data.alloc_range.size;
		} else {
			attr = q->data.alloc_size.attr;
			attr2 = q->data.alloc_size.attr2;
			want = q->data.alloc_size.size;
		}
		/*
		 * A virtual allocation here that pins its page tables would
		 * take video memory xpu keeps no record of: it is made, and
		 * charged, through RM_ALLOC (this is RM's deprecated path,
		 * which CUDA does not send).  The flags are at the same place
		 * in the three layouts, and RM reads xpu's copy.
		 */
		if ((q->data.alloc_size.flags & NVOS32_ALLOC_FLAGS_VIRTUAL) &&
		    nv_virtual_pins_tables(q->data.alloc_size.flags))
			return xpu_escape_status(&e, &site,
						 NV_ERR_NOT_SUPPORTED);
		/*
		 * Read back all the same: the location is a claim too.  Any
		 * other location may be system memory (LOCATION_ANY is RM's
		 * choice): admitted against host_limit at its size, and
		 * recorded if RM made system memory.
		 */
		if (xpu_is_vidmem(attr)) {
			want = xpu_rm_rounded(want, attr, attr2);
			/* RM copies ALLOC_SIZE's size back (docs/memory.md) */
			if (q->function == NVOS32_FUNCTION_ALLOC_SIZE &&
			    !(q->data.alloc_size.flags &
			      NVOS32_ALLOC_FLAGS_VIRTUAL))
				site.size = offsetof(struct nvos32_parameters,
						     data.alloc_size.size);
		} else {
			site.host = true;
			site.host_want = PAGE_ALIGN(want);
			want = 0;
		}
		return xpu_admit_call(xf, file, cmd, &e, want, &site);
	case NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR:
		attr = q->data.alloc_os_desc.attr;
		if (!xpu_os_desc_cached((attr & NVOS32_ATTR_COHERENCY_MASK) >>
					NVOS32_ATTR_COHERENCY_SHIFT))
			return xpu_escape_status(&e, &site,
						 NV_ERR_INSUFFICIENT_PERMISSIONS);
		return xpu_escape_plain(xf, file, cmd, &e, true);
	/*
	 * HW_ALLOC makes NV01_MEMORY_HW_RESOURCES (refused by RM_ALLOC too,
	 * xpu_slice_class_refused); HW_FREE is RM_FREE of any handle of
	 * hRoot, the client itself included (_nvos32FunctionHwFree), by a
	 * door xpu's records of frees do not stand at.  Neither is CUDA's.
	 */
	case NVOS32_FUNCTION_HW_ALLOC:
	case NVOS32_FUNCTION_HW_FREE:
		return xpu_escape_status(&e, &site,
					 NV_ERR_INSUFFICIENT_PERMISSIONS);
	case NVOS32_FUNCTION_INFO:
		ret = xpu_escape_plain(xf, file, cmd, &e, false);
		if (ret || q->status != NV_OK)
			return ret;
		limit = READ_ONCE(xf->slice->memory_limit);
		used = min(READ_ONCE(xf->slice->used), limit);
		free = min(q->free, limit - used);
		if (put_user(limit, &p->total) || put_user(free, &p->free))
			return -EFAULT;
		return 0;
	case NVOS32_FUNCTION_FREE:
		/* RM frees the handle as RM_FREE does when it is provided */
		if (!(q->data.free.flags &
		      NVOS32_FREE_FLAGS_MEMORY_HANDLE_PROVIDED) || xf->gpu)
			return xpu_escape_plain(xf, file, cmd, &e, true);
		return xpu_mem_free_through_ledger(xf, file, q->h_root,
						   q->h_object_parent,
						   q->data.free.h_memory, false,
						   &p->status);
	default:
		return xpu_escape_plain(xf, file, cmd, &e, true);
	}
}

long xpu_mem_rm_free(struct xpu_file *xf, struct file *file,
		     unsigned int cmd, unsigned long arg)
{
	struct nvos00_parameters __user *up = (void __user *)arg;
	struct nvos00_parameters p;

	if (!xf->slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(p))
		return xpu_call_refresh(xf, file, cmd, arg);
	/* read once: what xpu frees is what RM frees */
	if (copy_from_user(&p, up, sizeof(p)))
		return -EFAULT;
	/* the ledger would duplicate another tenant's memory: class 47 */
	if (!xpu_handles_file_client(xf, p.h_root))
		return xpu_put_status(&up->status, NV_ERR_INVALID_CLIENT);
	return xpu_mem_free_through_ledger(xf, file, p.h_root,
					   p.h_object_parent, p.h_object_old,
					   true, &up->status);
}

/*
 * A duplicate makes a handle in one of the slice's clients: under mem_lock,
 * as every call that makes one, so that a free that took a recorded object
 * can tell by its handle whether it went (ledger.c), and on xpu's copy of
 * the caller's struct, as an allocation: the handles RM reads are the ones
 * xpu read, and the new handle -- named by xpu as RM would choose it when
 * the caller leaves it to RM -- comes back where only xpu reads it.  RM
 * duplicates usermode objects, TSGs, virtual allocations and VA spaces
 * (their resCanCopy), and a duplicate keeps what it shares alive after its
 * source goes: what RM says it made is recorded as an allocation of its
 * class would be (sched.c), or undone, as the caller, with the status of
 * the refusal.
 */
long xpu_mem_rm_dup(struct xpu_file *xf, struct file *file,
		    unsigned int cmd, unsigned long arg)
{
	struct xpu_alloc_site site = {
		.status = offsetof(struct nvos55_parameters, status),
		.h_client = offsetof(struct nvos55_parameters, h_client),
		.h_parent = offsetof(struct nvos55_parameters, h_parent),
		.h_object = offsetof(struct nvos55_parameters, h_object),
		.record = true,
	};
	struct xpu_slice *slice = xf->slice;
	const struct nvos55_parameters *q;
	struct xpu_escape e;
	LIST_HEAD(spare);
	bool cheated;
	u32 cls, st;
	long ret, drv_ret;

	if (!slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(*q))
		return xpu_call_refresh(xf, file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(*q));
	if (ret)
		return ret;
	q = &e.u.p55;
	if (!xpu_handles_file_client(xf, q->h_client))
		return xpu_escape_status(&e, &site, NV_ERR_INVALID_CLIENT);
	/* RM writes the status of every dup it is asked for */
	e.u.p55.status = NV_ERR_GENERIC;
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	st = xpu_mem_client_check_locked(xf, q->h_client);
	if (!st)
		st = xpu_handles_reserve(slice, &spare, 1);
	if (st) {
		ret = xpu_escape_status(&e, &site, st);
		goto out;
	}
	ret = xpu_escape_call(xf, file, cmd, &e, &site, &cheated, &drv_ret);
	if (cheated) {
		xpu_mem_page_lost(xf, true);
		goto out;
	}
	/* what RM made: its word where only the driver wrote it, else asked */
	if (xpu_mem_rm_made(xf, &e, &site, drv_ret)) {
		cls = xpu_rm_object_class(q->h_client, q->h_object);
		st = xpu_sched_tracks_class(cls) ?
		     xpu_sched_rm_dup(xf, q->h_client, q->h_object, cls,
				      q->h_client_src, q->h_object_src) : NV_OK;
		if (st) {
			xpu_free_as_caller(xf, file, q->h_client, q->h_parent,
					   q->h_object);
			ret = xpu_escape_status(&e, &site, st);
		} else {
			xpu_handles_add(xf, &spare, q->h_client, q->h_parent,
					q->h_object);
		}
	}
	xpu_refresh_locked(slice);
out:
	xpu_handles_cancel(slice, &spare);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

/*
 * Objects exported to a control file by fd and imported from it
 * (NV0000_CTRL_CMD_OS_UNIX_{EXPORT,IMPORT}_OBJECT(S)_{TO,FROM}_FD), through
 * a slice's file.  RM duplicates an exported object into a client of its
 * own (rmobjexportimport.c), where it lives as long as the fd's file,
 * whoever frees the source, and an import duplicates it again into the
 * caller's client, whatever its class: RM_DUP_OBJECT by another door
 * (class 20).  So an export of an object of a class xpu records (a
 * usermode object, a TSG, a channel, a virtual allocation, a VA space),
 * whose doorbell, context, tables or directories would outlive the record
 * that gates or charges them, is refused, NV_ERR_NOT_SUPPORTED, RM not
 * called; CUDA exports memory only.  What an import makes is asked of RM
 * after the call, whatever the status says, and recorded as a duplicate of
 * no known source (sched.c), or undone as the caller.  Both are made on
 * xpu's copy of NVOS54 and of the params, under mem_lock: the handles RM
 * reads are the ones xpu asked about, and a handle left to RM is named by
 * xpu as RM would choose it.  A plural import that fails frees every
 * handle it names before the failing one, imported or not (os.c), so a
 * handle the client already has is refused before RM is called
 * (NV_ERR_INSERT_DUPLICATE_NAME, which RM answers when it is to be
 * imported into): RM would free it without the ledger.  The questions xpu
 * asks before the call name the client the caller names; if it is not the
 * caller's, RM refuses the call, and the refusal xpu gave instead tells the
 * caller the class or the existence of one handle there, nothing more.
 */
struct xpu_xport {
	u32 psize;
	size_t handles;			/* offset of the handles in the params */
	u32 max;			/* RM's bound on how many */
	size_t count;			/* offset of a u16 count; 0 for one */
	size_t parent;			/* an import's parent; 0: an export */
};

static const struct xpu_xport *xpu_xport_of(u32 ctrl)
{
	static const struct xpu_xport one_out = {
		sizeof(struct nv0000_ctrl_os_unix_export_object_to_fd_params),
		offsetof(struct nv0000_ctrl_os_unix_export_object_to_fd_params,
			 object.h_object), 1, 0, 0 };
	static const struct xpu_xport one_in = {
		sizeof(struct nv0000_ctrl_os_unix_import_object_from_fd_params),
		offsetof(struct nv0000_ctrl_os_unix_import_object_from_fd_params,
			 object.h_object), 1, 0,
		offsetof(struct nv0000_ctrl_os_unix_import_object_from_fd_params,
			 object.h_parent) };
	static const struct xpu_xport many_out = {
		sizeof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params),
		offsetof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params,
			 objects),
		NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS,
		offsetof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params,
			 num_objects), 0 };
	static const struct xpu_xport many_in = {
		sizeof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params),
		offsetof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params,
			 objects),
		NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS,
		offsetof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params,
			 num_objects),
		offsetof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params,
			 h_parent) };

	switch (ctrl) {
	case NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD:
		return &one_out;
	case NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD:
		return &one_in;
	case NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD:
		return &many_out;
	default:
		return &many_in;
	}
}

/*
 * RM_CONTROL P, with its PARAMS, on a page of xpu's (callpage.c), through
 * XF's FILE as the caller: P and PARAMS get what the driver wrote back.
 * *MOVED says the page did not stay where xpu mapped it.
 */
static long xpu_control_on_page(struct xpu_file *xf, struct file *file,
				unsigned int cmd, struct nvos54_parameters *p,
				void *params, bool *moved)
{
	size_t len = XPU_ESCAPE_PARAMS_OFF + p->params_size;
	struct xpu_callpage *cp;
	unsigned long addr;
	u64 uparams = p->params;
	u8 *img;
	long ret;

	*moved = false;
	img = kzalloc(len, GFP_KERNEL);
	if (!img)
		return -ENOMEM;
	memcpy(img, p, sizeof(*p));
	memcpy(img + XPU_ESCAPE_PARAMS_OFF, params, p->params_size);
	cp = xpu_callpage_map(img, len, &addr);
	if (IS_ERR(cp)) {
		kfree(img);
		return PTR_ERR(cp);
	}
	addr += XPU_ESCAPE_PARAMS_OFF;
	xpu_callpage_write(cp, offsetof(struct nvos54_parameters, params),
			   &addr, sizeof(u64));
	addr -= XPU_ESCAPE_PARAMS_OFF;
	ret = xpu_drv.unlocked_ioctl(file, cmd, addr);
	*moved = !xpu_callpage_done(cp, img, len, NULL);
	memcpy(p, img, sizeof(*p));
	p->params = uparams;
	memcpy(params, img + XPU_ESCAPE_PARAMS_OFF, p->params_size);
	kfree(img);
	return ret;
}

/*
 * Before the call: an export's handles are of no class xpu records; an
 * import's are new to the client, those left to RM named by xpu (set in
 * NAMED).  NV_OK or the status to refuse the call with.
 */
static u32 xpu_xport_check(struct xpu_file *xf, u32 hc, u32 *h, u32 n,
			   bool import, unsigned long *named)
{
	unsigned int i, tries;

	for (i = 0; i < n; i++) {
		if (!import) {
			if (h[i] && xpu_sched_tracks_class(xpu_rm_object_class(hc, h[i])))
				return NV_ERR_NOT_SUPPORTED;
			continue;
		}
		if (h[i]) {
			if (xpu_rm_object_class(hc, h[i]))
				return NV_ERR_INSERT_DUPLICATE_NAME;
			continue;
		}
		for (tries = 0; tries < XPU_HANDLE_TRIES && !h[i]; tries++) {
			h[i] = xpu_next_handle(xf);
			if (xpu_rm_object_class(hc, h[i]))
				h[i] = 0;
		}
		if (!h[i])
			return NV_ERR_INSERT_DUPLICATE_NAME;
		__set_bit(i, named);
	}
	return NV_OK;
}

/*
 * After an import of the N handles H under HP of HC: what RM made of a
 * class xpu records is recorded; if one is refused, every one made goes
 * again, as the caller, and the status says why.  A handle xpu NAMED that
 * RM did not make (an empty slot: RM skips it) reads 0 again, as the
 * caller left it.  NV_OK or that status.
 */
static u32 xpu_xport_record(struct xpu_file *xf, struct file *file, u32 hc,
			    u32 hp, u32 *h, u32 n, const unsigned long *named,
			    struct list_head *spare)
{
	DECLARE_BITMAP(made, NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS) = { 0 };
	u32 i, cls, st = NV_OK;

	for (i = 0; i < n && !st; i++) {
		cls = xpu_rm_object_class(hc, h[i]);
		if (cls)
			__set_bit(i, made);
		if (!cls && test_bit(i, named))
			h[i] = 0;
		else if (xpu_sched_tracks_class(cls))
			st = xpu_sched_rm_dup(xf, hc, h[i], cls, 0, 0);
	}
	if (!st) {
		/* what RM made goes on record, asked once above */
		for_each_set_bit(i, made, n)
			xpu_handles_add(xf, spare, hc, hp, h[i]);
		return NV_OK;
	}
	for (i = 0; i < n; i++) {
		if (!h[i] || !xpu_rm_object_class(hc, h[i]))
			continue;
		xpu_free_as_caller(xf, file, hc, hp, h[i]);
		xpu_sched_rm_free(xf, hc, h[i]);
	}
	return st;
}

static long xpu_mem_xport(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg,
			  const struct nvos54_parameters *p0)
{
	struct nvos54_parameters __user *up = (void __user *)arg;
	const struct xpu_xport *x = xpu_xport_of(p0->cmd);
	struct xpu_slice *slice = xf->slice;
	DECLARE_BITMAP(named, NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS) = { 0 };
	struct nvos54_parameters p = *p0;	/* the struct as xpu read it */
	u32 n = 1, hp = 0, st;
	bool moved, import = x->parent;
	LIST_HEAD(spare);
	u8 *params;
	u16 count;
	u32 *h;
	long ret;

	/*
	 * RM checks the client first, the size after; xpu asks RM about the
	 * handles it names with its own privilege (class 47)
	 */
	if (!xpu_handles_file_client(xf, p.h_client))
		return xpu_put_status(&up->status, NV_ERR_INVALID_CLIENT);
	/* a size RM refuses is refused here, the struct unread */
	if (p.params_size != x->psize || !p.params)
		return xpu_put_status(&up->status, NV_ERR_INVALID_ARGUMENT);
	params = memdup_user(u64_to_user_ptr(p.params), x->psize);
	if (IS_ERR(params))
		return xpu_put_status(&up->status, NV_ERR_INVALID_ADDRESS);
	h = (u32 *)(params + x->handles);
	if (x->count) {
		memcpy(&count, params + x->count, sizeof(count));
		n = min_t(u32, count, x->max);
	}
	if (import)
		memcpy(&hp, params + x->parent, sizeof(hp));
	if (mutex_lock_killable(&slice->mem_lock)) {
		kfree(params);
		return -EINTR;
	}
	/* only an import names handles: at most 128 */
	st = xpu_mem_client_check_locked(xf, p.h_client);
	if (!st)
		st = xpu_xport_check(xf, p.h_client, h, n, import, named);
	if (!st && import)
		st = xpu_handles_reserve(slice, &spare, n);
	if (st) {
		ret = xpu_put_status(&up->status, st);
		goto out;
	}
	ret = xpu_control_on_page(xf, file, cmd, &p, params, &moved);
	if (moved) {
		xpu_mem_page_lost(xf, false);
		goto out;
	}
	if (import) {
		/* RM's answer: the handles xpu named, whatever the status says */
		st = xpu_xport_record(xf, file, p.h_client, hp, h, n, named,
				      &spare);
		if (st)
			p.status = st;
		xpu_refresh_locked(slice);
	}
	if (ret == 0 && p.status == NV_OK &&
	    copy_to_user(u64_to_user_ptr(p.params), params, x->psize))
		p.status = NV_ERR_INVALID_ADDRESS;
	if (copy_to_user(up, &p, sizeof(p)))
		ret = -EFAULT;
out:
	xpu_handles_cancel(slice, &spare);
	mutex_unlock(&slice->mem_lock);
	kfree(params);
	return ret;
}

/*
 * RM_ALLOC_CONTEXT_DMA2 (NVOS39) is an RM_ALLOC by another door: RM
 * allocates the class the caller names -- any class, not only a context
 * DMA's -- under the parent of hMemory, with NV_CONTEXT_DMA_ALLOCATION_PARAMS
 * made of the struct's fields as its params (RmDeprecatedAllocContextDma,
 * rmapi_deprecated_misc.c, 535 to 595).  Passed through, it made a
 * usermode object xpu never recorded, whose doorbell mappings were never
 * gated, and objects no bound counts (docs/security.md, class 26).  So a
 * slice's control file makes context DMAs (NV01_CONTEXT_DMA) only this way,
 * on xpu's copy of the struct -- the class RM reads is the one xpu
 * checked -- under mem_lock, as every call that makes a handle of the
 * slice's clients; any other class is refused, NV_ERR_NOT_SUPPORTED, RM
 * not called.  A context DMA holds no memory of its own (a window on
 * hMemory, which it depends on); on an NV01_MEMORY_SYSTEM_DYNAMIC, RM makes
 * an NV01_MEMORY_VIRTUAL range instead, which maps nothing through a slice
 * (xpu_mem_map_dma).  CUDA does not send it (gVisor's nvproxy passes it for
 * graphics only).  A GPU file's is the driver's to refuse.
 */
long xpu_mem_alloc_context_dma(struct xpu_file *xf, struct file *file,
			       unsigned int cmd, unsigned long arg)
{
	/* RM makes it in hObjectParent, the client, under hMemory's parent */
	struct xpu_alloc_site site = {
		.status = offsetof(struct nvos39_parameters, status),
		.h_client = offsetof(struct nvos39_parameters, h_object_parent),
		.h_parent = offsetof(struct nvos39_parameters, h_memory),
		.h_object = offsetof(struct nvos39_parameters, h_object_new),
		.record = true,
	};
	struct nvos39_parameters __user *up = (void __user *)arg;
	struct xpu_slice *slice = xf->slice;
	const struct nvos39_parameters *q;
	struct xpu_escape e;
	LIST_HEAD(spare);
	long ret, drv_ret;
	bool cheated;
	u32 st;

	if (!xf->slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(*up))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(*up));
	if (ret)
		return ret;
	if (e.u.p39.h_class != NV01_CONTEXT_DMA)
		return xpu_put_status(&up->status, NV_ERR_NOT_SUPPORTED);
	if (!xpu_handles_file_client(xf, e.u.p39.h_object_parent))
		return xpu_put_status(&up->status, NV_ERR_INVALID_CLIENT);
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	st = xpu_mem_client_check_locked(xf, e.u.p39.h_object_parent);
	if (!st)
		st = xpu_handles_reserve(slice, &spare, 1);
	if (st) {
		ret = xpu_put_status(&up->status, st);
		goto out;
	}
	/*
	 * xpu names the new object when the caller leaves it to RM, and what
	 * RM made is its word only where the driver alone wrote the page
	 * (class 42); else RM is asked
	 */
	ret = xpu_escape_call(xf, file, cmd, &e, &site, &cheated, &drv_ret);
	if (cheated) {
		xpu_mem_page_lost(xf, true);
		goto out;
	}
	/* the parent is hMemory's, RM's to say */
	q = &e.u.p39;
	if (xpu_mem_rm_made(xf, &e, &site, drv_ret))
		xpu_handles_add(xf, &spare, q->h_object_parent,
				xpu_rm_object_parent(q->h_object_parent,
						     q->h_object_new),
				q->h_object_new);
out:
	xpu_handles_cancel(slice, &spare);
	mutex_unlock(&slice->mem_lock);
	return ret;
}

/*
 * NV_ESC_ALLOC_OS_EVENT and FREE_OS_EVENT through any file of a slice.  RM
 * ties an OS event to (hClient, fd) in one list for the whole driver and
 * checks neither (osapi.c allocate_os_event, free_os_event, 535 to 595):
 * passed through, a tenant made events without bound -- kernel memory
 * charged to no cgroup, and a longer walk under RM's spinlock for every
 * event call of every tenant --, freed another tenant's events by naming
 * its client, and took (client, fd) pairs before their owner did, so that
 * the owner's allocation failed and its RM event objects (NV01_EVENT_OS_EVENT,
 * bound by (hClient, fd): osUserHandleToKernelPtr) would post to the
 * squatter's file (docs/security.md, class 27).  So a slice's call must
 * name a client of the slice's (made through its control files, on xpu's
 * record), NV_ERR_INVALID_CLIENT otherwise, and an allocation must fit
 * max_os_events, NV_ERR_INSUFFICIENT_RESOURCES past it; RM is not called
 * then.  The call is made on xpu's copy under mem_lock (no thread of the
 * caller's renames the client after the check, and a client's free
 * waits), and what RM did is recorded.  RM's status is its word where the
 * caller was alone; else a thread of the caller's may have stored another
 * over it after the driver's copy-back (class 42), and RM's answer is the
 * one it must have given: allocate_os_event refuses only a pair it holds
 * (or when out of memory, which xpu then counts until the pair's free, its
 * client's or its file's: an over-count), free_os_event takes only a pair
 * it holds -- and the pairs of the slice's clients it holds are xpu's
 * records, made under this lock.
 */
long xpu_mem_os_event(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg)
{
	bool alloc = _IOC_NR(cmd) == NV_ESC_ALLOC_OS_EVENT;
	struct xpu_slice *slice = xf->slice;
	struct xpu_osev *rec = NULL;
	struct xpu_escape e;
	bool had, done;
	long ret;
	u32 st;

	if (!slice || _IOC_SIZE(cmd) != sizeof(e.u.osev))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(e.u.osev));
	if (ret)
		return ret;
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	st = xpu_osevents_admit(slice, e.u.osev.h_client, alloc ? &rec : NULL);
	if (st) {
		ret = xpu_put_status(e.uarg + NV_IOCTL_OS_EVENT_STATUS, st);
		goto out;
	}
	had = xpu_osevents_has(slice, e.u.osev.h_client, e.u.osev.fd, NULL);
	ret = xpu_escape_plain_locked(xf, file, cmd, &e, false);
	if (e.sealed && !ret) {
		done = e.u.osev.status == NV_OK;
	} else {
		done = alloc ? !had : had;
		/* a record that was more than RM held: RM's new one is XF's */
		if (alloc && had)
			xpu_osevents_has(slice, e.u.osev.h_client,
					 e.u.osev.fd, xf);
	}
	if (done && alloc) {
		xpu_osevents_add(xf, rec, e.u.osev.h_client, e.u.osev.fd);
		rec = NULL;
	} else if (done) {
		xpu_osevents_freed(slice, e.u.osev.h_client, e.u.osev.fd,
				   false);
	}
out:
	mutex_unlock(&slice->mem_lock);
	kfree(rec);
	return ret;
}

/*
 * The kernel's memory-block size, the one true value of NV_ESC_SYS_PARAMS
 * (what user space reads from /sys/devices/system/memory/block_size_bytes);
 * 0 without memory hotplug, where there are no memory blocks.
 * memory_block_size_bytes() is built with drivers/base/memory.c, under
 * CONFIG_MEMORY_HOTPLUG (CONFIG_MEMORY_HOTPLUG_SPARSE before 5.16, which
 * every architecture with hotplug that the driver supports selected).
 */
static u64 xpu_memblock_size(void)
{
#if defined(CONFIG_MEMORY_HOTPLUG) || defined(CONFIG_MEMORY_HOTPLUG_SPARSE)
	return memory_block_size_bytes();
#else
	return 0;
#endif
}

/*
 * NV_ESC_SYS_PARAMS (control files): the driver takes the memory-block size
 * it onlines coherent GPU memory in (GH200's NUMA memory) from the first
 * opener that sends one, whoever it is, unchecked, and answers -EBUSY to
 * every later value that differs (nv.c, 535 to 595; CUDA's user space sends
 * it on every open).  Passed through, a slice's tenant that came first set
 * a bogus size for the whole host and every honest process's true one was
 * refused (docs/security.md, class 29).  So a slice's call may send only
 * the kernel's own size, or 0 (which sets nothing): anything else is
 * -EINVAL, the driver not called.  The call is made on xpu's copy, so the
 * size the driver reads is the one xpu checked.
 */
long xpu_mem_sys_params(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg)
{
	struct xpu_escape e;
	long ret;
	u64 size;

	if (!xf->slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(e.u.sysp))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(e.u.sysp));
	if (ret)
		return ret;
	size = e.u.sysp.memblock_size;
	if (size && size != xpu_memblock_size())
		return -EINVAL;
	return xpu_escape_plain(xf, file, cmd, &e, false);
}

/*
 * NV_ESC_EXPORT_TO_DMABUF_FD (GPU files): the driver makes a dma-buf of the
 * video memory handles[] names in client hClient, duplicated with kernel
 * privilege into a client of its own, and checks only that the client
 * exists and that the handles are video memory of this GPU
 * (nv-dmabuf.c nv_dma_buf_create, osapi.c RmDmabufVerifyMemHandle, 535 to
 * 595): whose the client is, it never asks.  Passed through, a slice's
 * tenant could export another tenant's memory -- and map it (580's
 * bAllowMmap), or keep it alive and charged to its owner after the owner
 * freed it (docs/security.md, class 28).  So a slice's call must name a
 * client of the slice's, NV_ERR_INVALID_CLIENT otherwise, RM not called;
 * it is made on xpu's copy of the struct (the client RM reads is the one
 * xpu checked), under mem_lock, and RM's answer -- the new fd, the status
 * -- goes back whole, as the driver's copy-back would.  A struct of a size
 * no driver has goes to the driver, which refuses it.
 */
long xpu_mem_export_dmabuf(struct xpu_file *xf, struct file *file,
			   unsigned int cmd, unsigned long arg)
{
	struct xpu_slice *slice = xf->slice;
	size_t size = _IOC_SIZE(cmd);
	struct xpu_callpage *cp;
	unsigned long addr;
	void *copy;
	bool stayed;
	long ret;
	u32 hc;

	if (!slice || !xf->gpu || (size != NV_EXPORT_DMABUF_SIZE_535 &&
				   size != NV_EXPORT_DMABUF_SIZE_570))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	copy = memdup_user((void __user *)arg, size);
	if (IS_ERR(copy))
		return PTR_ERR(copy);
	memcpy(&hc, copy + NV_EXPORT_DMABUF_H_CLIENT, sizeof(hc));
	if (mutex_lock_killable(&slice->mem_lock)) {
		kfree(copy);
		return -EINTR;
	}
	if (!xpu_handles_is_client(slice, hc)) {
		ret = xpu_put_status((u32 __user *)(arg + size - 8),
				     NV_ERR_INVALID_CLIENT);
		goto out;
	}
	cp = xpu_callpage_map(copy, size, &addr);
	if (IS_ERR(cp)) {
		ret = PTR_ERR(cp);
		goto out;
	}
	ret = xpu_drv.unlocked_ioctl(file, cmd, addr);
	stayed = xpu_callpage_done(cp, copy, size, NULL);
	if (!stayed)
		xpu_mem_page_lost(xf, false);
	else if (!ret && copy_to_user((void __user *)arg, copy, size))
		ret = -EFAULT;
out:
	mutex_unlock(&slice->mem_lock);
	kfree(copy);
	return ret;
}

/*
 * RM_ALLOC_MEMORY (NVOS02, RM's deprecated API, on a GPU file) of a slice,
 * made on xpu's copy of the struct, so that the class and size RM reads
 * are the ones xpu read.  NV01_MEMORY_SYSTEM is system memory RM allocates
 * (_rmAllocMemorySystem: limit + 1 bytes, and a CPU mapping by default):
 * admitted against the slice's host_limit, its pages recorded after it,
 * as RM_ALLOC's (docs/security.md, class 25).  RM does not write a handle
 * it chose back into hObjectNew, so xpu names one when the caller names
 * none.  Class 0x40 answers the FB size - 1: the slice's.
 */
long xpu_mem_alloc_memory(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	struct nvos02_with_fd __user *up = (void __user *)arg;
	struct xpu_alloc_site site = {
		.status = offsetof(struct nvos02_with_fd, params.status),
		.h_client = offsetof(struct nvos02_with_fd, params.h_root),
		.h_parent = offsetof(struct nvos02_with_fd, params.h_object_parent),
		.h_object = offsetof(struct nvos02_with_fd, params.h_object_new),
	};
	const struct nvos02_parameters *q;
	struct xpu_escape e;
	long ret;

	if (!xf->slice || _IOC_SIZE(cmd) != sizeof(*up))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	ret = xpu_escape_copy(&e, arg, sizeof(*up));
	if (ret)
		return ret;
	q = &e.u.p02.params;
	if (!xpu_handles_file_client(xf, q->h_root))
		return xpu_escape_status(&e, &site, NV_ERR_INVALID_CLIENT);
	/* every class makes a handle, which xpu names when the caller does not */
	site.record = true;
	/* RM writes the status of every call it is asked for; a refusal not */
	e.u.p02.params.status = NV_ERR_GENERIC;
	if (q->h_class == NV01_MEMORY_SYSTEM_OS_DESCRIPTOR) {
		if (!xpu_os_desc_cached((q->flags &
					 NVOS02_FLAGS_COHERENCY_MASK) >>
					NVOS02_FLAGS_COHERENCY_SHIFT))
			return xpu_escape_status(&e, &site,
					NV_ERR_INSUFFICIENT_PERMISSIONS);
	} else {
		/* the classes RM_ALLOC refuses: register memory by this door */
		u32 st = xpu_slice_class_refused(xf->slice, q->h_class);

		if (st)
			return xpu_escape_status(&e, &site, st);
	}
	if (q->h_class == NV01_MEMORY_SYSTEM) {
		site.host = true;
		site.host_want = q->limit < U64_MAX - PAGE_SIZE ?
				 PAGE_ALIGN(q->limit + 1) : U64_MAX;
	}
	ret = xpu_admit_call(xf, file, cmd, &e, 0, &site);
	if (ret || q->h_class != NV01_MEMORY_LOCAL_USER || q->status != NV_OK)
		return ret;
	if (put_user(READ_ONCE(xf->slice->memory_limit) - 1, &up->params.limit))
		return -EFAULT;
	return 0;
}

/* Rewrite FB info entries in KiB: totals are the limit, frees what is left. */
static void xpu_fb_rewrite(struct xpu_slice *slice,
			   struct nv2080_ctrl_fb_info *e, u32 n)
{
	u64 limit, used, left;
	u32 i;

	/* RM's figure as of the slice's last change (every change refreshes it) */
	limit = READ_ONCE(slice->memory_limit);
	used = min(READ_ONCE(slice->used), limit);
	left = (limit - used) >> 10;
	for (i = 0; i < n; i++) {
		switch (e[i].index) {
		case NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE:
		case NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE:
		case NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE:
		case NV2080_CTRL_FB_INFO_INDEX_MAPPABLE_HEAP_SIZE:
		case NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE:
			e[i].data = min_t(u64, limit >> 10, U32_MAX);
			break;
		case NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE:
		case NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_SIZE_KB:
			e[i].data = min_t(u64, e[i].data, left);
			break;
		}
	}
}

#define XPU_FB_INFO_MAX_LIST	256

/*
 * GPU-id lists (NV0000 GET_ATTACHED_IDS, GET_PROBED_IDS): a sliced client
 * sees its slice's GPU alone, at the head of the list.  ids has n entries;
 * flags, when not NULL, runs alongside (PROBED's gpuFlags).
 */
static void xpu_filter_ids(u32 mine, u32 *ids, u32 *flags, u32 n)
{
	u32 i, keep = 0;

	for (i = 0; i < n; i++) {
		if (ids[i] != mine)
			continue;
		ids[keep] = ids[i];
		if (flags)
			flags[keep] = flags[i];
		keep++;
	}
	for (i = keep; i < n; i++) {
		ids[i] = NV0000_CTRL_GPU_INVALID_ID;
		if (flags)
			flags[i] = 0;
	}
}

static long xpu_rewrite_ids(struct xpu_slice *slice, u32 ctrl,
			    void __user *uparams, u32 psize)
{
	const u32 n = NV0000_CTRL_GPU_MAX_ATTACHED_GPUS;
	u32 *buf;
	long ret = 0;
	bool flags;

	/*
	 * ATTACHED: gpuIds[]. PROBED: gpuIds[], excludedGpuIds[] (256 B up to
	 * 575), then gpuFlags[] from 580 (384 B).
	 */
	if (ctrl == NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS) {
		if (psize != n * sizeof(u32))
			return 0;
		flags = false;
	} else if (psize == 2 * n * sizeof(u32)) {
		flags = false;
	} else if (psize == 3 * n * sizeof(u32)) {
		flags = true;
	} else {
		return 0;
	}
	buf = memdup_user(uparams, psize);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	xpu_filter_ids(slice->gpu->gpu_id, buf, flags ? buf + 2 * n : NULL, n);
	if (copy_to_user(uparams, buf, psize))
		ret = -EFAULT;
	kfree(buf);
	return ret;
}

/*
 * Whether the process NR, as RM named it to the caller, is a member of
 * SLICE: a pid of the caller's namespace from 565, a global one before.
 */
static bool xpu_nr_is_member(struct xpu_slice *slice, u32 nr)
{
	struct pid *pid;
	bool ret;

	if (!nr || nr > PID_MAX_LIMIT)
		return false;
	rcu_read_lock();
	pid = get_pid(xpu_rm_pids_in_caller_ns() ? find_vpid(nr) :
		      find_pid_ns(nr, &init_pid_ns));
	rcu_read_unlock();
	if (!pid)
		return false;
	ret = xpu_mem_is_member(slice, pid);
	put_pid(pid);
	return ret;
}

/*
 * The process lists (NV2080 GPU_GET_PIDS, GPU_GET_PID_INFO): a sliced client
 * sees its slice's processes alone.  RM names processes by global pid up
 * to 560, in the caller's pid namespace from 565 (xpu_nr_is_member); one
 * outside the slice is dropped from GET_PIDS, and GET_PID_INFO
 * answers for it as RM does for a process that has nothing on the GPU.
 */
static void xpu_filter_pids(struct xpu_slice *slice,
			    struct nv2080_ctrl_gpu_get_pids_params *p)
{
	u32 n = min_t(u32, p->pid_tbl_count, NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT);
	u32 i, keep = 0;

	for (i = 0; i < n; i++)
		if (xpu_nr_is_member(slice, p->pid_tbl[i]))
			p->pid_tbl[keep++] = p->pid_tbl[i];
	for (i = keep; i < n; i++)
		p->pid_tbl[i] = 0;
	p->pid_tbl_count = keep;
}

static void xpu_filter_pid_info(struct xpu_slice *slice,
				struct nv2080_ctrl_gpu_get_pid_info_params *p)
{
	u32 n = min_t(u32, p->pid_info_list_count,
		      NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT);
	struct nv2080_ctrl_gpu_pid_info *e;
	u32 i;

	for (i = 0; i < n; i++) {
		e = &p->pid_info_list[i];
		if (e->result == NV_OK && !xpu_nr_is_member(slice, e->pid))
			memset(&e->vid_mem_usage, 0, sizeof(e->vid_mem_usage));
	}
}

static long xpu_rewrite_pids(struct xpu_slice *slice, u32 ctrl,
			     void __user *uparams, u32 psize)
{
	bool get_pids = ctrl == NV2080_CTRL_CMD_GPU_GET_PIDS;
	void *buf;
	long ret = 0;

	if (psize != (get_pids ?
		      sizeof(struct nv2080_ctrl_gpu_get_pids_params) :
		      sizeof(struct nv2080_ctrl_gpu_get_pid_info_params)))
		return 0;
	buf = memdup_user(uparams, psize);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	if (get_pids)
		xpu_filter_pids(slice, buf);
	else
		xpu_filter_pid_info(slice, buf);
	if (copy_to_user(uparams, buf, psize))
		ret = -EFAULT;
	kfree(buf);
	return ret;
}

/*
 * Escapes a slice's files refuse, whatever they name, with
 * NV_ERR_INSUFFICIENT_PERMISSIONS in the struct's status, the driver not
 * called (docs/security.md, class 32).  CUDA sends neither (gVisor's
 * nvproxy passes the first to graphics workloads only, the second to
 * none).
 * - NV_ESC_RM_IDLE_CHANNELS (NVOS30): RM takes the GPU lock of the GPUs of
 *   the channels named, and has the firmware idle them within the caller's
 *   timeout (kernel_idle_channels.c RmIdleChannels, 535 to 595): a gated
 *   slice's channel, whose work cannot run, would keep every other
 *   tenant's RM calls on that GPU waiting for as long.
 * - NV_ESC_RM_ACCESS_REGISTRY (NVOS38): RM reads and writes its registry
 *   for any client that exists, the caller's or not; a client's own handle
 *   names the driver's global registry, which any user may write (only a
 *   device's write asks for an administrator, osapi.c RmAccessRegistry):
 *   keys every GPU's next initialisation reads, the driver's debug level
 *   (ResmanDebugLevel), and a new key's kernel memory for every new name,
 *   kept until the driver unloads.
 */
long xpu_mem_refused_escape(struct xpu_file *xf, struct file *file,
			    unsigned int cmd, unsigned long arg)
{
	bool idle = _IOC_NR(cmd) == NV_ESC_RM_IDLE_CHANNELS;
	size_t size = idle ? NVOS30_SIZE : NVOS38_SIZE;
	size_t status = idle ? NVOS30_STATUS : NVOS38_STATUS;

	/* a size the driver refuses, it refuses */
	if (!xf->slice || _IOC_SIZE(cmd) != size)
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	return xpu_put_status((u32 __user *)(arg + status),
			      NV_ERR_INSUFFICIENT_PERMISSIONS);
}

/*
 * The driver's escape CMD through a slice's file, on xpu's copy DATA of its
 * LEN-byte argument at ARG, on a page only xpu and the driver can write
 * (callpage.c): whatever xpu read of the argument to decide is what the
 * driver reads.  Passed on, the caller's argument is read again by the
 * driver, and a thread of the caller's could rewrite it in between
 * (docs/security.md, classes 31 and 33).  No lock of the slice's is held:
 * what the argument points to, the driver reads from the caller's memory,
 * which a tenant can stall.  The caller's argument and DATA get what the
 * driver wrote back, as from its own copy-back.  A page that did not stay
 * where xpu mapped it ran what the caller chose: as for every call xpu
 * makes on such a page, the file is refused and the caller killed -- and,
 * when the call can MAKE objects (a control: an import), what RM now
 * charges the slice's creators beyond xpu's figure is charged until the
 * slice is destroyed.
 */
long xpu_mem_call_on_copy(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg, void *data,
			  size_t len, bool make)
{
	const char *why = "moved the page of a call xpu made for it";
	struct xpu_slice *slice = xf->slice;
	struct xpu_callpage *cp;
	unsigned long addr;
	long ret;

	cp = xpu_callpage_map(data, len, &addr);
	if (IS_ERR(cp))
		return PTR_ERR(cp);
	ret = xpu_drv.unlocked_ioctl(file, cmd, addr);
	if (!xpu_callpage_done(cp, data, len, NULL)) {
		WRITE_ONCE(xf->poisoned, true);
		if (!make) {
			xpu_mem_kill_caller(xf, why, 0);
		} else if (!mutex_lock_killable(&slice->mem_lock)) {
			xpu_mem_unrecorded(xf, xpu_refresh_creators(slice, xf),
					   why);
			mutex_unlock(&slice->mem_lock);
		}
		return -EPERM;
	}
	if (ret != -EFAULT && copy_to_user((void __user *)arg, data, len))
		ret = -EFAULT;
	return ret;
}

/*
 * Whether share policy POL lets more than RM's default duplicate an
 * object: DUP_OBJECT granted, neither revoked nor only required, to any
 * type but PID (the clients of the process that made the object's client,
 * the default) and NONE -- ALL, a client named, a user's security token, a
 * GPU or partition, the fabric manager.  libcuda's own policies at cuInit
 * are PID policies (docs/nvstub.md, "Share policies").
 */
static bool xpu_share_widens(const struct rs_share_policy *pol)
{
	if (!(pol->access_mask & BIT(RS_ACCESS_DUP_OBJECT)) ||
	    (pol->action & (RS_SHARE_ACTION_FLAG_REVOKE |
			    RS_SHARE_ACTION_FLAG_REQUIRE)))
		return false;
	return pol->type != RS_SHARE_TYPE_NONE &&
	       pol->type != RS_SHARE_TYPE_PID && pol->type < RS_SHARE_TYPE_MAX;
}

/*
 * A slice's sharing of its objects (RM_SHARE, or a client's inherited
 * policy) is made on xpu's copy, on xpu's page: the policy RM reads is the
 * one xpu looked at.  One that widens who may duplicate marks the slice
 * before the call, whatever RM then answers (retain.c: another slice's
 * process may now register its VA space with UVM and retain its channels).
 */
static void xpu_mem_share_seen(struct xpu_slice *slice,
			       const struct rs_share_policy *pol)
{
	if (xpu_share_widens(pol) && !READ_ONCE(slice->shares_widened)) {
		WRITE_ONCE(slice->shares_widened, true);
		/* seen by every retention that names the slice after the call */
		smp_mb();
	}
}

long xpu_mem_rm_share(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg)
{
	struct nvos57_parameters p;

	/* the driver runs RM_SHARE on control files only */
	if (!xf->slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(p))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	if (copy_from_user(&p, (void __user *)arg, sizeof(p)))
		return -EFAULT;
	xpu_mem_share_seen(xf->slice, &p.policy);
	return xpu_mem_call_on_copy(xf, file, cmd, arg, &p, sizeof(p), false);
}

static long xpu_mem_inherited_share(struct xpu_file *xf, struct file *file,
				    unsigned int cmd, unsigned long arg,
				    struct nvos54_parameters *p)
{
	struct nvos54_parameters __user *up = (void __user *)arg;
	struct rs_share_policy pol;
	bool moved;
	long ret;

	/* a size RM refuses is refused here, the params unread */
	if (p->params_size != sizeof(pol) || !p->params)
		return xpu_put_status(&up->status, NV_ERR_INVALID_ARGUMENT);
	if (copy_from_user(&pol, u64_to_user_ptr(p->params), sizeof(pol)))
		return xpu_put_status(&up->status, NV_ERR_INVALID_ADDRESS);
	xpu_mem_share_seen(xf->slice, &pol);
	ret = xpu_control_on_page(xf, file, cmd, p, &pol, &moved);
	if (moved) {	/* it makes nothing: as xpu_mem_call_on_copy */
		xpu_mem_kill_caller(xf, "moved the page of a call xpu made for it",
				    0);
		return -EPERM;
	}
	if (copy_to_user(up, p, sizeof(*p)))
		ret = -EFAULT;
	return ret;
}

long xpu_mem_rm_control(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg)
{
	struct nvos54_parameters __user *up = (void __user *)arg;
	struct nv2080_ctrl_fb_get_info_params v1;
	struct nv2080_ctrl_fb_info *e;
	struct nvos54_parameters p;
	void __user *uparams;
	u32 ctrl, psize, n;
	void __user *ulist;
	long ret;

	/* the driver runs RM_CONTROL on control files only */
	if (!xf->slice || xf->gpu || _IOC_SIZE(cmd) != sizeof(p))
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	/* read once: the driver reads xpu's copy (xpu_mem_call_on_copy) */
	if (copy_from_user(&p, up, sizeof(p)))
		return -EFAULT;
	ctrl = p.cmd;
	uparams = u64_to_user_ptr(p.params);
	psize = p.params_size;
	switch (ctrl) {
	case NV2080_CTRL_CMD_FB_GET_INFO:
	case NV2080_CTRL_CMD_FB_GET_INFO_V2:
	case NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS:
	case NV0000_CTRL_CMD_GPU_GET_PROBED_IDS:
	case NV2080_CTRL_CMD_GPU_GET_PIDS:
	case NV2080_CTRL_CMD_GPU_GET_PID_INFO:
		break;
	case NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS:
		return xpu_sched_rm_control(xf, file, cmd, arg);
	case NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY:
		return xpu_mem_inherited_share(xf, file, cmd, arg, &p);
	case NV0000_CTRL_CMD_IDLE_CHANNELS:
	case NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS:
		/* RM waits on other tenants' behalf under the GPU lock */
		return xpu_put_status(&up->status,
				      NV_ERR_INSUFFICIENT_PERMISSIONS);
	case NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD:
	case NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD:
	case NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD:
	case NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD:
		return xpu_mem_xport(xf, file, cmd, arg, &p);
	default:
		ret = xpu_mem_call_on_copy(xf, file, cmd, arg, &p, sizeof(p),
					   true);
		if (unlikely(READ_ONCE(xf->slice->state) == XPU_GATE_WAIT))
			xpu_sched_reassert(xf->slice);
		return ret;
	}

	/* the filters: on what the caller sees, after the call */
	ret = xpu_mem_call_on_copy(xf, file, cmd, arg, &p, sizeof(p), true);
	if (ret || p.status != NV_OK)
		return ret;
	if (ctrl == NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS ||
	    ctrl == NV0000_CTRL_CMD_GPU_GET_PROBED_IDS)
		return xpu_rewrite_ids(xf->slice, ctrl, uparams, psize);
	if (ctrl == NV2080_CTRL_CMD_GPU_GET_PIDS ||
	    ctrl == NV2080_CTRL_CMD_GPU_GET_PID_INFO)
		return xpu_rewrite_pids(xf->slice, ctrl, uparams, psize);
	if (ctrl == NV2080_CTRL_CMD_FB_GET_INFO) {
		if (psize != sizeof(v1) || copy_from_user(&v1, uparams, sizeof(v1)))
			return 0;
		n = min_t(u32, v1.fb_info_list_size, XPU_FB_INFO_MAX_LIST);
		ulist = u64_to_user_ptr(v1.fb_info_list);
	} else {
		if (psize != xpu_rm_fb_info_v2_size() ||
		    get_user(n, (u32 __user *)uparams))
			return 0;
		n = min_t(u32, n, (psize - sizeof(u32)) / sizeof(*e));
		ulist = uparams + sizeof(u32);
	}
	if (!n)
		return 0;
	e = memdup_user(ulist, n * sizeof(*e));
	if (IS_ERR(e))
		return PTR_ERR(e);
	xpu_fb_rewrite(xf->slice, e, n);
	if (copy_to_user(ulist, e, n * sizeof(*e)))
		ret = -EFAULT;
	kfree(e);
	return ret;
}

/*
 * RM_MAP_MEMORY through a slice's control file, whose fd names the file RM
 * gives the mapping's context to (file.c checks it is none of another
 * slice's).  Made on xpu's copy: the object and the fd RM reads are the
 * ones xpu read, so a thread cannot show xpu one object and the driver
 * another.  The driver looks the fd up itself, and a thread can put another
 * file under the number between xpu's look and the driver's, and the first
 * one back after it.  So for a usermode object of the slice, every GPU file
 * of the slice mmapped while the call runs is a doorbell file
 * (xpu_sched_is_doorbell), and after the call every GPU file of the slice
 * open then is marked (sched.c gates their mmaps), whatever the ioctl
 * returned or the status says: a read-only struct fails the driver's
 * copy-back with -EFAULT after RM made the context, and the status is read
 * where a thread may rewrite it.  An honest file of the slice opened before
 * such a call and mapped during or after it is gated for nothing (its
 * faults wait for the slice's turn), which costs only the slice.  Whether
 * the object is a usermode object is asked of the records under mem_lock,
 * with the call: one made under the handle while the call waited for the
 * lock is seen.
 */
long xpu_mem_map_memory(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg)
{
	struct xpu_slice *other, *slice = xf->slice;
	struct xpu_escape e;
	bool driver_file, uobj;
	u32 hc, hm;
	long ret;
	int fd;

	ret = xpu_escape_copy(&e, arg, sizeof(struct nvos33_with_fd));
	if (ret)
		return ret;
	fd = e.u.p33.fd;
	hc = e.u.p33.params.h_client;
	hm = e.u.p33.params.h_memory;
	other = xpu_file_slice_of_fd(fd, &driver_file);
	if (driver_file && other != xf->slice)
		return -EPERM;
	/*
	 * The records are asked under the lock every call that makes or frees
	 * a handle of the slice holds: a usermode object made under the
	 * handle while this call waited for it is seen.
	 */
	if (mutex_lock_killable(&slice->mem_lock))
		return -EINTR;
	uobj = xpu_sched_is_usermode(xf, hc, hm);
	if (uobj)
		atomic_inc(&slice->uobj_maps);
	ret = xpu_escape_plain_locked(xf, file, cmd, &e, false);
	if (uobj) {
		xpu_file_mark_doorbells(slice);
		/* the marks are seen by whoever sees the count drop */
		smp_mb__before_atomic();
		atomic_dec(&slice->uobj_maps);
	}
	mutex_unlock(&slice->mem_lock);
	return ret;
}
