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

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <uapi/xpu.h>

#include "ctl.h"
#include "slice.h"
#include "uvm.h"
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

/*
 * The ioctls whose argument is one struct beginning with argsz and flags:
 * copy what both sides know (at least the version-1 fields), let the body
 * work on a zero-extended kernel copy, write back min(argsz, ours).
 */
#define XPU_ARG_MAX	256

static long xpu_ctl_struct(void __user *arg, size_t minsz, size_t size,
			   bool write_back, int (*body)(void *karg))
{
	u64 buf[XPU_ARG_MAX / sizeof(u64)] = { };
	u32 argsz;
	int ret;

	BUILD_BUG_ON(sizeof(struct xpu_slice_info) > XPU_ARG_MAX);
	if (get_user(argsz, (u32 __user *)arg))
		return -EFAULT;
	if (argsz < minsz)
		return -EINVAL;
	if (copy_from_user(buf, arg, min_t(size_t, argsz, size)))
		return -EFAULT;
	ret = body(buf);
	if (ret || !write_back)
		return ret;
	argsz = min_t(u32, argsz, size);
	((u32 *)buf)[0] = argsz;
	if (copy_to_user(arg, buf, argsz))
		return -EFAULT;
	return 0;
}

static int xpu_ctl_admin(void)
{
	return capable(CAP_SYS_ADMIN) ? 0 : -EPERM;
}

static int xpu_body_slice_create(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_create(a);
}

static int xpu_body_slice_get(void *a)
{
	return xpu_slice_ioc_get(a);
}

static int xpu_body_slice_set(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_set(a);
}

static int xpu_body_slice_destroy(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_destroy(a);
}

static int xpu_body_node_attach(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_node(a, true);
}

static int xpu_body_node_detach(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_node(a, false);
}

static int xpu_body_cgroup_bind(void *a)
{
	int ret = xpu_ctl_admin() ?: xpu_slice_ioc_cgroup(a, true);

	/* the cgroup's tasks' UVM files are its slice's (uvm.c) */
	if (!ret)
		xpu_uvm_interpose();
	return ret;
}

static int xpu_body_cgroup_unbind(void *a)
{
	return xpu_ctl_admin() ?: xpu_slice_ioc_cgroup(a, false);
}

static int xpu_body_gpu_set(void *a)
{
	return xpu_ctl_admin() ?: xpu_gpu_ioc_set(a);
}

#define XPU_STRUCT_IOC(name, type, last, wb, fn)				\
static long xpu_ctl_##name(struct file *file, void __user *arg)		\
{									\
	return xpu_ctl_struct(arg, offsetofend(type, last), sizeof(type),	\
			      wb, fn);					\
}

XPU_STRUCT_IOC(slice_create, struct xpu_slice_info, os_events, true, xpu_body_slice_create)
XPU_STRUCT_IOC(slice_get, struct xpu_slice_info, os_events, true, xpu_body_slice_get)
XPU_STRUCT_IOC(slice_set, struct xpu_slice_info, os_events, true, xpu_body_slice_set)
XPU_STRUCT_IOC(slice_destroy, struct xpu_slice_ref, pad0, false, xpu_body_slice_destroy)
XPU_STRUCT_IOC(node_attach, struct xpu_node, pad0, false, xpu_body_node_attach)
XPU_STRUCT_IOC(node_detach, struct xpu_node, pad0, false, xpu_body_node_detach)
XPU_STRUCT_IOC(cgroup_bind, struct xpu_cgroup, fd, false, xpu_body_cgroup_bind)
XPU_STRUCT_IOC(cgroup_unbind, struct xpu_cgroup, fd, false, xpu_body_cgroup_unbind)
XPU_STRUCT_IOC(gpu_set, struct xpu_gpu_set, period_us, false, xpu_body_gpu_set)

static long xpu_ctl_gpu_list(struct file *file, void __user *arg)
{
	struct xpu_gpu_list l;
	struct xpu_gpu_info info;
	const u32 minsz = offsetofend(struct xpu_gpu_list, gpus);
	u32 i, esz;

	if (copy_from_user(&l, arg, minsz))
		return -EFAULT;
	if (l.argsz < minsz || l.flags & ~XPU_GPU_LIST_FLAGS_ALL)
		return -EINVAL;
	if (l.count && l.gpu_argsz < offsetofend(struct xpu_gpu_info, uuid))
		return -EINVAL;
	esz = min_t(u32, l.gpu_argsz, sizeof(info));
	for (i = 0; i < l.count && i < xpu_nr_gpus; i++) {
		xpu_gpu_fill(&xpu_gpus[i], &info);
		if (copy_to_user(u64_to_user_ptr(l.gpus) + (u64)i * l.gpu_argsz,
				 &info, esz))
			return -EFAULT;
	}
	l.count = xpu_nr_gpus;
	if (put_user(l.count, &((struct xpu_gpu_list __user *)arg)->count))
		return -EFAULT;
	return 0;
}

static long xpu_ctl_slice_list(struct file *file, void __user *arg)
{
	const u32 minsz = offsetofend(struct xpu_slice_list, ids);
	struct xpu_slice_list l;
	u32 *ids, count;
	int ret;

	if (copy_from_user(&l, arg, minsz))
		return -EFAULT;
	if (l.argsz < minsz || l.flags & ~XPU_SLICE_LIST_FLAGS_ALL)
		return -EINVAL;
	l.count = min_t(u32, l.count, XPU_MAX_SLICES);
	ids = kcalloc(max_t(u32, l.count, 1), sizeof(*ids), GFP_KERNEL);
	if (!ids)
		return -ENOMEM;
	ret = xpu_slice_ioc_list(ids, l.count, &count);
	if (!ret && copy_to_user(u64_to_user_ptr(l.ids), ids,
				 min(count, l.count) * sizeof(*ids)))
		ret = -EFAULT;
	if (!ret && put_user(count, &((struct xpu_slice_list __user *)arg)->count))
		ret = -EFAULT;
	kfree(ids);
	return ret;
}

struct xpu_ctl_cmd {
	unsigned int cmd;
	long (*fn)(struct file *file, void __user *arg);
};

static const struct xpu_ctl_cmd xpu_ctl_cmds[] = {
	[_IOC_NR(XPU_IOC_VERSION)] = { XPU_IOC_VERSION, xpu_ctl_version },
	[_IOC_NR(XPU_IOC_GPU_LIST)] = { XPU_IOC_GPU_LIST, xpu_ctl_gpu_list },
	[_IOC_NR(XPU_IOC_GPU_SET)] = { XPU_IOC_GPU_SET, xpu_ctl_gpu_set },
	[_IOC_NR(XPU_IOC_SLICE_CREATE)] = { XPU_IOC_SLICE_CREATE, xpu_ctl_slice_create },
	[_IOC_NR(XPU_IOC_SLICE_GET)] = { XPU_IOC_SLICE_GET, xpu_ctl_slice_get },
	[_IOC_NR(XPU_IOC_SLICE_SET)] = { XPU_IOC_SLICE_SET, xpu_ctl_slice_set },
	[_IOC_NR(XPU_IOC_SLICE_DESTROY)] = { XPU_IOC_SLICE_DESTROY, xpu_ctl_slice_destroy },
	[_IOC_NR(XPU_IOC_SLICE_LIST)] = { XPU_IOC_SLICE_LIST, xpu_ctl_slice_list },
	[_IOC_NR(XPU_IOC_NODE_ATTACH)] = { XPU_IOC_NODE_ATTACH, xpu_ctl_node_attach },
	[_IOC_NR(XPU_IOC_NODE_DETACH)] = { XPU_IOC_NODE_DETACH, xpu_ctl_node_detach },
	[_IOC_NR(XPU_IOC_CGROUP_BIND)] = { XPU_IOC_CGROUP_BIND, xpu_ctl_cgroup_bind },
	[_IOC_NR(XPU_IOC_CGROUP_UNBIND)] = { XPU_IOC_CGROUP_UNBIND, xpu_ctl_cgroup_unbind },
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
