// SPDX-License-Identifier: GPL-2.0
/*
 * Inventory controls: what NVIDIA's own user space (NVML, nvidia-smi,
 * libcuda) asks RM about a GPU before it shows or uses it. Layouts are those
 * of the 535 branch's SDK headers (src/common/sdk/nvidia/inc/ctrl/...),
 * in info.h; the values describe the simulated H200 (docs/nvstub.md).
 */
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/timex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "nvstub.h"
#include "info.h"

/* --- NV01_ROOT_CLIENT (ctrl0000gpu.h) */

u32 nvstub_probed_ids_size(void)
{
	return nvstub_abi->since >= 580 ? 384 : 256;
}

static u32 nvstub_ctrl_probed_ids(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_probed_ids_params *p = params;
	unsigned int i;

	for (i = 0; i < NV_MAX_DEVICES; i++) {
		p->gpu_ids[i] = i < nvstub_ngpus ? nvstub_gpus[i].gpu_id :
			NV0000_CTRL_GPU_INVALID_ID;
		p->excluded_gpu_ids[i] = NV0000_CTRL_GPU_INVALID_ID;
		if (nvstub_probed_ids_size() > 256)
			p->gpu_flags[i] = 0;
	}
	return NV_OK;
}

/* RM's copies of embedded buffers: user memory, or kernel memory (kapi.c) */
static int nvstub_copy_from(struct nvstub_call *call, void *dst, u64 src, size_t n)
{
	if (call->kernel) {
		memcpy(dst, (void *)(uintptr_t)src, n);
		return 0;
	}
	return copy_from_user(dst, u64_to_user_ptr(src), n) ? -EFAULT : 0;
}

static int nvstub_copy_to(struct nvstub_call *call, u64 dst, const void *src, size_t n)
{
	if (call->kernel) {
		memcpy((void *)(uintptr_t)dst, src, n);
		return 0;
	}
	return copy_to_user(u64_to_user_ptr(dst), src, n) ? -EFAULT : 0;
}

static struct nvstub_gpu *nvstub_gpu_by_id(u32 gpu_id)
{
	unsigned int i;

	for (i = 0; i < nvstub_ngpus; i++)
		if (nvstub_gpus[i].gpu_id == gpu_id)
			return &nvstub_gpus[i];
	return NULL;
}

/* gpumgrGetProbedGpuDomainBusDevice(): an unknown id is NV_ERR_OBJECT_NOT_FOUND */
static u32 nvstub_ctrl_pci_info(struct nvstub_call *call,
				struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_pci_info_params *p = params;
	struct nvstub_gpu *gpu = nvstub_gpu_by_id(p->gpu_id);

	if (!gpu)
		return NV_ERR_OBJECT_NOT_FOUND;
	p->domain = 0;
	p->bus = gpu->bus;
	p->slot = 0;
	return NV_OK;
}

/*
 * cliresCtrlCmdGpuAttachIds/DetachIds: on Unix they only check that every id
 * (up to the first NV0000_CTRL_GPU_INVALID_ID) is probed / attached; the
 * stub's GPUs are all probed and attached.
 */
static u32 nvstub_ctrl_attach_ids(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_attach_ids_params *p = params;
	unsigned int i;

	if (p->gpu_ids[0] == NV0000_CTRL_GPU_ATTACH_ALL_PROBED_IDS)
		return NV_OK;
	for (i = 0; i < NV_MAX_DEVICES &&
		    p->gpu_ids[i] != NV0000_CTRL_GPU_INVALID_ID; i++)
		if (!nvstub_gpu_by_id(p->gpu_ids[i]))
			return NV_ERR_INVALID_ARGUMENT;
	return NV_OK;
}

static u32 nvstub_ctrl_detach_ids(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_detach_ids_params *p = params;

	/* RM checks the first id only, then stops (client_resource.c) */
	if (p->gpu_ids[0] == NV0000_CTRL_GPU_DETACH_ALL_ATTACHED_IDS ||
	    p->gpu_ids[0] == NV0000_CTRL_GPU_INVALID_ID)
		return NV_OK;
	return nvstub_gpu_by_id(p->gpu_ids[0]) ? NV_OK : NV_ERR_INVALID_ARGUMENT;
}

/* gpumgrQueryGpuDrainState(): never draining, never removed */
static u32 nvstub_ctrl_drain_state(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_query_drain_state_params *p = params;

	if (!nvstub_gpu_by_id(p->gpu_id))
		return NV_ERR_OBJECT_NOT_FOUND;
	p->drain_state = 0;
	p->flags = 0;
	return NV_OK;
}

/* gpumgrGetGpuIdInfo(): V2's answer (ctrl.c), without szName */
static u32 nvstub_ctrl_id_info(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_id_info_params *p = params;
	struct nvstub_gpu *gpu = nvstub_gpu_by_id(p->gpu_id);

	if (!gpu)
		return NV_ERR_INVALID_ARGUMENT;
	p->gpu_flags = 0;
	p->device_instance = gpu->index;
	p->sub_device_instance = 0;
	p->sli_status = 0;
	p->board_id = gpu->index;
	p->gpu_instance = gpu->index;
	p->numa_id = NV0000_CTRL_NO_NUMA_NODE;
	return NV_OK;
}

/*
 * cliresCtrlCmdSystemGetBuildVersionV2(): NV_VERSION_STRING is the loaded
 * version; the branch, title and changelists are the stub's own.
 */
static void nvstub_build_version(struct nv0000_ctrl_system_get_build_version_v2_params *p)
{
	strscpy(p->driver_version_buffer, nvstub_version,
		sizeof(p->driver_version_buffer));
	strscpy(p->version_buffer, "nvstub", sizeof(p->version_buffer));
	strscpy(p->title_buffer, "nvstub Release Build", sizeof(p->title_buffer));
	p->changelist_number = 0;
	p->official_changelist_number = 0;
}

static u32 nvstub_ctrl_build_version_v2(struct nvstub_call *call,
					struct nvstub_object *obj, void *params)
{
	nvstub_build_version(params);
	return NV_OK;
}

/*
 * cliresCtrlCmdClientSetInheritedSharePolicy() → ShareObject on the client
 * object itself (clientShareResource, rm.c): its objects without a list of
 * their own share what it shares.
 */
static u32 nvstub_ctrl_inherited_share(struct nvstub_call *call,
				       struct nvstub_object *obj, void *params)
{
	return nvstub_share(obj, params);
}

/* cliresCtrlCmdGpuGetMemOpEnable(): the stream-memops override is off */
static u32 nvstub_ctrl_memop_enable(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_memop_enable_params *p = params;

	p->enable_mask = 0;
	return NV_OK;
}

/* gpuboostmgrQueryGroups(): no sync-boost groups are configured */
static u32 nvstub_ctrl_boost_groups(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv0000_sync_gpu_boost_group_info_params *p = params;

	memset(p, 0, sizeof(*p));
	return NV_OK;
}

/* --- NV01_DEVICE_0 (ctrl0080*.h) */

/* deviceCtrlCmdGpuGetVirtualizationMode(): bare metal, no vGPU */
static u32 nvstub_ctrl_virt_mode(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_gpu_get_virtualization_mode_params *p = params;

	p->virtualization_mode = NV0080_CTRL_GPU_VIRTUALIZATION_MODE_NONE;
	return NV_OK;
}

/* --- NV20_SUBDEVICE_0 (ctrl2080*.h) */

/*
 * subdeviceCtrlCmdTimerGetGpuCpuTimeCorrelationInfo() on CPU-RM: the CPU
 * processor only (GSP → NV_ERR_NOT_SUPPORTED, not a GSP client; anything
 * else → NV_ERR_INVALID_ARGUMENT). stub: the GPU's PTIMER is the kernel's
 * monotonic clock in ns; PLATFORM_API fills one sample, as RM does.
 */
static u32 nvstub_ctrl_time_correlation(struct nvstub_call *call,
					struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_timer_get_gpu_cpu_time_correlation_info_params *p = params;
	unsigned int i;

	if (p->sample_count > NV2080_CTRL_TIMER_GPU_CPU_TIME_MAX_SAMPLES)
		return NV_ERR_INVALID_ARGUMENT;
	if ((p->cpu_clk_id >> 4) == 1)
		return NV_ERR_NOT_SUPPORTED;
	if ((p->cpu_clk_id >> 4) != 0)
		return NV_ERR_INVALID_ARGUMENT;
	switch (p->cpu_clk_id & 0xf) {
	case NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_OSTIME:
		for (i = 0; i < p->sample_count; i++) {
			p->samples[i].cpu_time = ktime_get_real_ns() / 1000;
			p->samples[i].gpu_time = ktime_get_ns();
		}
		return NV_OK;
	case NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_PLATFORM_API:
		p->samples[0].cpu_time = ktime_get_raw_ns();
		p->samples[0].gpu_time = ktime_get_ns();
		return NV_OK;
	case NV2080_TIMER_GPU_CPU_TIME_CPU_CLK_ID_TSC:
		for (i = 0; i < p->sample_count; i++) {
			p->samples[i].cpu_time = get_cycles();
			p->samples[i].gpu_time = ktime_get_ns();
		}
		return NV_OK;
	}
	return NV_ERR_NOT_SUPPORTED;
}

/* subdeviceCtrlCmdMcGetArchInfo(): GH100, revision A1 (H200) */
static u32 nvstub_ctrl_arch_info(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_mc_get_arch_info_params *p = params;

	p->architecture = NVSTUB_ARCH_GH100;
	p->implementation = NVSTUB_IMPL_GH100;
	p->revision = NVSTUB_REVISION_A1;
	p->sub_revision = 0;
	return NV_OK;
}

/* deviceCtrlCmdGpuQuerySwStatePersistence(): persistence mode off */
static u32 nvstub_ctrl_persistence(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_gpu_query_sw_state_persistence_params *p = params;

	p->sw_state_persistence = NV0080_CTRL_GPU_SW_STATE_PERSISTENCE_DISABLED;
	return NV_OK;
}

/* deviceCtrlCmdGpuGetVgxCaps(): always NV_FALSE */
static u32 nvstub_ctrl_vgx_caps(struct nvstub_call *call,
				struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_gpu_get_vgx_caps_params *p = params;

	p->is_vgx = 0;
	return NV_OK;
}

/*
 * deviceCtrlCmdGpuGetBrandCaps (not in the open source): stub: a data-centre
 * part carries none of the QUADRO/NVS/TITAN brand bits.
 */
static u32 nvstub_ctrl_brand_caps(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_gpu_get_brand_caps_params *p = params;

	p->brands = 0;
	return NV_OK;
}

/* deviceCtrlCmdGpuGetClasslistV2(): the GPU's classes, here the stub's own */
static u32 nvstub_ctrl_classlist_v2(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	static const u32 classes[] = {
		NV01_MEMORY_SYSTEM, NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM_DYNAMIC,
		NV01_DEVICE_0, NV20_SUBDEVICE_0, NV50_MEMORY_VIRTUAL,
		KEPLER_CHANNEL_GROUP_A, HOPPER_USERMODE_A, HOPPER_CHANNEL_GPFIFO_A,
		HOPPER_COMPUTE_A,
	};
	struct nv0080_ctrl_gpu_get_classlist_v2_params *p = params;

	memcpy(p->class_list, classes, sizeof(classes));
	p->num_classes = ARRAY_SIZE(classes);
	return NV_OK;
}

/*
 * deviceCtrlCmdHostGetCapsV2() → kbusGetDeviceCaps(): stub: no host bug
 * workarounds and no coherent BAR mappings, all bits clear.
 */
static u32 nvstub_ctrl_host_caps_v2(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	memset(params, 0, sizeof(struct nv0080_ctrl_host_get_caps_v2_params));
	return NV_OK;
}

/* deviceCtrlCmdGpuGetNumSubdevices(): always 1 */
static u32 nvstub_ctrl_num_subdevices(struct nvstub_call *call,
				      struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_gpu_get_num_subdevices_params *p = params;

	p->num_sub_devices = 1;
	return NV_OK;
}

/*
 * getGpuInfos(): list size 0 or above NV2080_CTRL_GPU_INFO_MAX_LIST_SIZE, or
 * an index at or above it → NV_ERR_INVALID_ARGUMENT. stub: the values of a
 * bare-metal H200; the indexes CPU-RM leaves to GSP read 0.
 */
static u32 nvstub_ctrl_gpu_info_v2(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_info_v2_params *p = params;
	unsigned int i;
	u32 data;

	if (p->gpu_info_list_size == 0 ||
	    p->gpu_info_list_size > NV2080_CTRL_GPU_INFO_MAX_LIST_SIZE)
		return NV_ERR_INVALID_ARGUMENT;
	for (i = 0; i < p->gpu_info_list_size; i++) {
		switch (p->gpu_info_list[i].index) {
		case NV2080_CTRL_GPU_INFO_INDEX_SYSMEM_ACCESS:
		case NV2080_CTRL_GPU_INFO_INDEX_PER_RUNLIST_CHANNEL_RAM:
		case NV2080_CTRL_GPU_INFO_INDEX_GPU_PROFILING_CAPABILITY:
		case NV2080_CTRL_GPU_INFO_INDEX_GPU_DEBUGGING_CAPABILITY:
			data = 1;	/* _YES / _ENABLED */
			break;
		case NV2080_CTRL_GPU_INFO_INDEX_GPU_SM_VERSION:
			data = NV2080_CTRL_GR_INFO_SM_VERSION_9_0;
			break;
		default:
			if (p->gpu_info_list[i].index >= NV2080_CTRL_GPU_INFO_MAX_LIST_SIZE)
				return NV_ERR_INVALID_ARGUMENT;
			data = 0;	/* _NO, or not present on this GPU */
			break;
		}
		p->gpu_info_list[i].data = data;
	}
	return NV_OK;
}

/* subdeviceCtrlCmdGpuGetNameString(): the marketing name, ASCII or UCS-2 */
static u32 nvstub_ctrl_name_string(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_name_string_params *p = params;
	static const char name[] = NVSTUB_MODEL;
	unsigned int i;

	memset(&p->gpu_name_string, 0, sizeof(p->gpu_name_string));
	switch (p->gpu_name_string_flags) {
	case NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII:
		strscpy(p->gpu_name_string.ascii, name, sizeof(p->gpu_name_string.ascii));
		return NV_OK;
	case NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_UNICODE:
		for (i = 0; i < sizeof(name) - 1; i++)
			p->gpu_name_string.unicode[i] = name[i];
		return NV_OK;
	}
	return NV_ERR_INVALID_ARGUMENT;
}

/*
 * gpuGetGidInfo(): only the SHA-1 type (else NV_ERR_INVALID_FLAGS); binary is
 * the 16 bytes, ASCII the "GPU-..." string with its NUL.
 */
static u32 nvstub_ctrl_gid_info(struct nvstub_call *call,
				struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_gid_info_params *p = params;
	const char *u = obj->gpu->uuid + 4;	/* after "GPU-" */
	unsigned int n = 0;

	if (p->flags & NV2080_GPU_CMD_GPU_GET_GID_FLAGS_TYPE_SHA256)
		return NV_ERR_INVALID_FLAGS;
	memset(p->data, 0, sizeof(p->data));
	if ((p->flags & 3) == NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY) {
		for (; *u && n < 16; u++) {
			if (*u == '-')
				continue;
			if (hex2bin(&p->data[n++], u, 1))
				return NV_ERR_INVALID_STATE;
			u++;
		}
		p->length = 16;
		return NV_OK;
	}
	strscpy(p->data, obj->gpu->uuid, sizeof(p->data));
	p->length = strlen(obj->gpu->uuid) + 1;
	return NV_OK;
}

/* subdeviceCtrlCmdGpuGetEnginesV2(): stub: GR0, one copy engine, SW */
static u32 nvstub_ctrl_engines_v2(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_engines_v2_params *p = params;
	static const u32 engines[] = {
		NV2080_ENGINE_TYPE_GR0, NV2080_ENGINE_TYPE_COPY0, NV2080_ENGINE_TYPE_SW,
	};

	memset(p->engine_list, 0, sizeof(p->engine_list));
	memcpy(p->engine_list, engines, sizeof(engines));
	p->engine_count = ARRAY_SIZE(engines);
	return NV_OK;
}

/*
 * subdeviceCtrlCmdGpuGetSimulationInfo(): silicon. (The stub is a simulation,
 * but of the driver, not of the chip in NVIDIA's RTL/fmodel sense.)
 */
static u32 nvstub_ctrl_simulation_info(struct nvstub_call *call,
				       struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_simulation_info_params *p = params;

	p->type = NV2080_CTRL_GPU_SIMULATION_INFO_TYPE_NONE;
	return NV_OK;
}

/* subdeviceCtrlCmdGpuQueryComputeModeRules(): the default compute mode */
static u32 nvstub_ctrl_compute_mode_rules(struct nvstub_call *call,
					  struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_query_compute_mode_rules_params *p = params;

	p->rules = NV2080_CTRL_CMD_GPU_COMPUTE_MODE_RULES_NONE;
	return NV_OK;
}

/* kbusGetPciInfo: ids from config space; stub: H200 SXM's subsystem */
static u32 nvstub_ctrl_bus_pci_info(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_bus_get_pci_info_params *p = params;

	p->pci_device_id = NVSTUB_DEVICE_ID << 16 | NVSTUB_VENDOR_ID;
	p->pci_sub_system_id = NVSTUB_SUBSYSTEM_ID << 16 | NVSTUB_VENDOR_ID;
	p->pci_revision_id = NVSTUB_REVISION_A1;
	p->pci_ext_device_id = NVSTUB_DEVICE_ID;
	return NV_OK;
}

/*
 * getBusInfos(): list size 0 or above NV2080_CTRL_BUS_INFO_MAX_LIST_SIZE, or
 * an index above NV2080_CTRL_BUS_INFO_INDEX_MAX → NV_ERR_INVALID_ARGUMENT.
 * stub: a PCI Express GPU on bus 0x18+N; link, error and DMA figures read 0.
 */
static u32 nvstub_ctrl_bus_info_v2(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_bus_get_info_v2_params *p = params;
	unsigned int i;

	if (p->bus_info_list_size == 0 ||
	    p->bus_info_list_size > NV2080_CTRL_BUS_INFO_MAX_LIST_SIZE)
		return NV_ERR_INVALID_ARGUMENT;
	for (i = 0; i < p->bus_info_list_size; i++) {
		switch (p->bus_info_list[i].index) {
		case NV2080_CTRL_BUS_INFO_INDEX_TYPE:
		case NV2080_CTRL_BUS_INFO_INDEX_INTERFACE_TYPE:
		case NV2080_CTRL_BUS_INFO_INDEX_GPU_INTERFACE_TYPE:
			p->bus_info_list[i].data = NV2080_CTRL_BUS_INFO_TYPE_PCI_EXPRESS;
			break;
		case NV2080_CTRL_BUS_INFO_INDEX_BUS_NUMBER:
			p->bus_info_list[i].data = obj->gpu->bus;
			break;
		default:
			if (p->bus_info_list[i].index > NV2080_CTRL_BUS_INFO_INDEX_MAX)
				return NV_ERR_INVALID_ARGUMENT;
			p->bus_info_list[i].data = 0;
			break;
		}
	}
	return NV_OK;
}

/* subdeviceCtrlCmdBusGetPciBarInfo(): stub: BAR0 (registers) and BAR1 (FB) */
static u32 nvstub_ctrl_pci_bar_info(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_bus_get_pci_bar_info_params *p = params;
	const u64 base[2] = { obj->gpu->reg_address, obj->gpu->fb_address };
	const u64 size[2] = { NVSTUB_BAR0_SIZE, NVSTUB_BAR1_SIZE };
	unsigned int i;

	memset(p->pci_bar_info, 0, sizeof(p->pci_bar_info));
	p->pci_bar_count = 2;
	for (i = 0; i < 2; i++) {
		p->pci_bar_info[i].bar_size = size[i] >> 20;
		p->pci_bar_info[i].bar_size_bytes = size[i];
		p->pci_bar_info[i].bar_offset = base[i];
	}
	return NV_OK;
}

#define CTRL(cmd, cls, type, fn) { cmd, cls, sizeof(struct type), fn }

const struct nvstub_ctrl nvstub_info_ctrls[] = {
	{ NV0000_CTRL_CMD_GPU_GET_PROBED_IDS, NV01_ROOT_CLIENT, 0,
	  nvstub_ctrl_probed_ids, nvstub_probed_ids_size },
	CTRL(NV0000_CTRL_CMD_GPU_GET_PCI_INFO, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_get_pci_info_params, nvstub_ctrl_pci_info),
	CTRL(NV0000_CTRL_CMD_GPU_ATTACH_IDS, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_attach_ids_params, nvstub_ctrl_attach_ids),
	CTRL(NV0000_CTRL_CMD_GPU_DETACH_IDS, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_detach_ids_params, nvstub_ctrl_detach_ids),
	CTRL(NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY, NV01_ROOT_CLIENT,
	     rs_share_policy,
	     nvstub_ctrl_inherited_share),
	CTRL(NV0000_CTRL_CMD_SYNC_GPU_BOOST_GROUP_INFO, NV01_ROOT_CLIENT,
	     nv0000_sync_gpu_boost_group_info_params, nvstub_ctrl_boost_groups),
	CTRL(NV0000_CTRL_CMD_GPU_GET_MEMOP_ENABLE, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_get_memop_enable_params, nvstub_ctrl_memop_enable),
	CTRL(NV0000_CTRL_CMD_GPU_GET_ID_INFO, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_get_id_info_params, nvstub_ctrl_id_info),
	CTRL(NV0000_CTRL_CMD_GPU_QUERY_DRAIN_STATE, NV01_ROOT_CLIENT,
	     nv0000_ctrl_gpu_query_drain_state_params, nvstub_ctrl_drain_state),
	CTRL(NV0080_CTRL_CMD_GPU_GET_VIRTUALIZATION_MODE, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_get_virtualization_mode_params, nvstub_ctrl_virt_mode),
	CTRL(NV2080_CTRL_CMD_TIMER_GET_GPU_CPU_TIME_CORRELATION_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_timer_get_gpu_cpu_time_correlation_info_params,
	     nvstub_ctrl_time_correlation),
	CTRL(NV2080_CTRL_CMD_MC_GET_ARCH_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_mc_get_arch_info_params, nvstub_ctrl_arch_info),
	CTRL(NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, NV01_ROOT_CLIENT,
	     nv0000_ctrl_system_get_build_version_v2_params,
	     nvstub_ctrl_build_version_v2),
	CTRL(NV0080_CTRL_CMD_GPU_QUERY_SW_STATE_PERSISTENCE, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_query_sw_state_persistence_params, nvstub_ctrl_persistence),
	CTRL(NV0080_CTRL_CMD_GPU_GET_VGX_CAPS, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_get_vgx_caps_params, nvstub_ctrl_vgx_caps),
	CTRL(NV0080_CTRL_CMD_GPU_GET_BRAND_CAPS, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_get_brand_caps_params, nvstub_ctrl_brand_caps),
	CTRL(NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_get_classlist_v2_params, nvstub_ctrl_classlist_v2),
	CTRL(NV0080_CTRL_CMD_HOST_GET_CAPS_V2, NV01_DEVICE_0,
	     nv0080_ctrl_host_get_caps_v2_params, nvstub_ctrl_host_caps_v2),
	CTRL(NV0080_CTRL_CMD_GPU_GET_NUM_SUBDEVICES, NV01_DEVICE_0,
	     nv0080_ctrl_gpu_get_num_subdevices_params, nvstub_ctrl_num_subdevices),
	CTRL(NV2080_CTRL_CMD_GPU_GET_INFO_V2, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_get_info_v2_params, nvstub_ctrl_gpu_info_v2),
	CTRL(NV2080_CTRL_CMD_GPU_GET_NAME_STRING, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_get_name_string_params, nvstub_ctrl_name_string),
	CTRL(NV2080_CTRL_CMD_GPU_GET_GID_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_get_gid_info_params, nvstub_ctrl_gid_info),
	CTRL(NV2080_CTRL_CMD_GPU_GET_ENGINES_V2, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_get_engines_v2_params, nvstub_ctrl_engines_v2),
	CTRL(NV2080_CTRL_CMD_GPU_GET_SIMULATION_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_get_simulation_info_params, nvstub_ctrl_simulation_info),
	CTRL(NV2080_CTRL_CMD_GPU_QUERY_COMPUTE_MODE_RULES, NV20_SUBDEVICE_0,
	     nv2080_ctrl_gpu_query_compute_mode_rules_params,
	     nvstub_ctrl_compute_mode_rules),
	CTRL(NV2080_CTRL_CMD_BUS_GET_PCI_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_bus_get_pci_info_params, nvstub_ctrl_bus_pci_info),
	CTRL(NV2080_CTRL_CMD_BUS_GET_INFO_V2, NV20_SUBDEVICE_0,
	     nv2080_ctrl_bus_get_info_v2_params, nvstub_ctrl_bus_info_v2),
	CTRL(NV2080_CTRL_CMD_BUS_GET_PCI_BAR_INFO, NV20_SUBDEVICE_0,
	     nv2080_ctrl_bus_get_pci_bar_info_params, nvstub_ctrl_pci_bar_info),
};
const unsigned int nvstub_info_nctrls = ARRAY_SIZE(nvstub_info_ctrls);

/*
 * NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION is a deprecated control
 * (rmapi_deprecated_control.c), taken before the ordinary checks when the
 * client exists and flags is 0: V2 is called on hObject, then the V1 struct
 * (paramsSize exact) comes back with sizeOfStrings = the longest string + 1
 * when any buffer pointer is NULL; else each string is copied out (a buffer
 * smaller than that → NV_ERR_INVALID_PARAM_STRUCT, as is a copy fault).
 */
u32 nvstub_build_version_v1(struct nvstub_call *call, struct nvos54_parameters *p)
{
	struct nv0000_ctrl_system_get_build_version_v2_params *v2;
	struct nv0000_ctrl_system_get_build_version_params v1;
	struct nvstub_client *c;
	struct nvstub_object *obj;
	size_t l1, l2, l3, max;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (!status) {
		obj = nvstub_object_find(c, p->h_object);
		if (!obj)
			status = NV_ERR_OBJECT_NOT_FOUND;
		else if (obj->hclass != NV01_ROOT_CLIENT)
			status = NV_ERR_NOT_SUPPORTED;
	}
	mutex_unlock(&nvstub_rm_lock);
	if (status)
		return status;
	if (p->params_size != sizeof(v1) || !p->params)
		return NV_ERR_INVALID_ARGUMENT;
	if (nvstub_copy_from(call, &v1, p->params, sizeof(v1)))
		return NV_ERR_INVALID_ADDRESS;

	v2 = kzalloc(sizeof(*v2), GFP_KERNEL);
	if (!v2)
		return NV_ERR_NO_MEMORY;
	nvstub_build_version(v2);
	l1 = strlen(v2->driver_version_buffer) + 1;
	l2 = strlen(v2->version_buffer) + 1;
	l3 = strlen(v2->title_buffer) + 1;
	max = max3(l1, l2, l3);
	if (!v1.p_driver_version_buffer || !v1.p_version_buffer || !v1.p_title_buffer) {
		v1.size_of_strings = max;
	} else if (v1.size_of_strings < max) {
		status = NV_ERR_INVALID_PARAM_STRUCT;
	} else if (nvstub_copy_to(call, v1.p_driver_version_buffer,
				  v2->driver_version_buffer, l1) ||
		   nvstub_copy_to(call, v1.p_version_buffer, v2->version_buffer, l2) ||
		   nvstub_copy_to(call, v1.p_title_buffer, v2->title_buffer, l3)) {
		status = NV_ERR_INVALID_PARAM_STRUCT;
	} else {
		v1.changelist_number = v2->changelist_number;
		v1.official_changelist_number = v2->official_changelist_number;
	}
	kfree(v2);
	if (!status && nvstub_copy_to(call, p->params, &v1, sizeof(v1)))
		status = NV_ERR_INVALID_ADDRESS;
	return status;
}
