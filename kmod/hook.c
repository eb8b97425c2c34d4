// SPDX-License-Identifier: GPL-2.0
/*
 * In-place interposition on the NVIDIA driver's file operations.
 *
 * The driver insists that the files it serves are its own (the inode's minor,
 * private_data, f_op == &nvidia_fops in its fd-table walks), so xpu does not
 * wrap files: it opens the control node once, takes the driver's own table
 * from file->f_op and writes its hooks into that table.  Every file stays
 * genuine and every call passes through xpu first.  See
 * docs/interposition.md.
 *
 * Unload is the delicate part.  A task may have loaded a hook's address from
 * the table and not yet entered it, or be inside a hook asleep in the driver.
 * So: restore the entries; wait for an RCU-tasks grace period (every task that
 * could have loaded a hook address has since passed a voluntary context
 * switch, i.e. entered the hook and taken the SRCU read lock); wait for SRCU
 * (every call inside a hook has left); wait for RCU tasks again (the last
 * instructions after srcu_read_unlock have run).  Only then may the code go.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/kdev_t.h>
#include <linux/module.h>
#include <linux/pgtable.h>
#include <linux/rcupdate.h>
#include <linux/srcu.h>

#include "file.h"
#include "hook.h"
#include "mem.h"
#include "nvabi.h"
#include "sched.h"

static char *ctl_path = "/dev/nvidiactl";
module_param(ctl_path, charp, 0444);
MODULE_PARM_DESC(ctl_path, "the NVIDIA control node xpu finds the driver through");

struct file_operations xpu_drv;

/* The driver's table, patched in place while xpu is loaded. */
static struct file_operations *xpu_fops;
static struct module *xpu_drv_owner;
static dev_t xpu_ctl_dev;

/* Calls inside a hook: SRCU read side; see the unload note above. */
DEFINE_STATIC_SRCU(xpu_hook_srcu);

/*
 * The escapes xpu acts on, by _IOC_NR.  Everything else is forwarded after one
 * look at this table: no copy, no lock.
 */
static const xpu_ioctl_fn xpu_ioctl_fns[256] = {
	[NV_ESC_CARD_INFO]		= xpu_file_card_info,
	[NV_ESC_REGISTER_FD]		= xpu_file_register_fd,
	[NV_ESC_ATTACH_GPUS_TO_FD]	= xpu_file_attach_gpus,
	[NV_ESC_ALLOC_OS_EVENT]		= xpu_mem_os_event,
	[NV_ESC_FREE_OS_EVENT]		= xpu_mem_os_event,
	[NV_ESC_EXPORT_TO_DMABUF_FD]	= xpu_mem_export_dmabuf,
	[NV_ESC_SYS_PARAMS]		= xpu_mem_sys_params,
	[NV_ESC_RM_IDLE_CHANNELS]	= xpu_mem_refused_escape,
	[NV_ESC_RM_ACCESS_REGISTRY]	= xpu_mem_refused_escape,
	[NV_ESC_IOCTL_XFER_CMD]		= xpu_file_xfer,
	[NV_ESC_RM_ALLOC]		= xpu_mem_rm_alloc,
	[NV_ESC_RM_FREE]		= xpu_mem_rm_free,
	[NV_ESC_RM_CONTROL]		= xpu_mem_rm_control,
	[NV_ESC_RM_DUP_OBJECT]		= xpu_mem_rm_dup,
	[NV_ESC_RM_SHARE]		= xpu_mem_rm_share,
	[NV_ESC_RM_VID_HEAP_CONTROL]	= xpu_mem_vid_heap,
	[NV_ESC_RM_ALLOC_OBJECT]	= xpu_mem_alloc_object,
	[NV_ESC_RM_ALLOC_MEMORY]	= xpu_mem_alloc_memory,
	[NV_ESC_RM_ALLOC_CONTEXT_DMA2]	= xpu_mem_alloc_context_dma,
	[NV_ESC_RM_MAP_MEMORY]		= xpu_file_fd_field,
	[NV_ESC_RM_MAP_MEMORY_DMA]	= xpu_mem_map_dma,
};

dev_t xpu_hook_ctl_dev(void)
{
	return xpu_ctl_dev;
}

long xpu_dispatch(struct file *file, unsigned int cmd, unsigned long arg)
{
	xpu_ioctl_fn fn = NULL;
	struct xpu_file *xf;

	/*
	 * The driver reads only the number and the size of a command, not its
	 * type nor its direction (nvidia_ioctl: _IOC_NR and _IOC_SIZE, 535 to
	 * 595): 'G' or _IOC_NONE make the same escape, so they are looked up
	 * by the number alone, and handed on as the driver's own encoding.
	 */
	fn = xpu_ioctl_fns[_IOC_NR(cmd)];
	if (!fn)
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	cmd = _IOC(_IOC_READ | _IOC_WRITE, NV_IOCTL_MAGIC, _IOC_NR(cmd),
		   _IOC_SIZE(cmd));
	/*
	 * The file is pinned for the call, and its record goes only in
	 * release, so it outlives the call.  Files opened before xpu was
	 * loaded have none: they are served as they were.
	 */
	xf = xpu_file_lookup(file);
	if (!xf)
		return xpu_drv.unlocked_ioctl(file, cmd, arg);
	if (unlikely(READ_ONCE(xf->poisoned)))
		return -EPERM;
	return fn(xf, file, cmd, arg);
}

static long xpu_hook_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	int idx = srcu_read_lock(&xpu_hook_srcu);
	long ret = xpu_dispatch(file, cmd, arg);

	srcu_read_unlock(&xpu_hook_srcu, idx);
	return ret;
}

static int xpu_hook_open(struct inode *inode, struct file *file)
{
	int idx = srcu_read_lock(&xpu_hook_srcu);
	int ret = xpu_file_open(inode, file);

	srcu_read_unlock(&xpu_hook_srcu, idx);
	return ret;
}

static int xpu_hook_release(struct inode *inode, struct file *file)
{
	int idx = srcu_read_lock(&xpu_hook_srcu);
	int ret = xpu_file_release(inode, file);

	srcu_read_unlock(&xpu_hook_srcu, idx);
	return ret;
}

static int xpu_hook_mmap(struct file *file, struct vm_area_struct *vma)
{
	int idx = srcu_read_lock(&xpu_hook_srcu);
	int ret = xpu_sched_mmap_prepare(file);

	if (!ret)
		ret = xpu_drv.mmap(file, vma);
	if (!ret)
		xpu_sched_mmap(file, vma);
	srcu_read_unlock(&xpu_hook_srcu, idx);
	return ret;
}

/*
 * The table must be in writable memory: a const table would fault on the
 * first write.  copy_to_kernel_nofault() is not exported to modules, so look
 * at the page tables instead.
 */
static bool xpu_writable(const void *addr)
{
	unsigned int level;
	pte_t *pte = lookup_address((unsigned long)addr, &level);

	return pte && pte_present(*pte) && pte_write(*pte);
}

static int xpu_probe(struct file *ctl)
{
	const struct file_operations *fops = ctl->f_op;
	struct inode *inode = file_inode(ctl);

	if (!S_ISCHR(inode->i_mode) ||
	    imajor(inode) != NV_MAJOR_DEVICE_NUMBER ||
	    iminor(inode) != NV_MINOR_CONTROL) {
		pr_err("%s is not the NVIDIA control node (195:255); refusing to load\n",
		       ctl_path);
		return -ENODEV;
	}
	if (!fops || !fops->owner || !fops->open || !fops->release ||
	    !fops->unlocked_ioctl || !fops->mmap) {
		pr_err("the driver's file operations are not as expected (no owner, open, release, ioctl or mmap); refusing to load\n");
		return -EINVAL;
	}
	if (!within_module((unsigned long)fops, fops->owner) ||
	    !xpu_writable(&fops->open) || !xpu_writable(&fops->mmap)) {
		pr_err("the driver's file operations (%ps) are not writable data of module %s; refusing to load\n",
		       fops, module_name(fops->owner));
		return -EINVAL;
	}
	return 0;
}

bool xpu_hook_is_driver(const struct file_operations *fops)
{
	return fops == xpu_fops;
}

struct module *xpu_hook_driver(void)
{
	return xpu_drv_owner;
}

int xpu_hook_init(void)
{
	struct file_operations *fops;
	struct file *ctl;
	int ret;

	ctl = filp_open(ctl_path, O_RDWR, 0);
	if (IS_ERR(ctl)) {
		pr_err("cannot open %s (%ld): is the NVIDIA driver loaded and the node made? refusing to load\n",
		       ctl_path, PTR_ERR(ctl));
		return PTR_ERR(ctl);
	}
	ret = xpu_probe(ctl);
	if (ret)
		goto out_close;

	fops = (struct file_operations *)ctl->f_op;
	if (!try_module_get(fops->owner)) {
		pr_err("the driver module %s is going away; refusing to load\n",
		       module_name(fops->owner));
		ret = -ENODEV;
		goto out_close;
	}
	xpu_drv_owner = fops->owner;
	xpu_ctl_dev = file_inode(ctl)->i_rdev;
	xpu_drv = *fops;
	xpu_fops = fops;

	/*
	 * Each entry is one aligned pointer store; a concurrent caller sees
	 * the old or the new one, and both are valid.  open is written last,
	 * so a file opened through the hook finds the other hooks in place.
	 */
	WRITE_ONCE(fops->release, xpu_hook_release);
	WRITE_ONCE(fops->mmap, xpu_hook_mmap);
	WRITE_ONCE(fops->unlocked_ioctl, xpu_hook_ioctl);
	if (fops->compat_ioctl)
		WRITE_ONCE(fops->compat_ioctl, xpu_hook_ioctl);
	WRITE_ONCE(fops->open, xpu_hook_open);
	pr_info("interposed on %s's file operations (%ps)\n",
		module_name(xpu_drv_owner), fops);
	ret = 0;
out_close:
	filp_close(ctl, NULL);
	return ret;
}

void xpu_hook_exit(void)
{
	struct file_operations *fops = xpu_fops;

	WRITE_ONCE(fops->open, xpu_drv.open);
	WRITE_ONCE(fops->unlocked_ioctl, xpu_drv.unlocked_ioctl);
	WRITE_ONCE(fops->compat_ioctl, xpu_drv.compat_ioctl);
	WRITE_ONCE(fops->mmap, xpu_drv.mmap);
	WRITE_ONCE(fops->release, xpu_drv.release);

	synchronize_rcu_tasks();
	synchronize_srcu(&xpu_hook_srcu);
	synchronize_rcu_tasks();

	module_put(xpu_drv_owner);
	pr_info("restored %s's file operations\n", module_name(xpu_drv_owner));
}
