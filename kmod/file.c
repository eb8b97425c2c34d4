// SPDX-License-Identifier: GPL-2.0
/*
 * A record per driver file: which slice it is in, decided once at open.
 * Keyed by the struct file; the driver's private_data is never touched.
 *
 * Also the escapes that decide what a sliced client may see and name: the
 * GPU list (CARD_INFO), the GPUs it attaches, and driver files named by
 * number inside parameters.  Checks of values read from user memory before
 * the driver reads them again are raceable by the caller's other threads;
 * they keep honest clients inside their slice.  The memory limit does not
 * rest on them: see mem.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/kdev_t.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#include "file.h"
#include "handles.h"
#include "ledger.h"
#include "mem.h"
#include "nvabi.h"
#include "sched.h"
#include "slice.h"

/* The records, by file; RCU readers, writers under xpu_files_lock. */
static DEFINE_HASHTABLE(xpu_files, 10);
static DEFINE_SPINLOCK(xpu_files_lock);

struct xpu_file *xpu_file_lookup(struct file *file)
{
	struct xpu_file *xf, *found = NULL;

	rcu_read_lock();
	hash_for_each_possible_rcu(xpu_files, xf, hash, (unsigned long)file)
		if (xf->file == file) {
			found = xf;
			break;
		}
	rcu_read_unlock();
	return found;
}

/*
 * Every GPU file of SLICE open now is marked a doorbell file: its mmaps are
 * gated from now on (sched.c).  A walk of every driver file, made once per
 * RM_MAP_MEMORY of a usermode object (CUDA makes one or a few per context).
 */
void xpu_file_mark_doorbells(struct xpu_slice *slice)
{
	struct xpu_file *xf;
	unsigned int bkt;

	rcu_read_lock();
	hash_for_each_rcu(xpu_files, bkt, xf, hash)
		if (xf->slice == slice && xf->gpu)
			WRITE_ONCE(xf->doorbell, true);
	rcu_read_unlock();
}

int xpu_file_open(struct inode *inode, struct file *file)
{
	struct xpu_slice *slice;
	struct xpu_gpu *gpu = NULL;
	struct xpu_file *xf;
	int ret;

	if (iminor(inode) != NV_MINOR_CONTROL) {
		gpu = xpu_gpu_by_minor(iminor(inode));
		if (!gpu)
			return xpu_drv.open(inode, file);
	}
	/* the opener's memory cgroup pays: a tenant may open many */
	xf = kzalloc(sizeof(*xf), GFP_KERNEL_ACCOUNT);
	if (!xf)
		return -ENOMEM;
	slice = xpu_slice_for_open(inode, gpu, true);
	if (IS_ERR(slice)) {
		ret = PTR_ERR(slice);
		goto err_free;
	}
	if (slice) {
		ret = xpu_mem_join(slice);
		if (ret)
			goto err_put;
	}
	ret = xpu_drv.open(inode, file);
	if (ret)
		goto err_put;

	xf->file = file;
	INIT_LIST_HEAD(&xf->db_link);
	hash_init(xf->memrecs);
	mutex_init(&xf->call_lock);
	INIT_LIST_HEAD(&xf->hnd_clients);
	xf->slice = slice;
	xf->gpu = gpu;
	xf->opener = get_pid(task_tgid(current));
	spin_lock(&xpu_files_lock);
	hash_add_rcu(xpu_files, &xf->hash, (unsigned long)file);
	spin_unlock(&xpu_files_lock);
	/*
	 * A destroy --force marks the slice dead, then signals the openers of
	 * the files it finds: one that did not find this file (not yet on the
	 * table) marked the slice first, which is seen here, after the file
	 * went on.  The file would live on, its doorbells ungated: it goes.
	 */
	if (slice && READ_ONCE(slice->dead)) {
		spin_lock(&xpu_files_lock);
		hash_del_rcu(&xf->hash);
		spin_unlock(&xpu_files_lock);
		xpu_drv.release(inode, file);
		put_pid(xf->opener);
		atomic_dec(&slice->open_files);
		xpu_slice_put(slice);
		kfree_rcu(xf, rcu);
		return -ENXIO;
	}
	return 0;

err_put:
	if (slice) {
		atomic_dec(&slice->open_files);
		xpu_slice_put(slice);
	}
err_free:
	kfree(xf);
	return ret;
}

int xpu_file_release(struct inode *inode, struct file *file)
{
	struct xpu_file *xf = xpu_file_lookup(file);
	int ret;

	/* no longer a doorbell file, and no zap left on its address_space */
	if (xf)
		xpu_sched_file_closing(xf);
	/* a control file's clients go: the ledger stands by their memory */
	if (xf && xf->slice && !xf->gpu)
		ret = xpu_ledger_release(xf, xpu_drv.release, inode, file);
	else
		ret = xpu_drv.release(inode, file);
	if (!xf)
		return ret;
	spin_lock(&xpu_files_lock);
	hash_del_rcu(&xf->hash);
	spin_unlock(&xpu_files_lock);
	if (xf->slice) {
		xpu_sched_file_release(xf);
		/* RM freed the clients made through it */
		xpu_handles_file_release(xf);
		/* Closing a control file freed its clients: read usage anew. */
		if (!xf->gpu) {
			xpu_mem_file_release(xf);
			xpu_mem_file_closed(xf->slice);
		}
		atomic_dec(&xf->slice->open_files);
		xpu_slice_put(xf->slice);
	}
	xpu_callpages_release();
	put_pid(xf->opener);
	kfree_rcu(xf, rcu);
	return ret;
}

/*
 * destroy --force: SIGKILL the processes that opened the slice's files still
 * open.  (A process handed such a file over a socket keeps using it, still
 * counted against the destroyed slice, until it closes it.)  Under the
 * files' lock, not RCU's: a release puts its opener's pid once its record
 * is off the table, and the last put frees the pid at once.
 */
void xpu_file_kill_openers(struct xpu_slice *slice)
{
	struct xpu_file *xf;
	int bkt;

	spin_lock(&xpu_files_lock);
	hash_for_each(xpu_files, bkt, xf, hash)
		if (xf->slice == slice)
			kill_pid(xf->opener, SIGKILL, 1);
	spin_unlock(&xpu_files_lock);
}

void xpu_file_exit(void)
{
	struct hlist_node *tmp;
	struct xpu_file *xf;
	int bkt;

	/* The hooks are gone and drained: nobody looks records up any more. */
	hash_for_each_safe(xpu_files, bkt, tmp, xf, hash) {
		hash_del(&xf->hash);
		if (xf->slice) {
			xpu_sched_file_closing(xf);
			xpu_sched_file_release(xf);
			xpu_handles_file_release(xf);
			if (!xf->gpu) {
				xpu_mem_file_release(xf);
				xpu_ledger_file_exit(xf);
			}
			atomic_dec(&xf->slice->open_files);
			xpu_slice_put(xf->slice);
		}
		put_pid(xf->opener);
		kfree(xf);
	}
}

struct xpu_slice *xpu_file_slice_of_fd(int fd, bool *is_driver_file)
{
	struct xpu_slice *slice = NULL;
	struct xpu_file *xf;
	struct file *f;

	*is_driver_file = false;
	f = fget(fd);
	if (!f)
		return NULL;
	xf = xpu_file_lookup(f);
	if (xf) {
		*is_driver_file = true;
		slice = xf->slice;
	}
	fput(f);
	return slice;
}

static long xpu_forward(struct file *file, unsigned int cmd, unsigned long arg)
{
	return xpu_drv.unlocked_ioctl(file, cmd, arg);
}

/* A sliced client sees only its slice's GPU, as the first entry. */
long xpu_file_card_info(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg)
{
	struct nv_ioctl_card_info *ci;
	size_t size = _IOC_SIZE(cmd), n, i, keep = 0;
	long ret;

	ret = xpu_forward(file, cmd, arg);
	if (ret || !xf->slice || size < sizeof(*ci))
		return ret;
	n = size / sizeof(*ci);
	ci = memdup_user((void __user *)arg, n * sizeof(*ci));
	if (IS_ERR(ci))
		return PTR_ERR(ci);
	for (i = 0; i < n; i++) {
		if (ci[i].valid && ci[i].minor_number == xf->slice->gpu->minor) {
			if (i != keep)
				ci[keep] = ci[i];
			keep++;
		}
	}
	memset(&ci[keep], 0, (n - keep) * sizeof(*ci));
	if (copy_to_user((void __user *)arg, ci, n * sizeof(*ci)))
		ret = -EFAULT;
	kfree(ci);
	return ret;
}

/*
 * A file may be registered only to a control file of its own slice, and a
 * control file of a slice not at all: RM would then make the clients created
 * through it the other file's, outliving it, and xpu keeps the processes that
 * make a slice's clients counted for as long as the file they made them
 * through (mem.c).  CUDA and other clients register GPU files only.  A
 * slice's call is made on xpu's copy of the number (xpu_mem_call_on_copy); the
 * driver looks the number up again, and a thread can put another file
 * under it in between (docs/security.md, "What is left").
 */
long xpu_file_register_fd(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	struct xpu_slice *other;
	bool driver_file;
	int ctl_fd;

	if (xf->slice && !xf->gpu)
		return -EPERM;

	if (_IOC_SIZE(cmd) == sizeof(ctl_fd)) {
		if (get_user(ctl_fd, (int __user *)arg))
			return -EFAULT;
		other = xpu_file_slice_of_fd(ctl_fd, &driver_file);
		if (driver_file && other != xf->slice)
			return -EPERM;
		if (xf->slice)
			return xpu_mem_call_on_copy(xf, file, cmd, arg,
						    &ctl_fd, sizeof(ctl_fd),
						    false);
	}
	return xpu_forward(file, cmd, arg);
}

/*
 * A sliced control file may attach its slice's GPU only: the driver opens
 * every GPU attached, and holds it open as long as the file (nv.c
 * nvidia_dev_get), which would keep another tenant's GPU from a reset or a
 * change of mode.  The call is made on xpu's copy of the ids
 * (xpu_mem_call_on_copy), at most a page of them (CUDA sends a few), so the ids
 * the driver opens are the ones xpu checked.
 */
long xpu_file_attach_gpus(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg)
{
	size_t size = _IOC_SIZE(cmd), i;
	u32 *ids;
	long ret = 0;

	if (!xf->slice || !size || size % sizeof(u32))
		return xpu_forward(file, cmd, arg);
	if (size > PAGE_SIZE)
		return -EINVAL;
	ids = memdup_user((void __user *)arg, size);
	if (IS_ERR(ids))
		return PTR_ERR(ids);
	for (i = 0; i < size / sizeof(u32); i++)
		if (ids[i] && ids[i] != xf->slice->gpu->gpu_id)
			ret = -EINVAL;	/* as the driver answers an unknown id */
	if (!ret)
		ret = xpu_mem_call_on_copy(xf, file, cmd, arg, ids, size,
					   false);
	kfree(ids);
	return ret;
}

/*
 * IOCTL_XFER_CMD carries {cmd, size, ptr} for arguments too big for the
 * ioctl number.  For a sliced file xpu reads it once and hands the driver
 * the inner command directly, so that the driver cannot read a different
 * inner command than the one xpu acted on.  So for an unsliced file while
 * a GPU is guarded: its RM_ALLOC and RM_ALLOC_OBJECT are looked at then
 * (mem.c, classes 2 and 34), and wrapped they would not be.
 */
long xpu_file_xfer(struct xpu_file *xf, struct file *file,
		   unsigned int cmd, unsigned long arg)
{
	struct nv_ioctl_xfer x;

	if ((!xf->slice && !xpu_mem_device_guarded()) ||
	    _IOC_SIZE(cmd) != sizeof(x))
		return xpu_forward(file, cmd, arg);
	if (copy_from_user(&x, (void __user *)arg, sizeof(x)))
		return -EFAULT;
	if (x.cmd == NV_ESC_IOCTL_XFER_CMD || x.cmd > _IOC_NRMASK ||
	    x.size > _IOC_SIZEMASK)
		return -EINVAL;
	return xpu_dispatch(file, _IOC(_IOC_READ | _IOC_WRITE, NV_IOCTL_MAGIC,
				      x.cmd, x.size), (unsigned long)x.ptr);
}

/*
 * RM_MAP_MEMORY names a file by number: it must be of the caller's slice.
 * A slice's call is made on xpu's copy of the struct (mem.c), so the number
 * checked is the one the driver reads.
 */
long xpu_file_fd_field(struct xpu_file *xf, struct file *file,
		       unsigned int cmd, unsigned long arg)
{
	struct nvos33_with_fd __user *p = (void __user *)arg;
	struct xpu_slice *other;
	bool driver_file;
	int fd;

	if (_IOC_SIZE(cmd) != sizeof(*p))
		return xpu_forward(file, cmd, arg);
	if (xf->slice)
		return xpu_mem_map_memory(xf, file, cmd, arg);
	if (get_user(fd, &p->fd))
		return -EFAULT;
	other = xpu_file_slice_of_fd(fd, &driver_file);
	if (driver_file && other)
		return -EPERM;
	return xpu_forward(file, cmd, arg);
}
