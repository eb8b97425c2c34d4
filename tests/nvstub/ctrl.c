// SPDX-License-Identifier: GPL-2.0
/*
 * RM_CONTROL as _nv04ControlWithSecInfo() and _rmapiRmControl() (control.c)
 * dispatch it, and the controls nvstub simulates: FB info (V1 and V2,
 * kern_mem_sys_ctrl), the process lists (subdevice_ctrl_gpu_kernel,
 * gpu_rmapi), the TSG's schedule and timeslice and the channel's work
 * submit token.
 */
#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "nvstub.h"
#include "info.h"

#define RMAPI_PARAM_COPY_MAX_PARAMS_SIZE	(1u << 20)
#define NVSTUB_CTRL_MIN_BUF			64

/* RM's param copies: user memory, or kernel memory for kernel-level calls. */
static u32 nvstub_copy_in(struct nvstub_call *call, void *dst, u64 src,
			  size_t size)
{
	if (call->kernel) {
		memcpy(dst, (void *)(uintptr_t)src, size);
		return NV_OK;
	}
	return copy_from_user(dst, u64_to_user_ptr(src), size) ?
	       NV_ERR_INVALID_ADDRESS : NV_OK;
}

static u32 nvstub_copy_out(struct nvstub_call *call, u64 dst, const void *src,
			   size_t size)
{
	if (call->kernel) {
		memcpy((void *)(uintptr_t)dst, src, size);
		return NV_OK;
	}
	return copy_to_user(u64_to_user_ptr(dst), src, size) ?
	       NV_ERR_INVALID_ADDRESS : NV_OK;
}

/*
 * An embedded list's copy-in, as rmapiParamsAcquire() makes it for a user
 * caller (param_copy.c): a count without a pointer or a pointer without a
 * count is NV_ERR_INVALID_ARGUMENT, and so is a list over the copy bound.
 * An empty list is no copy (*list stays NULL).  The caller kvfree()s *list.
 */
static u32 nvstub_list_copy_in(struct nvstub_call *call, u64 src, u32 n,
			       size_t size, void **list)
{
	u32 status;

	*list = NULL;
	if (!n != !src || (u64)n * size > RMAPI_PARAM_COPY_MAX_PARAMS_SIZE)
		return NV_ERR_INVALID_ARGUMENT;
	if (!n)
		return NV_OK;
	*list = kvmalloc_array(n, size, GFP_KERNEL);
	if (!*list)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	status = nvstub_copy_in(call, *list, src, n * size);
	if (status) {
		kvfree(*list);
		*list = NULL;
	}
	return status;
}

/* --- NV2080_CTRL_CMD_FB_GET_INFO(_V2) */

static u32 nvstub_fb_info_value(struct nvstub_gpu *gpu, u32 index, u32 *data)
{
	u64 total_kb = gpu->heap_total >> 10;
	u64 free_kb = (gpu->heap_total - gpu->heap_used) >> 10;

	if (index > nvstub_abi->fb_info_index_max)
		return NV_ERR_INVALID_ARGUMENT;

	switch (index) {
	case NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_MAPPABLE_HEAP_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE:
		*data = total_kb;	/* no RM reserve, no FB tax in the stub */
		break;
	case NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE:
	case NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_SIZE_KB:
		*data = free_kb;	/* a counter heap does not fragment */
		break;
	case NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_BASE_KB:
		*data = total_kb - free_kb;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_BAR1_AVAIL_SIZE:
	case NV2080_CTRL_FB_INFO_INDEX_BAR1_MAX_CONTIGUOUS_AVAIL_SIZE:
		*data = NVSTUB_BAR1_SIZE >> 10;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_PARTITION_COUNT:
	case NV2080_CTRL_FB_INFO_INDEX_FBP_COUNT:
		*data = 10;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_PARTITION_MASK:
	case NV2080_CTRL_FB_INFO_INDEX_FBP_MASK:
		*data = 0x3ff;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_BUS_WIDTH:
		*data = 6144;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_RAM_TYPE:
		*data = NV2080_CTRL_FB_INFO_RAM_TYPE_HBM3;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_BANK_COUNT:
	case NV2080_CTRL_FB_INFO_INDEX_ALLOW_PAGE_RETIREMENT:
	case NV2080_CTRL_FB_INFO_FBPA_ECC_ENABLED:
	case NV2080_CTRL_FB_INFO_DYNAMIC_PAGE_OFFLINING_ENABLED:
	case NV2080_CTRL_FB_INFO_INDEX_ACCESS_COUNTER_BUFFER_COUNT:
		*data = 1;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_L2CACHE_SIZE:
		*data = 50 << 20;	/* bytes */
		break;
	case NV2080_CTRL_FB_INFO_INDEX_LTC_COUNT:
		*data = 80;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_LTS_COUNT:
		*data = 160;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_LTC_MASK:
		*data = 0xffffffff;
		break;
	case NV2080_CTRL_FB_INFO_INDEX_NUMA_NODE_ID:
		*data = NUMA_NO_NODE;
		break;
	default:
		*data = 0;	/* deprecated, absent or off on this GPU */
		break;
	}
	return NV_OK;
}

static u32 nvstub_fb_infos(struct nvstub_gpu *gpu,
			   struct nv2080_ctrl_fb_info *list, u32 n)
{
	u32 i, status;

	for (i = 0; i < n; i++) {
		status = nvstub_fb_info_value(gpu, list[i].index, &list[i].data);
		if (status)
			return status;
	}
	return NV_OK;
}

/*
 * NV2080_CTRL_CMD_FB_GET_NUMA_INFO (subdeviceCtrlCmdFbGetNumaInfo, any
 * client): more room for offline addresses than the array has is
 * NV_ERR_INVALID_ARGUMENT; the stub's GPU has no NUMA node, no onlined
 * range and no retired page in it.
 */
static u32 nvstub_ctrl_fb_numa_info(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_fb_get_numa_info_params *p = params;

	if (p->numa_offline_addresses_count >
	    NV2080_CTRL_FB_NUMA_INFO_MAX_OFFLINE_ADDRESSES)
		return NV_ERR_INVALID_ARGUMENT;
	p->numa_node_id = NV0000_CTRL_NO_NUMA_NODE;
	p->numa_mem_addr = 0;
	p->numa_mem_size = 0;
	p->numa_offline_addresses_count = 0;
	return NV_OK;
}

static u32 nvstub_ctrl_fb_info_v2(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	u32 n = *(u32 *)params;

	if (n == 0 || n > nvstub_abi->fb_info_max_list)
		return NV_ERR_INVALID_ARGUMENT;
	return nvstub_fb_infos(obj->gpu, params + sizeof(u32), n);
}

/*
 * V1 carries a pointer to the list. Before 550 it is an ordinary control
 * with an embedded copy (embedded_param_copy.c), made before RM looks the
 * object up; from 550 a deprecated one rerouted to V2
 * (rmapi_deprecated_control.c), which ignores paramsSize, caps the list at
 * V2's size, and leaves an empty list to V2 (ctrlparamAcquire).
 */
static u32 nvstub_fb_info_v1(struct nvstub_call *call,
			     struct nvos54_parameters *p, bool deprecated)
{
	struct nv2080_ctrl_fb_get_info_params v1;
	struct nv2080_ctrl_fb_info *list = NULL;
	struct nvstub_client *c;
	struct nvstub_object *obj;
	u32 n, status;

	if (!p->params)
		return NV_ERR_INVALID_ARGUMENT;
	status = nvstub_copy_in(call, &v1, p->params, sizeof(v1));
	if (status)
		return status;
	n = v1.fb_info_list_size;
	if (deprecated && n > nvstub_abi->fb_info_max_list)
		return NV_ERR_OUT_OF_RANGE;
	/* ctrlparamAcquire: an empty list is not copied, its pointer not asked */
	if (n || !deprecated) {
		status = nvstub_list_copy_in(call, v1.fb_info_list, n,
					     sizeof(*list), (void **)&list);
		if (status)
			return status;
	}

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (status)
		goto unlock;
	obj = nvstub_object_find(c, p->h_object);
	if (!obj) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto unlock;
	}
	if (obj->hclass != NV20_SUBDEVICE_0) {
		status = NV_ERR_NOT_SUPPORTED;
		goto unlock;
	}
	status = n ? nvstub_fb_infos(obj->gpu, list, n) : NV_ERR_INVALID_ARGUMENT;
unlock:
	mutex_unlock(&nvstub_rm_lock);
	if (!status)
		status = nvstub_copy_out(call, v1.fb_info_list, list,
					 n * sizeof(*list));
	kvfree(list);
	return status;
}

/* --- NV0041_CTRL_CMD_GET_SURFACE_INFO (mem_ctrl.c) */

static u32 nvstub_surface_info_value(const struct nvstub_mem *mem, u32 index,
				     u32 *data)
{
	u64 pages;

	switch (index) {
	case NV0041_CTRL_SURFACE_INFO_INDEX_ATTRS:
	case NV0041_CTRL_SURFACE_INFO_INDEX_COMPR_COVERAGE:
		*data = 0;		/* no compression or zcull resources */
		return NV_OK;
	case NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_LO:
	case NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_HI:
		if (nvstub_major < 580)		/* not in 570's headers */
			return NV_ERR_INVALID_ARGUMENT;
		*data = index == NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_LO ?
			lower_32_bits(mem->size) : upper_32_bits(mem->size);
		return NV_OK;
	case NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE:
		pages = mem->size / NV0041_CTRL_SURFACE_INFO_PHYS_SIZE_SCALE_FACTOR;
		if (pages > U32_MAX)
			return NV_ERR_OUT_OF_RANGE;
		*data = pages;
		return NV_OK;
	case NV0041_CTRL_SURFACE_INFO_INDEX_ADDR_SPACE_TYPE:
		*data = mem->type == NVSTUB_MEM_VIDMEM ?
			NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_VIDMEM :
			mem->type == NVSTUB_MEM_SYSMEM ?
			NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_SYSMEM : 0;
		return NV_OK;
	default:
		/* PHYS_ATTR too: the stub keeps no attributes (docs/nvstub.md) */
		return NV_ERR_INVALID_ARGUMENT;
	}
}

/*
 * A Memory's surface information.  RM copies the caller's list in and out
 * around the handler for a user caller (embedded_param_copy.c, as
 * rmapiParamsAcquire: a size without a pointer or a pointer without a size
 * is NV_ERR_INVALID_ARGUMENT) and uses a kernel caller's where it lies.
 * The handler stops at the first entry it cannot answer, whose status the
 * call returns, and nothing is copied out then.
 */
static u32 nvstub_surface_info(struct nvstub_call *call,
			       struct nvos54_parameters *p)
{
	struct nv0041_ctrl_get_surface_info_params q;
	struct nv0041_ctrl_surface_info *list = NULL;
	struct nvstub_object *obj;
	struct nvstub_client *c;
	u32 n, i, status;

	if (!p->params || p->params_size != sizeof(q))
		return NV_ERR_INVALID_ARGUMENT;
	status = nvstub_copy_in(call, &q, p->params, sizeof(q));
	if (status)
		return status;
	n = q.surface_info_list_size;
	status = nvstub_list_copy_in(call, q.surface_info_list, n,
				     sizeof(*list), (void **)&list);
	if (status)
		return status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (status)
		goto unlock;
	obj = nvstub_object_find_any(c, p->h_object);
	if (!obj) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto unlock;
	}
	if (obj->invalid) {
		status = NV_ERR_RESOURCE_LOST;
		goto unlock;
	}
	if (!nvstub_object_is_memory(obj)) {
		status = NV_ERR_NOT_SUPPORTED;
		goto unlock;
	}
	for (i = 0; i < n; i++) {
		status = nvstub_surface_info_value(obj->mem.mem, list[i].index,
						   &list[i].data);
		if (status)
			break;
	}
unlock:
	mutex_unlock(&nvstub_rm_lock);
	/* no copy-out on error (serverControlApiCopyOut) */
	if (n && !status)
		status = nvstub_copy_out(call, q.surface_info_list, list,
					 n * sizeof(*list));
	kvfree(list);
	return status;
}

/* --- NV2080_CTRL_CMD_GPU_GET_PIDS / GET_PID_INFO */

/*
 * The pid a client's process is known by in GET_PID_INFO and GET_PIDS, or 0
 * to skip the client.  Kernel admin clients (RS_PRIV_LEVEL_KERNEL and
 * rmclientIsAdmin(): not made as NV01_ROOT_NON_PRIV) are skipped ("Skip
 * reporting of kernel mode and internal RM clients", gpu_rmapi.c).  Up to 560 it is the client's global ProcID, whoever asks;
 * from 565 _gpuConvertPid() translates it into the calling task's pid
 * namespace (osFindNsPid: pid_vnr), for a kernel-level caller too, and a
 * process that namespace cannot see is skipped.
 */
static pid_t nvstub_client_ns_pid(struct nvstub_call *call,
				  struct nvstub_client *c)
{
	if (c->kernel_admin)
		return 0;
	if (!nvstub_abi->pid_in_caller_ns)
		return pid_nr(c->pid);
	return pid_nr_ns(c->pid, task_active_pid_ns(current));
}

/* deviceGetByGpu() */
static struct nvstub_object *nvstub_client_device(struct nvstub_client *c,
						  struct nvstub_gpu *gpu)
{
	struct nvstub_object *dev;

	list_for_each_entry(dev, &c->root->children, sibling)
		if (dev->hclass == NV01_DEVICE_0 && dev->gpu == gpu)
			return dev;
	return NULL;
}

static bool nvstub_client_has(struct nvstub_object *obj, u32 id,
			      struct nvstub_object *dev)
{
	struct nvstub_object *child;

	if (id == NV20_SUBDEVICE_0) {
		if (obj->hclass == NV20_SUBDEVICE_0)
			return true;
	} else if (obj->hclass == id && obj->parent &&
		   obj->parent->hclass == HOPPER_CHANNEL_GPFIFO_A &&
		   obj->device == dev) {
		return true;	/* a channel descendant of that class */
	}
	list_for_each_entry(child, &obj->children, sibling)
		if (!child->invalid && nvstub_client_has(child, id, dev))
			return true;
	return false;
}

static u32 nvstub_ctrl_get_pids(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_pids_params *p = params;
	struct nvstub_object *dev;
	struct nvstub_client *c;
	unsigned long h;
	u32 n = 0, i;
	pid_t pid;

	if (p->id_type == NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_VGPU_GUEST) {
		p->pid_tbl_count = 0;	/* no vGPU guests here */
		return NV_OK;
	}
	if (p->id_type != NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_CLASS)
		return NV_ERR_INVALID_ARGUMENT;

	xa_for_each(&nvstub_clients, h, c) {
		dev = nvstub_client_device(c, obj->gpu);
		if (!dev || p->id == MPS_COMPUTE ||
		    !nvstub_client_has(c->root, p->id, dev))
			continue;
		pid = nvstub_client_ns_pid(call, c);
		if (!pid)
			continue;	/* not visible from the caller's namespace */
		for (i = 0; i < n; i++)
			if (p->pid_tbl[i] == (u32)pid)
				break;
		if (i < n)
			continue;
		p->pid_tbl[n++] = pid;
		if (n == NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT)
			break;
	}
	p->pid_tbl_count = n;
	return NV_OK;
}

/*
 * Memory objects GET_PID_INFO looked at since the stub was loaded: RM walks
 * every memory object of each client of the process asked about, so a
 * test can see whose objects a reading costs.
 */
static atomic64_t nvstub_pid_info_walked = ATOMIC64_INIT(0);

/* _gpuCollectMemInfo() for one device of one client */
static void nvstub_collect_vidmem(struct nvstub_object *obj,
				  struct nvstub_object *dev,
				  struct nv2080_ctrl_gpu_pid_info *info)
{
	typeof(info->vid_mem_usage) *u = &info->vid_mem_usage;
	struct nvstub_object *child;

	if (obj->hclass == NV01_MEMORY_LOCAL_USER && obj->device == dev) {
		struct nvstub_mem *mem = obj->mem.mem;
		u64 prot = mem->protected ? mem->size : 0;

		atomic64_inc(&nvstub_pid_info_walked);

		/* protected memory counts in both figures, as in RM */
		if (mem->handles == 1) {
			u->mem_private += mem->size;
			u->protected_mem_private += prot;
		} else if (obj->mem.owner) {
			u->mem_shared_owned += mem->size;
			u->protected_mem_shared_owned += prot;
		} else {
			u->mem_shared_duped += mem->size;
			u->protected_mem_shared_duped += prot;
		}
	}
	list_for_each_entry(child, &obj->children, sibling)
		if (!child->invalid)
			nvstub_collect_vidmem(child, dev, info);
}

static u32 nvstub_ctrl_get_pid_info(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_gpu_get_pid_info_params *p = params;
	struct nv2080_ctrl_gpu_pid_info *info;
	struct nvstub_object *dev;
	struct nvstub_client *c;
	unsigned long h;
	u32 i;

	if (p->pid_info_list_count == 0 ||
	    p->pid_info_list_count > NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT)
		return NV_ERR_INVALID_ARGUMENT;

	for (i = 0; i < p->pid_info_list_count; i++) {
		info = &p->pid_info_list[i];
		info->compute_instance_id = PARTITIONID_INVALID;
		info->gpu_instance_id = PARTITIONID_INVALID;
		if (info->index != NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE) {
			info->result = NV_ERR_INVALID_ARGUMENT;
			continue;
		}
		memset(&info->vid_mem_usage, 0, sizeof(info->vid_mem_usage));
		if (!info->pid) {
			info->result = NV_ERR_INVALID_ARGUMENT;
			continue;
		}
		xa_for_each(&nvstub_clients, h, c) {
			if ((u32)nvstub_client_ns_pid(call, c) != info->pid)
				continue;
			list_for_each_entry(dev, &c->root->children, sibling)
				if (dev->hclass == NV01_DEVICE_0 &&
				    dev->gpu == obj->gpu)
					nvstub_collect_vidmem(c->root, dev, info);
		}
		info->result = NV_OK;
	}
	return NV_OK;
}

/* --- KEPLER_CHANNEL_GROUP_A and the channel */

/*
 * kchannelIsSchedulable(): a graphics/compute channel in an externally owned
 * VA space runs only once UVM_REGISTER_CHANNEL bound its allocations.
 */
static bool nvstub_chan_schedulable(struct nvstub_chan *chan)
{
	u32 engine = chan->tsg->engine_type;

	return !chan->vas->external || chan->bound ||
	       (engine && engine != NV2080_ENGINE_TYPE_GR0);
}

/* kchangrpapiCtrlCmdGpFifoSchedule(): every channel of the TSG is checked */
static u32 nvstub_ctrl_schedule(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nvstub_object *ch;

	list_for_each_entry(ch, &obj->children, sibling)
		if (ch->hclass == HOPPER_CHANNEL_GPFIFO_A && !ch->invalid &&
		    !nvstub_chan_schedulable(ch->chan))
			return NV_ERR_INVALID_STATE;
	return nvstub_tsg_schedule(obj->gpu, obj->tsg, params);
}

/*
 * kchannelCtrlCmdGpFifoSchedule(): on one channel; stub: it schedules the
 * channel's TSG (RM's own for a channel under a device).
 */
static u32 nvstub_ctrl_chan_schedule(struct nvstub_call *call,
				     struct nvstub_object *obj, void *params)
{
	if (!nvstub_chan_schedulable(obj->chan))
		return NV_ERR_INVALID_STATE;
	return nvstub_tsg_schedule(obj->gpu, obj->chan->tsg, params);
}

static u32 nvstub_ctrl_set_timeslice(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nva06c_ctrl_timeslice_params *p = params;

	/* kfifoChannelGroupSetTimeslice(): the minimum is 0 */
	nvstub_tsg_set_timeslice(obj->gpu, obj->tsg, p->timeslice_us);
	return NV_OK;
}

static u32 nvstub_ctrl_get_timeslice(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nva06c_ctrl_timeslice_params *p = params;

	p->timeslice_us = nvstub_tsg_get_timeslice(obj->gpu, obj->tsg);
	return NV_OK;
}

static u32 nvstub_ctrl_work_submit_token(struct nvstub_call *call,
					 struct nvstub_object *obj, void *params)
{
	struct nvc36f_ctrl_get_work_submit_token_params *p = params;

	/*
	 * kernel_fifo_ga100.c (535, 580): no runlist yet, no token.  A
	 * channel gets one with its first engine object, or at allocation in
	 * a TSG that has one (kernel_channel.c; without SR-IOV, CC or MIG).
	 */
	if (!obj->chan->runlist)
		return NV_ERR_INVALID_STATE;
	p->work_submit_token = obj->chan->token;
	return NV_OK;
}

/* --- NV01_ROOT_CLIENT: which GPUs there are */

static u32 nvstub_ctrl_attached_ids(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_attached_ids_params *p = params;
	unsigned int i;

	for (i = 0; i < NV0000_CTRL_GPU_MAX_ATTACHED_GPUS; i++)
		p->gpu_ids[i] = i < nvstub_ngpus ? nvstub_gpus[i].gpu_id :
			NV0000_CTRL_GPU_INVALID_ID;
	return NV_OK;
}

static u32 nvstub_ctrl_id_info_v2(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_get_id_info_v2_params *p = params;
	unsigned int i;

	for (i = 0; i < nvstub_ngpus; i++) {
		if (nvstub_gpus[i].gpu_id != p->gpu_id)
			continue;
		p->gpu_flags = 0;
		p->device_instance = i;
		p->sub_device_instance = 0;
		p->sli_status = 0;
		p->board_id = i;
		p->gpu_instance = i;
		p->numa_id = NV0000_CTRL_NO_NUMA_NODE;
		return NV_OK;
	}
	return NV_ERR_INVALID_ARGUMENT;
}

/* cliresCtrlCmdClientGetHandleInfo(): an object of the called client */
static u32 nvstub_ctrl_handle_info(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_client_get_handle_info_params *p = params;
	/* clientGetResourceRef(): an invalidated handle answers too */
	struct nvstub_object *o = nvstub_object_find_any(obj->client,
							 p->h_object);

	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	switch (p->index) {
	case NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_PARENT:
		p->data.i_result = 0;
		p->data.h_result = o->parent ? o->parent->handle : 0;
		return NV_OK;
	case NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_CLASSID:
		p->data.i_result = o->hclass;
		return NV_OK;
	}
	return NV_ERR_INVALID_ARGUMENT;
}

/* cliresCtrlCmdObjectsAreDuplicates(): memIsDuplicate() on two handles */
static u32 nvstub_ctrl_are_duplicates(struct nvstub_call *call,
				      struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_client_objects_are_duplicates_params *p = params;
	struct nvstub_object *a = nvstub_object_find(obj->client, p->h_object1);
	struct nvstub_object *b;

	if (!a)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (!nvstub_object_is_memory(a))
		return NV_ERR_NOT_SUPPORTED;	/* resIsDuplicate()'s default */
	b = nvstub_object_find(obj->client, p->h_object2);
	if (!b)
		return NV_ERR_OBJECT_NOT_FOUND;
	p->b_duplicates = nvstub_object_is_memory(b) && a->mem.mem == b->mem.mem;
	return NV_OK;
}

/*
 * memCtrlCmdGetSurfacePhysAttrLvm() (550 on; 535 has no such control): where
 * byte MEM_OFFSET of a Memory lies, AT_GPU (memdescFillMemdescForPhysAttr).
 * Duplicates share the memory, so they answer alike.  The stub's video
 * memory is one contiguous run from its heap offset, its system memory one
 * from its cookie; a virtual range has no pages (NV_ERR_NOT_SUPPORTED).  RM
 * does not check the offset against the size; the stub refuses one past it
 * (stricter, never kinder).  From 580 the control is
 * RMCTRL_FLAGS_PRIVILEGED: a user caller without admin rights is refused
 * (rmControlValidateClientPrivilegeAccess), a kernel caller never.
 */
static u32 nvstub_ctrl_phys_attr(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv0041_ctrl_get_surface_phys_attr_params *p = params;
	struct nvstub_mem *mem = obj->mem.mem;
	u64 off = p->mem_offset;

	if (nvstub_major >= 580 && !call->kernel && !capable(CAP_SYS_ADMIN))
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	if (!mem || mem->type == NVSTUB_MEM_VIRTUAL)
		return NV_ERR_NOT_SUPPORTED;
	if (off >= mem->size)
		return NV_ERR_INVALID_LIMIT;
	memset(p, 0, sizeof(*p));
	if (mem->type == NVSTUB_MEM_VIDMEM) {
		p->mem_offset = mem->heap_offset + off;
		p->mem_aperture =
			NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_VIDMEM;
	} else {
		p->mem_offset = mem->cookie + off;
		p->mem_aperture =
			NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_SYSMEM;
	}
	p->contig_segment_size = mem->size - off;
	return NV_OK;
}

/*
 * sysmemCtrlCmdGetSurface{Num,}PhysPages(): the OS pages of system memory,
 * as struct page pointers written straight into pPages (nv_get_phys_pages),
 * so RM exports them to kernel callers only (flags 0x0,
 * RMCTRL_FLAGS_KERNEL_PRIVILEGED: a user's call is refused before the
 * handler).  Memory not in system memory is NV_ERR_NOT_SUPPORTED.
 */
static u32 nvstub_sysmem_of(struct nvstub_call *call, struct nvstub_object *obj,
			    struct nvstub_mem **mem)
{
	if (!call->kernel)
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	*mem = obj->mem.mem;
	if (!*mem || (*mem)->type != NVSTUB_MEM_SYSMEM)
		return NV_ERR_NOT_SUPPORTED;
	return NV_OK;
}

static u32 nvstub_ctrl_num_phys_pages(struct nvstub_call *call,
				      struct nvstub_object *obj, void *params)
{
	struct nv003e_ctrl_get_surface_num_phys_pages_params *p = params;
	struct nvstub_mem *mem;
	u32 status = nvstub_sysmem_of(call, obj, &mem);

	if (status)
		return status;
	p->num_pages = mem->npages;
	return NV_OK;
}

static u32 nvstub_ctrl_phys_pages(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv003e_ctrl_get_surface_phys_pages_params *p = params;
	struct page **pages = (struct page **)(uintptr_t)p->p_pages;
	struct nvstub_mem *mem;
	u32 status = nvstub_sysmem_of(call, obj, &mem);
	u32 i, n;

	if (status)
		return status;
	if (!pages)
		return NV_ERR_INVALID_ARGUMENT;
	n = min_t(u64, p->num_pages, mem->npages);
	for (i = 0; i < n; i++)
		pages[i] = mem->pages[i];
	p->num_pages = n;
	return NV_OK;
}

/*
 * NV0002_CTRL_CMD_BIND_CONTEXTDMA (context_dma.c
 * ctxdmaCtrlCmdBindContextdma_IMPL, 535 to 595): binding to a host channel
 * of the context DMA's client is "no longer required" and succeeds, doing
 * nothing; anything else must be a display channel (dispchnBindCtx), which
 * no simulated GPU has.
 */
static u32 nvstub_ctrl_bind_contextdma(struct nvstub_call *call,
				       struct nvstub_object *obj, void *params)
{
	struct nv0002_ctrl_bind_contextdma_params *p = params;
	struct nvstub_object *ch = nvstub_object_find_any(obj->client,
							  p->h_channel);

	if (!ch)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (ch->invalid || ch->hclass != HOPPER_CHANNEL_GPFIFO_A)
		return NV_ERR_INVALID_OBJECT_HANDLE;	/* dispchnGetByHandle() */
	return NV_OK;
}

/* NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS: bSkipEnable from 575 */
static u32 nvstub_gpfifo_schedule_size(void)
{
	return nvstub_abi->gpfifo_schedule_size;
}

static const struct nvstub_ctrl nvstub_ctrls[] = {
	{ NV0002_CTRL_CMD_BIND_CONTEXTDMA, NV01_CONTEXT_DMA,
	  sizeof(struct nv0002_ctrl_bind_contextdma_params),
	  nvstub_ctrl_bind_contextdma },
	{ NV003E_CTRL_CMD_GET_SURFACE_NUM_PHYS_PAGES, NV01_MEMORY_SYSTEM,
	  sizeof(struct nv003e_ctrl_get_surface_num_phys_pages_params),
	  nvstub_ctrl_num_phys_pages },
	{ NV003E_CTRL_CMD_GET_SURFACE_PHYS_PAGES, NV01_MEMORY_SYSTEM,
	  sizeof(struct nv003e_ctrl_get_surface_phys_pages_params),
	  nvstub_ctrl_phys_pages },
	{ NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_client_objects_are_duplicates_params),
	  nvstub_ctrl_are_duplicates },
	/* any Memory's (NVSTUB_CTRL_ANY_MEMORY) */
	{ NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR, NVSTUB_CTRL_ANY_MEMORY,
	  sizeof(struct nv0041_ctrl_get_surface_phys_attr_params),
	  nvstub_ctrl_phys_attr, NULL, 550 },
	{ NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_os_unix_export_object_to_fd_params),
	  nvstub_ctrl_export_object },
	{ NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_os_unix_import_object_from_fd_params),
	  nvstub_ctrl_import_object },
	{ NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_os_unix_export_objects_to_fd_params),
	  nvstub_ctrl_export_objects },
	{ NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_os_unix_import_objects_from_fd_params),
	  nvstub_ctrl_import_objects },
	{ NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO, NV01_ROOT_CLIENT, 0,
	  nvstub_ctrl_export_info, nvstub_export_info_size },
	{ NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_client_get_handle_info_params),
	  nvstub_ctrl_handle_info },
	{ NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_gpu_get_attached_ids_params),
	  nvstub_ctrl_attached_ids },
	{ NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_gpu_get_id_info_v2_params),
	  nvstub_ctrl_id_info_v2 },
	{ NV2080_CTRL_CMD_FB_GET_INFO_V2, NV20_SUBDEVICE_0, 0,
	  nvstub_ctrl_fb_info_v2, nvstub_fb_info_v2_size },
	{ NV2080_CTRL_CMD_FB_GET_NUMA_INFO, NV20_SUBDEVICE_0,
	  sizeof(struct nv2080_ctrl_fb_get_numa_info_params),
	  nvstub_ctrl_fb_numa_info },
	{ NV2080_CTRL_CMD_GPU_GET_PIDS, NV20_SUBDEVICE_0,
	  sizeof(struct nv2080_ctrl_gpu_get_pids_params), nvstub_ctrl_get_pids },
	{ NV2080_CTRL_CMD_GPU_GET_PID_INFO, NV20_SUBDEVICE_0,
	  sizeof(struct nv2080_ctrl_gpu_get_pid_info_params),
	  nvstub_ctrl_get_pid_info },
	{ NV0000_CTRL_CMD_IDLE_CHANNELS, NV01_ROOT_CLIENT,
	  sizeof(struct nv0000_ctrl_gpu_idle_channels_params),
	  nvstub_ctrl_idle_channels },
	{ NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS, NV01_DEVICE_0,
	  sizeof(struct nv0080_ctrl_fifo_idle_channels_params),
	  nvstub_ctrl_fifo_idle_channels },
	{ NV2080_CTRL_CMD_FIFO_GET_PHYSICAL_CHANNEL_COUNT, NV20_SUBDEVICE_0,
	  sizeof(struct nv2080_ctrl_fifo_get_physical_channel_count_params),
	  nvstub_fifo_channel_count },
	{ NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS, NV20_SUBDEVICE_0,
	  sizeof(struct nv2080_ctrl_fifo_disable_channels_params),
	  nvstub_fifo_disable_channels },
	{ NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, KEPLER_CHANNEL_GROUP_A, 0,
	  nvstub_ctrl_schedule, nvstub_gpfifo_schedule_size },
	{ NVA06F_CTRL_CMD_GPFIFO_SCHEDULE, HOPPER_CHANNEL_GPFIFO_A, 0,
	  nvstub_ctrl_chan_schedule, nvstub_gpfifo_schedule_size },
	{ NVA06C_CTRL_CMD_SET_TIMESLICE, KEPLER_CHANNEL_GROUP_A,
	  sizeof(struct nva06c_ctrl_timeslice_params), nvstub_ctrl_set_timeslice },
	{ NVA06C_CTRL_CMD_GET_TIMESLICE, KEPLER_CHANNEL_GROUP_A,
	  sizeof(struct nva06c_ctrl_timeslice_params), nvstub_ctrl_get_timeslice },
	{ NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, HOPPER_CHANNEL_GPFIFO_A,
	  sizeof(struct nvc36f_ctrl_get_work_submit_token_params),
	  nvstub_ctrl_work_submit_token },
};

/* How often each of nvstub_ctrls[] reached its handler (debugfs "controls"). */
static atomic_t nvstub_ctrl_calls[ARRAY_SIZE(nvstub_ctrls)];

static const struct nvstub_ctrl *nvstub_ctrl_find(u32 cmd)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(nvstub_ctrls); i++)
		if (nvstub_ctrls[i].cmd == cmd)
			return nvstub_major >= nvstub_ctrls[i].since ?
			       &nvstub_ctrls[i] : NULL;
	for (i = 0; i < nvstub_info_nctrls; i++)
		if (nvstub_info_ctrls[i].cmd == cmd)
			return &nvstub_info_ctrls[i];
	return NULL;
}

static u32 nvstub_ctrl_size(const struct nvstub_ctrl *ctrl)
{
	return ctrl->size ?: ctrl->size_of();
}

static bool nvstub_client_exists(u32 h_client)
{
	bool ret;

	mutex_lock(&nvstub_rm_lock);
	ret = xa_load(&nvstub_clients, h_client);
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}

/*
 * serverControl(): CTRL (NULL: a command the stub does not know) on object
 * H_OBJECT of client H_CLIENT, with PARAMS in kernel memory.
 */
static u32 nvstub_control_run(struct nvstub_call *call, u32 h_client,
			      u32 h_object, const struct nvstub_ctrl *ctrl,
			      void *params)
{
	struct nvstub_object *obj;
	struct nvstub_client *c;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	status = nvstub_client_get(call, h_client, &c);
	if (status)
		return status;
	obj = nvstub_object_find_any(c, h_object);
	if (!obj)
		return NV_ERR_OBJECT_NOT_FOUND;
	/* before the command is looked up */
	if (obj->invalid)
		return NV_ERR_RESOURCE_LOST;
	if (!ctrl ||
	    (ctrl->hclass == NVSTUB_CTRL_ANY_MEMORY ?
	     !nvstub_object_is_memory(obj) : obj->hclass != ctrl->hclass))
		return NV_ERR_NOT_SUPPORTED;
	if (ctrl >= nvstub_ctrls && ctrl < nvstub_ctrls + ARRAY_SIZE(nvstub_ctrls))
		atomic_inc(&nvstub_ctrl_calls[ctrl - nvstub_ctrls]);
	return ctrl->handler(call, obj, params);
}

/*
 * /sys/kernel/debug/nvstub/controls: "cmd=0x... calls=N" for each command of
 * the table that reached its handler since the stub was loaded, so a test
 * can count what a path asked RM.
 */
static int nvstub_controls_show(struct seq_file *s, void *unused)
{
	unsigned int i, n;

	for (i = 0; i < ARRAY_SIZE(nvstub_ctrls); i++) {
		n = atomic_read(&nvstub_ctrl_calls[i]);
		if (n)
			seq_printf(s, "cmd=0x%x calls=%u\n", nvstub_ctrls[i].cmd, n);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_controls);

/* /sys/kernel/debug/nvstub/pid_info_walked: the count above */
static int nvstub_walked_show(struct seq_file *s, void *unused)
{
	seq_printf(s, "%lld\n", (long long)atomic64_read(&nvstub_pid_info_walked));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_walked);

void nvstub_ctrl_debugfs(struct dentry *dir)
{
	debugfs_create_file("controls", 0444, dir, NULL, &nvstub_controls_fops);
	debugfs_create_file("pid_info_walked", 0444, dir, NULL,
			    &nvstub_walked_fops);
}

u32 nvstub_rm_control(struct nvstub_call *call, struct nvos54_parameters *p)
{
	const struct nvstub_ctrl *ctrl;
	void *params = NULL;
	u32 size, status;
	bool direct;

	/* RmDeprecatedGetControlHandler() comes first (550+) */
	if (p->cmd == NV2080_CTRL_CMD_FB_GET_INFO && nvstub_abi->since_550 &&
	    p->flags == 0 && nvstub_client_exists(p->h_client))
		return nvstub_fb_info_v1(call, p, true);
	if (p->cmd == NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION && p->flags == 0 &&
	    nvstub_client_exists(p->h_client))
		return nvstub_build_version_v1(call, p);

	/* the NULL command of any class */
	if (NVXXXX_CTRL_CMD_CATEGORY(p->cmd) == 0 &&
	    NVXXXX_CTRL_CMD_INDEX(p->cmd) == 0)
		return NV_OK;
	/* user clients may neither raise IRQL nor bypass locks */
	if (!call->kernel &&
	    (p->flags & (NVOS54_FLAGS_IRQL_RAISED | NVOS54_FLAGS_LOCK_BYPASS)))
		return NV_ERR_INVALID_ARGUMENT;
	if (!nvstub_client_exists(p->h_client))
		return NV_ERR_INVALID_CLIENT;

	if (p->cmd == NV0041_CTRL_CMD_GET_SURFACE_INFO)
		return nvstub_surface_info(call, p);
	if (p->cmd == NV2080_CTRL_CMD_FB_GET_INFO && !nvstub_abi->since_550) {
		if (p->params_size != sizeof(struct nv2080_ctrl_fb_get_info_params))
			return NV_ERR_INVALID_ARGUMENT;
		return nvstub_fb_info_v1(call, p, false);
	}

	ctrl = nvstub_ctrl_find(p->cmd);
	size = ctrl ? nvstub_ctrl_size(ctrl) : 0;
	if ((p->params_size && !p->params) || (!p->params_size && p->params) ||
	    (ctrl && p->params_size != size))
		return NV_ERR_INVALID_ARGUMENT;
	/*
	 * rmapiParamsAcquire(): a kernel-level caller's params are used where
	 * they lie -- no bound, no copy either way, and a handler's writes stay
	 * there on error too.  Only a form shorter than the slack is copied,
	 * so that the handlers may read it as the newest.
	 */
	direct = call->kernel && p->params_size >= NVSTUB_CTRL_MIN_BUF;
	if (direct) {
		params = (void *)(uintptr_t)p->params;
	} else if (p->params_size > RMAPI_PARAM_COPY_MAX_PARAMS_SIZE) {
		return NV_ERR_INVALID_ARGUMENT;
	} else if (p->params_size) {
		/* zeroed slack: older, shorter forms read as the newest */
		params = kvzalloc(max_t(u32, p->params_size, NVSTUB_CTRL_MIN_BUF),
				  GFP_KERNEL);
		if (!params)
			return NV_ERR_NO_MEMORY;
		status = nvstub_copy_in(call, params, p->params, p->params_size);
		if (status) {
			kvfree(params);
			return status;
		}
	}

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_control_run(call, p->h_client, p->h_object, ctrl, params);
	mutex_unlock(&nvstub_rm_lock);

	if (direct)
		return status;
	/* serverControlApiCopyOut(): nothing goes back on error */
	if (!status && p->params_size)
		status = nvstub_copy_out(call, p->params, params, p->params_size);
	kvfree(params);
	return status;
}

/*
 * RM_BIND_CONTEXT_DMA (rmapi_deprecated_misc.c RmDeprecatedBindContextDma):
 * the control above on hCtxDma, in the caller's own client (the escape
 * carries the file's security info, unlike RM_UPDATE_DEVICE_MAPPING_INFO).
 * RM first asks the handle's class and lets an NV01_MEMORY_SYSTEM_DYNAMIC
 * "bind" silently; the stub has no such class.
 */
u32 nvstub_esc_bind_context_dma(struct nvstub_call *call,
				struct nvos49_parameters *p)
{
	struct nv0002_ctrl_bind_contextdma_params params = {
		.h_channel = p->h_channel,
	};
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_control_run(call, p->h_client, p->h_ctx_dma,
				    nvstub_ctrl_find(NV0002_CTRL_CMD_BIND_CONTEXTDMA),
				    &params);
	mutex_unlock(&nvstub_rm_lock);
	return status;
}
