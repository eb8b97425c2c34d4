// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/xpuctl, the admin device: the versioned ioctls of <uapi/xpu.h>.
 *
 * Commands are looked up by number in one table.  The size encoded in a
 * command is that of the caller's struct, which may be older or newer than
 * ours; each handler trusts argsz instead and copies no more than both sides
 * know.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <uapi/xpu.h>

#include "ctl.h"
#include "version.h"

static long xpu_ctl_version(struct file *file, void __user *arg)
{
	const u32 minsz = offsetofend(struct xpu_version, patch);
	struct xpu_version ver;
	u32 argsz;

	if (copy_from_user(&ver, arg, minsz))
		return -EFAULT;
	if (ver.argsz < minsz)
		return -EINVAL;
	if (ver.flags & ~XPU_VERSION_FLAGS_ALL)
		return -EINVAL;

	argsz = min_t(u32, ver.argsz, sizeof(ver));
	memset(&ver, 0, sizeof(ver));
	ver.argsz = argsz;
	ver.api = XPU_API_VERSION;
	ver.major = XPU_VERSION_MAJOR;
	ver.minor = XPU_VERSION_MINOR;
	ver.patch = XPU_VERSION_PATCH;

	if (copy_to_user(arg, &ver, argsz))
		return -EFAULT;
	return 0;
}

struct xpu_ctl_cmd {
	unsigned int cmd;
	long (*fn)(struct file *file, void __user *arg);
};

static const struct xpu_ctl_cmd xpu_ctl_cmds[] = {
	[_IOC_NR(XPU_IOC_VERSION)] = { XPU_IOC_VERSION, xpu_ctl_version },
};

static long xpu_ctl_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	const struct xpu_ctl_cmd *ioc;
	unsigned int nr = _IOC_NR(cmd);

	if (_IOC_TYPE(cmd) != XPU_IOC_TYPE || nr >= ARRAY_SIZE(xpu_ctl_cmds))
		return -ENOTTY;
	/* nr indexes a table of function pointers: no speculation past it. */
	ioc = &xpu_ctl_cmds[array_index_nospec(nr, ARRAY_SIZE(xpu_ctl_cmds))];
	if (!ioc->fn || _IOC_DIR(cmd) != _IOC_DIR(ioc->cmd))
		return -ENOTTY;

	return ioc->fn(file, (void __user *)arg);
}

static const struct file_operations xpu_ctl_fops = {
	.owner		= THIS_MODULE,
	.open		= nonseekable_open,
	.unlocked_ioctl	= xpu_ctl_ioctl,
	/* The structs are laid out alike for 32- and 64-bit callers. */
	.compat_ioctl	= compat_ptr_ioctl,
};

static struct miscdevice xpu_ctl_dev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= XPU_CTL_NAME,
	.fops	= &xpu_ctl_fops,
	.mode	= 0600,
};

int xpu_ctl_init(void)
{
	int ret;

	ret = misc_register(&xpu_ctl_dev);
	if (ret)
		pr_err("cannot register /dev/%s: %d\n", XPU_CTL_NAME, ret);
	return ret;
}

void xpu_ctl_exit(void)
{
	misc_deregister(&xpu_ctl_dev);
}
