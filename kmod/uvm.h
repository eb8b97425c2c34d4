/* SPDX-License-Identifier: GPL-2.0 */
/* A slice's UVM files, and the charge UVM may retain (uvm.c). */
#ifndef XPU_UVM_H
#define XPU_UVM_H

#include <linux/types.h>

struct xpu_slice;
struct xpu_slice_info;

int xpu_uvm_init(void);
void xpu_uvm_exit(void);
void xpu_uvm_interpose(void);
dev_t xpu_uvm_devt(void);
bool xpu_uvm_keep(struct xpu_slice *slice, int kind, u64 charge);
u32 xpu_uvm_kept(struct xpu_slice *slice, int kind);
void xpu_uvm_fill(struct xpu_slice *slice, struct xpu_slice_info *out);

#endif /* XPU_UVM_H */
