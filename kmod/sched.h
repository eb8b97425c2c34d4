/* SPDX-License-Identifier: GPL-2.0 */
/* Compute isolation: doorbell gating and the per-GPU scheduler (sched.c). */
#ifndef XPU_SCHED_H
#define XPU_SCHED_H

#include "hook.h"
#include "xpu.h"

struct vm_area_struct;

enum {
	XPU_GATE_RUN,		/* doorbell open, channels enabled */
	XPU_GATE_WAIT,		/* doorbell zapped, channels disabled */
	XPU_GATE_IDLE,		/* doorbell zapped, channels enabled */
};

int xpu_sched_init(void);
void xpu_sched_exit(void);
void xpu_sched_slice_add(struct xpu_slice *slice);
void xpu_sched_slice_remove(struct xpu_slice *slice);
void xpu_sched_kick(struct xpu_gpu *gpu);
void xpu_sched_fill(struct xpu_slice *slice, struct xpu_slice_info *out);
void xpu_sched_file_closing(struct xpu_file *xf);
void xpu_sched_file_release(struct xpu_file *xf);
int xpu_sched_mmap_prepare(struct file *file);
void xpu_sched_mmap(struct file *file, struct vm_area_struct *vma);

bool xpu_sched_tracks_class(u32 h_class);
bool xpu_sched_is_channel_class(u32 h_class);
u32 xpu_gpu_chan_ids(const struct xpu_gpu *gpu);
void xpu_sched_forget_stale(struct xpu_slice *slice);
void xpu_sched_uncharge(struct xpu_slice *slice, u64 bytes);
struct pid;
bool xpu_sched_chan_recorded(u32 h_client, u32 h_channel, struct pid *pid);
struct xpu_escape;
long xpu_sched_rm_alloc(struct xpu_file *xf, struct file *file,
			unsigned int cmd, struct xpu_escape *e, u32 h_class,
			u64 pinned, u32 h_vas);
u32 xpu_sched_rm_dup(struct xpu_file *xf, u32 hc, u32 ho, u32 cls,
		     u32 hc_src, u32 ho_src);
void xpu_sched_rm_free(struct xpu_file *xf, u32 h_client, u32 h_object);
bool xpu_sched_is_usermode(struct xpu_file *xf, u32 h_client, u32 h_memory);
bool xpu_sched_is_pinning_virtual(struct xpu_file *xf, u32 h_client, u32 h_dma);
void xpu_sched_reassert(struct xpu_slice *slice);
long xpu_sched_rm_control(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);

#endif /* XPU_SCHED_H */
