/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_SLICE_H
#define XPU_SLICE_H

#include "xpu.h"

struct inode;

int xpu_slice_init(void);
void xpu_slice_exit(void);

/*
 * The slice an open of inode (a driver node; gpu is NULL for the control
 * node and UVM's) by current belongs to, referenced, or NULL; an ERR_PTR
 * when the open must be refused.  COUNTED: the open is one of the slice's
 * open_files (the driver's nodes, whose release takes it back), not a UVM
 * file's.
 */
struct xpu_slice *xpu_slice_for_open(struct inode *inode, struct xpu_gpu *gpu,
				     bool counted);

/* -EPERM if pid is in another slice of slice's GPU: RM counts per process. */
int xpu_slice_check_alone(struct xpu_slice *slice, struct pid *pid);

/* Bodies of the /dev/xpuctl ioctls; each validates what it is given. */
int xpu_slice_ioc_create(struct xpu_slice_info *arg);
int xpu_slice_ioc_get(struct xpu_slice_info *arg);
int xpu_slice_ioc_set(struct xpu_slice_info *arg);
int xpu_slice_ioc_destroy(const struct xpu_slice_ref *arg);
int xpu_slice_ioc_list(u32 *ids, u32 room, u32 *count);
int xpu_slice_ioc_node(const struct xpu_node *arg, bool attach);
int xpu_slice_ioc_cgroup(const struct xpu_cgroup *arg, bool bind);
int xpu_gpu_ioc_set(const struct xpu_gpu_set *arg);
void xpu_gpu_fill(struct xpu_gpu *gpu, struct xpu_gpu_info *out);

#endif /* XPU_SLICE_H */
