/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TEMPORARY: the NVIDIA ABI definitions live in tests/nvstub/nvabi.h while
 * the simulated driver is being written; they move here, and the stub will
 * include this file.
 */
#ifndef XPU_NVABI_H
#define XPU_NVABI_H

#include "../tests/nvstub/nvabi.h"

#define NV0000_CTRL_CMD_GPU_GET_PROBED_IDS	0x214

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
