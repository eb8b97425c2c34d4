/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_FILE_H
#define XPU_FILE_H

#include "hook.h"
#include "xpu.h"

int xpu_file_open(struct inode *inode, struct file *file);
int xpu_file_release(struct inode *inode, struct file *file);
struct xpu_file *xpu_file_lookup(struct file *file);
void xpu_file_exit(void);
void xpu_file_kill_openers(struct xpu_slice *slice);

/* Dispatch an NVIDIA ioctl as the hook does (used by xpu_file_xfer). */
long xpu_dispatch(struct file *file, unsigned int cmd, unsigned long arg);

/* Escapes handled here: what a sliced client may see and name. */
long xpu_file_card_info(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg);
long xpu_file_register_fd(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);
long xpu_file_attach_gpus(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);
long xpu_file_xfer(struct xpu_file *xf, struct file *file,
		   unsigned int cmd, unsigned long arg);
long xpu_file_fd_field(struct xpu_file *xf, struct file *file,
		       unsigned int cmd, unsigned long arg);

/* Every GPU file of SLICE is a doorbell file from now on. */
void xpu_file_mark_doorbells(struct xpu_slice *slice);

/* The slice of the driver file fd of current, or NULL if unsliced/unknown. */
struct xpu_slice *xpu_file_slice_of_fd(int fd, bool *is_driver_file);

#endif /* XPU_FILE_H */
