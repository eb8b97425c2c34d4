/* SPDX-License-Identifier: GPL-2.0 */
/* UVM's retention of channels, seen where it happens (retain.c). */
#ifndef XPU_RETAIN_H
#define XPU_RETAIN_H

#include <linux/types.h>

struct xpu_slice;

void xpu_retain_init(void);
void xpu_retain_exit(void);
bool xpu_retain_exact(void);
bool xpu_retain_any(void);
void xpu_retain_note_tsg(u32 h_client, u32 h_channel, u32 h_tsg);
bool xpu_retain_pin(struct xpu_slice *slice, int kind, u32 h_client,
		    u32 h_object, u32 h_parent, u64 charge);

#endif /* XPU_RETAIN_H */
