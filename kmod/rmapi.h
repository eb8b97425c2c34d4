/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xpu's own kernel-privileged RM client, through the driver's exported
 * nvidia_get_rm_ops(): what RM itself says, which no user thread can change.
 */
#ifndef XPU_RMAPI_H
#define XPU_RMAPI_H

#include <linux/types.h>

struct xpu_gpu;

int xpu_rm_init(void);
void xpu_rm_exit(void);

/*
 * Bytes of video memory RM attributes to each of N processes (global tgids)
 * on gpu, in one query; N at most NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT.
 */
int xpu_rm_pid_usage(struct xpu_gpu *gpu, const pid_t *pids, u64 *bytes,
		     u32 n);

u32 xpu_rm_disable_channels(struct xpu_gpu *gpu, bool disable,
			    const u32 *clients, const u32 *channels, u32 n);
u32 xpu_rm_object_class(u32 h_client, u32 h_object);
void xpu_rm_driver_version(u32 *major, u32 *minor, u32 *patch);
/* Struct sizes of the running driver version. */
u32 xpu_rm_fb_info_v2_size(void);
u32 xpu_rm_alloc_params_size(void);

#endif /* XPU_RMAPI_H */
