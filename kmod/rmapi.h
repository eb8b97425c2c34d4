/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xpu's own kernel-privileged RM client, through the driver's exported
 * nvidia_get_rm_ops(): what RM itself says, which no user thread can change.
 */
#ifndef XPU_RMAPI_H
#define XPU_RMAPI_H

#include <linux/types.h>

#include "xpu.h"

struct pid;
struct xpu_gpu;

int xpu_rm_init(void);
void xpu_rm_exit(void);

/*
 * Bytes of video memory RM attributes to each of N processes on gpu, in one
 * query, whatever the caller's pid namespace; N at most
 * NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT.
 */
int xpu_rm_pid_usage(struct xpu_gpu *gpu, struct pid *const *pids,
		     u64 *bytes, u32 n);

/* GET_PID_INFO's figures for one process, protected memory included. */
struct xpu_vidmem_usage {
	u64 priv;		/* memPrivate: its only handle */
	u64 owned;		/* memSharedOwned: the owner of shared memory */
	u64 duped;		/* memSharedDuped: a duplicate, not the owner */
};

/*
 * A client of the ledger's (ledger.c), made by a thread that outlives it:
 * RM's process figures for the thread's pid are the client's.
 */
struct xpu_rm_client {
	u32 h;
	u32 dev[XPU_MAX_GPUS], sub[XPU_MAX_GPUS];	/* 0 where none */
	struct pid *pid;
};

int xpu_rm_client_create(struct xpu_rm_client *c, struct xpu_gpu *gpu);
void xpu_rm_client_destroy(struct xpu_rm_client *c);
u32 xpu_rm_client_dup(struct xpu_rm_client *c, struct xpu_gpu *gpu,
		      bool subdevice, u32 h_client, u32 h_object, u32 *h_new);
void xpu_rm_client_free(struct xpu_rm_client *c, u32 h_object);
bool xpu_rm_client_same(struct xpu_rm_client *c, u32 h1, u32 h2);
bool xpu_rm_client_where(struct xpu_rm_client *c, u32 h, u64 *where);
int xpu_rm_client_usage(struct xpu_rm_client *c, struct xpu_gpu *gpu,
			struct xpu_vidmem_usage *u);
u32 xpu_rm_object_parent(u32 h_client, u32 h_object);

u32 xpu_rm_disable_channels(struct xpu_gpu *gpu, bool disable,
			    const u32 *clients, const u32 *channels, u32 n);
u32 xpu_rm_object_class(u32 h_client, u32 h_object);
bool xpu_rm_client_exists(u32 h);
u32 xpu_rm_sysmem_npages(u32 h_client, u32 h_object, u32 *n);
struct page;
u32 xpu_rm_sysmem_pages(u32 h_client, u32 h_object, struct page **pages,
			u32 *n);
bool xpu_rm_object_lost(u32 h_client, u32 h_object);
void xpu_rm_driver_version(u32 *major, u32 *minor, u32 *patch);
/* Whether RM's process lists speak the caller's pid namespace (565+). */
bool xpu_rm_pids_in_caller_ns(void);
/* Struct sizes of the running driver version. */
u32 xpu_rm_fb_info_v2_size(void);
u32 xpu_rm_alloc_params_size(void);
u32 xpu_rm_vaspace_params_size(void);
u32 xpu_rm_channel_params_size(void);
u32 xpu_rm_map_dma_params_size(void);

#endif /* XPU_RMAPI_H */
