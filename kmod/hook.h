/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_HOOK_H
#define XPU_HOOK_H

#include <linux/fs.h>

/*
 * The driver's file operations as they were before xpu wrote its hooks into
 * the table: every hook ends in one of these.
 */
extern struct file_operations xpu_drv;

/*
 * An ioctl handler for one NVIDIA escape number.  It runs instead of the
 * driver's ioctl, in the caller's context, and calls xpu_drv.unlocked_ioctl
 * itself where it forwards.  xf is the caller's file record (never NULL).
 */
struct xpu_file;
typedef long (*xpu_ioctl_fn)(struct xpu_file *xf, struct file *file,
			     unsigned int cmd, unsigned long arg);

int xpu_hook_init(void);
void xpu_hook_exit(void);

/* Called by the parts that need the driver's devices, once hooked. */
dev_t xpu_hook_ctl_dev(void);

/* Whether FOPS is the driver's own table (the one xpu writes its hooks in). */
bool xpu_hook_is_driver(const struct file_operations *fops);

/* The driver's module (its file operations' owner), once hooked. */
struct module *xpu_hook_driver(void);

#endif /* XPU_HOOK_H */
