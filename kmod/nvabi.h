/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TEMPORARY: the NVIDIA ABI definitions live in tests/nvstub/nvabi.h while
 * the simulated driver is being written; they move here, and the stub will
 * include this file.
 */
#ifndef XPU_NVABI_H
#define XPU_NVABI_H

#include "../tests/nvstub/nvabi.h"

/* nv-modeset-interface.h, nv-gpu-info.h: the driver's kernel interface */
#define NV_MAX_GPUS	32

struct nv_gpu_info {
	u32 gpu_id;
	struct {
		u32 domain;
		u8 bus, slot, function;
	} pci_info;
	u8 needs_numa_setup;
	void *os_device_ptr;
};

typedef struct nvidia_stack_s *nvidia_modeset_stack_ptr;

struct nvidia_modeset_rm_ops {
	const char *version_string;
	struct {
		u8 allow_write_combining;
	} system_info;
	int (*alloc_stack)(nvidia_modeset_stack_ptr *sp);
	void (*free_stack)(nvidia_modeset_stack_ptr sp);
	u32 (*enumerate_gpus)(struct nv_gpu_info *gpu_info);
	int (*open_gpu)(u32 gpu_id, nvidia_modeset_stack_ptr sp);
	void (*close_gpu)(u32 gpu_id, nvidia_modeset_stack_ptr sp);
	void (*op)(nvidia_modeset_stack_ptr sp, void *ops_cmd);
	int (*set_callbacks)(const void *cb);
};

/* nvos.h: operations of the kernel RM API (nv-kernel-rmapi-ops.h) */
#define NV01_FREE		0x00000000
#define NV04_ALLOC		0x00000015
#define NV04_VID_HEAP_CONTROL	0x00000020
#define NV04_CONTROL		0x00000036
#define NV04_DUP_OBJECT		0x00000037

struct nvidia_kernel_rmapi_ops {
	u32 op;
	u32 pad0;
	union {
		struct nvos00_parameters free;
		struct nvos02_parameters alloc_memory64;
		struct nvos64_parameters alloc;
		struct nvos32_parameters *p_vid_heap_control;
		struct nvos33_parameters map_memory;
		struct nvos34_parameters unmap_memory;
		struct nvos54_parameters control;
		struct nvos55_parameters dup_object;
		u8 raw[72];	/* the largest member, NVOS46 from 580: 64 B */
	} params;
};

/* ctrl/ctrl0000/ctrl0000gpu.h */
#define NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS	0x201
#define NV0000_CTRL_GPU_MAX_ATTACHED_GPUS	32
#define NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2	0x205

struct nv0000_ctrl_gpu_get_id_info_v2_params {
	u32 gpu_id;
	u32 gpu_flags;
	u32 device_instance;
	u32 sub_device_instance;
	u32 sli_status;
	u32 board_id;
	u32 gpu_instance;
	s32 numa_id;
};

/* Sizes that moved between driver versions, looked up once. */
struct nv_abi_version {
	u32 fb_info_v2_size;		/* NV2080_CTRL_FB_GET_INFO_V2_PARAMS */
	u32 memory_alloc_params_size;	/* NV_MEMORY_ALLOCATION_PARAMS */
};

static inline const struct nv_abi_version *nv_abi_for_version(u32 major)
{
	static const struct nv_abi_version v580 = { 1028, 128 };
	static const struct nv_abi_version v560 = { 460, 128 };
	static const struct nv_abi_version v545 = { 444, 128 };
	static const struct nv_abi_version v535 = { 436, 120 };

	if (major >= 580)
		return &v580;
	if (major >= 560)
		return &v560;
	if (major >= 545)
		return &v545;
	return &v535;
}

#endif /* XPU_NVABI_H */
