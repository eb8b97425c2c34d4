/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The NVIDIA kernel driver's ABI as far as xpu.ko reads it and nvstub
 * (tests/nvstub, which includes this file) simulates it: numbers, status
 * codes and naturally aligned layouts, written from the public headers
 * of NVIDIA/open-gpu-kernel-modules (each struct names the header it mirrors)
 * and checked against shared/reference/nvidia-abi/layouts-*.txt at build time
 * (nvabi_build_checks()).  Sizes that changed between driver versions are in
 * nv_abi_for_version() below (xpu.ko) and nvstub's version table.
 */
#ifndef XPU_NVABI_H
#define XPU_NVABI_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>

/* kernel-open/common/inc/nv-ioctl-numbers.h, nv.h */
#define NV_MAJOR_DEVICE_NUMBER		195
#define NV_MINOR_CONTROL		255
#define NV_IOCTL_MAGIC			'F'
#define NV_ABSOLUTE_MAX_IOCTL_SIZE	16384

#define NV_ESC_CARD_INFO		200
#define NV_ESC_REGISTER_FD		201
#define NV_ESC_ALLOC_OS_EVENT		206
#define NV_ESC_FREE_OS_EVENT		207
#define NV_ESC_STATUS_CODE		209
#define NV_ESC_CHECK_VERSION_STR	210
#define NV_ESC_IOCTL_XFER_CMD		211
#define NV_ESC_ATTACH_GPUS_TO_FD	212
#define NV_ESC_QUERY_DEVICE_INTR	213
#define NV_ESC_SYS_PARAMS		214
#define NV_ESC_NUMA_INFO		215
#define NV_ESC_EXPORT_TO_DMABUF_FD	217
#define NV_ESC_WAIT_OPEN_COMPLETE	218

/* src/nvidia/arch/nvalloc/unix/include/nv_escape.h */
#define NV_ESC_RM_ALLOC_MEMORY		0x27
#define NV_ESC_RM_ALLOC_OBJECT		0x28
#define NV_ESC_RM_FREE			0x29
#define NV_ESC_RM_CONTROL		0x2A
#define NV_ESC_RM_ALLOC			0x2B
#define NV_ESC_RM_DUP_OBJECT		0x34
#define NV_ESC_RM_SHARE			0x35
#define NV_ESC_RM_I2C_ACCESS		0x39
#define NV_ESC_RM_IDLE_CHANNELS		0x41
#define NV_ESC_RM_VID_HEAP_CONTROL	0x4A
#define NV_ESC_RM_ACCESS_REGISTRY	0x4D
#define NV_ESC_RM_MAP_MEMORY		0x4E
#define NV_ESC_RM_UNMAP_MEMORY		0x4F
#define NV_ESC_RM_GET_EVENT_DATA	0x52
#define NV_ESC_RM_ALLOC_CONTEXT_DMA2	0x54
#define NV_ESC_RM_MAP_MEMORY_DMA	0x57
#define NV_ESC_RM_UNMAP_MEMORY_DMA	0x58
#define NV_ESC_RM_BIND_CONTEXT_DMA	0x59
#define NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO 0x5E

/* src/common/sdk/nvidia/inc/nvstatuscodes.h */
#define NV_OK				0x00
#define NV_ERR_IN_USE			0x17
#define NV_ERR_INSERT_DUPLICATE_NAME	0x19
#define NV_ERR_INSUFFICIENT_RESOURCES	0x1A
#define NV_ERR_INSUFFICIENT_PERMISSIONS	0x1B
#define NV_ERR_INVALID_ACCESS_TYPE	0x1D
#define NV_ERR_INVALID_ADDRESS		0x1E
#define NV_ERR_INVALID_ARGUMENT		0x1F
#define NV_ERR_INVALID_BASE		0x20
#define NV_ERR_INVALID_CHANNEL		0x21
#define NV_ERR_INVALID_CLASS		0x22
#define NV_ERR_INVALID_CLIENT		0x23
#define NV_ERR_INVALID_EVENT		0x28
#define NV_ERR_INVALID_DEVICE		0x26
#define NV_ERR_INVALID_FLAGS		0x29
#define NV_ERR_INVALID_LIMIT		0x2E
#define NV_ERR_INVALID_OBJECT		0x31
#define NV_ERR_INVALID_OBJECT_HANDLE	0x33
#define NV_ERR_INVALID_OBJECT_PARENT	0x36
#define NV_ERR_INVALID_OFFSET		0x37
#define NV_ERR_INVALID_OWNER		0x39
#define NV_ERR_INVALID_PARAMETER	0x3B
#define NV_ERR_INVALID_STATE		0x40
#define NV_ERR_INVALID_STRING_LENGTH	0x41
#define NV_ERR_NO_MEMORY		0x51
#define NV_ERR_NOT_SUPPORTED		0x56
#define NV_ERR_OBJECT_NOT_FOUND		0x57
#define NV_ERR_OPERATING_SYSTEM		0x59
#define NV_ERR_OUT_OF_RANGE		0x5B
#define NV_ERR_STATE_IN_USE		0x63
#define NV_ERR_UVM_ADDRESS_IN_USE	0x68
#define NV_ERR_RESOURCE_LOST		0x6E
#define NV_ERR_GPU_UUID_NOT_FOUND	0x12
#define NV_ERR_ILLEGAL_ACTION		0x16
#define NV_ERR_GENERIC			0xFFFF

/*
 * ctrl0041.h: a memory object's surface information, any Memory's
 * (mem_ctrl.c memCtrlCmdGetSurfaceInfoLvm): a list of {index, data} the
 * caller points to (embedded_param_copy.c copies it for user callers).
 * PHYS_SIZE is memdescGetSize() in 4 KiB units; from 580 PHYS_SIZE_LO/HI
 * give it in bytes.
 */
#define NV0041_CTRL_CMD_GET_SURFACE_INFO		0x410110
#define NV0041_CTRL_SURFACE_INFO_INDEX_ATTRS		1
#define NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_LO	2
#define NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_HI	3
#define NV0041_CTRL_SURFACE_INFO_INDEX_COMPR_COVERAGE	5
#define NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE	7
#define NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_ATTR	8
#define NV0041_CTRL_SURFACE_INFO_INDEX_ADDR_SPACE_TYPE	9
#define NV0041_CTRL_SURFACE_INFO_PHYS_SIZE_SCALE_FACTOR	0x1000
#define NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_SYSMEM 1
#define NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_VIDMEM 2
/*
 * ctrl0041.h, 550 on (mem_ctrl.c memCtrlCmdGetSurfacePhysAttrLvm, absent in
 * 535): where a Memory's byte MEM_OFFSET lies (in: the offset; out:
 * memdescFillMemdescForPhysAttr's address, AT_GPU) and in which aperture.
 * Every duplicate of a memory shares its memdesc, so the address of offset
 * 0 is one memory's while it lives.  RMCTRL_FLAGS_PRIVILEGED from 580: a
 * user client needs admin rights, a kernel caller never does.
 */
#define NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR		0x410103
#define NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_VIDMEM 0
#define NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_SYSMEM 1
struct nv0041_ctrl_get_surface_phys_attr_params {
	u64 mem_offset;
	u32 mem_format;
	u32 compr_offset;
	u32 compr_format;
	u32 mem_aperture;
	u32 gpu_cache_attr;
	u32 gpu_p2p_cache_attr;
	u32 mmu_context;
	u32 pad0;
	u64 contig_segment_size;
};

struct nv0041_ctrl_surface_info {
	u32 index;
	u32 data;
};

struct nv0041_ctrl_get_surface_info_params {
	u32 surface_info_list_size;
	u32 pad0;
	u64 surface_info_list;
};

/* class/cl*.h */
#define NV01_ROOT			0x0000
#define NV01_ROOT_NON_PRIV		0x0001
#define NV01_ROOT_CLIENT		0x0041
#define NV01_CONTEXT_DMA		0x0002
#define NV01_EVENT			0x0005
#define NV01_MEMORY_SYSTEM		0x003E
/*
 * ctrl003e.h: the physical pages of an NV01_MEMORY_SYSTEM object, for
 * kernel callers only (RMCTRL_FLAGS_KERNEL_PRIVILEGED, the default:
 * g_system_mem_nvoc.c's flags 0x0).  pPages is a kernel pointer to
 * numPages struct page pointers, which nv_get_phys_pages() fills in, one
 * per OS page (nv.c); numPages is in/out.
 */
#define NV003E_CTRL_CMD_GET_SURFACE_NUM_PHYS_PAGES	0x3e0102
#define NV003E_CTRL_CMD_GET_SURFACE_PHYS_PAGES		0x3e0103
struct nv003e_ctrl_get_surface_num_phys_pages_params {
	u32 num_pages;
};

struct nv003e_ctrl_get_surface_phys_pages_params {
	u64 p_pages;
	u32 num_pages;
	u32 pad0;
};

#define NV01_MEMORY_LOCAL_USER		0x0040
#define NV01_MEMORY_DEVICELESS		0x90CE	/* system memory, under the client */
#define NV_EVENT_BUFFER			0x90CD	/* an event buffer, under the client */
#define NV01_MEMORY_LOCAL_PRIVILEGED	0x003F
#define NV01_MEMORY_HW_RESOURCES	0x00B1
#define NVA084_KERNEL_HOST_VGPU_DEVICE	0xA084
#define NV01_MEMORY_SYSTEM_DYNAMIC	0x0070
#define NV01_EVENT_KERNEL_CALLBACK	0x0078
#define NV01_EVENT_OS_EVENT		0x0079
#define NV01_EVENT_KERNEL_CALLBACK_EX	0x007E
#define NV01_MEMORY_SYSTEM_OS_DESCRIPTOR 0x0071
#define NV01_MEMORY_FRAMEBUFFER_CONSOLE	0x0076
#define NV01_MEMORY_LIST_SYSTEM		0x0081
#define NV01_MEMORY_LIST_FBMEM		0x0082
#define NV01_MEMORY_LIST_OBJECT		0x0083
#define NV01_MEMORY_FLA			0x00F3
#define NV01_DEVICE_0			0x0080
#define NV20_SUBDEVICE_0		0x2080
#define NV50_MEMORY_VIRTUAL		0x50A0
#define MPS_COMPUTE			0x900E
#define KEPLER_CHANNEL_GROUP_A		0xA06C
#define VOLTA_USERMODE_A		0xC361
#define TURING_USERMODE_A		0xC461
#define AMPERE_USERMODE_A		0xC561
#define HOPPER_USERMODE_A		0xC661
#define BLACKWELL_USERMODE_A		0xC761
#define VOLTA_CHANNEL_GPFIFO_A		0xC36F
#define TURING_CHANNEL_GPFIFO_A		0xC46F
#define AMPERE_CHANNEL_GPFIFO_A		0xC56F
#define AMPERE_CHANNEL_GPFIFO_B		0xC76F
#define HOPPER_CHANNEL_GPFIFO_A		0xC86F
#define BLACKWELL_CHANNEL_GPFIFO_A	0xC96F
#define BLACKWELL_CHANNEL_GPFIFO_B	0xCA6F
#define HOPPER_COMPUTE_A		0xCBC0
#define HOPPER_DMA_COPY_A		0xC8B5
#define FERMI_CONTEXT_SHARE_A		0x9067
#define FERMI_VASPACE_A			0x90F1

/* nvlimits.h, resserv.h, rs_client.h */
#define NV_MAX_DEVICES			32
#define NV_MAX_SUBDEVICES		8
#define RS_CLIENT_HANDLE_BASE		0xC1D00000u
#define RS_CLIENT_HANDLE_MAX		0x100000u
#define RS_UNIQUE_HANDLE_BASE		0xCAF00000u
#define RS_UNIQUE_HANDLE_RANGE		0x00080000u

/* kernel-open/common/inc/nv-ioctl.h */
struct nv_ioctl_xfer {
	u32 cmd;
	u32 size;
	u64 ptr;
};

struct nv_pci_info {
	u32 domain;
	u8 bus;
	u8 slot;
	u8 function;
	u8 pad0;
	u16 vendor_id;
	u16 device_id;
};

struct nv_ioctl_card_info {
	u8 valid;
	u8 pad0[3];
	struct nv_pci_info pci_info;
	u32 gpu_id;
	u16 interrupt_line;
	u8 pad1[2];
	u64 reg_address;
	u64 reg_size;
	u64 fb_address;
	u64 fb_size;
	u32 minor_number;
	u8 dev_name[10];
	u8 pad2[2];
};

#define NV_RM_API_VERSION_STRING_LENGTH	64
#define NV_RM_API_VERSION_CMD_STRICT	0
#define NV_RM_API_VERSION_CMD_RELAXED	'1'
#define NV_RM_API_VERSION_CMD_QUERY	'2'
#define NV_RM_API_VERSION_REPLY_RECOGNIZED 1

struct nv_ioctl_rm_api_version {
	u32 cmd;
	u32 reply;
	char version_string[NV_RM_API_VERSION_STRING_LENGTH];
};

struct nv_ioctl_sys_params {
	u64 memblock_size;
};

/* nv-ioctl-numa.h (535 to 595): NUMA_INFO, GPU files only */
#define NV_IOCTL_NUMA_INFO_MAX_OFFLINE_ADDRESSES	64
#define NV_IOCTL_NUMA_STATUS_DISABLED			0

struct nv_ioctl_numa_info {
	s32 nid;
	s32 status;
	u64 memblock_size;
	u64 numa_mem_addr;
	u64 numa_mem_size;
	u8 use_auto_online;
	u8 pad[7];
	struct {
		u64 addresses[NV_IOCTL_NUMA_INFO_MAX_OFFLINE_ADDRESSES];
		u32 num_entries;
		u32 pad;
	} offline_addresses;
};

struct nv_ioctl_register_fd {
	s32 ctl_fd;
};

struct nv_ioctl_status_code {
	u32 domain;
	u8 bus;
	u8 slot;
	u8 pad0[2];
	u32 status;
};

struct nv_ioctl_wait_open_complete {
	s32 rc;
	u32 adapter_status;
};

/* nv-ioctl.h: alloc/free os event; nvos.h: NVOS41 (get event data) */
#define NV_IOCTL_OS_EVENT_SIZE		16
#define NV_IOCTL_OS_EVENT_STATUS	12

/*
 * nv-ioctl.h: nv_ioctl_export_to_dma_buf_fd_t.  hClient follows fd; status
 * is the last field, 8 bytes from the end: 2600 bytes before 570, 2608
 * since (mappingType, then 580's bAllowMmap, before the handles).
 */
#define NV_EXPORT_DMABUF_H_CLIENT	4
#define NV_EXPORT_DMABUF_SIZE_535	2600
#define NV_EXPORT_DMABUF_SIZE_570	2608

/* nv-ioctl.h: nv_ioctl_alloc_os_event_t, nv_ioctl_free_os_event_t */
struct nv_ioctl_os_event {
	u32 h_client;
	u32 h_device;
	u32 fd;
	u32 status;
};

#define NVOS41_SIZE			16
#define NVOS41_STATUS			12

/* src/common/sdk/nvidia/inc/nvos.h: NVOS00 (RM_FREE) */
struct nvos00_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 h_object_old;
	u32 status;
};

/* nvos.h: NVOS05 (RM_ALLOC_OBJECT), an allocation with no parameters */
struct nvos05_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 h_object_new;
	u32 h_class;
	u32 status;
};

/*
 * nvos.h: NVOS39 (RM_ALLOC_CONTEXT_DMA2).  RM makes it an RM_ALLOC of
 * hClass under hMemory's parent, in client hObjectParent, with
 * NV_CONTEXT_DMA_ALLOCATION_PARAMS (cl0002.h) built from the fields
 * (RmDeprecatedAllocContextDma).
 */
struct nvos39_parameters {
	u32 h_object_parent;		/* the client */
	u32 h_subdevice;
	u32 h_object_new;
	u32 h_class;
	u32 flags;
	u32 selector;
	u32 h_memory;
	u32 pad0;
	u64 offset;
	u64 limit;
	u32 status;
	u32 pad1;
};

/*
 * NV0005_ALLOC_PARAMETERS (class/cl0005.h): an event object's notifier is
 * hSrcResource of client hParentClient (0: the allocating client).
 */
struct nv0005_alloc_parameters {
	u32 h_parent_client;
	u32 h_src_resource;
	u32 h_class;
	u32 notify_index;
	u64 data;
};

struct nv_context_dma_allocation_params {
	u32 h_subdevice;
	u32 flags;
	u32 h_memory;
	u32 pad0;
	u64 offset;
	u64 limit;
};

/* NVOS03 flags of a context DMA (nvos.h) */
#define NVOS03_FLAGS_ACCESS_MASK		0x3
#define NVOS03_FLAGS_ACCESS_WRITE_ONLY		0x2
#define NVOS03_FLAGS_HASH_TABLE_DISABLE		BIT(29)

/* nvos.h: NVOS02 (RM_ALLOC_MEMORY), wrapped with an fd (nv-unix-nvos-params-wrappers.h) */
struct nvos02_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 h_object_new;
	u32 h_class;
	u32 flags;
	u32 pad0;
	u64 p_memory;
	u64 limit;
	u32 status;
	u32 pad1;
};

struct nvos02_with_fd {
	struct nvos02_parameters params;
	s32 fd;
	u32 pad0;
};

/* nvos.h: NVOS21 and NVOS64 (RM_ALLOC; the escape tells them apart by size) */
struct nvos21_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 h_object_new;
	u32 h_class;
	u64 p_alloc_parms;
	u32 params_size;
	u32 status;
};

struct nvos64_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 h_object_new;
	u32 h_class;
	u64 p_alloc_parms;
	u64 p_rights_requested;
	u32 params_size;
	u32 flags;
	u32 status;
	u32 pad0;
};

/* nvos.h: NVOS54 (RM_CONTROL) */
#define NVOS54_FLAGS_IRQL_RAISED	0x1
#define NVOS54_FLAGS_LOCK_BYPASS	0x2

struct nvos54_parameters {
	u32 h_client;
	u32 h_object;
	u32 cmd;
	u32 flags;
	u64 params;
	u32 params_size;
	u32 status;
};

/* nvos.h: NVOS55 (RM_DUP_OBJECT) */
struct nvos55_parameters {
	u32 h_client;
	u32 h_parent;
	u32 h_object;
	u32 h_client_src;
	u32 h_object_src;
	u32 flags;
	u32 status;
};

/* nvos.h: NVOS33 (RM_MAP_MEMORY), wrapped with an fd */
struct nvos33_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_memory;
	u32 pad0;
	u64 offset;
	u64 length;
	u64 p_linear_address;
	u32 status;
	u32 flags;
};

struct nvos33_with_fd {
	struct nvos33_parameters params;
	s32 fd;
	u32 pad0;
};

/* nvos.h: NVOS34 (RM_UNMAP_MEMORY) */
struct nvos34_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_memory;
	u32 pad0;
	u64 p_linear_address;
	u32 status;
	u32 flags;
};

/* NVOS49: RM_BIND_CONTEXT_DMA, NV0002_CTRL_CMD_BIND_CONTEXTDMA's old form */
#define NVOS49_SIZE			16
#define NVOS49_STATUS			12
struct nvos49_parameters {
	u32 h_client;
	u32 h_channel;
	u32 h_ctx_dma;
	u32 status;
};

#define NV0002_CTRL_CMD_BIND_CONTEXTDMA	0x20102
struct nv0002_ctrl_bind_contextdma_params {
	u32 h_channel;
};

/* NVOS56: RM_UPDATE_DEVICE_MAPPING_INFO (a CPU mapping moved: mremap) */
#define NVOS56_SIZE			40
#define NVOS56_STATUS			32
struct nvos56_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_memory;
	u32 pad0;
	u64 p_old_cpu_address;
	u64 p_new_cpu_address;
	u32 status;
	u32 pad1;
};

/* nvos.h: NVOS32 (RM_VID_HEAP_CONTROL) and the parts of its union we use */
#define NVOS32_FUNCTION_ALLOC_SIZE		2
#define NVOS32_FUNCTION_FREE			3
#define NVOS32_FUNCTION_INFO			5
#define NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT 6
#define NVOS32_FUNCTION_ALLOC_SIZE_RANGE	14
#define NVOS32_FUNCTION_REACQUIRE_COMPR		15
#define NVOS32_FUNCTION_RELEASE_COMPR		16
#define NVOS32_FUNCTION_GET_MEM_ALIGNMENT	18
#define NVOS32_FUNCTION_HW_ALLOC		19
#define NVOS32_FUNCTION_HW_FREE			20
#define NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR	27

#define NVOS32_FREE_FLAGS_MEMORY_HANDLE_PROVIDED 0x1

/* data.AllocSize */
struct nvos32_alloc_size {
	u32 owner;
	u32 h_memory;
	u32 type;
	u32 flags;
	u32 attr;
	u32 format;
	u32 compr_covg;
	u32 zcull_covg;
	u32 partition_stride;
	u32 width;
	u32 height;
	u32 pad0;
	u64 size;
	u64 alignment;
	u64 offset;
	u64 limit;
	u64 address;
	u64 range_begin;
	u64 range_end;
	u32 attr2;
	u32 ctag_offset;
	s32 numa_node;
	u32 pad1;
};

/* data.AllocTiledPitchHeight */
struct nvos32_alloc_tiled {
	u32 owner;
	u32 h_memory;
	u32 type;
	u32 flags;
	u32 height;
	s32 pitch;
	u32 attr;
	u32 width;
	u32 format;
	u32 compr_covg;
	u32 zcull_covg;
	u32 partition_stride;
	u64 size;
	u64 alignment;
	u64 offset;
	u64 limit;
	u64 address;
	u64 range_begin;
	u64 range_end;
	u32 attr2;
	u32 ctag_offset;
	s32 numa_node;
	u32 pad0;
};

/* data.AllocSizeRange */
struct nvos32_alloc_range {
	u32 owner;
	u32 h_memory;
	u32 type;
	u32 flags;
	u32 attr;
	u32 format;
	u32 compr_covg;
	u32 zcull_covg;
	u32 partition_stride;
	u32 pad0;
	u64 size;
	u64 alignment;
	u64 offset;
	u64 limit;
	u64 range_begin;
	u64 range_end;
	u64 address;
	u32 attr2;
	u32 ctag_offset;
	s32 numa_node;
	u32 pad1;
};

/* data.Free */
struct nvos32_free {
	u32 owner;
	u32 h_memory;
	u32 flags;
};

/* data.HwFree: RmFree of any handle of hRoot (rmapi_deprecated_vidheapctrl.c) */
struct nvos32_hw_free {
	u32 h_resource_handle;
	u32 flags;
};

/* data.Info */
struct nvos32_info {
	u32 attr;
	u32 pad0;
	u64 offset;
	u64 size;
	u64 base;
};

/* NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR */
struct nvos32_alloc_os_desc {
	u32 h_memory;
	u32 type;
	u32 flags;
	u32 attr;
	u32 attr2;
	u32 pad0;
	u64 descriptor;
	u64 limit;
	u32 descriptor_type;
};

struct nvos32_parameters {
	u32 h_root;
	u32 h_object_parent;
	u32 function;
	u32 h_va_space;
	s16 ivc_heap_number;
	u16 pad0;
	u32 status;
	u64 total;
	u64 free;
	union {
		struct nvos32_alloc_size alloc_size;
		struct nvos32_alloc_tiled alloc_tiled;
		struct nvos32_alloc_range alloc_range;
		struct nvos32_free free;
		struct nvos32_hw_free hw_free;
		struct nvos32_info info;
		struct nvos32_alloc_os_desc alloc_os_desc;
		u8 raw[144];
	} data;
};

/* NV_ESC_RM_IDLE_CHANNELS (nvos.h), a slice's to refuse (mem.c) */
struct nvos30_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_channel;
	u32 num_channels;
	u64 ph_clients;
	u64 ph_devices;
	u64 ph_channels;
	u32 flags;
	u32 timeout;
	u32 status;
	u32 pad0;
};

#define NVOS30_FLAGS_CHANNEL(f)		(((f) >> 4) & 0xF)	/* 7:4 */
#define NVOS30_FLAGS_CHANNEL_LIST	0
#define NVOS30_FLAGS_CHANNEL_SINGLE	1

/* NV0000_CTRL_CMD_IDLE_CHANNELS's params (ctrl0000gpu.h) */
struct nv0000_ctrl_gpu_idle_channels_params {
	u32 h_device;
	u32 h_channel;
	u32 num_channels;
	u32 pad0;
	u64 ph_clients;
	u64 ph_devices;
	u64 ph_channels;
	u32 flags;
	u32 timeout;
};

/* NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS's params (ctrl0080fifo.h) */
#define NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS	4096

struct nv0080_ctrl_fifo_idle_channels_params {
	u32 num_channels;
	u32 h_channels[NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS];
	u32 flags;
	u32 timeout;
};

/* NV_ESC_RM_ACCESS_REGISTRY (nvos.h) */
struct nvos38_parameters {
	u32 h_client;
	u32 h_object;
	u32 access_type;
	u32 dev_node_length;
	u64 p_dev_node;
	u32 parm_str_length;
	u32 pad0;
	u64 p_parm_str;
	u32 binary_data_length;
	u32 pad1;
	u64 p_binary_data;
	u32 data;
	u32 entry;
	u32 status;
	u32 pad2;
};

#define NVOS38_ACCESS_TYPE_READ_DWORD		1
#define NVOS38_ACCESS_TYPE_WRITE_DWORD		2
#define NVOS38_ACCESS_TYPE_READ_BINARY		6
#define NVOS38_ACCESS_TYPE_WRITE_BINARY		7
#define NVOS38_MAX_REGISTRY_STRING_LENGTH	256
#define NVOS38_MAX_REGISTRY_BINARY_LENGTH	256

#define NVOS30_SIZE			sizeof(struct nvos30_parameters)
#define NVOS30_STATUS			offsetof(struct nvos30_parameters, status)
#define NVOS38_SIZE			sizeof(struct nvos38_parameters)
#define NVOS38_STATUS			offsetof(struct nvos38_parameters, status)

/*
 * Sizes and status offsets of the RM escapes nvstub recognises but does not
 * simulate (nvos.h); RmIoctl still checks their size and device rule.
 */
#define NVOS_I2C_ACCESS_SIZE		32
#define NVOS_I2C_ACCESS_STATUS		24
#define NVOS57_SIZE			24	/* RM_SHARE */
#define NVOS57_STATUS			20

/*
 * rs_access.h: a share policy (RS_SHARE_POLICY), in RM_SHARE's NVOS57, and
 * NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY's params, which hold
 * just one (ctrl0000client.h; 535 to 595).
 */
#define NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY	0xd04
struct rs_share_policy {
	u32 target;			/* RS_SHARE_TYPE_CLIENT's client */
	u32 access_mask;		/* RS_ACCESS_MASK: one limb */
	u16 type;			/* RS_SHARE_TYPE_* */
	u8 action;			/* RS_SHARE_ACTION_FLAG_* */
};

static_assert(sizeof(struct rs_share_policy) == 12);
#define RS_SHARE_TYPE_NONE		0
#define RS_SHARE_TYPE_ALL		1
#define RS_SHARE_TYPE_CLIENT		3
#define RS_SHARE_TYPE_PID		4
#define RS_SHARE_TYPE_MAX		8	/* up to FM_CLIENT 7 */
#define RS_SHARE_ACTION_FLAG_REVOKE	BIT(0)
#define RS_SHARE_ACTION_FLAG_REQUIRE	BIT(1)
#define RS_SHARE_ACTION_FLAG_COMPOSE	BIT(2)
#define RS_ACCESS_DUP_OBJECT		0
struct nvos57_parameters {
	u32 h_client;
	u32 h_object;
	struct rs_share_policy policy;
	u32 status;
};

static_assert(sizeof(struct nvos57_parameters) == NVOS57_SIZE);
static_assert(offsetof(struct nvos57_parameters, status) == NVOS57_STATUS);

/* NVOS46 (MAP_MEMORY_DMA) and NVOS47 (UNMAP_MEMORY_DMA) moved: status is last */

/* nvos.h: NVOS46_PARAMETERS before 580 (56 B) and from 580 (64 B) */
struct nvos46_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_dma;
	u32 h_memory;
	u64 offset;
	u64 length;
	u32 flags;
	u32 pad0;
	u64 dma_offset;
	u32 status;
	u32 pad1;
};

struct nvos46_parameters_v580 {
	u32 h_client;
	u32 h_device;
	u32 h_dma;
	u32 h_memory;
	u64 offset;
	u64 length;
	u32 flags;
	u32 flags2;
	u32 kind_override;
	u32 pad0;
	u64 dma_offset;
	u32 status;
	u32 pad1;
};

/* NVOS47_PARAMETERS before 550 (40 B) and from 550 (48 B, with size) */
struct nvos47_parameters {
	u32 h_client;
	u32 h_device;
	u32 h_dma;
	u32 h_memory;
	u32 flags;
	u32 pad0;
	u64 dma_offset;
	u64 size;	/* 550+ */
	u32 status;
	u32 pad1;
};

#define NVOS46_FLAGS_DMA_OFFSET_FIXED	BIT(15)	/* 15:15 */

/* nvos.h: NV_VASPACE_ALLOCATION_PARAMETERS (FERMI_VASPACE_A) */
struct nv_vaspace_allocation_parameters {
	u32 index;
	u32 flags;
	u64 va_size;
	u64 va_start_internal;
	u64 va_limit_internal;
	u32 big_page_size;
	u32 pad0;
	u64 va_base;
	u32 pasid;	/* 580+: 48 bytes before */
	u32 pad1;
};

#define NV_VASPACE_ALLOCATION_PARAMETERS_SIZE_OLD	48

#define NV_VASPACE_ALLOCATION_INDEX_GPU_NEW	0x00
#define NV_VASPACE_ALLOCATION_INDEX_GPU_HOST	0x01
#define NV_VASPACE_ALLOCATION_INDEX_GPU_DEVICE	0x03
#define NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED	BIT(3)
#define NV_VASPACE_ALLOCATION_FLAGS_ALLOW_ZERO_ADDRESS	BIT(8)

/*
 * Whether RM makes a VA space of its own, with page directories, for a
 * FERMI_VASPACE_A of these params (vaspace_api.c, gpu_vaspace.c
 * gvaspaceConstruct): every index but the device's default VA space, which
 * the object only names; an externally owned one gets its root from UVM.
 * Those RM refuses (BAR1's, for a user) are charged too, for nothing.
 */
static inline bool nv_vaspace_pins_root(u32 index, u32 flags)
{
	return index != NV_VASPACE_ALLOCATION_INDEX_GPU_DEVICE &&
	       !(flags & NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED);
}

#define NV_VASPACE_BIG_PAGE_SIZE_64K	(64u << 10)
#define NV_VASPACE_BIG_PAGE_SIZE_128K	(128u << 10)

/* nvos.h: NV_DEVICE_ALLOCATION_VAMODE_* (NV0080_ALLOC_PARAMETERS.vaMode) */
#define NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES	0
#define NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE		1
#define NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES		2

/* nvos.h: NV_CTXSHARE_ALLOCATION_PARAMETERS (FERMI_CONTEXT_SHARE_A) */
struct nv_ctxshare_allocation_parameters {
	u32 h_va_space;
	u32 flags;
	u32 subctx_id;
};

#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_MASK	0x3	/* 1:0 */
#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC	0
#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC	1
#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED 2

/* nvos.h: NV_MEMORY_ALLOCATION_PARAMS (120 B before 545, 128 B with numaNode) */
struct nv_memory_allocation_params {
	u32 owner;
	u32 type;
	u32 flags;
	u32 width;
	u32 height;
	s32 pitch;
	u32 attr;
	u32 attr2;
	u32 format;
	u32 compr_covg;
	u32 zcull_covg;
	u32 pad0;
	u64 range_lo;
	u64 range_hi;
	u64 size;
	u64 alignment;
	u64 offset;
	u64 limit;
	u64 address;
	u32 ctag_offset;
	u32 h_va_space;
	u32 internalflags;
	u32 tag;
	s32 numa_node;		/* 545+ */
	u32 pad1;
};

#define NV_MEMORY_ALLOCATION_PARAMS_SIZE_OLD	120

#define NVOS32_ATTR_PAGE_SIZE_SHIFT	23	/* NVOS32_ATTR_PAGE_SIZE 24:23 */
#define NVOS32_ATTR_PAGE_SIZE_MASK	(3u << NVOS32_ATTR_PAGE_SIZE_SHIFT)
#define NVOS32_ATTR_PAGE_SIZE_DEFAULT	0
#define NVOS32_ATTR_PAGE_SIZE_4KB	1
#define NVOS32_ATTR_PAGE_SIZE_BIG	2
#define NVOS32_ATTR_PAGE_SIZE_HUGE	3
#define NVOS32_ATTR_LOCATION_SHIFT	25	/* NVOS32_ATTR_LOCATION 26:25 */
#define NVOS32_ATTR_LOCATION_MASK	(3u << NVOS32_ATTR_LOCATION_SHIFT)
#define NVOS32_ATTR_LOCATION_VIDMEM	0
#define NVOS32_ATTR_LOCATION_PCI	1
#define NVOS32_ATTR_LOCATION_ANY	3
#define NVOS32_ATTR_COHERENCY_SHIFT	29	/* NVOS32_ATTR_COHERENCY 31:29 */
#define NVOS32_ATTR_COHERENCY_MASK	(7u << NVOS32_ATTR_COHERENCY_SHIFT)
/* NVOS02_FLAGS_COHERENCY 15:12; the values are NVOS32_ATTR_COHERENCY's */
#define NVOS02_FLAGS_COHERENCY_SHIFT	12
#define NVOS02_FLAGS_COHERENCY_MASK	(0xFu << NVOS02_FLAGS_COHERENCY_SHIFT)
#define NVOS32_ATTR_COHERENCY_CACHED	1
#define NVOS32_ATTR_COHERENCY_WRITE_BACK 5
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT 20	/* NVOS32_ATTR2_PAGE_SIZE_HUGE 21:20 */
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_MASK (3u << NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT)
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_DEFAULT 0
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB	1
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_512MB 2
#define NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT 25	/* NVOS32_ATTR2_MEMORY_PROTECTION 26:25 */
#define NVOS32_ATTR2_MEMORY_PROTECTION_MASK (3u << NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT)
#define NVOS32_ATTR2_MEMORY_PROTECTION_DEFAULT 0
#define NVOS32_ATTR2_MEMORY_PROTECTION_PROTECTED 1
#define NVOS32_ATTR2_MEMORY_PROTECTION_UNPROTECTED 2

#define NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE 0x00000010
#define NVOS32_ALLOC_FLAGS_LAZY			0x00000400
#define NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED 0x00004000
#define NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED	0x00008000
#define NVOS32_ALLOC_FLAGS_USE_BEGIN_END	0x00020000
#define NVOS32_ALLOC_FLAGS_VIRTUAL		0x00080000
#define NVOS32_ALLOC_FLAGS_EXTERNALLY_MANAGED	0x00400000
#define NVOS32_ALLOC_FLAGS_PROTECTED		0x01000000
#define NVOS32_ALLOC_FLAGS_KERNEL_MAPPING_MAP	0x02000000
#define NVOS32_ALLOC_FLAGS_SPARSE		0x04000000	/* virtual */

/*
 * Whether a virtual allocation with FLAGS pins the page tables of its whole
 * range when RM makes it, until it goes: a sparse one, or one neither lazy
 * nor externally managed (gpu_vaspace.c gvaspaceAlloc, virtual_mem.c; RM
 * clears LAZY on a sparse one).
 */
static inline bool nv_virtual_pins_tables(u32 flags)
{
	return (flags & NVOS32_ALLOC_FLAGS_SPARSE) ||
	       !(flags & (NVOS32_ALLOC_FLAGS_LAZY |
			  NVOS32_ALLOC_FLAGS_EXTERNALLY_MANAGED));
}

/* g_heap_nvoc.h: owners reserved for RM itself */
#define HEAP_OWNER_RM_SCRATCH_BEGIN	0xDEAF0000u
#define HEAP_OWNER_RM_SCRATCH_END	(HEAP_OWNER_RM_SCRATCH_BEGIN + 3)

/* class/cl0080.h: NV0080_ALLOC_PARAMETERS */
struct nv0080_alloc_parameters {
	u32 device_id;
	u32 h_client_share;
	u32 h_target_client;
	u32 h_target_device;
	u32 flags;
	u32 pad0;
	u64 va_space_size;
	u64 va_start_internal;
	u64 va_limit_internal;
	u32 va_mode;
	u32 pad1;
};

/* class/cl2080.h: NV2080_ALLOC_PARAMETERS */
struct nv2080_alloc_parameters {
	u32 sub_device_id;
};

/* nvos.h: NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS */
struct nv_channel_group_allocation_parameters {
	u32 h_object_error;
	u32 h_object_ecc_error;
	u32 h_va_space;
	u32 engine_type;
	u8 b_is_calling_context_vgpu_plugin;
	u8 pad0[3];
};

/* alloc/alloc_channel.h: NV_MEMORY_DESC_PARAMS, NV_CHANNEL_ALLOC_PARAMS */
struct nv_memory_desc_params {
	u64 base;
	u64 size;
	u32 address_space;
	u32 cache_attrib;
};

struct nv_channel_alloc_params {
	u32 h_object_error;
	u32 h_object_buffer;
	u64 gp_fifo_offset;
	u32 gp_fifo_entries;
	u32 flags;
	u32 h_context_share;
	u32 h_va_space;
	u32 h_userd_memory[NV_MAX_SUBDEVICES];
	u64 userd_offset[NV_MAX_SUBDEVICES];
	u32 engine_type;
	u32 cid;
	u32 sub_device_id;
	u32 h_object_ecc_error;
	struct nv_memory_desc_params instance_mem;
	struct nv_memory_desc_params userd_mem;
	struct nv_memory_desc_params ramfc_mem;
	struct nv_memory_desc_params mthdbuf_mem;
	u32 h_phys_channel_group;
	u32 internal_flags;
	struct nv_memory_desc_params error_notifier_mem;
	struct nv_memory_desc_params ecc_error_notifier_mem;
	u32 process_id;
	u32 sub_process_id;
	u32 encrypt_iv[3];
	u32 decrypt_iv[3];
	u32 hmac_nonce[8];
	u32 tpc_config_id;	/* 570+ */
	u32 pad0;
};

#define NV_CHANNEL_ALLOC_PARAMS_SIZE_OLD	360

/*
 * clc365.h, alloc_access_counter_buffer.h: UVM's access-counter notification
 * buffer, one a GPU for each index (accessCounterBufferCount: 1 on GH100),
 * under a subdevice; unprivileged (resource_list.h), and taken from
 * everyone else while it lives (accesscntrConstruct: NV_ERR_INVALID_STATE).
 */
#define ACCESS_COUNTER_NOTIFY_BUFFER	0xC365

struct nv_access_counter_notify_buffer_alloc_params {
	u32 access_counter_index;
};

/* nvos.h: NV_HOPPER_USERMODE_A_PARAMS */
struct nv_hopper_usermode_a_params {
	u8 b_bar1_mapping;
	u8 b_priv;
};

/* nvos.h: NV_GR_ALLOCATION_PARAMETERS */
struct nv_gr_allocation_parameters {
	u32 version;
	u32 flags;
	u32 size;
	u32 caps;
};

/* class/clc86f.h: Nvc86fControl (USERD), class/clc361.h: usermode region */
#define NVC86F_USERD_SIZE		512
#define NVC86F_USERD_GP_GET		0x88
#define NVC86F_USERD_GP_PUT		0x8C
#define NVC361_NV_USERMODE__SIZE	0x10000
#define NVC361_NOTIFY_CHANNEL_PENDING	0x90
/* ctrl/ctrlc36f.h and dev_vm.h: the work submit token is runlist:16 | chid */
#define NV_VF_DOORBELL_RUNLIST_SHIFT	16
#define NV_VF_DOORBELL_VECTOR_MASK	0xFFF

/* ctrl/ctrl2080/ctrl2080fb.h */
#define NV2080_CTRL_CMD_FB_GET_INFO	0x20801301
#define NV2080_CTRL_CMD_FB_GET_INFO_V2	0x20801303
#define NV2080_CTRL_CMD_FB_GET_NUMA_INFO	0x20801351
#define NV2080_CTRL_FB_NUMA_INFO_MAX_OFFLINE_ADDRESSES	64
#define NV0000_CTRL_NO_NUMA_NODE	(-1)

struct nv2080_ctrl_fb_get_numa_info_params {
	s32 numa_node_id;
	u32 pad0;
	u64 numa_mem_addr;
	u64 numa_mem_size;
	u32 numa_offline_addresses_count;
	u32 pad1;
	u64 numa_offline_addresses[NV2080_CTRL_FB_NUMA_INFO_MAX_OFFLINE_ADDRESSES];
};

struct nv2080_ctrl_fb_info {
	u32 index;
	u32 data;
};

struct nv2080_ctrl_fb_get_info_params {
	u32 fb_info_list_size;
	u32 pad0;
	u64 fb_info_list;
};

#define NV2080_CTRL_FB_INFO_INDEX_TILE_REGION_COUNT		0x00
#define NV2080_CTRL_FB_INFO_INDEX_COMPRESSION_SIZE		0x01
#define NV2080_CTRL_FB_INFO_INDEX_DRAM_PAGE_STRIDE		0x02
#define NV2080_CTRL_FB_INFO_INDEX_TILE_REGION_FREE_COUNT	0x03
#define NV2080_CTRL_FB_INFO_INDEX_PARTITION_COUNT		0x04
#define NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE			0x05
#define NV2080_CTRL_FB_INFO_INDEX_BANK_SWIZZLE_ALIGNMENT	0x06
#define NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE			0x07
#define NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE		0x08
#define NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE			0x09
#define NV2080_CTRL_FB_INFO_INDEX_MAPPABLE_HEAP_SIZE		0x0A
#define NV2080_CTRL_FB_INFO_INDEX_BUS_WIDTH			0x0B
#define NV2080_CTRL_FB_INFO_INDEX_RAM_CFG			0x0C
#define NV2080_CTRL_FB_INFO_INDEX_RAM_TYPE			0x0D
#define NV2080_CTRL_FB_INFO_INDEX_BANK_COUNT			0x0E
#define NV2080_CTRL_FB_INFO_INDEX_OVERLAY_OFFSET_ADJUSTMENT	0x0F
#define NV2080_CTRL_FB_INFO_INDEX_FB_TAX_SIZE_KB		0x10
#define NV2080_CTRL_FB_INFO_INDEX_HEAP_BASE_KB			0x11
#define NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_SIZE_KB	0x12
#define NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_BASE_KB	0x13
#define NV2080_CTRL_FB_INFO_INDEX_PARTITION_MASK		0x14
#define NV2080_CTRL_FB_INFO_INDEX_VISTA_RESERVED_HEAP_SIZE	0x15
#define NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE			0x16
#define NV2080_CTRL_FB_INFO_INDEX_RAM_LOCATION			0x17
#define NV2080_CTRL_FB_INFO_INDEX_FB_IS_BROKEN			0x18
#define NV2080_CTRL_FB_INFO_INDEX_FBP_COUNT			0x19
#define NV2080_CTRL_FB_INFO_INDEX_FBP_MASK			0x1A
#define NV2080_CTRL_FB_INFO_INDEX_L2CACHE_SIZE			0x1B
#define NV2080_CTRL_FB_INFO_INDEX_MEMORYINFO_VENDOR_ID		0x1C
#define NV2080_CTRL_FB_INFO_INDEX_BAR1_AVAIL_SIZE		0x1D
#define NV2080_CTRL_FB_INFO_INDEX_HEAP_START			0x1E
#define NV2080_CTRL_FB_INFO_INDEX_BAR1_MAX_CONTIGUOUS_AVAIL_SIZE 0x1F
#define NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE		0x20
#define NV2080_CTRL_FB_INFO_INDEX_LTC_COUNT			0x22
#define NV2080_CTRL_FB_INFO_INDEX_LTS_COUNT			0x23
#define NV2080_CTRL_FB_INFO_INDEX_ALLOW_PAGE_RETIREMENT		0x2A
#define NV2080_CTRL_FB_INFO_INDEX_LTC_MASK			0x2B
#define NV2080_CTRL_FB_INFO_FBPA_ECC_ENABLED			0x2D
#define NV2080_CTRL_FB_INFO_DYNAMIC_PAGE_OFFLINING_ENABLED	0x2E
#define NV2080_CTRL_FB_INFO_INDEX_ACCESS_COUNTER_BUFFER_COUNT	0x39
#define NV2080_CTRL_FB_INFO_INDEX_NUMA_NODE_ID			0x3B
#define NV2080_CTRL_FB_INFO_INDEX_LAST				0x3B	/* 580 */
#define NV2080_CTRL_FB_INFO_RAM_TYPE_HBM3			0x14

/* ctrl/ctrl2080/ctrl2080gpu.h */
#define NV2080_CTRL_CMD_GPU_GET_PIDS		0x2080018D
#define NV2080_CTRL_CMD_GPU_GET_PID_INFO	0x2080018E
#define NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT	950
#define NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_CLASS	0
#define NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_VGPU_GUEST 1
#define NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT	200
#define NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE 0
#define PARTITIONID_INVALID			0xFFFFFFFFu

struct nv2080_ctrl_gpu_get_pids_params {
	u32 id_type;
	u32 id;
	u32 pid_tbl_count;
	u32 pid_tbl[NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT];
};

struct nv2080_ctrl_gpu_pid_info {
	u32 pid;
	u32 index;
	u32 result;
	u32 pad0;
	struct {
		u64 mem_private;
		u64 mem_shared_owned;
		u64 mem_shared_duped;
		u64 protected_mem_private;
		u64 protected_mem_shared_owned;
		u64 protected_mem_shared_duped;
	} vid_mem_usage;
	u32 compute_instance_id;
	u32 gpu_instance_id;
};

struct nv2080_ctrl_gpu_get_pid_info_params {
	u32 pid_info_list_count;
	u32 pad0;
	struct nv2080_ctrl_gpu_pid_info pid_info_list[NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT];
};

/* ctrl/ctrla06c.h (params from ctrla06f/ctrla06fgpfifo.h) */
#define NVA06C_CTRL_CMD_GPFIFO_SCHEDULE	0xA06C0101
#define NVA06C_CTRL_CMD_SET_TIMESLICE	0xA06C0103
#define NVA06C_CTRL_CMD_GET_TIMESLICE	0xA06C0104
/* ctrl/ctrla06f/ctrla06fgpfifo.h: the same, on one channel */
#define NVA06F_CTRL_CMD_GPFIFO_SCHEDULE	0xA06F0103

struct nva06c_ctrl_gpfifo_schedule_params {
	u8 b_enable;
	u8 b_skip_submit;
	u8 b_skip_enable;
};

struct nva06c_ctrl_timeslice_params {
	u64 timeslice_us;
};

/*
 * ctrl/ctrl2080/ctrl2080fifo.h: the fewest channel ids of any runlist's
 * channel-id manager, and the most channel groups in use on any
 * (subdeviceCtrlCmdGetPhysicalChannelCount, kernel_fifo_ctrl.c, 535 to
 * 595); RMCTRL_FLAGS_NON_PRIVILEGED.
 */
#define NV2080_CTRL_CMD_FIFO_GET_PHYSICAL_CHANNEL_COUNT	0x20801108

struct nv2080_ctrl_fifo_get_physical_channel_count_params {
	u32 phys_channel_count;
	u32 phys_channel_count_in_use;
};

/*
 * ctrl/ctrl2080/ctrl2080fifo.h: disable (and preempt) or enable the listed
 * channels of any clients; RMCTRL_FLAGS_NON_PRIVILEGED.  A non-NULL
 * pRunlistPreemptEvent is for kernel clients only.
 */
#define NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS		0x2080110B

/*
 * The idling of channels (docs/security.md, class 32): the client control
 * (ctrl0000gpu.h; NV_ESC_RM_IDLE_CHANNELS is its deprecated form) and the
 * device's (ctrl0080fifo.h), both RMCTRL_FLAGS_NON_PRIVILEGED; RM holds
 * the GPU lock while the firmware idles them within the caller's timeout.
 */
#define NV0000_CTRL_CMD_IDLE_CHANNELS			0x283
#define NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS		0x801714
#define NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES	64

struct nv2080_ctrl_fifo_disable_channels_params {
	u8 b_disable;
	u8 pad0[3];
	u32 num_channels;
	u8 b_only_disable_scheduling;
	u8 b_rewind_gp_put;
	u8 pad1[6];
	u64 p_runlist_preempt_event;
	u32 h_client_list[NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES];
	u32 h_channel_list[NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES];
};

/* ctrl/ctrlc36f.h */
#define NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN 0xC36F0108

struct nvc36f_ctrl_get_work_submit_token_params {
	u32 work_submit_token;
};

/* ctrl/ctrlxxxx.h: the NULL command of every class */
#define NVXXXX_CTRL_CMD_CATEGORY(cmd)	(((cmd) >> 8) & 0xFF)
#define NVXXXX_CTRL_CMD_INDEX(cmd)	((cmd) & 0xFF)
#define NVXXXX_CTRL_CMD_CLASS(cmd)	((cmd) >> 16)
/*
 * A command no class exports: NV0000's reserved category, index 1 (not the
 * NULL command, which control.c answers NV_OK before any lookup).  RM finds
 * the object first and answers NV_ERR_RESOURCE_LOST for an invalidated one
 * (serverControl()), then NV_ERR_NOT_SUPPORTED (resControlLookup()).
 */
#define XPU_CTRL_CMD_UNEXPORTED		0x00000001

/*
 * Checked against shared/reference/nvidia-abi/layouts-<version>.txt (sizes
 * of the 580 form; the version table supplies the older sizes).
 */
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

/* The driver's nvidia_modeset_stack_ptr, spelt out: an opaque stack. */
struct nvidia_stack_s;

struct nvidia_modeset_rm_ops {
	const char *version_string;
	struct {
		u8 allow_write_combining;
	} system_info;
	int (*alloc_stack)(struct nvidia_stack_s **sp);
	void (*free_stack)(struct nvidia_stack_s *sp);
	u32 (*enumerate_gpus)(struct nv_gpu_info *gpu_info);
	int (*open_gpu)(u32 gpu_id, struct nvidia_stack_s *sp);
	void (*close_gpu)(u32 gpu_id, struct nvidia_stack_s *sp);
	void (*op)(struct nvidia_stack_s *sp, void *ops_cmd);
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

/*
 * ctrl/ctrl0000/ctrl0000client.h: an object's class or parent, asked of the
 * client that holds it (clientresource.c cliresCtrlCmdClientGetHandleInfo;
 * API lock read, no GPU lock).
 */
#define NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO			0xd02
#define NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_PARENT	1
#define NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_CLASSID	2

struct nv0000_ctrl_client_get_handle_info_params {
	u32 h_object;
	u32 index;
	union {
		u32 h_result;
		u64 i_result;
	} data;
};

/*
 * ctrl/ctrl0000/ctrl0000client.h: whether two handles of the called client
 * name the same memory (client_resource.c cliresCtrlCmdObjectsAreDuplicates,
 * memIsDuplicate: the same memory descriptor); memory objects only.
 */
#define NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES	0xd07

struct nv0000_ctrl_client_objects_are_duplicates_params {
	u32 h_object1;
	u32 h_object2;
	u8 b_duplicates;
	u8 pad0[3];
};

/*
 * ctrl/ctrl0000/ctrl0000unix.h: objects exported to a control file by fd
 * and imported from it (arch/nvalloc/unix/src/os.c,
 * rmobjexportimport.c); the same from 535 to 580.
 */
#define NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD	0x3d05
#define NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD	0x3d06
#define NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD	0x3d0b
#define NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD	0x3d0c
#define NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO	0x3d08
#define NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM	1
#define NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_FLAGS_EMPTY_FD_TRUE 1
#define NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE	64
#define NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS	512
#define NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS	128
#define NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE		0
#define NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_VIDMEM	1
#define NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_SYSMEM	2

struct nv0000_ctrl_os_unix_export_object {
	u32 type;
	u32 h_device;
	u32 h_parent;
	u32 h_object;
};

struct nv0000_ctrl_os_unix_export_object_to_fd_params {
	struct nv0000_ctrl_os_unix_export_object object;
	s32 fd;
	u32 flags;
};

struct nv0000_ctrl_os_unix_import_object_from_fd_params {
	s32 fd;
	struct nv0000_ctrl_os_unix_export_object object;
};

struct nv0000_ctrl_os_unix_export_objects_to_fd_params {
	s32 fd;
	u32 h_device;
	u16 max_objects;
	u8 metadata[NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE];
	u32 objects[NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS];
	u16 num_objects;
	u16 index;
};

/* GET_EXPORT_OBJECT_INFO: 545 added gpu_instance_id (76 -> 80 bytes) */
struct nv0000_ctrl_os_unix_get_export_object_info_params_v535 {
	s32 fd;
	u32 device_instance;
	u16 max_objects;
	u8 metadata[NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE];
};

struct nv0000_ctrl_os_unix_get_export_object_info_params {
	s32 fd;
	u32 device_instance;
	u32 gpu_instance_id;
	u16 max_objects;
	u8 metadata[NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE];
};

struct nv0000_ctrl_os_unix_import_objects_from_fd_params {
	s32 fd;
	u32 h_parent;
	u32 objects[NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS];
	u8 object_types[NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS];
	u16 num_objects;
	u16 index;
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

#define NV0000_CTRL_GPU_INVALID_ID	0xFFFFFFFFu

struct nv0000_ctrl_gpu_get_attached_ids_params {
	u32 gpu_ids[NV0000_CTRL_GPU_MAX_ATTACHED_GPUS];
};

static inline void nvabi_build_checks(void)
{
	BUILD_BUG_ON(sizeof(struct nv_ioctl_xfer) != 16);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_get_export_object_info_params_v535) != 76);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_get_export_object_info_params) != 80);
	BUILD_BUG_ON(offsetof(struct nvos32_alloc_os_desc, descriptor) != 24);
	BUILD_BUG_ON(offsetof(struct nvos32_alloc_os_desc, descriptor_type) != 40);
	BUILD_BUG_ON(sizeof(struct nvos49_parameters) != NVOS49_SIZE);
	BUILD_BUG_ON(offsetof(struct nvos49_parameters, status) != NVOS49_STATUS);
	BUILD_BUG_ON(sizeof(struct nvos56_parameters) != NVOS56_SIZE);
	BUILD_BUG_ON(offsetof(struct nvos56_parameters, status) != NVOS56_STATUS);
	BUILD_BUG_ON(sizeof(struct nvos30_parameters) != 56);
	BUILD_BUG_ON(offsetof(struct nvos30_parameters, status) != 48);
	BUILD_BUG_ON(sizeof(struct nvos38_parameters) != 72);
	BUILD_BUG_ON(offsetof(struct nvos38_parameters, status) != 64);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_gpu_idle_channels_params) != 48);
	BUILD_BUG_ON(sizeof(struct nv0080_ctrl_fifo_idle_channels_params) !=
		     16396);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_fifo_disable_channels_params) != 536);
	BUILD_BUG_ON(offsetof(struct nv2080_ctrl_fifo_disable_channels_params,
			      p_runlist_preempt_event) != 16);
	BUILD_BUG_ON(offsetof(struct nv2080_ctrl_fifo_disable_channels_params,
			      h_client_list) != 24);
	BUILD_BUG_ON(offsetof(struct nv2080_ctrl_fifo_disable_channels_params,
			      h_channel_list) != 280);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_card_info) != 72);
	BUILD_BUG_ON(offsetof(struct nv_ioctl_card_info, gpu_id) != 16);
	BUILD_BUG_ON(offsetof(struct nv_ioctl_card_info, fb_size) != 48);
	BUILD_BUG_ON(offsetof(struct nv_ioctl_card_info, minor_number) != 56);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_rm_api_version) != 72);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_sys_params) != 8);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_numa_info) != 560);
	BUILD_BUG_ON(offsetof(struct nv_ioctl_numa_info, offline_addresses) != 40);
	BUILD_BUG_ON(offsetof(struct nv_ioctl_numa_info,
			      offline_addresses.num_entries) != 552);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_fb_get_numa_info_params) != 544);
	BUILD_BUG_ON(offsetof(struct nv2080_ctrl_fb_get_numa_info_params,
			      numa_offline_addresses_count) != 24);
	BUILD_BUG_ON(sizeof(struct nv0005_alloc_parameters) != 24);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_register_fd) != 4);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_status_code) != 12);
	BUILD_BUG_ON(sizeof(struct nv_ioctl_wait_open_complete) != 8);
	BUILD_BUG_ON(sizeof(struct nvos00_parameters) != 16);
	BUILD_BUG_ON(sizeof(struct nvos05_parameters) != 20);
	BUILD_BUG_ON(sizeof(struct nvos39_parameters) != 56);
	BUILD_BUG_ON(offsetof(struct nvos39_parameters, offset) != 32);
	BUILD_BUG_ON(offsetof(struct nvos39_parameters, status) != 48);
	BUILD_BUG_ON(sizeof(struct nv_context_dma_allocation_params) != 32);
	BUILD_BUG_ON(sizeof(struct nvos02_parameters) != 48);
	BUILD_BUG_ON(offsetof(struct nvos02_parameters, limit) != 32);
	BUILD_BUG_ON(offsetof(struct nvos02_parameters, status) != 40);
	BUILD_BUG_ON(sizeof(struct nvos02_with_fd) != 56);
	BUILD_BUG_ON(offsetof(struct nvos02_with_fd, fd) != 48);
	BUILD_BUG_ON(sizeof(struct nvos21_parameters) != 32);
	BUILD_BUG_ON(offsetof(struct nvos21_parameters, status) != 28);
	BUILD_BUG_ON(sizeof(struct nvos64_parameters) != 48);
	BUILD_BUG_ON(offsetof(struct nvos64_parameters, params_size) != 32);
	BUILD_BUG_ON(offsetof(struct nvos64_parameters, status) != 40);
	BUILD_BUG_ON(sizeof(struct nvos54_parameters) != 32);
	BUILD_BUG_ON(offsetof(struct nvos54_parameters, params_size) != 24);
	BUILD_BUG_ON(sizeof(struct nvos55_parameters) != 28);
	BUILD_BUG_ON(sizeof(struct nvos33_parameters) != 48);
	BUILD_BUG_ON(offsetof(struct nvos33_parameters, p_linear_address) != 32);
	BUILD_BUG_ON(offsetof(struct nvos33_parameters, flags) != 44);
	BUILD_BUG_ON(sizeof(struct nvos33_with_fd) != 56);
	BUILD_BUG_ON(offsetof(struct nvos33_with_fd, fd) != 48);
	BUILD_BUG_ON(sizeof(struct nvos34_parameters) != 32);
	BUILD_BUG_ON(offsetof(struct nvos34_parameters, status) != 24);
	BUILD_BUG_ON(sizeof(struct nvos32_parameters) != 184);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, status) != 20);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, total) != 24);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data) != 40);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.h_memory) != 44);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.attr) != 56);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.size) != 88);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.limit) != 112);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.range_begin) != 128);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.attr2) != 144);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.alloc_size.numa_node) != 152);
	BUILD_BUG_ON(offsetof(struct nvos32_parameters, data.free.h_memory) != 44);
	BUILD_BUG_ON(sizeof(struct nvos32_alloc_size) > 144);
	BUILD_BUG_ON(sizeof(struct nvos32_alloc_tiled) > 144);
	BUILD_BUG_ON(sizeof(struct nvos32_alloc_range) > 144);
	BUILD_BUG_ON(offsetof(struct nvos32_alloc_range, address) != 88);
	BUILD_BUG_ON(offsetof(struct nvos32_alloc_tiled, size) != 48);
	BUILD_BUG_ON(sizeof(struct nv_memory_allocation_params) != 128);
	BUILD_BUG_ON(offsetof(struct nv_memory_allocation_params, attr) != 24);
	BUILD_BUG_ON(offsetof(struct nv_memory_allocation_params, size) != 64);
	BUILD_BUG_ON(offsetof(struct nv_memory_allocation_params, tag) != 116);
	BUILD_BUG_ON(offsetof(struct nv_memory_allocation_params, numa_node) !=
		     NV_MEMORY_ALLOCATION_PARAMS_SIZE_OLD);
	BUILD_BUG_ON(sizeof(struct nv0080_alloc_parameters) != 56);
	BUILD_BUG_ON(offsetof(struct nv0080_alloc_parameters, va_mode) != 48);
	BUILD_BUG_ON(sizeof(struct nv_vaspace_allocation_parameters) != 56);
	BUILD_BUG_ON(offsetof(struct nv_vaspace_allocation_parameters, pasid) !=
		     NV_VASPACE_ALLOCATION_PARAMETERS_SIZE_OLD);
	BUILD_BUG_ON(offsetof(struct nv_vaspace_allocation_parameters, va_base) != 40);
	BUILD_BUG_ON(sizeof(struct nv_ctxshare_allocation_parameters) != 12);
	BUILD_BUG_ON(sizeof(struct nvos46_parameters) != 56);
	BUILD_BUG_ON(offsetof(struct nvos46_parameters, dma_offset) != 40);
	BUILD_BUG_ON(sizeof(struct nvos46_parameters_v580) != 64);
	BUILD_BUG_ON(offsetof(struct nvos46_parameters_v580, dma_offset) != 48);
	BUILD_BUG_ON(sizeof(struct nvos47_parameters) != 48);
	BUILD_BUG_ON(offsetof(struct nvos47_parameters, dma_offset) != 24);
	BUILD_BUG_ON(sizeof(struct nv2080_alloc_parameters) != 4);
	BUILD_BUG_ON(sizeof(struct nv_channel_group_allocation_parameters) != 20);
	BUILD_BUG_ON(sizeof(struct nv_channel_alloc_params) != 368);
	BUILD_BUG_ON(offsetof(struct nv_channel_alloc_params, h_userd_memory) != 32);
	BUILD_BUG_ON(offsetof(struct nv_channel_alloc_params, userd_offset) != 64);
	BUILD_BUG_ON(offsetof(struct nv_channel_alloc_params, engine_type) != 128);
	BUILD_BUG_ON(offsetof(struct nv_channel_alloc_params, tpc_config_id) !=
		     NV_CHANNEL_ALLOC_PARAMS_SIZE_OLD);
	BUILD_BUG_ON(sizeof(struct nv_hopper_usermode_a_params) != 2);
	BUILD_BUG_ON(sizeof(struct nv_gr_allocation_parameters) != 16);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_fb_get_info_params) != 16);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_fb_info) != 8);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_gpu_get_pids_params) != 3812);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_gpu_pid_info) != 72);
	BUILD_BUG_ON(sizeof(struct nv2080_ctrl_gpu_get_pid_info_params) != 14408);
	BUILD_BUG_ON(sizeof(struct nva06c_ctrl_gpfifo_schedule_params) != 3);
	BUILD_BUG_ON(sizeof(struct nva06c_ctrl_timeslice_params) != 8);
	BUILD_BUG_ON(sizeof(struct nvc36f_ctrl_get_work_submit_token_params) != 4);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_client_get_handle_info_params) != 16);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_client_objects_are_duplicates_params) != 12);
	BUILD_BUG_ON(sizeof(struct nv0041_ctrl_get_surface_phys_attr_params) != 48);
	BUILD_BUG_ON(offsetof(struct nv0041_ctrl_get_surface_phys_attr_params,
			      contig_segment_size) != 40);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_export_object_to_fd_params) != 24);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_import_object_from_fd_params) != 20);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params) != 2128);
	BUILD_BUG_ON(offsetof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params,
			      objects) != 76);
	BUILD_BUG_ON(sizeof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params) != 652);
	BUILD_BUG_ON(offsetof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params,
			      num_objects) != 648);
}

#define NV0000_CTRL_CMD_GPU_GET_PROBED_IDS	0x214

/* Sizes that moved between driver versions, looked up once. */
struct nv_abi_version {
	u32 fb_info_v2_size;		/* NV2080_CTRL_FB_GET_INFO_V2_PARAMS */
	u32 memory_alloc_params_size;	/* NV_MEMORY_ALLOCATION_PARAMS */
	u32 vaspace_alloc_params_size;	/* NV_VASPACE_ALLOCATION_PARAMETERS */
	u32 map_dma_params_size;	/* NVOS46_PARAMETERS */
	u32 channel_alloc_params_size;	/* NV_CHANNEL_ALLOC_PARAMS */
};

static inline const struct nv_abi_version *nv_abi_for_version(u32 major)
{
	static const struct nv_abi_version v580 = { 1028, 128, 56, 64, 368 };
	/* tpcConfigId came in 570 */
	static const struct nv_abi_version v570 = { 460, 128, 48, 56, 368 };
	static const struct nv_abi_version v560 = { 460, 128, 48, 56, 360 };
	static const struct nv_abi_version v545 = { 444, 128, 48, 56, 360 };
	static const struct nv_abi_version v535 = { 436, 120, 48, 56, 360 };

	if (major >= 580)
		return &v580;
	if (major >= 570)
		return &v570;
	if (major >= 560)
		return &v560;
	if (major >= 545)
		return &v545;
	return &v535;
}

#endif /* XPU_NVABI_H */
