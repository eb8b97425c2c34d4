// SPDX-License-Identifier: GPL-2.0
/*
 * A planted use-after-free: on load, reads a byte of a buffer it has freed.
 * KASAN reports it on the debug kernel, and the VM rig must fail the run
 * (tests/rig/test_debug_tier.py).  Never load it anywhere else.
 */
#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/slab.h>

static noinline int xpu_planted_uaf_read(void)
{
	char *buf = kmalloc(64, GFP_KERNEL);
	int v;

	if (!buf)
		return -ENOMEM;
	buf[8] = 0x5a;
	kfree(buf);
	/* Hide the pointer's history from the compiler's own checks. */
	OPTIMIZER_HIDE_VAR(buf);
	v = READ_ONCE(buf[8]);
	pr_info("xpu_planted_uaf: read %d from a freed buffer\n", v);
	return 0;
}

static int __init xpu_planted_uaf_init(void)
{
	return xpu_planted_uaf_read();
}

static void __exit xpu_planted_uaf_exit(void)
{
}

module_init(xpu_planted_uaf_init);
module_exit(xpu_planted_uaf_exit);
MODULE_DESCRIPTION("xpu test rig self-test: a planted use-after-free");
MODULE_LICENSE("GPL");
