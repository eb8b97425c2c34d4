/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Layouts of the inventory controls (info.c), from the 535 branch's SDK
 * headers; each struct's size is checked below as RM checks paramsSize.
 */
#ifndef NVSTUB_INFO_H
#define NVSTUB_INFO_H

#include <linux/build_bug.h>
#include <linux/types.h>

#define NV_MAX_DEVICES				32
#define NV_ERR_INVALID_PARAM_STRUCT		0x3a

/* ctrl0000gpu.h */
#define NV0000_CTRL_CMD_GPU_GET_PROBED_IDS	0x214
/* 256 B before 580; 580 appends gpuFlags[] (384 B) */
struct nv0000_ctrl_gpu_get_probed_ids_params {
	u32 gpu_ids[NV_MAX_DEVICES];
	u32 excluded_gpu_ids[NV_MAX_DEVICES];
	u32 gpu_flags[NV_MAX_DEVICES];		/* 580+ */
};
static_assert(sizeof(struct nv0000_ctrl_gpu_get_probed_ids_params) == 384);
u32 nvstub_probed_ids_size(void);	/* gpuFlags: 580 */

#define NV0000_CTRL_CMD_GPU_GET_PCI_INFO	0x21b
struct nv0000_ctrl_gpu_get_pci_info_params {
	u32 gpu_id;
	u32 domain;
	u16 bus;
	u16 slot;
};
static_assert(sizeof(struct nv0000_ctrl_gpu_get_pci_info_params) == 12);

#define NV0000_CTRL_CMD_GPU_ATTACH_IDS		0x215
#define NV0000_CTRL_GPU_ATTACH_ALL_PROBED_IDS	0xffff
struct nv0000_ctrl_gpu_attach_ids_params {
	u32 gpu_ids[NV_MAX_DEVICES];
	u32 failed_id;
};
static_assert(sizeof(struct nv0000_ctrl_gpu_attach_ids_params) == 132);

#define NV0000_CTRL_CMD_GPU_DETACH_IDS		0x216
#define NV0000_CTRL_GPU_DETACH_ALL_ATTACHED_IDS	0xffff
struct nv0000_ctrl_gpu_detach_ids_params {
	u32 gpu_ids[NV_MAX_DEVICES];
};
static_assert(sizeof(struct nv0000_ctrl_gpu_detach_ids_params) == 128);

#define NV0000_CTRL_CMD_GPU_QUERY_DRAIN_STATE	0x279
struct nv0000_ctrl_gpu_query_drain_state_params {
	u32 gpu_id;
	u32 drain_state;	/* NV0000_CTRL_GPU_DRAIN_STATE_DISABLED 0 */
	u32 flags;
};
static_assert(sizeof(struct nv0000_ctrl_gpu_query_drain_state_params) == 12);

#define NV0000_CTRL_CMD_GPU_GET_ID_INFO		0x202
struct nv0000_ctrl_gpu_get_id_info_params {
	u32 gpu_id;
	u32 gpu_flags;
	u32 device_instance;
	u32 sub_device_instance;
	u64 sz_name;		/* NvP64, not written by RM */
	u32 sli_status;
	u32 board_id;
	u32 gpu_instance;
	s32 numa_id;
};
static_assert(sizeof(struct nv0000_ctrl_gpu_get_id_info_params) == 40);

#define NV0000_CTRL_CMD_GPU_GET_MEMOP_ENABLE	0x27b
struct nv0000_ctrl_gpu_get_memop_enable_params {
	u32 enable_mask;
};
static_assert(sizeof(struct nv0000_ctrl_gpu_get_memop_enable_params) == 4);

/* ctrl0000client.h, rs_access.h: share policies are in kmod/nvabi.h */

/* ctrl0000syncgpuboost.h: 16 groups of 140 B configs */
#define NV0000_CTRL_CMD_SYNC_GPU_BOOST_GROUP_INFO	0xa04
struct nv0000_sync_gpu_boost_group_info_params {
	u32 group_count;
	u8 boost_groups[16 * 140];	/* NV0000_SYNC_GPU_BOOST_GROUP_CONFIG */
};
static_assert(sizeof(struct nv0000_sync_gpu_boost_group_info_params) == 2244);

/* ctrl0080gpu.h */
#define NV0080_CTRL_CMD_GPU_GET_VIRTUALIZATION_MODE	0x800289
#define NV0080_CTRL_GPU_VIRTUALIZATION_MODE_NONE	0
struct nv0080_ctrl_gpu_get_virtualization_mode_params {
	u32 virtualization_mode;
};
static_assert(sizeof(struct nv0080_ctrl_gpu_get_virtualization_mode_params) == 4);

/* ctrl2080tmr.h */
#define NV2080_CTRL_CMD_TIMER_GET_GPU_CPU_TIME_CORRELATION_INFO	0x20800406
#define NV2080_CTRL_TIMER_GPU_CPU_TIME_MAX_SAMPLES	16
#define NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_OSTIME	1
#define NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_TSC	2
#define NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_PLATFORM_API 3
struct nv2080_ctrl_timer_get_gpu_cpu_time_correlation_info_params {
	u8 cpu_clk_id;		/* SOURCE 3:0, PROCESSOR 7:4 */
	u8 sample_count;
	u8 pad[6];
	struct {
		u64 cpu_time;
		u64 gpu_time;
	} samples[NV2080_CTRL_TIMER_GPU_CPU_TIME_MAX_SAMPLES];
};
static_assert(sizeof(struct nv2080_ctrl_timer_get_gpu_cpu_time_correlation_info_params) == 264);

/* ctrl2080mc.h; the architecture is PMC_BOOT_0's field << 4 (gpu.c) */
#define NV2080_CTRL_CMD_MC_GET_ARCH_INFO	0x20801701
#define NVSTUB_ARCH_GH100			0x180
#define NVSTUB_IMPL_GH100			0x0
#define NVSTUB_REVISION_A1			0xa1
struct nv2080_ctrl_mc_get_arch_info_params {
	u32 architecture;
	u32 implementation;
	u32 revision;
	u8 sub_revision;
};
static_assert(sizeof(struct nv2080_ctrl_mc_get_arch_info_params) == 16);

/* ctrl0000system.h */
#define NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION	0x101
struct nv0000_ctrl_system_get_build_version_params {
	u32 size_of_strings;
	u64 p_driver_version_buffer;	/* NvP64 */
	u64 p_version_buffer;
	u64 p_title_buffer;
	u32 changelist_number;
	u32 official_changelist_number;
};
static_assert(sizeof(struct nv0000_ctrl_system_get_build_version_params) == 40);

#define NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2	0x13e
#define NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE 256
struct nv0000_ctrl_system_get_build_version_v2_params {
	char driver_version_buffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
	char version_buffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
	char title_buffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
	u32 changelist_number;
	u32 official_changelist_number;
};
static_assert(sizeof(struct nv0000_ctrl_system_get_build_version_v2_params) == 776);

/* ctrl0080gpu.h */
#define NV0080_CTRL_CMD_GPU_QUERY_SW_STATE_PERSISTENCE	0x800288
#define NV0080_CTRL_GPU_SW_STATE_PERSISTENCE_ENABLED	0
#define NV0080_CTRL_GPU_SW_STATE_PERSISTENCE_DISABLED	1
struct nv0080_ctrl_gpu_query_sw_state_persistence_params {
	u32 sw_state_persistence;
};
static_assert(sizeof(struct nv0080_ctrl_gpu_query_sw_state_persistence_params) == 4);

#define NV0080_CTRL_CMD_GPU_GET_VGX_CAPS	0x80028e
struct nv0080_ctrl_gpu_get_vgx_caps_params {
	u8 is_vgx;		/* NvBool */
};
static_assert(sizeof(struct nv0080_ctrl_gpu_get_vgx_caps_params) == 1);

#define NV0080_CTRL_CMD_GPU_GET_BRAND_CAPS	0x800294
struct nv0080_ctrl_gpu_get_brand_caps_params {
	u32 brands;		/* NV0080_CTRL_GPU_GET_BRAND_CAPS_* bits */
};
static_assert(sizeof(struct nv0080_ctrl_gpu_get_brand_caps_params) == 4);

#define NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2	0x800292
#define NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE	160
struct nv0080_ctrl_gpu_get_classlist_v2_params {
	u32 num_classes;
	u32 class_list[NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE];
};
static_assert(sizeof(struct nv0080_ctrl_gpu_get_classlist_v2_params) == 644);

#define NV0080_CTRL_CMD_GPU_GET_NUM_SUBDEVICES	0x800280
struct nv0080_ctrl_gpu_get_num_subdevices_params {
	u32 num_sub_devices;
};
static_assert(sizeof(struct nv0080_ctrl_gpu_get_num_subdevices_params) == 4);

/* ctrl0080host.h */
#define NV0080_CTRL_CMD_HOST_GET_CAPS_V2	0x801402
#define NV0080_CTRL_HOST_CAPS_TBL_SIZE		3
struct nv0080_ctrl_host_get_caps_v2_params {
	u8 caps_tbl[NV0080_CTRL_HOST_CAPS_TBL_SIZE];
};
static_assert(sizeof(struct nv0080_ctrl_host_get_caps_v2_params) == 3);

/* ctrl2080gpu.h */
#define NV2080_CTRL_CMD_GPU_GET_INFO_V2			0x20800102
#define NV2080_CTRL_GPU_INFO_MAX_LIST_SIZE		0x40
#define NV2080_CTRL_GPU_INFO_INDEX_SYSMEM_ACCESS	0x1f
#define NV2080_CTRL_GPU_INFO_INDEX_GPU_SM_VERSION	0x2c
#define NV2080_CTRL_GPU_INFO_INDEX_PER_RUNLIST_CHANNEL_RAM 0x2f
#define NV2080_CTRL_GPU_INFO_INDEX_GPU_PROFILING_CAPABILITY 0x36
#define NV2080_CTRL_GPU_INFO_INDEX_GPU_DEBUGGING_CAPABILITY 0x37
#define NV2080_CTRL_GR_INFO_SM_VERSION_9_0		0x900
struct nv2080_ctrl_gpu_get_info_v2_params {
	u32 gpu_info_list_size;
	struct {
		u32 index;
		u32 data;
	} gpu_info_list[NV2080_CTRL_GPU_INFO_MAX_LIST_SIZE];
};
static_assert(sizeof(struct nv2080_ctrl_gpu_get_info_v2_params) == 516);

#define NV2080_CTRL_CMD_GPU_GET_NAME_STRING		0x20800110
#define NV2080_GPU_MAX_NAME_STRING_LENGTH		0x40
#define NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII 0
#define NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_UNICODE 1
struct nv2080_ctrl_gpu_get_name_string_params {
	u32 gpu_name_string_flags;
	union {
		u8 ascii[NV2080_GPU_MAX_NAME_STRING_LENGTH];
		u16 unicode[NV2080_GPU_MAX_NAME_STRING_LENGTH];
	} gpu_name_string;
};
static_assert(sizeof(struct nv2080_ctrl_gpu_get_name_string_params) == 132);

#define NV2080_CTRL_CMD_GPU_QUERY_COMPUTE_MODE_RULES	0x20800131
#define NV2080_CTRL_CMD_GPU_COMPUTE_MODE_RULES_NONE	0
struct nv2080_ctrl_gpu_query_compute_mode_rules_params {
	u32 rules;
};
static_assert(sizeof(struct nv2080_ctrl_gpu_query_compute_mode_rules_params) == 4);

#define NV2080_CTRL_CMD_GPU_GET_GID_INFO		0x2080014a
#define NV2080_GPU_MAX_GID_LENGTH			0x100
#define NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY	0x2	/* FORMAT 1:0 */
#define NV2080_GPU_CMD_GPU_GET_GID_FLAGS_TYPE_SHA256	0x4	/* TYPE 2:2 */
#define NV_ERR_INVALID_FLAGS				0x29
struct nv2080_ctrl_gpu_get_gid_info_params {
	u32 index;
	u32 flags;
	u32 length;
	u8 data[NV2080_GPU_MAX_GID_LENGTH];
};
static_assert(sizeof(struct nv2080_ctrl_gpu_get_gid_info_params) == 268);

#define NV2080_CTRL_CMD_GPU_GET_ENGINES_V2	0x20800170
#define NV2080_GPU_MAX_ENGINES_LIST_SIZE	0x3e
#define NV2080_ENGINE_TYPE_GR0			0x01
#define NV2080_ENGINE_TYPE_COPY0		0x09
#define NV2080_ENGINE_TYPE_SW			0x22
struct nv2080_ctrl_gpu_get_engines_v2_params {
	u32 engine_count;
	u32 engine_list[NV2080_GPU_MAX_ENGINES_LIST_SIZE];
};
static_assert(sizeof(struct nv2080_ctrl_gpu_get_engines_v2_params) == 252);

#define NV2080_CTRL_CMD_GPU_GET_SIMULATION_INFO	0x20800119
#define NV2080_CTRL_GPU_SIMULATION_INFO_TYPE_NONE	0
struct nv2080_ctrl_gpu_get_simulation_info_params {
	u32 type;
};
static_assert(sizeof(struct nv2080_ctrl_gpu_get_simulation_info_params) == 4);

/* ctrl2080bus.h */
#define NV2080_CTRL_CMD_BUS_GET_PCI_INFO		0x20801801
struct nv2080_ctrl_bus_get_pci_info_params {
	u32 pci_device_id;		/* device << 16 | vendor */
	u32 pci_sub_system_id;
	u32 pci_revision_id;
	u32 pci_ext_device_id;
};
static_assert(sizeof(struct nv2080_ctrl_bus_get_pci_info_params) == 16);

#define NV2080_CTRL_CMD_BUS_GET_INFO_V2		0x20801823
#define NV2080_CTRL_BUS_INFO_MAX_LIST_SIZE	0x34
#define NV2080_CTRL_BUS_INFO_INDEX_MAX		0x33
#define NV2080_CTRL_BUS_INFO_INDEX_TYPE		0x00
#define NV2080_CTRL_BUS_INFO_INDEX_BUS_NUMBER	0x0f
#define NV2080_CTRL_BUS_INFO_INDEX_INTERFACE_TYPE 0x13
#define NV2080_CTRL_BUS_INFO_INDEX_GPU_INTERFACE_TYPE 0x2e
#define NV2080_CTRL_BUS_INFO_TYPE_PCI_EXPRESS	0x03
struct nv2080_ctrl_bus_get_info_v2_params {
	u32 bus_info_list_size;
	struct {
		u32 index;
		u32 data;
	} bus_info_list[NV2080_CTRL_BUS_INFO_MAX_LIST_SIZE];
};
static_assert(sizeof(struct nv2080_ctrl_bus_get_info_v2_params) == 420);

#define NV2080_CTRL_CMD_BUS_GET_PCI_BAR_INFO	0x20801803
#define NV2080_CTRL_BUS_MAX_PCI_BARS		8
struct nv2080_ctrl_bus_get_pci_bar_info_params {
	u32 pci_bar_count;
	u32 pad;
	struct {
		u32 flags;
		u32 bar_size;		/* MiB */
		u64 bar_size_bytes;
		u64 bar_offset;
	} pci_bar_info[NV2080_CTRL_BUS_MAX_PCI_BARS];
};
static_assert(sizeof(struct nv2080_ctrl_bus_get_pci_bar_info_params) == 200);

#endif
