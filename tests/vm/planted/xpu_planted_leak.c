// SPDX-License-Identifier: GPL-2.0
/*
 * A planted leak: on load, allocates a buffer and drops the only pointer to
 * it.  kmemleak reports it on the debug kernel, and the VM rig must fail the
 * run (tests/rig/test_debug_tier.py).  Never load it anywhere else.
 */
#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

/* Not __init: the allocation's backtrace then names this module's frame,
 * which stays resolvable while the module is loaded. */
static noinline int xpu_planted_leak_alloc(void)
{
	char *buf = kmalloc(256, GFP_KERNEL);

	if (!buf)
		return -ENOMEM;
	memset(buf, 0x5a, 256);
	OPTIMIZER_HIDE_VAR(buf);
	pr_info("xpu_planted_leak: leaked 256 bytes\n");
	return 0;
}

static int __init xpu_planted_leak_init(void)
{
	return xpu_planted_leak_alloc();
}

static void __exit xpu_planted_leak_exit(void)
{
}

module_init(xpu_planted_leak_init);
module_exit(xpu_planted_leak_exit);
MODULE_DESCRIPTION("xpu test rig self-test: a planted memory leak");
MODULE_LICENSE("GPL");
