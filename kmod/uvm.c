// SPDX-License-Identifier: GPL-2.0
/*
 * UVM files a slice opens, and what UVM may retain of its channels
 * (docs/security.md, class 39).
 *
 * UVM_REGISTER_CHANNEL has RM retain a channel for UVM: its TSG duplicated
 * into UVM's session client (the GR context stays), a UVM_CHANNEL_RETAINER
 * (the channel id and the instance block stay), until UVM lets go --
 * UVM_UNREGISTER_CHANNEL, the VA space's or GPU's unregistration, or the UVM
 * file's release.  RM tells a kernel client nothing of it, and UVM's file
 * operations are const and checked by identity (f_op == &uvm_fops), so xpu
 * cannot wrap them.  What xpu can see is the file itself:
 *
 * - The slice's UVM node is xpu's misc device "xpu-uvm" (bound to a slice
 *   like its GPU nodes, XPU_NODE_UVM, or opened by a task of a bound
 *   cgroup).  Its open hands the file to UVM as chrdev_open does: UVM's own
 *   file operations (found by opening uvm_node once, from a work item, so
 *   in the host's mount namespace) replace xpu's, and UVM's open makes the
 *   file.  The tenant holds a genuine UVM file; nothing of xpu is in its
 *   path after the open.
 * - UVM's own node opens the same way: the character device UVM
 *   registered (its data, writable, unlike its file operations) is given
 *   xpu's open when uvm_node is found -- at load, at a cgroup's binding,
 *   at an open of xpu-uvm -- so a task of a bound cgroup that opens the
 *   driver's /dev/nvidia-uvm gets a UVM file of its slice too.
 * - xpu keeps a reference to each such file of a slice.  When xpu's is the
 *   only one left (no descriptor, mapping or message in flight holds it,
 *   and none can be made again: a reference is only copied from one),
 *   xpu lets it go, synchronously, from its work item: UVM's release runs,
 *   and everything UVM retained through that file is back with RM.
 * - RM's retention needs the registration to come from the client's
 *   creator (RM's share policy on the TSG's duplicate), through a UVM file
 *   open at the time, so it cannot outlive every UVM file open when the
 *   channel or TSG was freed.  The charge of a channel or TSG of the slice
 *   freed while any of the slice's UVM files was open stays (rec_bytes,
 *   and the count against max_records), pinned by the newest of them, and
 *   moves to the next older file when that one goes; with no older file
 *   left, it is given back.
 *
 * Since session 51 the pinning by files is the fallback: where xpu sees
 * UVM's retentions themselves (retain.c, its probes on the driver), a
 * freed channel's or TSG's charge is pinned to its retention instead, and
 * no file pins anything.  What the files do not see: a UVM file opened
 * through another slice's node, or by a process outside every slice, and
 * passed in; and a UVM file opened before xpu found UVM (UVM loaded after
 * xpu and first opened before any cgroup's binding since; docs/security.md,
 * class 39).  The containers xpud makes get the slice's UVM node in place
 * of /dev/nvidia-uvm either way.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cdev.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "hook.h"
#include "retain.h"
#include "sched.h"
#include "slice.h"
#include "uvm.h"
#include "xpu.h"

static char *uvm_node = "/dev/nvidia-uvm";
module_param(uvm_node, charp, 0444);
MODULE_PARM_DESC(uvm_node,
		 "the host's UVM device node, whose file operations a slice's UVM node opens with");

/* Held UVM files a slice may have at once (the tenant's and closed ones). */
static unsigned int max_uvm_files = 1024;
static struct xpu_uint_range max_uvm_files_range =
	XPU_UINT_RANGE(max_uvm_files, 1, 65536);
module_param_cb(max_uvm_files, &xpu_uint_range_ops, &max_uvm_files_range, 0644);
MODULE_PARM_DESC(max_uvm_files,
		 "UVM files one slice may hold open through its UVM node (1..65536)");

/* How often held files are looked at while there are any. */
#define XPU_UVM_SWEEP_MS	50

struct xpu_uvm_file {
	struct list_head link;		/* in slice->uvm_files, oldest first */
	struct list_head all;		/* in xpu_uvm_all */
	struct file *file;		/* xpu's reference */
	struct xpu_slice *slice;	/* a reference */
	/* the charge it pins: channels and TSGs freed while it was newest */
	u64 bytes;
	u32 chans, tsgs;
};

/* UVM's file operations, with a reference on their module; under the mutex */
static DEFINE_MUTEX(xpu_uvm_fops_lock);
static const struct file_operations *xpu_uvm_fops;

/*
 * UVM's own node, interposed on at its open: the character device UVM
 * registered for it (writable data of UVM's module, unlike its file
 * operations) opens through xpu's table, whose open is xpu_uvm_open(),
 * so a task of a bound cgroup that opens the driver's own /dev/nvidia-uvm
 * is seen as one that opens its slice's UVM node.  Set once, with
 * xpu_uvm_fops, under the mutex; put back at unload.
 */
static struct cdev *xpu_uvm_cdev;
static dev_t xpu_uvm_rdev;
static bool xpu_uvm_interposed;
module_param_named(uvm_interposed, xpu_uvm_interposed, bool, 0444);
MODULE_PARM_DESC(uvm_interposed,
		 "whether opens of UVM's own node (uvm_node) pass through xpu, so that bound cgroups' UVM files are their slices' (read only)");

static LIST_HEAD(xpu_uvm_all);
static DEFINE_SPINLOCK(xpu_uvm_all_lock);
static void xpu_uvm_sweep(struct work_struct *work);
static DECLARE_DELAYED_WORK(xpu_uvm_sweep_work, xpu_uvm_sweep);
static bool xpu_uvm_exiting;

struct xpu_uvm_find {
	struct work_struct work;
	const struct file_operations *fops;
	struct cdev *cdev;		/* UVM's, when it is as expected */
	dev_t rdev;
	int err;
};

static const struct file_operations xpu_uvm_node_fops;
static const struct file_operations xpu_uvm_cdev_fops;

/* From a work item: the host's filesystem, not the opener's. */
static void xpu_uvm_find_fn(struct work_struct *work)
{
	struct xpu_uvm_find *f = container_of(work, struct xpu_uvm_find, work);
	const struct file_operations *fops;
	struct file *file;
	struct inode *inode;
	struct cdev *cdev;
	struct path path;
	dev_t rdev;

	/* never a node of xpu-uvm's: its open would wait on this one */
	f->err = kern_path(uvm_node, LOOKUP_FOLLOW, &path);
	if (f->err)
		return;
	rdev = d_backing_inode(path.dentry)->i_rdev;
	path_put(&path);
	f->err = -ELOOP;
	if (rdev == xpu_uvm_devt())
		return;
	file = filp_open(uvm_node, O_RDWR | O_CLOEXEC, 0);
	if (IS_ERR(file)) {
		f->err = PTR_ERR(file);
		return;
	}
	fops = file->f_op;
	inode = file_inode(file);
	f->err = -ENODEV;
	/*
	 * a character device of another driver that makes its files at open
	 * (never the NVIDIA driver's own nodes)
	 */
	if (S_ISCHR(inode->i_mode) && fops->open &&
	    fops != &xpu_uvm_node_fops && fops != &xpu_uvm_cdev_fops &&
	    fops->owner != THIS_MODULE && !xpu_hook_is_driver(fops) &&
	    try_module_get(fops->owner)) {
		f->fops = fops;
		f->err = 0;
		/*
		 * The device chrdev_open() found for the node (set on the
		 * inode by that open): UVM's own, opening with these very
		 * operations, in its module's data.
		 */
		cdev = inode->i_cdev;
		if (cdev && cdev->ops == fops && cdev->owner == fops->owner &&
		    within_module((unsigned long)cdev, fops->owner)) {
			f->cdev = cdev;
			f->rdev = inode->i_rdev;
		}
	}
	fput(file);
}

/*
 * UVM's file operations, with a reference on its module for the caller;
 * found once (QUIET: not being there yet is no news), and UVM's own node
 * interposed on then.
 */
static const struct file_operations *xpu_uvm_fops_get(bool quiet)
{
	const struct file_operations *fops;
	struct xpu_uvm_find f = { .err = -ENODEV };

	/* found once and kept until unload: every UVM open after needs no lock */
	fops = READ_ONCE(xpu_uvm_fops);
	if (fops)
		return fops_get(fops);
	mutex_lock(&xpu_uvm_fops_lock);
	if (!xpu_uvm_fops) {
		INIT_WORK_ONSTACK(&f.work, xpu_uvm_find_fn);
		queue_work(system_unbound_wq, &f.work);
		flush_work(&f.work);
		destroy_work_on_stack(&f.work);
		if (f.err && !quiet)
			pr_warn_ratelimited("%s: %d: no UVM to open a slice's UVM file with\n",
					    uvm_node, f.err);
		if (!f.err)
			WRITE_ONCE(xpu_uvm_fops, f.fops);
		if (!f.err && f.cdev) {
			/*
			 * One aligned pointer store: chrdev_open() reads the
			 * old table or xpu's, and takes a reference on the
			 * module of the one it read.
			 */
			xpu_uvm_cdev = f.cdev;
			xpu_uvm_rdev = f.rdev;
			/* what xpu_uvm_cdev_open() reads, before its table */
			smp_wmb();
			WRITE_ONCE(f.cdev->ops, &xpu_uvm_cdev_fops);
			WRITE_ONCE(xpu_uvm_interposed, true);
			pr_info("interposed on the open of %s (%u:%u, %s)\n",
				uvm_node, MAJOR(f.rdev), MINOR(f.rdev),
				module_name(f.fops->owner));
		} else if (!f.err) {
			pr_warn("%s: not a character device xpu can interpose on; UVM files of bound cgroups' tasks opened there are not their slices'\n",
				uvm_node);
		}
	}
	fops = fops_get(xpu_uvm_fops);
	mutex_unlock(&xpu_uvm_fops_lock);
	return fops;
}

/*
 * Interpose on UVM's own node if it is there now and was not before: at
 * load, and when a cgroup is bound (UVM is loaded, and its node made, at
 * a task's first use: nvidia-modprobe -u).
 */
void xpu_uvm_interpose(void)
{
	const struct file_operations *fops = xpu_uvm_fops_get(true);

	if (fops)
		fops_put(fops);
}

static int xpu_uvm_open(struct inode *inode, struct file *file)
{
	const struct file_operations *fops;
	struct xpu_uvm_file *uf = NULL;
	struct xpu_slice *slice;
	int ret;

	slice = xpu_slice_for_open(inode, NULL, false);
	if (IS_ERR(slice))
		return PTR_ERR(slice);
	ret = -ENOMEM;
	if (slice) {
		uf = kzalloc(sizeof(*uf), GFP_KERNEL_ACCOUNT);
		if (!uf)
			goto err_put;
		/* a place among the slice's held files, taken now */
		ret = -EMFILE;
		spin_lock(&slice->uvm_lock);
		if (slice->nr_uvm_files < READ_ONCE(max_uvm_files)) {
			slice->nr_uvm_files++;
			ret = 0;
		}
		spin_unlock(&slice->uvm_lock);
		if (ret) {
			pr_warn_ratelimited("slice %u: pid %d: the slice holds %u UVM files; refused\n",
					    slice->id, task_tgid_nr(current),
					    READ_ONCE(max_uvm_files));
			goto err_put;
		}
	}
	ret = -ENODEV;
	fops = xpu_uvm_fops_get(false);
	if (!fops)
		goto err_place;
	/* UVM's open makes the file */
	ret = fops->open(inode, file);
	if (ret) {
		fops_put(fops);
		goto err_place;
	}
	if (slice) {
		uf->file = get_file(file);
		uf->slice = slice;
		spin_lock(&slice->uvm_lock);
		list_add_tail(&uf->link, &slice->uvm_files);
		spin_unlock(&slice->uvm_lock);
		spin_lock(&xpu_uvm_all_lock);
		list_add_tail(&uf->all, &xpu_uvm_all);
		if (!xpu_uvm_exiting)
			mod_delayed_work(system_wq, &xpu_uvm_sweep_work,
					 msecs_to_jiffies(XPU_UVM_SWEEP_MS));
		spin_unlock(&xpu_uvm_all_lock);
	}
	/*
	 * Last, as chrdev_open() does: UVM's file operations replace xpu's
	 * (putting the module reference the open took on xpu), so the file
	 * is UVM's, f_op included.  A failure of the open after this (the
	 * VFS's O_DIRECT check) releases it through UVM's own operations.
	 */
	replace_fops(file, fops);
	return 0;

err_place:
	if (slice) {
		spin_lock(&slice->uvm_lock);
		slice->nr_uvm_files--;
		spin_unlock(&slice->uvm_lock);
	}
err_put:
	kfree(uf);
	if (slice)
		xpu_slice_put(slice);
	return ret;
}

/*
 * The charge of a channel or TSG of SLICE given back now (CHARGE bytes,
 * KIND): kept instead, pinned by the slice's newest UVM file, when it has
 * any.  Where xpu does not see UVM's retentions exactly (retain.c).  Under
 * sched's list_lock.
 */
bool xpu_uvm_keep(struct xpu_slice *slice, int kind, u64 charge)
{
	struct xpu_uvm_file *newest;
	bool kept = false;

	if (kind != XPU_REC_CHAN && kind != XPU_REC_TSG)
		return false;
	spin_lock(&slice->uvm_lock);
	if (!list_empty(&slice->uvm_files)) {
		newest = list_last_entry(&slice->uvm_files,
					 struct xpu_uvm_file, link);
		newest->bytes += charge;
		slice->uvm_bytes += charge;
		if (kind == XPU_REC_CHAN) {
			newest->chans++;
			WRITE_ONCE(slice->uvm_chans, slice->uvm_chans + 1);
		} else {
			newest->tsgs++;
			WRITE_ONCE(slice->uvm_tsgs, slice->uvm_tsgs + 1);
		}
		kept = true;
	}
	spin_unlock(&slice->uvm_lock);
	return kept;
}

/* Records of KIND the slice's UVM files keep charged. */
u32 xpu_uvm_kept(struct xpu_slice *slice, int kind)
{
	if (kind == XPU_REC_CHAN)
		return READ_ONCE(slice->uvm_chans);
	if (kind == XPU_REC_TSG)
		return READ_ONCE(slice->uvm_tsgs);
	return 0;
}

void xpu_uvm_fill(struct xpu_slice *slice, struct xpu_slice_info *out)
{
	spin_lock(&slice->uvm_lock);
	out->uvm_files = slice->nr_uvm_files;
	out->uvm_channels = slice->uvm_chans;
	out->uvm_tsgs = slice->uvm_tsgs;
	out->uvm_retained = slice->uvm_bytes;
	spin_unlock(&slice->uvm_lock);
}

/*
 * UF is off the lists and its file released: its charge moves to the next
 * older file of its slice, or, with none, is given back.
 */
static void xpu_uvm_file_gone(struct xpu_uvm_file *uf)
{
	struct xpu_slice *slice = uf->slice;
	struct xpu_uvm_file *older = NULL, *o;
	u64 back = 0;

	spin_lock(&slice->uvm_lock);
	list_for_each_entry(o, &slice->uvm_files, link) {
		if (o == uf)
			break;
		older = o;
	}
	list_del(&uf->link);
	slice->nr_uvm_files--;
	if (older) {
		older->bytes += uf->bytes;
		older->chans += uf->chans;
		older->tsgs += uf->tsgs;
	} else {
		back = uf->bytes;
		slice->uvm_bytes -= uf->bytes;
		WRITE_ONCE(slice->uvm_chans, slice->uvm_chans - uf->chans);
		WRITE_ONCE(slice->uvm_tsgs, slice->uvm_tsgs - uf->tsgs);
	}
	spin_unlock(&slice->uvm_lock);
	if (back)
		xpu_sched_uncharge(slice, back);
	xpu_slice_put(slice);
	kfree(uf);
}

/*
 * Let go of every held file whose only reference is xpu's: nobody holds
 * one to copy, so nobody can get it again.  From the work item (a kernel
 * thread): UVM's release runs before the charge moves.
 */
static void xpu_uvm_sweep(struct work_struct *work)
{
	struct xpu_uvm_file *uf, *tmp;
	LIST_HEAD(done);
	bool more;

	spin_lock(&xpu_uvm_all_lock);
	list_for_each_entry_safe(uf, tmp, &xpu_uvm_all, all)
		if (file_count(uf->file) == 1)
			list_move_tail(&uf->all, &done);
	spin_unlock(&xpu_uvm_all_lock);

	list_for_each_entry_safe(uf, tmp, &done, all) {
		__fput_sync(uf->file);
		xpu_uvm_file_gone(uf);
	}

	spin_lock(&xpu_uvm_all_lock);
	more = !list_empty(&xpu_uvm_all) && !xpu_uvm_exiting;
	if (more)
		mod_delayed_work(system_wq, &xpu_uvm_sweep_work,
				 msecs_to_jiffies(XPU_UVM_SWEEP_MS));
	spin_unlock(&xpu_uvm_all_lock);
}

static const struct file_operations xpu_uvm_node_fops = {
	.owner = THIS_MODULE,
	.open = xpu_uvm_open,
	.llseek = noop_llseek,
};

/*
 * The open of UVM's own device.  Its UVM node is a UVM node like the
 * slice's; another minor of the same device (a tools node) is UVM's,
 * untouched: UVM's operations replace xpu's before UVM's open, as
 * chrdev_open() does.
 */
static int xpu_uvm_cdev_open(struct inode *inode, struct file *file)
{
	const struct file_operations *fops;

	if (inode->i_rdev == READ_ONCE(xpu_uvm_rdev))
		return xpu_uvm_open(inode, file);
	fops = fops_get(READ_ONCE(xpu_uvm_fops));
	if (!fops)
		return -ENODEV;
	replace_fops(file, fops);
	return fops->open ? fops->open(inode, file) : 0;
}

static const struct file_operations xpu_uvm_cdev_fops = {
	.owner = THIS_MODULE,
	.open = xpu_uvm_cdev_open,
	.llseek = noop_llseek,
};

/*
 * Root's alone: an open outside every slice is a UVM file, and a host may
 * have made its UVM node narrower (NVreg_DeviceFileMode).  A slice's nodes
 * get the owner and mode xpud gives them.
 */
static struct miscdevice xpu_uvm_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "xpu-uvm",
	.fops = &xpu_uvm_node_fops,
	.mode = 0600,
};

dev_t xpu_uvm_devt(void)
{
	return MKDEV(MISC_MAJOR, xpu_uvm_dev.minor);
}

int xpu_uvm_init(void)
{
	int ret = misc_register(&xpu_uvm_dev);

	if (!ret) {
		xpu_retain_init();
		xpu_uvm_interpose();
	}
	return ret;
}

/*
 * At unload: no more opens, no more sweeps; xpu's references go (a file's
 * release is UVM's own code), and so does the charge they pinned.
 */
void xpu_uvm_exit(void)
{
	struct xpu_uvm_file *uf, *tmp;
	LIST_HEAD(all);

	if (xpu_uvm_cdev) {
		/*
		 * UVM's table back; then every task that read xpu's from the
		 * device and may not have taken its module reference yet
		 * (which fails now: the open is refused) has passed a
		 * voluntary context switch, so it is done with xpu's memory.
		 */
		WRITE_ONCE(xpu_uvm_cdev->ops, xpu_uvm_fops);
		synchronize_rcu_tasks();
	}
	misc_deregister(&xpu_uvm_dev);
	spin_lock(&xpu_uvm_all_lock);
	xpu_uvm_exiting = true;
	spin_unlock(&xpu_uvm_all_lock);
	cancel_delayed_work_sync(&xpu_uvm_sweep_work);
	spin_lock(&xpu_uvm_all_lock);
	list_splice_init(&xpu_uvm_all, &all);
	spin_unlock(&xpu_uvm_all_lock);
	list_for_each_entry_safe(uf, tmp, &all, all) {
		fput(uf->file);
		xpu_uvm_file_gone(uf);
	}
	/* UVM's releases of those files were seen: the probes go last */
	xpu_retain_exit();
	if (xpu_uvm_fops)
		module_put(xpu_uvm_fops->owner);
}
