// SPDX-License-Identifier: GPL-2.0
/*
 * xpu: slices of NVIDIA GPUs.  Brings the parts of the module up in order and
 * takes them down in the reverse order.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/module.h>

#include "callpage.h"
#include "ctl.h"
#include "events.h"
#include "file.h"
#include "hook.h"
#include "handles.h"
#include "ledger.h"
#include "rmapi.h"
#include "sched.h"
#include "slice.h"
#include "uvm.h"
#include "version.h"
#include "xpu.h"

static int xpu_uint_range_set(const char *val, const struct kernel_param *kp)
{
	const struct xpu_uint_range *r = kp->arg;
	unsigned int n;
	int ret = kstrtouint(val, 0, &n);

	if (ret)
		return ret;
	if (n < r->min || n > r->max) {
		pr_err("%s=%u: must be from %u to %u\n", kp->name, n, r->min,
		       r->max);
		return -EINVAL;
	}
	WRITE_ONCE(*r->val, n);
	return 0;
}

static int xpu_uint_range_get(char *buf, const struct kernel_param *kp)
{
	const struct xpu_uint_range *r = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(*r->val));
}

const struct kernel_param_ops xpu_uint_range_ops = {
	.set = xpu_uint_range_set,
	.get = xpu_uint_range_get,
};

static int __init xpu_init(void)
{
	int ret;

	xpu_callpage_init();
	ret = xpu_handles_module_init();
	if (ret)
		return ret;
	ret = xpu_events_init();
	if (ret)
		goto err_handles;
	ret = xpu_rm_init();
	if (ret)
		goto err_events;
	ret = xpu_ledger_init();
	if (ret)
		goto err_rm;
	ret = xpu_slice_init();
	if (ret)
		goto err_ledger;
	ret = xpu_sched_init();
	if (ret)
		goto err_slice;
	ret = xpu_hook_init();
	if (ret)
		goto err_sched;
	ret = xpu_uvm_init();
	if (ret)
		goto err_hook;
	/* The admin device comes last: once it exists, user space can call in. */
	ret = xpu_ctl_init();
	if (ret)
		goto err_uvm;

	pr_info("version " XPU_VERSION " loaded\n");
	return 0;

err_uvm:
	xpu_uvm_exit();
err_hook:
	xpu_hook_exit();
	xpu_file_exit();
err_sched:
	xpu_slice_exit();
	xpu_sched_exit();
	goto err_ledger;
err_slice:
	xpu_slice_exit();
err_ledger:
	xpu_ledger_exit();
err_rm:
	xpu_rm_exit();
err_events:
	xpu_events_exit();
err_handles:
	xpu_handles_module_exit();
	return ret;
}

static void __exit xpu_exit(void)
{
	xpu_ctl_exit();
	xpu_uvm_exit();
	xpu_hook_exit();
	xpu_file_exit();
	xpu_slice_exit();
	xpu_sched_exit();
	xpu_ledger_exit();
	xpu_rm_exit();
	xpu_events_exit();
	xpu_handles_module_exit();
}

module_init(xpu_init);
module_exit(xpu_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Slices of NVIDIA GPUs");
MODULE_VERSION(XPU_VERSION);
