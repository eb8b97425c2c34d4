// SPDX-License-Identifier: GPL-2.0
/*
 * A module that does nothing but WARN when loaded: tests/rig/test_rig.py loads
 * it to show that the VM rig fails a run whose kernel log gains a WARNING.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init xpu_rigtest_warn_init(void)
{
	WARN_ON(1);
	return 0;
}

static void __exit xpu_rigtest_warn_exit(void)
{
}

module_init(xpu_rigtest_warn_init);
module_exit(xpu_rigtest_warn_exit);
MODULE_DESCRIPTION("xpu test rig self-test: warns on load");
MODULE_LICENSE("GPL");
