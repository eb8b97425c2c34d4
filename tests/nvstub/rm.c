// SPDX-License-Identifier: GPL-2.0
/*
 * The resource manager's object world: clients, handles, the class table,
 * allocation, free cascades and RM_DUP_OBJECT, with the checks and status
 * codes of src/nvidia/src/libraries/resserv and src/nvidia/src/kernel/rmapi
 * (rs_server.c, rs_client.c, alloc_free.c, client.c, device.c, subdevice.c).
 */
#include <linux/delay.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "info.h"
#include "nvstub.h"

/* All clients by handle (the server's client list); under nvstub_rm_lock. */
DEFINE_XARRAY(nvstub_clients);
unsigned int nvstub_nclients;
unsigned int nvstub_nobjects;
static u32 nvstub_client_index;

typedef u32 (*nvstub_ctor_t)(struct nvstub_call *call, struct nvstub_object *obj,
			     void *params);

struct nvstub_class {
	u32 hclass;
	u32 params_size;		/* 0: none; see nvstub_class_params_size() */
	unsigned int flags;
	u32 parents[3];			/* allowed parent classes, 0-terminated */
	nvstub_ctor_t construct;
	void (*destruct)(struct nvstub_object *obj);
};

#define NVSTUB_CLS_REQUIRED	BIT(0)	/* RS_REQUIRED rather than RS_OPTIONAL */
#define NVSTUB_CLS_COPYABLE	BIT(1)	/* resCanCopy(): RM_DUP_OBJECT allowed */
#define NVSTUB_CLS_INTERNAL	BIT(2)	/* only RM itself allocates it here */
#define NVSTUB_CLS_MEMORY	BIT(3)	/* a Memory: has a struct nvstub_mem */
#define NVSTUB_CLS_ANY_PARENT	BIT(4)	/* RS_ANY_PARENT */

#define NVSTUB_PARAMS_MEMALLOC	(~0u)	/* NV_MEMORY_ALLOCATION_PARAMS */
#define NVSTUB_PARAMS_CHANNEL	(~1u)	/* NV_CHANNEL_ALLOC_PARAMS */
#define NVSTUB_PARAMS_VASPACE	(~2u)	/* NV_VASPACE_ALLOCATION_PARAMETERS */
#define NVSTUB_ALLOC_PARAMS_MAX	sizeof(struct nv_channel_alloc_params)

static u32 nvstub_class_params_size(const struct nvstub_class *cls)
{
	switch (cls->params_size) {
	case NVSTUB_PARAMS_MEMALLOC:
		return nvstub_abi->memalloc_size;
	case NVSTUB_PARAMS_CHANNEL:
		return nvstub_abi->channel_alloc_size;
	case NVSTUB_PARAMS_VASPACE:	/* pasid: 580 */
		return nvstub_abi->since >= 580 ?
		       sizeof(struct nv_vaspace_allocation_parameters) :
		       NV_VASPACE_ALLOCATION_PARAMETERS_SIZE_OLD;
	default:
		return cls->params_size;
	}
}

static u32 nvstub_device_construct(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv0080_alloc_parameters *p = params;
	struct nvstub_object *dev;
	struct nvstub_gpu *gpu;
	u32 inst;

	if (!p) {
		/* resservResourceFactory() from 550; before, class - NV01_DEVICE_0 */
		if (nvstub_abi->since_550)
			return NV_ERR_INVALID_ARGUMENT;
		inst = 0;
	} else {
		inst = p->device_id;
	}
	if (nvstub_abi->since_550 && inst >= NV_MAX_DEVICES)
		return NV_ERR_INVALID_ARGUMENT;
	if (inst >= nvstub_ngpus)
		return NV_ERR_INVALID_CLASS;	/* gpumgrIsDeviceInstanceValid() */

	gpu = &nvstub_gpus[inst];
	/* osIsGpuAccessible(): even root needs a file of that GPU open */
	if (!call->kernel && !nvstub_fd_table_has_gpu(gpu))
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	/*
	 * deviceInit(): one device per instance in a client, "keeping existing
	 * code from CliAllocElement" for the status (device.c).
	 */
	list_for_each_entry(dev, &obj->client->root->children, sibling)
		if (dev != obj && dev->hclass == NV01_DEVICE_0 && dev->gpu == gpu)
			return NV_ERR_INSUFFICIENT_RESOURCES;
	obj->gpu = gpu;
	obj->device = obj;
	/* vaMode: the default VA space is made when first used */
	obj->dev.va_mode = p ? p->va_mode : NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES;
	obj->dev.vas = NULL;
	return NV_OK;
}

static void nvstub_device_destruct(struct nvstub_object *obj)
{
	nvstub_vas_drop_root(obj->dev.vas, obj);
	nvstub_vas_put(obj->dev.vas);
}

static u32 nvstub_subdevice_construct(struct nvstub_call *call,
				      struct nvstub_object *obj, void *params)
{
	struct nv2080_alloc_parameters *p = params;
	struct nvstub_object *sib;
	u32 inst = p ? p->sub_device_id : 0;

	/* one GPU per device: only subdevice instance 0 exists */
	if (inst != 0)
		return NV_ERR_INVALID_CLASS;
	list_for_each_entry(sib, &obj->parent->children, sibling)
		if (sib != obj && sib->hclass == NV20_SUBDEVICE_0 &&
		    sib->subdevice_inst == inst)
			return NV_ERR_INSUFFICIENT_RESOURCES;
	obj->subdevice_inst = inst;
	return NV_OK;
}

/*
 * kchangrpapiConstruct(): a TSG may name the VA space its channels use when
 * they name no context share (legacy mode); else the device's default.  A
 * TSG that names one depends on it (refAddDependant): freeing the VA space
 * takes the TSG, and its channels, with it.
 */
static u32 nvstub_tsg_construct(struct nvstub_call *call,
				struct nvstub_object *obj, void *params)
{
	struct nv_channel_group_allocation_parameters *p = params;
	struct nvstub_object *vas_obj = NULL;
	struct nvstub_vas *vas = NULL;
	u32 status;

	if (p->h_va_space) {
		status = nvstub_vas_lookup(obj->client, obj->device,
					   p->h_va_space, &vas, &vas_obj);
		if (status)
			return status;
	}
	obj->tsg = nvstub_tsg_create(p->engine_type);
	if (!obj->tsg)
		return NV_ERR_NO_MEMORY;
	obj->tsg->api_objs = 1;
	if (vas) {
		nvstub_vas_get(vas);
		obj->tsg->vas = vas;
	}
	nvstub_object_depend(obj, vas_obj);
	return NV_OK;
}

/* Its GR context buffers go with the TSG (shrkgrctxTeardown), not before. */
static void nvstub_tsg_ctx_free(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg)
{
	nvstub_heap_give(gpu, tsg->gr_ctx_bytes);
	tsg->gr_ctx_bytes = 0;
}

static void nvstub_tsg_destruct(struct nvstub_object *obj)
{
	if (!--obj->tsg->api_objs)
		nvstub_tsg_ctx_free(obj->gpu, obj->tsg);
	nvstub_tsg_put(obj->tsg);
}

/*
 * kchangrpapiCopyConstruct(): the duplicate shares the source's channel
 * group (serverRefShare) and its graphics context (duplicated with it), and
 * depends on the VA space object of its client that has the group's VA
 * space, if any.  Channels are not duplicated: they stay the source's
 * children, and channels made under the duplicate join the same group.
 */
static void nvstub_tsg_dup(struct nvstub_object *obj,
			   struct nvstub_object *src)
{
	struct nvstub_tsg *tsg = src->tsg;
	struct nvstub_object *o;

	kref_get(&tsg->ref);
	tsg->api_objs++;
	obj->tsg = tsg;
	if (!tsg->vas)
		return;
	list_for_each_entry(o, &obj->parent->children, sibling)
		if (o->hclass == FERMI_VASPACE_A && !o->invalid &&
		    o->vas == tsg->vas) {
			nvstub_object_depend(obj, o);
			break;
		}
}

/* vaspaceapiCopyConstruct(): one more handle on the VA space (vaspaceIncRefCnt) */
static void nvstub_vaspace_dup(struct nvstub_object *obj,
			       struct nvstub_object *src)
{
	nvstub_vas_get(src->vas);
	src->vas->api_objs++;
	obj->vas = src->vas;
}

/*
 * kchannelCreateUserdMemDesc_GV100(): USERD in a memory object of the client,
 * system or video memory (in video memory the client writes GPPut through a
 * BAR1 mapping), 512-aligned within it.
 */
static u32 nvstub_chan_userd(struct nvstub_object *chan, u32 handle,
			     u64 offset, struct nvstub_mem **out)
{
	struct nvstub_object *o = nvstub_object_find(chan->client, handle);

	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != NV01_MEMORY_SYSTEM && o->hclass != NV01_MEMORY_LOCAL_USER)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	if (o->gpu != chan->gpu)
		return NV_ERR_INVALID_DEVICE;
	if (!IS_ALIGNED(offset, NVC86F_USERD_SIZE) || offset >= o->mem.mem->size ||
	    NVC86F_USERD_SIZE > o->mem.mem->size - offset)
		return NV_ERR_INVALID_ARGUMENT;	/* memdescCreateSubMem() */
	*out = o->mem.mem;
	return NV_OK;
}

/*
 * The VA space a channel runs in (kchannelConstruct): its context share's;
 * without one (legacy mode) the TSG's, which is the TSG's hVASpace, or the
 * device's default; a channel under a device names its own in hVASpace.
 * A TSG's channels all have context shares or none.  VAS_OBJ: the object a
 * channel depends on (its context share or VA space), or NULL.
 */
static u32 nvstub_chan_vas(struct nvstub_object *obj,
			   struct nv_channel_alloc_params *p,
			   struct nvstub_tsg *tsg, struct nvstub_vas **vas,
			   struct nvstub_object **dep)
{
	struct nvstub_object *cs;
	u32 status;

	*dep = NULL;
	if (tsg->nchannels && tsg->legacy != !p->h_context_share)
		return NV_ERR_INVALID_ARGUMENT;
	if (p->h_context_share) {
		cs = nvstub_object_find(obj->client, p->h_context_share);
		if (!cs)
			return NV_ERR_OBJECT_NOT_FOUND;
		if (cs->hclass != FERMI_CONTEXT_SHARE_A)
			return NV_ERR_INVALID_OBJECT_HANDLE;
		if (cs->parent != obj->parent)
			return NV_ERR_INVALID_OBJECT_PARENT;
		*vas = cs->ctxshare->vas;
		*dep = cs;
		return NV_OK;
	}
	if (!tsg->vas) {	/* kchangrpapiSetLegacyMode() */
		status = nvstub_vas_lookup(obj->client, obj->device, 0, vas, NULL);
		if (status)
			return status;
		nvstub_vas_get(*vas);
		tsg->vas = *vas;
	}
	tsg->legacy = true;
	*vas = tsg->vas;
	return NV_OK;
}

static u32 nvstub_channel_construct(struct nvstub_call *call,
				    struct nvstub_object *obj, void *params)
{
	struct nv_channel_alloc_params *p = params;
	struct nvstub_object *dep, *vas_obj = NULL;
	struct nvstub_vas *vas = NULL;
	struct nvstub_tsg *tsg;
	struct nvstub_mem *userd;
	u32 entries = p->gp_fifo_entries, status;

	/* "Context share and vaspace handles can't be active at the same time." */
	if (p->h_context_share && p->h_va_space)
		return NV_ERR_INVALID_ARGUMENT;
	if (obj->parent->hclass == KEPLER_CHANNEL_GROUP_A) {
		tsg = obj->parent->tsg;
		/* "TSG channels can't use an explicit vaspace" */
		if (p->h_va_space)
			return NV_ERR_INVALID_ARGUMENT;
		kref_get(&tsg->ref);
	} else {
		/* "Non-TSG channels can't use context share" */
		if (p->h_context_share)
			return NV_ERR_INVALID_ARGUMENT;
		if (p->h_va_space) {
			status = nvstub_vas_lookup(obj->client, obj->device,
						   p->h_va_space, &vas, &vas_obj);
			if (status)
				return status;
		}
		/*
		 * RM wraps the channel in a TSG of its own (bAllocatedByRm),
		 * freed with it.  stub: that TSG is not an RM object here.
		 */
		tsg = nvstub_tsg_create(p->engine_type);
		if (!tsg)
			return NV_ERR_NO_MEMORY;
		tsg->internal = true;
		if (vas) {
			nvstub_vas_get(vas);
			tsg->vas = vas;
		}
	}
	p->h_phys_channel_group = 0;	/* "only needed internally" */

	/* kchannelConstruct(): a channel's engine must be its TSG's */
	status = NV_ERR_INVALID_ARGUMENT;
	if (p->engine_type && p->engine_type != tsg->engine_type)
		goto err_put;
	if (entries < 2 || entries > (1u << 20) || !is_power_of_2(entries))
		goto err_put;
	/*
	 * kchangrpAddChannel(): a TSG holds kfifoGetMaxChannelGroupSize()
	 * channels at most (128 from Volta on, dev_ram.h); a freed channel's
	 * place comes back with its free, whoever retains its id.
	 */
	status = NV_ERR_INSUFFICIENT_RESOURCES;
	if (tsg->nchannels >= NVSTUB_TSG_LENGTH_MAX)
		goto err_put;
	status = nvstub_chan_vas(obj, p, tsg, &vas, &dep);
	if (status)
		goto err_put;
	/* stub: RM allocates USERD itself when hUserdMemory[0] is 0; not here */
	status = NV_ERR_NOT_SUPPORTED;
	if (!p->h_userd_memory[0])
		goto err_put;
	status = nvstub_chan_userd(obj, p->h_userd_memory[0], p->userd_offset[0],
				   &userd);
	if (status)
		goto err_put;

	/* _kchannelAllocOrDescribeInstMem(): video memory no process is charged */
	status = nvstub_heap_take(obj->gpu, NVSTUB_RAMIN_ALLOC_SIZE);
	if (status)
		goto err_put;
	/* gpFifoOffset is a GPU VA: the GPU faults later if it is unmapped */
	status = nvstub_chan_create(obj->gpu, tsg, obj->client, obj->handle,
				    userd, p->userd_offset[0], vas,
				    p->gp_fifo_offset, entries, &obj->chan);
	if (status) {
		nvstub_heap_give(obj->gpu, NVSTUB_RAMIN_ALLOC_SIZE);
		goto err_put;
	}
	tsg->nchannels++;
	nvstub_object_depend(obj, dep ? dep : vas_obj);
	nvstub_tsg_put(tsg);	/* the channel holds its own */
	return NV_OK;

err_put:
	nvstub_tsg_put(tsg);
	return status;
}

static void nvstub_channel_destruct(struct nvstub_object *obj)
{
	struct nvstub_tsg *tsg = obj->chan->tsg;

	tsg->nchannels--;
	/* a UVM_CHANNEL_RETAINER keeps the instance block (and the id) */
	if (!obj->chan->retainers)
		nvstub_heap_give(obj->gpu, NVSTUB_RAMIN_ALLOC_SIZE);
	if (tsg->internal)	/* RM's own TSG goes with its channel */
		nvstub_tsg_ctx_free(obj->gpu, tsg);
	nvstub_chan_destroy(obj->chan);
}

/*
 * nvGpuOpsRetainChannel() for UVM_REGISTER_CHANNEL: UVM duplicates the
 * channel's TSG into its session client (hDupTsg: the graphics context
 * stays with it, kchangrpapiCopyConstruct) and allocates a
 * UVM_CHANNEL_RETAINER under it, which takes a reference on the channel id
 * (kfifoChidMgrRetainChid) and on the instance block's memory
 * (uvmchanrtnrConstruct, 535 to 595).  The user's RM_FREE of its TSG or
 * channel then leaves all three in use, charged to no process, until UVM
 * lets go (nvGpuOpsReleaseChannel: UVM_UNREGISTER_CHANNEL, the VA space's
 * unregistration or the UVM file's close).  A channel under a device has a
 * TSG of RM's, which UVM does not duplicate (it parents the retainer by the
 * device).  stub: the duplicate is no object of UVM's session client, and
 * the context share UVM duplicates too (hDupKernelCtxShare) is not kept.
 */
void nvstub_chan_retain(struct nvstub_chan *chan)
{
	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_chan_get(chan);
	chan->retainers++;
	if (!chan->tsg->internal)
		chan->tsg->api_objs++;
}

void nvstub_chan_unretain(struct nvstub_chan *chan)
{
	struct nvstub_tsg *tsg = chan->tsg;

	lockdep_assert_held(&nvstub_rm_lock);
	if (!tsg->internal && !--tsg->api_objs)
		nvstub_tsg_ctx_free(chan->gpu, tsg);
	if (!--chan->retainers && chan->dead) {
		nvstub_heap_give(chan->gpu, NVSTUB_RAMIN_ALLOC_SIZE);
		nvstub_chan_free_id(chan);
	}
	nvstub_chan_put(chan);
}

static u32 nvstub_usermode_construct(struct nvstub_call *call,
				     struct nvstub_object *obj, void *params)
{
	struct nv_hopper_usermode_a_params *p = params;

	/* usrmodeConstruct() */
	if (p && p->b_priv && !p->b_bar1_mapping)
		return NV_ERR_INVALID_PARAMETER;
	if (p && p->b_priv)
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	return NV_OK;
}

/*
 * accesscntrConstruct(): UVM's access-counter notification buffer of an
 * index is one a GPU, whoever holds it (accessCounterBufferCount, 1 on
 * GH100); until it is freed nobody else gets it, UVM included, whose
 * parent-GPU init then fails (uvm_isr_init_access_counters).
 */
static u32 nvstub_access_counters_construct(struct nvstub_call *call,
					    struct nvstub_object *obj,
					    void *params)
{
	struct nv_access_counter_notify_buffer_alloc_params *p = params;

	if (p->access_counter_index >= NVSTUB_ACCESS_COUNTER_BUFFERS)
		return NV_ERR_INVALID_ARGUMENT;
	if (obj->gpu->access_counters)
		return NV_ERR_INVALID_STATE;
	obj->gpu->access_counters = obj;
	return NV_OK;
}

static void nvstub_access_counters_destruct(struct nvstub_object *obj)
{
	if (obj->gpu->access_counters == obj)
		obj->gpu->access_counters = NULL;
}

/*
 * An engine object (compute) on a channel: the first one puts the channel,
 * and so its TSG, on the engine's runlist (channel_descendant.c,
 * kchannelAllocChannel's runlist assignment), which the work-submit token
 * needs.  Under nvstub_rm_lock, as the token control.
 */
static u32 nvstub_engine_object_construct(struct nvstub_call *call,
					  struct nvstub_object *obj,
					  void *params)
{
	struct nvstub_chan *chan = obj->parent->chan;
	u32 status;

	/*
	 * A TSG's first compute object makes its GR context buffers
	 * (kgrctxAllocCtxBuffers), charged to no process (rule 5).
	 */
	if ((obj->hclass & 0xFF) == 0xC0 && !chan->tsg->gr_ctx_bytes &&
	    nvstub_gr_context_bytes) {
		status = nvstub_heap_take(obj->gpu, nvstub_gr_context_bytes);
		if (status)
			return status;
		chan->tsg->gr_ctx_bytes = nvstub_gr_context_bytes;
	}
	chan->runlist = true;
	chan->tsg->runlist = true;
	return NV_OK;
}

static u32 nvstub_vaspace_ctor(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params)
{
	return nvstub_vaspace_construct(call, obj, params);
}

static u32 nvstub_ctxshare_ctor(struct nvstub_call *call,
				struct nvstub_object *obj, void *params)
{
	return nvstub_ctxshare_construct(call, obj, params);
}

static u32 nvstub_memory_construct(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	return nvstub_mem_construct(obj, params);
}

/*
 * ctxdmaConstruct() and _ctxdmaConstruct() (context_dma.c): a window
 * [offset, offset + limit] of a memory object that has the context DMA's
 * parent, which it depends on (refAddDependant).  The stub keeps no
 * instance block or binding of it: binding one to a host channel does
 * nothing in RM either (ctrl.c, NV0002_CTRL_CMD_BIND_CONTEXTDMA).
 */
static u32 nvstub_ctxdma_construct(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv_context_dma_allocation_params *p = params;
	struct nvstub_object *mem, *sub;
	u64 end;

	mem = nvstub_object_find_any(obj->client, p->h_memory);
	if (!mem)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (mem->parent != obj->parent)
		return NV_ERR_INVALID_OBJECT_PARENT;
	if ((p->flags & NVOS03_FLAGS_ACCESS_MASK) > NVOS03_FLAGS_ACCESS_WRITE_ONLY)
		return NV_ERR_INVALID_FLAGS;
	if (!(p->flags & NVOS03_FLAGS_HASH_TABLE_DISABLE))
		return NV_ERR_INVALID_FLAGS;	/* "no longer supported" */
	if (!nvstub_object_is_memory(mem) || mem->invalid)
		return NV_ERR_INVALID_OBJECT;
	if (p->h_subdevice) {			/* gpuGetByHandle() */
		sub = nvstub_object_find(obj->client, p->h_subdevice);
		if (!sub || (sub->hclass != NV20_SUBDEVICE_0 &&
			     sub->hclass != NV01_DEVICE_0))
			return NV_ERR_INVALID_OBJECT_HANDLE;
	}
	if (check_add_overflow(p->offset, p->limit, &end) ||
	    end >= mem->mem.mem->size)
		return NV_ERR_INVALID_LIMIT;
	nvstub_object_depend(obj, mem);
	return NV_OK;
}

/*
 * EventApi (rmapi/event_api.c eventConstruct, eventapiInit; 535 to 595): an
 * event object hangs on a notifier, hSrcResource of client hParentClient
 * (0: the allocating one) -- any client: RM looks it up without asking
 * whose it is (RS_FLAGS_DUAL_CLIENT_LOCK), and the resource must be an
 * INotifier (the client itself, a subdevice, a channel or an object on one,
 * a context DMA, an access-counter buffer; not a device, memory, a TSG).
 * Kernel callbacks are for kernel callers (NV_ERR_ILLEGAL_ACTION), and an
 * OS event object binds to the OS event of (its client, data)
 * (osUserHandleToKernelPtr: NV_ERR_OBJECT_NOT_FOUND without one).  The stub
 * posts no notification and keeps no reference to the notifier.
 */
static bool nvstub_is_notifier(u32 hclass)
{
	switch (hclass) {
	case NV01_ROOT_CLIENT:
	case NV20_SUBDEVICE_0:
	case HOPPER_CHANNEL_GPFIFO_A:
	case HOPPER_COMPUTE_A:
	case HOPPER_DMA_COPY_A:
	case NV01_CONTEXT_DMA:
	case ACCESS_COUNTER_NOTIFY_BUFFER:
		return true;
	default:
		return false;
	}
}

static u32 nvstub_event_construct(struct nvstub_call *call,
				  struct nvstub_object *obj, void *params)
{
	struct nv0005_alloc_parameters *p = params;
	u32 hpc = p->h_parent_client ?: obj->client->handle;
	struct nvstub_client *nc;
	struct nvstub_object *src;

	if ((obj->hclass == NV01_EVENT_KERNEL_CALLBACK ||
	     obj->hclass == NV01_EVENT_KERNEL_CALLBACK_EX) && !call->kernel)
		return NV_ERR_ILLEGAL_ACTION;
	nc = xa_load(&nvstub_clients, hpc);
	if (!nc)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	src = nvstub_object_find_any(nc, p->h_src_resource);
	if (!src || !nvstub_is_notifier(src->hclass))
		return NV_ERR_INVALID_OBJECT;
	if (obj->hclass == NV01_EVENT_OS_EVENT && !call->kernel &&
	    !nvstub_os_event_exists(obj->client->handle, (u32)p->data))
		return NV_ERR_OBJECT_NOT_FOUND;
	return NV_OK;
}

/* src/nvidia/src/kernel/rmapi/resource_list.h, for the classes simulated */
static const struct nvstub_class nvstub_classes[] = {
	{
		.hclass = NV01_ROOT_CLIENT,
		.params_size = sizeof(u32),	/* the NvHandle RM writes back */
	}, {
		.hclass = NV01_DEVICE_0,
		.params_size = sizeof(struct nv0080_alloc_parameters),
		.parents = { NV01_ROOT_CLIENT },
		.construct = nvstub_device_construct,
		.destruct = nvstub_device_destruct,
	}, {
		.hclass = NV20_SUBDEVICE_0,
		.params_size = sizeof(struct nv2080_alloc_parameters),
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_subdevice_construct,
	}, {
		.hclass = NV01_MEMORY_LOCAL_USER,
		.params_size = NVSTUB_PARAMS_MEMALLOC,
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE |
			 NVSTUB_CLS_MEMORY,
		.parents = { NV01_DEVICE_0, NV20_SUBDEVICE_0 },
		.construct = nvstub_memory_construct,
		.destruct = nvstub_mem_destruct,
	}, {
		.hclass = NV01_MEMORY_SYSTEM,
		.params_size = NVSTUB_PARAMS_MEMALLOC,
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE |
			 NVSTUB_CLS_MEMORY,
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_memory_construct,
		.destruct = nvstub_mem_destruct,
	}, {
		.hclass = NV50_MEMORY_VIRTUAL,
		.params_size = NVSTUB_PARAMS_MEMALLOC,
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE |
			 NVSTUB_CLS_MEMORY,
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_memory_construct,
		.destruct = nvstub_mem_destruct,
	}, {
		.hclass = NV01_MEMORY_SYSTEM_DYNAMIC,
		.flags = NVSTUB_CLS_INTERNAL | NVSTUB_CLS_COPYABLE |
			 NVSTUB_CLS_MEMORY,
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_memory_construct,
		.destruct = nvstub_mem_destruct,
	}, {
		.hclass = KEPLER_CHANNEL_GROUP_A,
		.params_size = sizeof(struct nv_channel_group_allocation_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE,
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_tsg_construct,
		.destruct = nvstub_tsg_destruct,
	}, {
		.hclass = HOPPER_CHANNEL_GPFIFO_A,
		.params_size = NVSTUB_PARAMS_CHANNEL,
		.flags = NVSTUB_CLS_REQUIRED,
		.parents = { KEPLER_CHANNEL_GROUP_A, NV01_DEVICE_0 },
		.construct = nvstub_channel_construct,
		.destruct = nvstub_channel_destruct,
	}, {
		.hclass = HOPPER_USERMODE_A,
		.params_size = sizeof(struct nv_hopper_usermode_a_params),
		.flags = NVSTUB_CLS_COPYABLE,
		.parents = { NV20_SUBDEVICE_0 },
		.construct = nvstub_usermode_construct,
	}, {
		.hclass = ACCESS_COUNTER_NOTIFY_BUFFER,
		.params_size =
			sizeof(struct nv_access_counter_notify_buffer_alloc_params),
		.flags = NVSTUB_CLS_REQUIRED,
		.parents = { NV20_SUBDEVICE_0 },
		.construct = nvstub_access_counters_construct,
		.destruct = nvstub_access_counters_destruct,
	}, {
		.hclass = HOPPER_COMPUTE_A,
		.params_size = sizeof(struct nv_gr_allocation_parameters),
		.parents = { HOPPER_CHANNEL_GPFIFO_A },
		.construct = nvstub_engine_object_construct,
	}, {
		/* NV_DMA_COPY_ALLOCATION_PARAMETERS {version; engineType} */
		.hclass = HOPPER_DMA_COPY_A,
		.params_size = 8,
		.parents = { HOPPER_CHANNEL_GPFIFO_A },
		.construct = nvstub_engine_object_construct,
	}, {
		.hclass = NV01_CONTEXT_DMA,
		.params_size = sizeof(struct nv_context_dma_allocation_params),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_ANY_PARENT,
		.construct = nvstub_ctxdma_construct,
	}, {
		.hclass = FERMI_VASPACE_A,
		.params_size = NVSTUB_PARAMS_VASPACE,
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE,
		.parents = { NV01_DEVICE_0 },
		.construct = nvstub_vaspace_ctor,
		.destruct = nvstub_vaspace_destruct,
	}, {
		.hclass = FERMI_CONTEXT_SHARE_A,
		.params_size = sizeof(struct nv_ctxshare_allocation_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_COPYABLE,
		.parents = { KEPLER_CHANNEL_GROUP_A },
		.construct = nvstub_ctxshare_ctor,
		.destruct = nvstub_ctxshare_destruct,
	}, {
		.hclass = NV01_EVENT,
		.params_size = sizeof(struct nv0005_alloc_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_ANY_PARENT,
		.construct = nvstub_event_construct,
	}, {
		.hclass = NV01_EVENT_OS_EVENT,
		.params_size = sizeof(struct nv0005_alloc_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_ANY_PARENT,
		.construct = nvstub_event_construct,
	}, {
		.hclass = NV01_EVENT_KERNEL_CALLBACK,
		.params_size = sizeof(struct nv0005_alloc_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_ANY_PARENT,
		.construct = nvstub_event_construct,
	}, {
		.hclass = NV01_EVENT_KERNEL_CALLBACK_EX,
		.params_size = sizeof(struct nv0005_alloc_parameters),
		.flags = NVSTUB_CLS_REQUIRED | NVSTUB_CLS_ANY_PARENT,
		.construct = nvstub_event_construct,
	},
};

static const struct nvstub_class *nvstub_class_find(u32 hclass)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(nvstub_classes); i++)
		if (nvstub_classes[i].hclass == hclass)
			return &nvstub_classes[i];
	return NULL;
}

static bool nvstub_parent_allowed(const struct nvstub_class *cls,
				  const struct nvstub_object *parent)
{
	unsigned int i;

	if (cls->flags & NVSTUB_CLS_ANY_PARENT)
		return true;
	for (i = 0; i < ARRAY_SIZE(cls->parents) && cls->parents[i]; i++)
		if (cls->parents[i] == parent->hclass)
			return true;
	return false;
}

/* A Memory object: it has a struct nvstub_mem. */
bool nvstub_object_is_memory(const struct nvstub_object *o)
{
	return o->cls && (o->cls->flags & NVSTUB_CLS_MEMORY);
}

/* A live object of C; an invalidated handle is no object to use. */
struct nvstub_object *nvstub_object_find(struct nvstub_client *c, u32 h)
{
	struct nvstub_object *o;

	lockdep_assert_held(&nvstub_rm_lock);
	o = xa_load(&c->objects, h);
	return o && !o->invalid ? o : NULL;
}

/* Any handle of C, invalidated or not (clientGetResourceRef()). */
struct nvstub_object *nvstub_object_find_any(struct nvstub_client *c, u32 h)
{
	lockdep_assert_held(&nvstub_rm_lock);
	return xa_load(&c->objects, h);
}

/*
 * The client of a call: it must exist (serverutilGetClientUnderLock) and be
 * owned by the caller's clientOSInfo (rmclientValidate, strict mode).
 */
u32 nvstub_client_get(struct nvstub_call *call, u32 h_client,
		      struct nvstub_client **out)
{
	struct nvstub_client *c;

	lockdep_assert_held(&nvstub_rm_lock);
	c = xa_load(&nvstub_clients, h_client);
	if (!c || (!call->kernel && c->owner != call->os_info))
		return NV_ERR_INVALID_CLIENT;
	*out = c;
	return NV_OK;
}

/* clientAssignResourceHandle(): the caller's handle, or the next 0xcaf0xxxx */
static u32 nvstub_assign_handle(struct nvstub_client *c, u32 *handle)
{
	u32 i, h;

	if (*handle) {
		if (*handle == c->handle)
			return NV_ERR_INVALID_OBJECT_HANDLE;
		if (xa_load(&c->objects, *handle))
			return NV_ERR_INSERT_DUPLICATE_NAME;
		return NV_OK;
	}
	for (i = 0; i < RS_UNIQUE_HANDLE_RANGE; i++) {
		h = RS_UNIQUE_HANDLE_BASE + (c->handle_gen++ % RS_UNIQUE_HANDLE_RANGE);
		if (h != c->handle && !xa_load(&c->objects, h)) {
			*handle = h;
			return NV_OK;
		}
	}
	return NV_ERR_INSUFFICIENT_RESOURCES;
}

static struct nvstub_object *nvstub_object_new(struct nvstub_client *c,
					       const struct nvstub_class *cls,
					       u32 hclass, u32 handle,
					       struct nvstub_object *parent)
{
	struct nvstub_object *obj;

	if (nvstub_nobjects >= NVSTUB_MAX_OBJECTS)
		return NULL;
	obj = kzalloc(sizeof(*obj), GFP_KERNEL);
	if (!obj)
		return NULL;
	if (xa_insert(&c->objects, handle, obj, GFP_KERNEL)) {
		kfree(obj);
		return NULL;
	}
	obj->handle = handle;
	obj->hclass = hclass;
	obj->cls = cls;
	obj->client = c;
	obj->parent = parent;
	INIT_LIST_HEAD(&obj->children);
	INIT_LIST_HEAD(&obj->sibling);
	INIT_LIST_HEAD(&obj->cpu_maps);
	INIT_LIST_HEAD(&obj->dependants);
	INIT_LIST_HEAD(&obj->dep_node);
	INIT_LIST_HEAD(&obj->free_node);
	INIT_LIST_HEAD(&obj->map_backrefs);
	INIT_LIST_HEAD(&obj->ctx_backrefs);
	if (parent) {
		obj->gpu = parent->gpu;
		obj->device = parent->device;
		list_add_tail(&obj->sibling, &parent->children);
	}
	nvstub_nobjects++;
	return obj;
}

/* Unlink and free one object whose children and dependants are gone. */
static void nvstub_object_drop(struct nvstub_object *obj)
{
	list_del(&obj->dep_node);
	list_del(&obj->sibling);
	xa_erase(&obj->client->objects, obj->handle);
	nvstub_nobjects--;
	kfree(obj->shares);
	kfree(obj);
}

/*
 * clientUpdatePendingFreeList(): OBJ's dependants and children, theirs in
 * turn, the newest first, each before what it hangs on; an object met twice
 * is listed once.
 */
static void nvstub_free_collect(struct nvstub_object *obj,
				struct list_head *list)
{
	struct nvstub_object *o;

	obj->pending = true;
	list_for_each_entry_reverse(o, &obj->dependants, dep_node)
		if (!o->pending)
			nvstub_free_collect(o, list);
	list_for_each_entry_reverse(o, &obj->children, sibling)
		if (!o->pending)
			nvstub_free_collect(o, list);
	list_add_tail(&obj->free_node, list);
}

static bool nvstub_object_has_ancestor(const struct nvstub_object *o,
				       const struct nvstub_object *anc)
{
	for (o = o->parent; o; o = o->parent)
		if (o == anc)
			return true;
	return false;
}

/*
 * serverFreeResourceTree(): what the free of TARGET takes, in that order.
 * TARGET and its descendants go for good; any other dependant (a channel
 * of a freed context share, say, under a TSG that stays) and what hangs
 * on it is only invalidated: destructed, its handle kept (clientFreeResource
 * with bInvalidateOnly).  An invalidated object freed later is not
 * destructed again.
 */
static void nvstub_free_tree(struct nvstub_object *target)
{
	struct nvstub_object *o, *tmp;
	LIST_HEAD(list);

	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_free_collect(target, &list);
	list_for_each_entry_safe(o, tmp, &list, free_node) {
		list_del_init(&o->free_node);
		o->pending = false;
		if (!o->invalid) {
			nvstub_cpu_maps_free(o);
			nvstub_vas_unmap_backrefs(o);
			if (o->cls && o->cls->destruct)
				o->cls->destruct(o);
			/* _refRemoveAllDependencies() */
			list_del_init(&o->dep_node);
			o->depends_on = NULL;
		}
		if (o == target || nvstub_object_has_ancestor(o, target))
			nvstub_object_drop(o);
		else
			o->invalid = true;
	}
}

static void nvstub_client_destroy(struct nvstub_client *c)
{
	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_free_tree(c->root);
	xa_erase(&nvstub_clients, c->handle);
	xa_destroy(&c->objects);
	put_pid(c->pid);
	nvstub_nclients--;
	kfree(c);
}

/* serverAllocClient(): hRoot is the requested handle, 0 lets RM choose. */
static u32 nvstub_client_alloc(struct nvstub_call *call, u32 requested,
			       u32 *h_object, void *params)
{
	struct nvstub_client *c;
	u32 h = requested, i;

	lockdep_assert_held(&nvstub_rm_lock);
	if (h) {
		if (xa_load(&nvstub_clients, h))
			return NV_ERR_INSERT_DUPLICATE_NAME;
	} else {
		for (i = 0; i < RS_CLIENT_HANDLE_MAX; i++) {
			h = RS_CLIENT_HANDLE_BASE | nvstub_client_index;
			nvstub_client_index = (nvstub_client_index + 1) &
					      (RS_CLIENT_HANDLE_MAX - 1);
			if (!xa_load(&nvstub_clients, h))
				break;
		}
		if (i == RS_CLIENT_HANDLE_MAX)
			return NV_ERR_INSUFFICIENT_RESOURCES;
	}
	if (nvstub_nobjects >= NVSTUB_MAX_OBJECTS)
		return NV_ERR_INSUFFICIENT_RESOURCES;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	c->handle = h;
	c->owner = call->os_info;
	c->kernel_admin = call->kernel && !call->non_priv;
	c->pid = get_task_pid(current, PIDTYPE_TGID);
	c->tgid = task_tgid_nr(current);
	xa_init(&c->objects);
	if (xa_insert(&nvstub_clients, h, c, GFP_KERNEL))
		goto err_free;
	c->root = nvstub_object_new(c, nvstub_class_find(NV01_ROOT_CLIENT),
				    NV01_ROOT_CLIENT, h, NULL);
	if (!c->root)
		goto err_erase;
	nvstub_nclients++;

	/* rmclientConstruct(): "RM gets the client handle from the params" */
	if (params)
		*(u32 *)params = h;
	*h_object = h;
	return NV_OK;

err_erase:
	xa_erase(&nvstub_clients, h);
err_free:
	put_pid(c->pid);
	kfree(c);
	return NV_ERR_INSUFFICIENT_RESOURCES;
}

/* A client RM makes for itself (hObjExportRmClient), under the RM lock. */
u32 nvstub_rm_alloc_client_locked(struct nvstub_call *call, u32 *h_client)
{
	return nvstub_client_alloc(call, 0, h_client, NULL);
}

/* serverAllocResourceUnderLock() for one non-client object. */
static u32 nvstub_alloc_locked(struct nvstub_call *call,
			       const struct nvstub_class *cls, u32 h_client,
			       u32 h_parent, u32 *h_object, u32 h_class,
			       void *params)
{
	struct nvstub_client *c;
	struct nvstub_object *parent, *obj;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	if (cls->hclass == NV01_ROOT_CLIENT)
		return nvstub_client_alloc(call, h_client, h_object, params);

	status = nvstub_client_get(call, h_client, &c);
	if (status)
		return status;
	if (*h_object == h_client)
		return NV_ERR_INVALID_OBJECT_PARENT;
	parent = nvstub_object_find(c, h_parent);
	if (!parent)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (!nvstub_parent_allowed(cls, parent))
		return NV_ERR_INVALID_OBJECT_PARENT;
	status = nvstub_assign_handle(c, h_object);
	if (status)
		return status;

	obj = nvstub_object_new(c, cls, h_class, *h_object, parent);
	if (!obj)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	status = cls->construct(call, obj, params);
	if (status) {
		nvstub_object_drop(obj);
		return status;
	}
	return NV_OK;
}

/*
 * RM_ALLOC as rmapiAllocWithSecInfo(): RM copies the class's own alloc
 * params from pAllocParms (whatever paramsSize says, rmapiParamsCopyInit)
 * after the escape's copy of NVOS21/64, and back on success.
 */
u32 nvstub_rm_alloc(struct nvstub_call *call, u32 h_client, u32 h_parent,
		    u32 *h_object, u32 h_class, u64 uparams)
{
	void __user *up = u64_to_user_ptr(uparams);
	const struct nvstub_class *cls;
	void *params = NULL;
	u32 size, status;

	cls = nvstub_class_find(h_class);
	if (!cls || (cls->flags & NVSTUB_CLS_INTERNAL))
		return NV_ERR_INVALID_CLASS;
	size = nvstub_class_params_size(cls);
	if (!up) {
		if ((cls->flags & NVSTUB_CLS_REQUIRED) && size)
			return NV_ERR_INVALID_ARGUMENT;
		size = 0;
	}
	if (size) {
		unsigned int delay = READ_ONCE(nvstub_alloc_reread_delay_us);

		if (delay)
			fsleep(delay);
		/* constructors read the newest layout; older ones are shorter */
		params = kzalloc(max_t(u32, size, NVSTUB_ALLOC_PARAMS_MAX),
				 GFP_KERNEL);
		if (!params)
			return NV_ERR_INSUFFICIENT_RESOURCES;
		if (copy_from_user(params, up, size)) {
			kfree(params);
			return NV_ERR_INVALID_ADDRESS;
		}
	}

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_alloc_locked(call, cls, h_client, h_parent, h_object,
				     h_class, params);
	mutex_unlock(&nvstub_rm_lock);

	/* serverAllocApiCopyOut(): no copy-out on error; a failed one fails */
	if (!status && size && copy_to_user(up, params, size))
		status = NV_ERR_INVALID_ADDRESS;
	kfree(params);
	return status;
}

/* RM_ALLOC of a kernel-level client (kapi.c): the params are kernel memory. */
u32 nvstub_rm_alloc_kparams(struct nvstub_call *call, u32 h_client,
			    u32 h_parent, u32 *h_object, u32 h_class,
			    void *kparams)
{
	const struct nvstub_class *cls = nvstub_class_find(h_class);
	void *params = NULL;
	u32 size, status;

	if (!cls || (cls->flags & NVSTUB_CLS_INTERNAL))
		return NV_ERR_INVALID_CLASS;
	size = kparams ? nvstub_class_params_size(cls) : 0;
	if (!kparams && (cls->flags & NVSTUB_CLS_REQUIRED) &&
	    nvstub_class_params_size(cls))
		return NV_ERR_INVALID_ARGUMENT;
	if (size) {
		params = kzalloc(max_t(u32, size, NVSTUB_ALLOC_PARAMS_MAX),
				 GFP_KERNEL);
		if (!params)
			return NV_ERR_INSUFFICIENT_RESOURCES;
		memcpy(params, kparams, size);
	}
	mutex_lock(&nvstub_rm_lock);
	status = nvstub_alloc_locked(call, cls, h_client, h_parent, h_object,
				     h_class, params);
	mutex_unlock(&nvstub_rm_lock);
	if (!status && size)
		memcpy(kparams, params, size);
	kfree(params);
	return status;
}

/* An allocation RM makes for itself with kernel params (the deprecated API). */
u32 nvstub_rm_alloc_kernel(struct nvstub_call *call, u32 h_client,
			   u32 h_parent, u32 *h_object, u32 h_class,
			   void *params)
{
	const struct nvstub_class *cls = nvstub_class_find(h_class);

	lockdep_assert_held(&nvstub_rm_lock);
	if (!cls || cls->hclass == NV01_ROOT_CLIENT)
		return NV_ERR_INVALID_CLASS;
	return nvstub_alloc_locked(call, cls, h_client, h_parent, h_object,
				   h_class, params);
}

/*
 * RM_ALLOC_CONTEXT_DMA2 (RmDeprecatedAllocContextDma, 535 to 595): an
 * allocation of the class the caller names -- whatever it is -- in client
 * hObjectParent, under the parent of hMemory (asked as
 * NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO would: an invalidated handle
 * answers too), with NV_CONTEXT_DMA_ALLOCATION_PARAMS made of the fields
 * as its params, kernel memory.  RM passes 32 bytes whatever the class
 * reads (its own stack beyond them); the stub gives a class that reads
 * more zeros.  When hMemory is NV01_MEMORY_SYSTEM_DYNAMIC, RM makes an
 * NV01_MEMORY_VIRTUAL of [offset, limit] instead, which the stub does not
 * simulate: NV_ERR_NOT_SUPPORTED.  The status is RM's answer; the ioctl
 * succeeds.
 */
u32 nvstub_esc_alloc_context_dma(struct nvstub_call *call,
				 struct nvos39_parameters *p)
{
	struct nv_context_dma_allocation_params *a;
	struct nvstub_object *mem;
	struct nvstub_client *c;
	u32 status, hparent = 0, h = p->h_object_new;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_object_parent, &c);
	if (!status) {
		mem = nvstub_object_find_any(c, p->h_memory);
		if (!mem)
			status = NV_ERR_OBJECT_NOT_FOUND;
		else if (mem->hclass == NV01_MEMORY_SYSTEM_DYNAMIC)
			status = NV_ERR_NOT_SUPPORTED;
		else if (mem->parent)
			hparent = mem->parent->handle;
	}
	mutex_unlock(&nvstub_rm_lock);
	if (status)
		return status;
	/* room for what any class reads */
	a = kzalloc(NVSTUB_ALLOC_PARAMS_MAX, GFP_KERNEL);
	if (!a)
		return NV_ERR_NO_MEMORY;
	a->h_subdevice = p->h_subdevice;
	a->flags = p->flags;
	a->h_memory = p->h_memory;
	a->offset = p->offset;
	a->limit = p->limit;
	/* a second call, as RM's (the parent's query, then RmAlloc) */
	status = nvstub_rm_alloc_kparams(call, p->h_object_parent, hparent, &h,
					 p->h_class, a);
	if (!status)
		p->h_object_new = h;
	kfree(a);
	return status;
}

/*
 * RM_FREE: a missing object in an accessible client is NV_OK (resserv's
 * compatibility mode); freeing hRoot frees the client.
 */
u32 nvstub_rm_free(struct nvstub_call *call, u32 h_client, u32 h_object)
{
	struct nvstub_client *c;
	struct nvstub_object *obj;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	status = nvstub_client_get(call, h_client, &c);
	if (status)
		return status;
	obj = nvstub_object_find_any(c, h_object);
	if (!obj)
		return NV_OK;
	if (obj == c->root)
		nvstub_client_destroy(c);
	else
		nvstub_free_tree(obj);
	return NV_OK;
}

/* --- share policies (rs_access_map.c, rs_client.c) */

#define NVSTUB_MAX_SHARES	8

struct nvstub_shares {
	unsigned int n;
	struct {
		u32 target;		/* RS_SHARE_TYPE_CLIENT's client */
		u32 mask;		/* RS_ACCESS_MASK: one limb */
		u16 type;
	} e[NVSTUB_MAX_SHARES];
};

/*
 * rsAccessGetActiveShareList(): the nearest list edited, O's own or an
 * ancestor's; NULL for the server's default, which shares DUP_OBJECT with
 * the clients of the process that made O's client (RS_SHARE_TYPE_PID).
 */
static const struct nvstub_shares *
nvstub_active_shares(const struct nvstub_object *o)
{
	for (; o; o = o->parent)
		if (o->shares)
			return o->shares;
	return NULL;
}

/*
 * Whether SOBJ's active list shares DUP_OBJECT with a client of process
 * TGID whose handle is CLIENT (0: a kernel client, which no CLIENT policy
 * names): the default, and a PID policy, with the process that made SOBJ's
 * client; ALL with anyone; CLIENT with the client it names.
 */
static bool nvstub_shares_admit(const struct nvstub_object *sobj,
				pid_t tgid, u32 client)
{
	const struct nvstub_shares *l = nvstub_active_shares(sobj);
	bool same_pid = sobj->client->tgid == tgid;
	unsigned int i;

	if (!l)
		return same_pid;
	for (i = 0; i < l->n; i++) {
		if (!(l->e[i].mask & BIT(RS_ACCESS_DUP_OBJECT)))
			continue;
		if (l->e[i].type == RS_SHARE_TYPE_ALL ||
		    (l->e[i].type == RS_SHARE_TYPE_CLIENT && client &&
		     l->e[i].target == client) ||
		    (l->e[i].type == RS_SHARE_TYPE_PID && same_pid))
			return true;
	}
	return false;
}

/*
 * Whether client DST may duplicate SOBJ (clientCopyResource():
 * rsAccessCheckRights for DUP_OBJECT): its own client holds the rights it
 * was made with; another, those a policy of the active list shares with it.
 */
static bool nvstub_may_dup(const struct nvstub_object *sobj,
			   const struct nvstub_client *dst)
{
	return sobj->client == dst ||
	       nvstub_shares_admit(sobj, dst->tgid, dst->handle);
}

/*
 * clientShareResource(): the first edit of OBJ's list starts it empty, or
 * (COMPOSE) from the active one; without COMPOSE the list is cleared
 * first; a policy equal to one there (same type, and target for CLIENT)
 * merges its rights into it, or REVOKE takes them out.  stub: the types
 * that need state it does not keep (security tokens, MIG partitions, GPUs,
 * the fabric manager) and REQUIRE policies are NV_ERR_NOT_SUPPORTED.
 */
u32 nvstub_share(struct nvstub_object *obj,
		 const struct rs_share_policy *p)
{
	const struct nvstub_shares *from;
	struct nvstub_shares *l = obj->shares;
	unsigned int i;

	lockdep_assert_held(&nvstub_rm_lock);
	if (p->type >= RS_SHARE_TYPE_MAX)
		return NV_ERR_INVALID_ARGUMENT;
	if ((p->type != RS_SHARE_TYPE_NONE && p->type != RS_SHARE_TYPE_ALL &&
	     p->type != RS_SHARE_TYPE_CLIENT && p->type != RS_SHARE_TYPE_PID) ||
	    (p->action & RS_SHARE_ACTION_FLAG_REQUIRE))
		return NV_ERR_NOT_SUPPORTED;
	if (!l) {
		l = kzalloc(sizeof(*l), GFP_KERNEL);
		if (!l)
			return NV_ERR_NO_MEMORY;
		from = nvstub_active_shares(obj);
		if ((p->action & RS_SHARE_ACTION_FLAG_COMPOSE) && from) {
			*l = *from;
		} else if (p->action & RS_SHARE_ACTION_FLAG_COMPOSE) {
			l->n = 1;
			l->e[0].type = RS_SHARE_TYPE_PID;
			l->e[0].mask = BIT(RS_ACCESS_DUP_OBJECT);
		}
		obj->shares = l;
	}
	if (!(p->action & RS_SHARE_ACTION_FLAG_COMPOSE))
		l->n = 0;
	for (i = 0; i < l->n; i++)
		if (l->e[i].type == p->type &&
		    (p->type != RS_SHARE_TYPE_CLIENT || l->e[i].target == p->target))
			break;
	if (p->action & RS_SHARE_ACTION_FLAG_REVOKE) {
		if (i < l->n) {
			l->e[i].mask &= ~p->access_mask;
			if (!l->e[i].mask)
				l->e[i] = l->e[--l->n];
		}
		return NV_OK;
	}
	if (i < l->n) {
		l->e[i].mask |= p->access_mask;
		return NV_OK;
	}
	if (l->n == NVSTUB_MAX_SHARES)
		return NV_ERR_NO_MEMORY;
	l->e[l->n].type = p->type;
	l->e[l->n].target = p->target;
	l->e[l->n].mask = p->access_mask;
	l->n++;
	return NV_OK;
}

/* RM_SHARE (serverShareResourceAccess): the caller's client, any handle of it */
u32 nvstub_rm_share(struct nvstub_call *call, struct nvos57_parameters *p)
{
	struct nvstub_object *obj;
	struct nvstub_client *c;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	if (p->policy.type >= RS_SHARE_TYPE_MAX)
		return NV_ERR_INVALID_ARGUMENT;
	status = nvstub_client_get(call, p->h_client, &c);
	if (status)
		return status;
	obj = nvstub_object_find_any(c, p->h_object);
	if (!obj)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (obj->invalid)
		return NV_ERR_RESOURCE_LOST;
	return nvstub_share(obj, &p->policy);
}

/* RM_DUP_OBJECT as serverCopyResource() and memCopyConstruct(). */
u32 nvstub_rm_dup(struct nvstub_call *call, struct nvos55_parameters *p)
{
	struct nvstub_client *dst, *src;
	struct nvstub_object *sobj, *parent, *obj;
	bool src_sub, dst_sub;
	u32 status, h = p->h_object;

	lockdep_assert_held(&nvstub_rm_lock);
	src = xa_load(&nvstub_clients, p->h_client_src);
	if (!src || !xa_load(&nvstub_clients, p->h_client))
		return NV_ERR_INVALID_CLIENT;
	status = nvstub_client_get(call, p->h_client, &dst);
	if (status)
		return status;
	sobj = nvstub_object_find_any(src, p->h_object_src);
	if (!sobj)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (sobj->invalid)
		return NV_ERR_RESOURCE_LOST;
	parent = nvstub_object_find(dst, p->h_parent);
	if (!parent)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (!sobj->cls || !(sobj->cls->flags & NVSTUB_CLS_COPYABLE))
		return NV_ERR_INVALID_ARGUMENT;
	status = nvstub_assign_handle(dst, &h);
	if (status)
		return status;
	/* a kernel caller is not checked (no REJECT_KERNEL_DUP flag) */
	if (!call->kernel && !nvstub_may_dup(sobj, dst))
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	if (!nvstub_parent_allowed(sobj->cls, parent) || parent->gpu != sobj->gpu)
		return NV_ERR_INVALID_OBJECT_PARENT;
	src_sub = sobj->parent->hclass == NV20_SUBDEVICE_0;
	dst_sub = parent->hclass == NV20_SUBDEVICE_0;
	if (src_sub != dst_sub)
		return NV_ERR_INVALID_OBJECT_PARENT;

	/*
	 * _virtmemCopyConstruct(): a range goes only where the new handle's
	 * device has it in its default VA space (the duplicate names no VA
	 * space of its own), and takes a reference on it there
	 * (vaspaceIncAllocRefCnt: its pinned tables stay with the last handle)
	 */
	if (sobj->hclass == NV50_MEMORY_VIRTUAL && sobj->mem.mem->range) {
		struct nvstub_vas *vas;

		if (nvstub_vas_lookup(dst, parent, 0, &vas, NULL) ||
		    vas != sobj->mem.mem->range->vas)
			return NV_ERR_INVALID_DEVICE;
	}

	obj = nvstub_object_new(dst, sobj->cls, sobj->hclass, h, parent);
	if (!obj)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	if (sobj->cls->flags & NVSTUB_CLS_MEMORY)
		nvstub_mem_dup(obj, sobj);
	else if (sobj->hclass == KEPLER_CHANNEL_GROUP_A)
		nvstub_tsg_dup(obj, sobj);
	else if (sobj->hclass == FERMI_VASPACE_A)
		nvstub_vaspace_dup(obj, sobj);
	else if (sobj->hclass == FERMI_CONTEXT_SHARE_A)
		nvstub_ctxshare_dup(obj, sobj);
	p->h_object = h;
	return NV_OK;
}

/* The dup of SOBJ into kernel client DST under H_PARENT, as *H_NEW. */
static u32 nvstub_rm_dup_into(struct nvstub_client *dst, u32 h_parent,
			      struct nvstub_object *sobj, u32 *h_new)
{
	struct nvstub_object *parent, *obj;
	u32 status, h = 0;

	lockdep_assert_held(&nvstub_rm_lock);
	/* memory only: what UVM and dma-bufs duplicate */
	if (!sobj->cls || !(sobj->cls->flags & NVSTUB_CLS_COPYABLE) ||
	    !(sobj->cls->flags & NVSTUB_CLS_MEMORY))
		return NV_ERR_INVALID_ARGUMENT;
	parent = nvstub_object_find(dst, h_parent);
	if (!parent)
		return NV_ERR_OBJECT_NOT_FOUND;
	status = nvstub_assign_handle(dst, &h);
	if (status)
		return status;
	obj = nvstub_object_new(dst, sobj->cls, sobj->hclass, h, parent);
	if (!obj)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	if (sobj->cls->flags & NVSTUB_CLS_MEMORY)
		nvstub_mem_dup(obj, sobj);
	*h_new = h;
	return NV_OK;
}

/*
 * Whether UVM may duplicate SOBJ into its kernel session client, in the
 * calling process (nvGpuOpsDupMemory, nvGpuOpsDupAddressSpace: with
 * NV04_DUP_HANDLE_FLAGS_REJECT_KERNEL_DUP_PRIVILEGE the share policies
 * apply).  The active list decides, as for a user's dup, except that a PID
 * policy admits the calling process when it made SOBJ's client
 * (cliresShareCallback with a kernel destination), and so does the
 * default; an ALL policy admits anyone (resShareCallback).  stub: a CLIENT
 * policy admits no kernel client (UVM's session client is named by RM).
 */
bool nvstub_may_dup_to_kernel(const struct nvstub_object *sobj)
{
	lockdep_assert_held(&nvstub_rm_lock);
	return nvstub_shares_admit(sobj, task_tgid_nr(current), 0);
}

/* A dup into a kernel client (UVM's nvGpuOpsDupMemory), by its share policy */
u32 nvstub_rm_dup_to_kernel(struct nvstub_client *dst, u32 h_parent,
			    struct nvstub_object *sobj, u32 *h_new)
{
	lockdep_assert_held(&nvstub_rm_lock);
	if (!nvstub_may_dup_to_kernel(sobj))
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	return nvstub_rm_dup_into(dst, h_parent, sobj, h_new);
}

/*
 * A dma-buf's dup of (H_CLIENT, H_MEMORY), OFFSET and SIZE of it, into
 * kernel client DST (osapi.c RmDmabufVerifyMemHandle, then the dup through
 * RM's internal API: no share policy is asked, whoever's the client is),
 * under DST's device or subdevice as the memory's parent is one.  The
 * memory must be video memory of GPU, and the range page-aligned and in
 * it.
 */
u32 nvstub_rm_dup_for_dmabuf(struct nvstub_client *dst, u32 h_device,
			     u32 h_subdevice, struct nvstub_gpu *gpu,
			     u32 h_client, u32 h_memory, u64 offset, u64 size,
			     u32 *h_new)
{
	struct nvstub_client *c;
	struct nvstub_object *o;
	struct nvstub_mem *mem;

	lockdep_assert_held(&nvstub_rm_lock);
	c = xa_load(&nvstub_clients, h_client);
	if (!c)
		return NV_ERR_INVALID_CLIENT;
	o = nvstub_object_find(c, h_memory);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (!o->cls || !(o->cls->flags & NVSTUB_CLS_MEMORY))
		return NV_ERR_INVALID_OBJECT;
	mem = o->mem.mem;
	if (o->gpu != gpu && (!mem || mem->gpu != gpu))
		return NV_ERR_INVALID_OBJECT_PARENT;
	if (!IS_ALIGNED(offset, PAGE_SIZE) || !IS_ALIGNED(size, PAGE_SIZE))
		return NV_ERR_INVALID_ARGUMENT;
	if (!mem || mem->type != NVSTUB_MEM_VIDMEM)
		return NV_ERR_INVALID_ARGUMENT;
	if (!size || size > mem->size || offset > mem->size - size)
		return NV_ERR_INVALID_ARGUMENT;
	return nvstub_rm_dup_into(dst, o->parent->hclass == NV20_SUBDEVICE_0 ?
				  h_subdevice : h_device, o, h_new);
}

/* nv_open_device() and nvidia_dev_get(): one more user of the GPU */
void nvstub_gpu_get(struct nvstub_gpu *gpu)
{
	lockdep_assert_held(&nvstub_rm_lock);
	gpu->users++;
}

/*
 * K's device and subdevice on GPU, made for its first user (*FIRST, unless
 * NULL, says so, for what a caller makes beside them), the GPU held with them.
 */
u32 nvstub_kgpus_get(struct nvstub_kgpus *k, struct nvstub_gpu *gpu,
		     bool *first)
{
	struct nvstub_call call = { .kernel = true };
	struct nv0080_alloc_parameters dp = { .device_id = gpu->index };
	unsigned int i = gpu->index;
	bool made = !k->users[i]++;
	u32 st;

	lockdep_assert_held(&nvstub_rm_lock);
	if (first)
		*first = made;
	if (!made)
		return NV_OK;
	nvstub_gpu_get(gpu);
	k->device[i] = 0;
	k->subdevice[i] = 0;
	st = nvstub_rm_alloc_kernel(&call, k->client, k->client, &k->device[i],
				    NV01_DEVICE_0, &dp);
	if (!st)
		st = nvstub_rm_alloc_kernel(&call, k->client, k->device[i],
					    &k->subdevice[i], NV20_SUBDEVICE_0,
					    NULL);
	if (st)
		nvstub_kgpus_put(k, gpu);
	return st;
}

/* K's last user of GPU gone: its device (and all under it) freed */
void nvstub_kgpus_put(struct nvstub_kgpus *k, struct nvstub_gpu *gpu)
{
	struct nvstub_call call = { .kernel = true };
	unsigned int i = gpu->index;

	lockdep_assert_held(&nvstub_rm_lock);
	if (WARN_ON(!k->users[i]) || --k->users[i])
		return;
	if (k->device[i])
		nvstub_rm_free(&call, k->client, k->device[i]);
	k->device[i] = 0;
	k->subdevice[i] = 0;
	nvstub_gpu_put(gpu);
}

/*
 * nv_close_device() and nvidia_dev_put(): the last user gone and persistence
 * mode off (the stub has none), RmShutdownAdapter() deletes every client's
 * devices on the GPU (rmapiDelPendingDevices): a kernel client that never
 * called open_gpu() loses its device and subdevice handles too.
 */
void nvstub_gpu_put(struct nvstub_gpu *gpu)
{
	struct nvstub_object *dev, *tmp;
	struct nvstub_client *c;
	unsigned long h;

	lockdep_assert_held(&nvstub_rm_lock);
	if (WARN_ON(!gpu->users) || --gpu->users)
		return;
	xa_for_each(&nvstub_clients, h, c)
		list_for_each_entry_safe(dev, tmp, &c->root->children, sibling)
			if (dev->hclass == NV01_DEVICE_0 && dev->gpu == gpu)
				nvstub_free_tree(dev);
}

/* rm_cleanup_file_private(): a closing file frees the clients it owns. */
void nvstub_rm_free_clients_of(struct nvstub_file *nf)
{
	struct nvstub_client *c;
	unsigned long h;

	mutex_lock(&nvstub_rm_lock);
	xa_for_each(&nvstub_clients, h, c)
		if (c->owner == nf)
			nvstub_client_destroy(c);
	mutex_unlock(&nvstub_rm_lock);
}

void nvstub_rm_exit(void)
{
	struct nvstub_client *c;
	unsigned long h;

	/* files hold the module, so every client is gone by now */
	mutex_lock(&nvstub_rm_lock);
	xa_for_each(&nvstub_clients, h, c)
		nvstub_client_destroy(c);
	mutex_unlock(&nvstub_rm_lock);
	xa_destroy(&nvstub_clients);
}
