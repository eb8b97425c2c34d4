// SPDX-License-Identifier: GPL-2.0
/*
 * Slices, and which slice an open belongs to (docs/architecture.md §2):
 * registered slice nodes, then cgroup v2 bindings, else none.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cgroup.h>
#include <linux/ctype.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/kdev_t.h>
#include <linux/path.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "events.h"
#include "file.h"
#include "handles.h"
#include "ledger.h"
#include "mem.h"
#include "nvabi.h"
#include "rmapi.h"
#include "sched.h"
#include "slice.h"
#include "uvm.h"

/* Serialises slices, bindings and GPU settings (the admin ioctls). */
DEFINE_MUTEX(xpu_lock);
struct xpu_gpu xpu_gpus[XPU_MAX_GPUS];
unsigned int xpu_nr_gpus;

/* Under xpu_lock: the live slices, by id; a destroyed slice leaves both. */
static DEFINE_IDR(xpu_slice_ids);
static LIST_HEAD(xpu_slices);
static unsigned int xpu_nr_slices;

#define XPU_MAX_BINDINGS	4096

/*
 * A node or cgroup that names a slice; under xpu_lock.
 *
 * A node binding holds the path it was attached through, not the bare
 * inode: an inode pins neither its mount nor its superblock, and unmounting
 * the filesystem of a bound node (a tmpfs) would free the superblock under
 * it ("Busy inodes after unmount", then a crash at the binding's iput).  With
 * the path held, a plain umount is -EBUSY while the node is bound, and a lazy
 * one keeps the superblock until the binding goes.  Opens are still matched
 * by inode: a bind mount of the node, or a hard link, is the same inode.
 */
struct xpu_binding {
	struct list_head link;
	struct xpu_slice *slice;	/* not counted: unbound before it goes */
	struct path path;		/* node bindings: held with path_get */
	struct inode *inode;		/* node bindings: path's, the key */
	u32 role;
	struct cgroup *cgrp;		/* cgroup bindings: held */
};

static LIST_HEAD(xpu_nodes);
static LIST_HEAD(xpu_cgroups);
static unsigned int xpu_nr_bindings;

struct xpu_gpu *xpu_gpu_by_minor(u32 minor)
{
	unsigned int i;

	for (i = 0; i < xpu_nr_gpus; i++)
		if (xpu_gpus[i].minor == minor)
			return &xpu_gpus[i];
	return NULL;
}

struct xpu_gpu *xpu_gpu_by_id(u32 gpu_id)
{
	unsigned int i;

	for (i = 0; i < xpu_nr_gpus; i++)
		if (xpu_gpus[i].gpu_id == gpu_id)
			return &xpu_gpus[i];
	return NULL;
}

struct xpu_slice *xpu_slice_get(struct xpu_slice *slice)
{
	kref_get(&slice->ref);
	return slice;
}

static void xpu_slice_release(struct kref *ref)
{
	struct xpu_slice *slice = container_of(ref, struct xpu_slice, ref);

	xpu_mem_slice_release(slice);
	xpu_handles_destroy(slice);
	kfree(slice);
}

void xpu_slice_put(struct xpu_slice *slice)
{
	kref_put(&slice->ref, xpu_slice_release);
}

/*
 * What of GPU's memory a new limit may take: neither another slice's limit
 * nor what destroyed slices left kept (memory_orphaned).  Exact under
 * xpu_lock; without it, a figure to decide whether to look at orphans.
 */
static u64 xpu_gpu_memory_room(struct xpu_gpu *gpu)
{
	u64 taken = READ_ONCE(gpu->memory_sliced) +
		    READ_ONCE(gpu->memory_orphaned);

	return gpu->memory_total - min(gpu->memory_total, taken);
}

static struct xpu_slice *xpu_slice_find(u32 id)
{
	lockdep_assert_held(&xpu_lock);
	return idr_find(&xpu_slice_ids, id);
}

/*
 * Names become device-node and cgroup-facing identifiers: a small charset,
 * NUL-terminated inside the field, nothing after the NUL.
 */
static int xpu_name_valid(const u8 *name)
{
	size_t len = strnlen(name, XPU_NAME_LEN);
	size_t i;

	if (len == 0 || len == XPU_NAME_LEN || name[0] == '.' || name[0] == '-')
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (!isalnum(name[i]) && !strchr("_.-", name[i]))
			return -EINVAL;
	for (; i < XPU_NAME_LEN; i++)
		if (name[i])
			return -EINVAL;
	return 0;
}

static int xpu_settings_valid(u64 memory, u32 share, u32 weight, u32 prio)
{
	if (memory < SZ_1M || share > XPU_SHARE_MAX || weight < 1 ||
	    weight > XPU_WEIGHT_MAX || prio > XPU_PRIO_HIGH)
		return -EINVAL;
	return 0;
}

static void xpu_slice_fill(struct xpu_slice *slice, struct xpu_slice_info *out)
{
	u32 argsz = out->argsz, flags = out->flags;

	memset(out, 0, sizeof(*out));
	out->argsz = argsz;
	out->flags = flags;
	out->id = slice->id;
	out->gpu_minor = slice->gpu->minor;
	memcpy(out->name, slice->name, XPU_NAME_LEN);
	out->memory_limit = READ_ONCE(slice->memory_limit);
	out->compute_share = READ_ONCE(slice->share);
	out->weight = READ_ONCE(slice->weight);
	out->priority = READ_ONCE(slice->priority);
	xpu_mem_fill(slice, out);
	xpu_sched_fill(slice, out);
	out->open_files = atomic_read(&slice->open_files);
	out->rm_handles = xpu_handles_count(slice);
	out->os_events = xpu_osevents_count(slice);
}

int xpu_slice_ioc_create(struct xpu_slice_info *arg)
{
	struct xpu_slice *slice, *other;
	struct xpu_gpu *gpu;
	int ret, id;

	if (arg->flags & ~XPU_SLICE_CREATE_FLAGS_ALL)
		return -EINVAL;
	ret = xpu_name_valid(arg->name);
	if (ret)
		return ret;
	ret = xpu_settings_valid(arg->memory_limit, arg->compute_share,
				 arg->weight, arg->priority);
	if (ret)
		return ret;
	slice = kzalloc(sizeof(*slice), GFP_KERNEL);
	if (!slice)
		return -ENOMEM;
	kref_init(&slice->ref);
	mutex_init(&slice->mem_lock);
	spin_lock_init(&slice->members_lock);
	INIT_LIST_HEAD(&slice->members);
	INIT_LIST_HEAD(&slice->held);
	INIT_LIST_HEAD(&slice->heir_of);
	INIT_LIST_HEAD(&slice->hostmem);
	spin_lock_init(&slice->uvm_lock);
	INIT_LIST_HEAD(&slice->uvm_files);
	ret = xpu_handles_init(slice);
	if (ret) {
		kfree(slice);
		return ret;
	}
	memcpy(slice->name, arg->name, XPU_NAME_LEN);
	slice->memory_limit = arg->memory_limit;
	slice->host_limit = arg->host_memory_limit;
	slice->share = arg->compute_share;
	slice->weight = arg->weight;
	slice->priority = arg->priority;
	/* xpu's GPUs are found at its load and stay */
	gpu = xpu_gpu_by_minor(arg->gpu_minor);
	ret = gpu ? xpu_ledger_slice_init(slice, gpu) : -ENODEV;
	if (ret) {
		xpu_handles_destroy(slice);
		kfree(slice);
		return ret;
	}
	/*
	 * What destroyed slices left kept may be free by now: all of it is
	 * looked at when the limit would not fit otherwise (an admin's call),
	 * so that no ENOSPC stands on what is gone.
	 */
	xpu_ledger_orphans_settle(gpu, xpu_gpu_memory_room(gpu) <
				  arg->memory_limit ?
				  UINT_MAX : XPU_LEDGER_REPROBE_STEP);

	mutex_lock(&xpu_lock);
	ret = -EEXIST;
	list_for_each_entry(other, &xpu_slices, link)
		if (!strncmp(other->name, slice->name, XPU_NAME_LEN))
			goto err_unlock;
	ret = -ENOSPC;
	if (xpu_nr_slices >= XPU_MAX_SLICES ||
	    arg->memory_limit > xpu_gpu_memory_room(gpu) ||
	    gpu->share_sliced + arg->compute_share > XPU_SHARE_MAX)
		goto err_unlock;
	id = idr_alloc(&xpu_slice_ids, slice, 0, XPU_MAX_SLICES, GFP_KERNEL);
	if (id < 0) {
		ret = id;
		goto err_unlock;
	}
	slice->id = id;
	slice->gpu = gpu;
	gpu->memory_sliced += slice->memory_limit;
	gpu->share_sliced += slice->share;
	WRITE_ONCE(gpu->nr_slices, gpu->nr_slices + 1);
	xpu_nr_slices++;
	list_add_tail(&slice->link, &xpu_slices);
	xpu_sched_slice_add(slice);
	xpu_slice_fill(slice, arg);
	xpu_event_slice(XPU_EVENT_SLICE_CREATED, slice);
	mutex_unlock(&xpu_lock);
	pr_info("slice %u '%s' created on GPU %u: %llu bytes, share %u/1000\n",
		slice->id, slice->name, gpu->minor, slice->memory_limit,
		slice->share);
	return 0;

err_unlock:
	mutex_unlock(&xpu_lock);
	xpu_ledger_slice_release(slice);
	xpu_handles_destroy(slice);
	kfree(slice);
	return ret;
}

int xpu_slice_ioc_get(struct xpu_slice_info *arg)
{
	struct xpu_slice *slice;
	int ret = -ENOENT;

	if (arg->flags & ~XPU_SLICE_GET_FLAGS_ALL)
		return -EINVAL;
	mutex_lock(&xpu_lock);
	slice = xpu_slice_find(arg->id);
	if (slice) {
		xpu_slice_fill(slice, arg);
		ret = 0;
	}
	mutex_unlock(&xpu_lock);
	return ret;
}

int xpu_slice_ioc_set(struct xpu_slice_info *arg)
{
	u32 flags = arg->flags;
	struct xpu_slice *slice;
	struct xpu_gpu *gpu;
	bool lower = false;
	u64 memory;
	u32 share;
	int ret;

	if (!flags || (flags & ~XPU_SLICE_SET_FLAGS_ALL))
		return -EINVAL;
	mutex_lock(&xpu_lock);
	slice = xpu_slice_find(arg->id);
	if (slice)
		xpu_slice_get(slice);
	mutex_unlock(&xpu_lock);
	if (!slice)
		return -ENOENT;
	/*
	 * A raise that would not fit otherwise looks at every orphan of its
	 * GPU first (as a creation does), outside xpu_lock.
	 */
	if ((flags & XPU_SLICE_SET_MEMORY) &&
	    arg->memory_limit > READ_ONCE(slice->memory_limit) &&
	    arg->memory_limit - READ_ONCE(slice->memory_limit) >
	    xpu_gpu_memory_room(slice->gpu))
		xpu_ledger_orphans_settle(slice->gpu, UINT_MAX);
	/*
	 * A lower limit is checked against RM's figure under the slice's
	 * mem_lock.  A caller of the slice may hold it asleep on its own
	 * page: it is waited for a bounded time (xpu_mem_lock_admin), and
	 * before xpu_lock, which every open and every admin call needs.  A
	 * higher limit waits for nothing.
	 */
again:
	if (lower) {
		ret = xpu_mem_lock_admin(slice);
		if (ret)
			goto out_put;
	}
	mutex_lock(&xpu_lock);
	ret = -ENOENT;
	if (READ_ONCE(slice->dead))
		goto out;
	gpu = slice->gpu;
	memory = flags & XPU_SLICE_SET_MEMORY ? arg->memory_limit : slice->memory_limit;
	share = flags & XPU_SLICE_SET_SHARE ? arg->compute_share : slice->share;
	ret = xpu_settings_valid(memory, share,
				 flags & XPU_SLICE_SET_WEIGHT ? arg->weight : slice->weight,
				 flags & XPU_SLICE_SET_PRIORITY ? arg->priority : slice->priority);
	if (ret)
		goto out;
	ret = -ENOSPC;
	if ((memory > slice->memory_limit &&
	     memory - slice->memory_limit > xpu_gpu_memory_room(gpu)) ||
	    gpu->share_sliced - slice->share + share > XPU_SHARE_MAX)
		goto out;
	/*
	 * A bound on system memory where there was none, or a lower one, is
	 * checked as a lower memory limit is, and before anything changes: a
	 * refused SET changes nothing.
	 */
	if ((flags & XPU_SLICE_SET_HOST_MEMORY) &&
	    xpu_mem_host_limit_lowers(slice, arg->host_memory_limit)) {
		if (!lower) {
			mutex_unlock(&xpu_lock);
			lower = true;
			goto again;
		}
		ret = xpu_mem_host_limit_check(slice, arg->host_memory_limit);
		if (ret)
			goto out;
	}
	if (flags & XPU_SLICE_SET_MEMORY) {
		u64 old = slice->memory_limit;

		if (memory < old && !lower) {
			mutex_unlock(&xpu_lock);
			lower = true;
			goto again;
		}
		ret = xpu_mem_set_limit(slice, memory);
		if (ret)
			goto out;
		gpu->memory_sliced = gpu->memory_sliced - old + memory;
	}
	if (flags & XPU_SLICE_SET_HOST_MEMORY)
		WRITE_ONCE(slice->host_limit, arg->host_memory_limit);
	if (flags & XPU_SLICE_SET_SHARE) {
		gpu->share_sliced = gpu->share_sliced - slice->share + share;
		WRITE_ONCE(slice->share, share);
	}
	if (flags & XPU_SLICE_SET_WEIGHT)
		WRITE_ONCE(slice->weight, arg->weight);
	if (flags & XPU_SLICE_SET_PRIORITY)
		WRITE_ONCE(slice->priority, arg->priority);
	if (flags & (XPU_SLICE_SET_SHARE | XPU_SLICE_SET_WEIGHT |
		     XPU_SLICE_SET_PRIORITY))
		xpu_sched_kick(gpu);	/* within one period */
	ret = 0;
out:
	if (lower)
		mutex_unlock(&slice->mem_lock);
	if (!ret) {
		xpu_slice_fill(slice, arg);
		xpu_event_slice(XPU_EVENT_SLICE_CHANGED, slice);
	}
	mutex_unlock(&xpu_lock);
out_put:
	xpu_slice_put(slice);
	return ret;
}

static void xpu_binding_free(struct xpu_binding *b)
{
	lockdep_assert_held(&xpu_lock);
	list_del(&b->link);
	if (b->inode)
		path_put(&b->path);
	if (b->cgrp)
		cgroup_put(b->cgrp);
	xpu_nr_bindings--;
	kfree(b);
}

/*
 * A destroyed slice's node bindings stay as tombstones: a container may have
 * bind-mounted the node, and an open through it must not become an unsliced
 * open of the GPU.  A tombstone goes once nothing but xpu holds the inode
 * (the node is unlinked, unmounted and closed everywhere): no link names it,
 * no other dentry holds the inode (the one reference is our dentry's), and
 * nothing but the binding holds our dentry (an open file, a bind mount of
 * the node and a cwd all hold the dentry they came through).  Until then it
 * pins the node's filesystem, as a live binding does.
 */
static void xpu_reap_tombstones(void)
{
	struct xpu_binding *b, *tmp;

	lockdep_assert_held(&xpu_lock);
	list_for_each_entry_safe(b, tmp, &xpu_nodes, link)
		if (!b->slice && !b->inode->i_nlink &&
		    atomic_read(&b->inode->i_count) == 1 &&
		    d_count(b->path.dentry) == 1)
			xpu_binding_free(b);
}

static void xpu_slice_unbind_all(struct xpu_slice *slice)
{
	struct xpu_binding *b, *tmp;

	list_for_each_entry(b, &xpu_nodes, link)
		if (b->slice == slice)
			b->slice = NULL;
	list_for_each_entry_safe(b, tmp, &xpu_cgroups, link)
		if (b->slice == slice)
			xpu_binding_free(b);
	xpu_reap_tombstones();
}

/* Take slice out of the namespace; the caller drops the list's reference. */
static void xpu_slice_unlink(struct xpu_slice *slice)
{
	struct xpu_gpu *gpu = slice->gpu;

	lockdep_assert_held(&xpu_lock);
	xpu_slice_unbind_all(slice);
	WRITE_ONCE(slice->dead, true);
	xpu_sched_slice_remove(slice);
	idr_remove(&xpu_slice_ids, slice->id);
	list_del(&slice->link);
	gpu->memory_sliced -= slice->memory_limit;
	gpu->share_sliced -= slice->share;
	WRITE_ONCE(gpu->nr_slices, gpu->nr_slices - 1);
	xpu_nr_slices--;
	WRITE_ONCE(slice->dead, true);
}

int xpu_slice_ioc_destroy(const struct xpu_slice_ref *arg)
{
	struct xpu_slice *slice;
	int ret;

	if (arg->flags & ~XPU_DESTROY_FLAGS_ALL)
		return -EINVAL;
	mutex_lock(&xpu_lock);
	ret = -ENOENT;
	slice = xpu_slice_find(arg->id);
	if (!slice)
		goto out;
	ret = -EBUSY;
	if (atomic_read(&slice->open_files) && !(arg->flags & XPU_DESTROY_FORCE))
		goto out;
	xpu_slice_unlink(slice);
	mutex_unlock(&xpu_lock);
	if (arg->flags & XPU_DESTROY_FORCE)
		xpu_file_kill_openers(slice);
	pr_info("slice %u '%s' destroyed\n", slice->id, slice->name);
	xpu_event_slice(XPU_EVENT_SLICE_DESTROYED, slice);
	xpu_slice_put(slice);
	return 0;
out:
	mutex_unlock(&xpu_lock);
	return ret;
}

int xpu_slice_ioc_list(u32 *ids, u32 room, u32 *count)
{
	struct xpu_slice *slice;
	u32 n = 0;

	mutex_lock(&xpu_lock);
	list_for_each_entry(slice, &xpu_slices, link) {
		if (n < room)
			ids[n] = slice->id;
		n++;
	}
	mutex_unlock(&xpu_lock);
	*count = n;
	return 0;
}

/*
 * Attach or detach the binding of key (an inode or a cgroup) in list to
 * slice: attaching again to the same slice changes nothing, a key bound to
 * another (or a destroyed) slice is -EEXIST, detaching what slice does not
 * hold is -ENOENT.  *nb, filled in by the caller, is linked in (and set to
 * NULL) when a binding is added.
 */
static int xpu_binding_change(struct list_head *list, const void *key,
			      struct xpu_slice *slice, bool attach,
			      struct xpu_binding **nb)
{
	struct xpu_binding *b;

	lockdep_assert_held(&xpu_lock);
	list_for_each_entry(b, list, link) {
		if ((b->inode ? (const void *)b->inode : (const void *)b->cgrp) != key)
			continue;
		if (attach)
			return b->slice == slice ? 0 : -EEXIST;
		if (b->slice != slice)
			return -ENOENT;
		xpu_binding_free(b);
		return 0;
	}
	if (!attach)
		return -ENOENT;
	if (xpu_nr_bindings >= XPU_MAX_BINDINGS)
		return -ENOSPC;
	(*nb)->slice = slice;
	list_add_tail(&(*nb)->link, list);
	xpu_nr_bindings++;
	*nb = NULL;
	return 0;
}

int xpu_slice_ioc_node(const struct xpu_node *arg, bool attach)
{
	struct xpu_binding *nb = NULL;
	struct xpu_slice *slice;
	struct inode *inode;
	struct file *file;
	int ret;

	if (arg->flags || arg->role > XPU_NODE_UVM)
		return -EINVAL;
	file = fget_raw(arg->fd);
	if (!file)
		return -EBADF;
	inode = file_inode(file);
	ret = -ENODEV;
	if (!S_ISCHR(inode->i_mode) ||
	    (arg->role == XPU_NODE_UVM ? inode->i_rdev != xpu_uvm_devt() :
	     imajor(inode) != NV_MAJOR_DEVICE_NUMBER))
		goto out_fput;
	ret = -ENOMEM;
	if (attach) {
		nb = kzalloc(sizeof(*nb), GFP_KERNEL);
		if (!nb)
			goto out_fput;
		nb->path = file->f_path;
		nb->inode = inode;
		nb->role = arg->role;
	}

	mutex_lock(&xpu_lock);
	/* Whatever the answer: a tombstone pins its filesystem until reaped. */
	xpu_reap_tombstones();
	ret = -ENOENT;
	slice = xpu_slice_find(arg->id);
	if (!slice)
		goto out_unlock;
	ret = -EINVAL;
	if (arg->role != XPU_NODE_UVM &&
	    iminor(inode) != (arg->role == XPU_NODE_CTL ? NV_MINOR_CONTROL :
			      slice->gpu->minor))
		goto out_unlock;
	ret = xpu_binding_change(&xpu_nodes, inode, slice, attach, &nb);
	if (attach && !nb)
		path_get(&file->f_path);	/* the node, its mount and superblock */
out_unlock:
	mutex_unlock(&xpu_lock);
	kfree(nb);
out_fput:
	fput(file);
	return ret;
}

int xpu_slice_ioc_cgroup(const struct xpu_cgroup *arg, bool bind)
{
	struct xpu_binding *nb = NULL;
	struct xpu_slice *slice;
	struct cgroup *cgrp;
	int ret;

	if (arg->flags)
		return -EINVAL;
	cgrp = cgroup_get_from_fd(arg->fd);
	if (IS_ERR(cgrp))
		return -EBADF;	/* not a cgroup v2 directory */
	if (bind) {
		nb = kzalloc(sizeof(*nb), GFP_KERNEL);
		if (!nb) {
			cgroup_put(cgrp);
			return -ENOMEM;
		}
		nb->cgrp = cgrp;
	}
	mutex_lock(&xpu_lock);
	ret = -ENOENT;
	slice = xpu_slice_find(arg->id);
	if (slice)
		ret = xpu_binding_change(&xpu_cgroups, cgrp, slice, bind, &nb);
	mutex_unlock(&xpu_lock);
	if (!bind || nb) {
		/* not taken by a new binding: drop our reference */
		cgroup_put(cgrp);
	}
	kfree(nb);
	return ret;
}

/* The nearest bound ancestor of current's cgroup, or NULL; under xpu_lock. */
static struct xpu_slice *xpu_slice_by_cgroup(void)
{
	struct xpu_slice *found = NULL;
	struct xpu_binding *b;
	struct cgroup *cgrp;

	lockdep_assert_held(&xpu_lock);
	if (list_empty(&xpu_cgroups))
		return NULL;
	rcu_read_lock();
	for (cgrp = task_dfl_cgroup(current); cgrp && !found;
	     cgrp = cgroup_parent(cgrp))
		list_for_each_entry(b, &xpu_cgroups, link)
			if (b->cgrp == cgrp) {
				found = b->slice;
				break;
			}
	rcu_read_unlock();
	return found;
}

int xpu_slice_check_alone(struct xpu_slice *slice, struct pid *pid)
{
	struct xpu_slice *other;
	int ret = 0;

	mutex_lock(&xpu_lock);
	list_for_each_entry(other, &xpu_slices, link)
		if (other != slice && other->gpu == slice->gpu &&
		    xpu_mem_is_member(other, pid)) {
			ret = -EPERM;
			break;
		}
	mutex_unlock(&xpu_lock);
	return ret;
}

struct xpu_slice *xpu_slice_for_open(struct inode *inode, struct xpu_gpu *gpu,
				     bool counted)
{
	struct xpu_slice *slice = NULL;
	struct xpu_binding *b;

	mutex_lock(&xpu_lock);
	list_for_each_entry(b, &xpu_nodes, link)
		if (b->inode == inode) {
			if (!b->slice) {
				/* the node of a destroyed slice */
				mutex_unlock(&xpu_lock);
				return ERR_PTR(-ENXIO);
			}
			slice = b->slice;
			break;
		}
	if (!slice) {
		slice = xpu_slice_by_cgroup();
		/* A slice is one GPU: its cgroup does not capture the others. */
		if (slice && gpu && slice->gpu != gpu)
			slice = NULL;
	}
	if (slice) {
		xpu_slice_get(slice);
		/*
		 * counted from here, under the lock a destroy takes: one
		 * without --force refuses while a file is opening too.  A
		 * UVM file is not: nothing would take it back (it holds its
		 * slice by reference until UVM lets it go).
		 */
		if (counted)
			atomic_inc(&slice->open_files);
	} else if (gpu && gpu->mode == XPU_MODE_EXCLUSIVE && gpu->nr_slices &&
		   !capable(CAP_SYS_ADMIN)) {
		slice = ERR_PTR(-EPERM);
	}
	mutex_unlock(&xpu_lock);
	return slice;
}

int xpu_gpu_ioc_set(const struct xpu_gpu_set *arg)
{
	struct xpu_gpu *gpu;
	int ret = -ENODEV;

	if (!arg->flags || (arg->flags & ~XPU_GPU_SET_FLAGS_ALL))
		return -EINVAL;
	if ((arg->flags & XPU_GPU_SET_MODE) && arg->mode > XPU_MODE_EXCLUSIVE)
		return -EINVAL;
	if ((arg->flags & XPU_GPU_SET_POLICY) && arg->policy > XPU_POLICY_NATIVE)
		return -EINVAL;
	if ((arg->flags & XPU_GPU_SET_PERIOD) &&
	    (arg->period_us < XPU_PERIOD_MIN_US || arg->period_us > XPU_PERIOD_MAX_US))
		return -EINVAL;
	mutex_lock(&xpu_lock);
	gpu = xpu_gpu_by_minor(arg->minor);
	if (gpu) {
		if (arg->flags & XPU_GPU_SET_MODE)
			WRITE_ONCE(gpu->mode, arg->mode);
		if (arg->flags & XPU_GPU_SET_POLICY)
			WRITE_ONCE(gpu->policy, arg->policy);
		if (arg->flags & XPU_GPU_SET_PERIOD)
			WRITE_ONCE(gpu->period_us, arg->period_us);
		if (arg->flags & (XPU_GPU_SET_POLICY | XPU_GPU_SET_PERIOD))
			xpu_sched_kick(gpu);
		ret = 0;
	}
	mutex_unlock(&xpu_lock);
	return ret;
}

void xpu_gpu_fill(struct xpu_gpu *gpu, struct xpu_gpu_info *out)
{
	memset(out, 0, sizeof(*out));
	xpu_ledger_orphans_settle(gpu, XPU_LEDGER_REPROBE_STEP);
	mutex_lock(&xpu_lock);
	out->minor = gpu->minor;
	out->mode = gpu->mode;
	out->policy = gpu->policy;
	out->period_us = gpu->period_us;
	out->nr_slices = gpu->nr_slices;
	out->memory_total = gpu->memory_total;
	out->memory_sliced = gpu->memory_sliced;
	out->memory_orphaned = READ_ONCE(gpu->memory_orphaned);
	memcpy(out->uuid, gpu->uuid, sizeof(out->uuid));
	out->channel_ids = xpu_gpu_chan_ids(gpu);
	mutex_unlock(&xpu_lock);
	xpu_rm_driver_version(&out->driver_major, &out->driver_minor,
			      &out->driver_patch);
}

int xpu_slice_init(void)
{
	return 0;
}

void xpu_slice_exit(void)
{
	struct xpu_slice *slice, *tmp;
	struct xpu_binding *b, *btmp;

	mutex_lock(&xpu_lock);

	list_for_each_entry_safe(slice, tmp, &xpu_slices, link) {
		xpu_slice_unlink(slice);
		xpu_slice_put(slice);
	}
	list_for_each_entry_safe(b, btmp, &xpu_nodes, link)
		xpu_binding_free(b);
	mutex_unlock(&xpu_lock);
	idr_destroy(&xpu_slice_ids);
}
