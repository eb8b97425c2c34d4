// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/nvidia-uvm (kernel-open/nvidia-uvm: uvm.c, uvm_api.h, uvm_ioctl.h,
 * uvm_va_space.c, uvm_gpu.c, uvm_map_external.c, uvm_user_channel.c, and
 * src/nvidia/src/kernel/rmapi/nv_gpu_ops.c for what it asks of RM): what
 * libcuda's cuInit asks of it, and the external-memory and channel paths
 * CUDA and tinygrad take with an externally owned VA space.
 *
 * A dynamic character major named "nvidia-uvm" with minors 0 (nvidia-uvm)
 * and 1 (nvidia-uvm-tools), as the real module registers; nvidia-modprobe
 * -u makes the nodes from /proc/devices.  ioctl numbers are the raw UVM
 * command numbers; a routed command copies its params in (its size is the
 * driver's, whatever the caller meant), sets rmStatus (NV_ERR_ILLEGAL_ACTION
 * before UVM_INITIALIZE), and copies them back; the ioctl returns 0.
 *
 * UVM's RM work is done in its own kernel RM client (the session,
 * nvGpuOpsCreateClient), made at load with a device and subdevice per GPU:
 * its dups of a user's memory keep that memory alive (RM's DupCount), and a
 * kernel client is counted for no process in GPU_GET_PID_INFO.  rmCtrlFd is
 * never checked by UVM ("Bug 1624521"); a dup needs the source client to be
 * the calling process's (the PID share policy) unless its owner shared the
 * object with everyone (RM_SHARE or its client's inherited policy, ALL):
 * then any process may register its VA space and retain its channels.
 *
 * stub: managed memory, HMM, peers, access counters and MIG are not
 * simulated (mmap is -EBADFD before UVM_INITIALIZE, -EINVAL after); a new
 * mapping over part of an older one removes the older one whole (UVM splits
 * it); UVM keeps a reference on a registered VA space, not a dup of it.
 */
#include <linux/cdev.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "nvstub.h"

#define UVM_INITIALIZE			0x30000001
#define UVM_DEINITIALIZE		0x30000002
#define UVM_REGISTER_GPU_VASPACE	25
#define UVM_UNREGISTER_GPU_VASPACE	26
#define UVM_REGISTER_CHANNEL		27
#define UVM_UNREGISTER_CHANNEL		28
#define UVM_MAP_EXTERNAL_ALLOCATION	33
#define UVM_FREE			34
#define UVM_REGISTER_GPU		37
#define UVM_UNREGISTER_GPU		38
#define UVM_PAGEABLE_MEM_ACCESS		39
#define UVM_CREATE_EXTERNAL_RANGE	73
#define UVM_MM_INITIALIZE		75
#define NV_WARN_NOTHING_TO_DO		0x10006
#define NV_ERR_OTHER_DEVICE_FOUND	0x5A
#define UVM_INIT_FLAGS_MASK		0x3ull	/* DISABLE_HMM | MULTI_PROCESS_SHARING_MODE */
#define NVSTUB_UVM_MINORS		2	/* nvidia-uvm, nvidia-uvm-tools */
#define NVSTUB_UVM_MAX_RANGES		4096	/* stub: per va_space */
#define NVSTUB_UVM_MAX_GPUS		256	/* UVM_MAX_GPUS from 550 */
#define UVM_4K				4096ull

struct uvm_initialize_params {
	u64 flags;
	u32 rm_status;
};
static_assert(sizeof(struct uvm_initialize_params) == 16);

struct uvm_pageable_mem_access_params {
	u8 pageable_mem_access;		/* NvBool */
	u32 rm_status;
};
static_assert(sizeof(struct uvm_pageable_mem_access_params) == 8);

struct uvm_mm_initialize_params {
	s32 uvm_fd;
	u32 rm_status;
};
static_assert(sizeof(struct uvm_mm_initialize_params) == 8);

struct uvm_register_gpu_params {
	u8 gpu_uuid[16];
	u8 numa_enabled;
	u8 pad0[3];
	s32 numa_node_id;
	s32 rm_ctrl_fd;
	u32 h_client;
	u32 h_smc_part_ref;
	u32 rm_status;
};
static_assert(sizeof(struct uvm_register_gpu_params) == 40);

/* UNREGISTER_GPU and UNREGISTER_GPU_VASPACE */
struct uvm_gpu_params {
	u8 gpu_uuid[16];
	u32 rm_status;
};
static_assert(sizeof(struct uvm_gpu_params) == 20);

struct uvm_register_gpu_va_space_params {
	u8 gpu_uuid[16];
	s32 rm_ctrl_fd;
	u32 h_client;
	u32 h_va_space;
	u32 rm_status;
};
static_assert(sizeof(struct uvm_register_gpu_va_space_params) == 32);

/* CREATE_EXTERNAL_RANGE and FREE */
struct uvm_range_params {
	u64 base;
	u64 length;
	u32 rm_status;
	u32 pad0;
};
static_assert(sizeof(struct uvm_range_params) == 24);

struct uvm_gpu_mapping_attributes {
	u8 gpu_uuid[16];
	u32 mapping_type;
	u32 caching_type;
	u32 format_type;
	u32 element_bits;
	u32 compression_type;
};
static_assert(sizeof(struct uvm_gpu_mapping_attributes) == 36);

/* UVM_MAP_EXTERNAL_ALLOCATION: head, attributes[UVM_MAX_GPUS], tail */
struct uvm_map_external_head {
	u64 base;
	u64 length;
	u64 offset;
};

struct uvm_map_external_tail {
	u64 gpu_attributes_count;
	s32 rm_ctrl_fd;
	u32 h_client;
	u32 h_memory;
	u32 rm_status;
};

struct uvm_register_channel_params {
	u8 gpu_uuid[16];
	s32 rm_ctrl_fd;
	u32 h_client;
	u32 h_channel;
	u32 pad0;
	u64 base;
	u64 length;
	u32 rm_status;
	u32 pad1;
};
static_assert(sizeof(struct uvm_register_channel_params) == 56);

struct uvm_unregister_channel_params {
	u8 gpu_uuid[16];
	u32 h_client;
	u32 h_channel;
	u32 rm_status;
};
static_assert(sizeof(struct uvm_unregister_channel_params) == 28);

/* One GPU mapping of an external range: UVM's dup keeps the memory alive. */
struct nvstub_uvm_map {
	struct list_head node;
	struct nvstub_gpu *gpu;
	struct nvstub_vas *vas;		/* the GPU's registered VA space */
	u64 base;
	u64 length;
	u32 h_dup;			/* in the session client */
};

/* A UVM va_range: CREATE_EXTERNAL_RANGE's, or a registered channel's. */
struct nvstub_uvm_range {
	struct list_head node;
	u64 base;
	u64 length;
	struct list_head maps;		/* external: nvstub_uvm_map */
	struct nvstub_chan *chan;	/* channel: holds a reference */
	u32 h_client;
	u32 h_channel;
};

/* A UVM va_space: one per open file. */
struct nvstub_uvm_file {
	/*
	 * The va_space's lock, outside nvstub_rm_lock: written by every call
	 * but UVM_REGISTER_CHANNEL, which UVM makes with it read
	 * (uvm_register_channel: uvm_va_space_down_read_rm around
	 * uvm_user_channel_create), so that threads of one file are inside the
	 * driver's retain at once; what it changes, it changes under
	 * nvstub_rm_lock
	 */
	struct rw_semaphore lock;
	bool initialized;
	u64 flags;			/* the va_space's initialization_flags */
	DECLARE_BITMAP(registered, NVSTUB_MAX_GPUS);
	struct nvstub_vas *gpu_vas[NVSTUB_MAX_GPUS];	/* REGISTER_GPU_VASPACE */
	struct list_head ranges;
	unsigned int nranges;
};

/*
 * The session: UVM's kernel RM client, made at load; a device and subdevice
 * under it for each GPU some va_space registered, which also holds the GPU
 * open (uvm_gpu's retained_count, nvidia_dev_get); under nvstub_rm_lock.
 */
static struct nvstub_kgpus nvstub_uvm_session;

static dev_t nvstub_uvm_dev;
static const struct file_operations nvstub_uvm_fops;
static struct cdev nvstub_uvm_cdev;

static struct nvstub_gpu *nvstub_uvm_gpu(const u8 *uuid)
{
	unsigned int i;

	for (i = 0; i < nvstub_ngpus; i++)
		if (!memcmp(nvstub_gpus[i].uuid_bin, uuid, 16))
			return &nvstub_gpus[i];
	return NULL;
}

/* uvm_api_range_invalid_4k() */
static bool nvstub_uvm_range_invalid(u64 base, u64 length)
{
	u64 end;

	return !base || !length || !IS_ALIGNED(base, UVM_4K) ||
	       !IS_ALIGNED(length, UVM_4K) ||
	       check_add_overflow(base, length - 1, &end);
}

/* gpu_retain_by_uuid(): the first va_space to register GPU adds it */
static u32 nvstub_uvm_gpu_retain(struct nvstub_gpu *gpu)
{
	struct nvstub_call call = { .kernel = true };
	struct nv_access_counter_notify_buffer_alloc_params acp = { 0 };
	struct nvstub_kgpus *k = &nvstub_uvm_session;
	bool first;
	u32 st, h = 0;

	lockdep_assert_held(&nvstub_rm_lock);
	st = nvstub_kgpus_get(k, gpu, &first);
	if (st || !first)
		return st;
	/*
	 * init_parent_gpu() -> uvm_isr_init_access_counters(): the GPU's
	 * access-counter buffer, in UVM's client; if another client holds it
	 * (RM: NV_ERR_INVALID_STATE), the GPU cannot be added
	 */
	st = nvstub_rm_alloc_kernel(&call, k->client, k->subdevice[gpu->index],
				    &h, ACCESS_COUNTER_NOTIFY_BUFFER, &acp);
	if (st)
		nvstub_kgpus_put(k, gpu);
	return st;
}

static void nvstub_uvm_gpu_release(struct nvstub_gpu *gpu)
{
	nvstub_kgpus_put(&nvstub_uvm_session, gpu);
}

/* --- mappings, ranges and channels */

/* nvGpuOpsFreeDupedHandle() with the map; under uf->lock and the RM lock */
static void nvstub_uvm_map_destroy(struct nvstub_uvm_map *m)
{
	struct nvstub_call call = { .kernel = true };

	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_vas_unmap(m->vas, m->base, m);
	nvstub_rm_free(&call, nvstub_uvm_session.client, m->h_dup);
	list_del(&m->node);
	nvstub_vas_put(m->vas);
	kfree(m);
}

/* uvm_user_channel_stop(): kchannel's bIsContextBound goes false */
static void nvstub_uvm_range_destroy(struct nvstub_uvm_file *uf,
				     struct nvstub_uvm_range *r)
{
	struct nvstub_uvm_map *m, *tmp;

	lockdep_assert_held(&nvstub_rm_lock);
	list_for_each_entry_safe(m, tmp, &r->maps, node)
		nvstub_uvm_map_destroy(m);
	if (r->chan) {
		r->chan->bound = false;
		nvUvmInterfaceReleaseChannel(r->chan);
	}
	list_del(&r->node);
	uf->nranges--;
	kfree(r);
}

/* Every mapping and channel of the file on GPU (NULL: all) goes. */
static void nvstub_uvm_drop_gpu(struct nvstub_uvm_file *uf,
				struct nvstub_gpu *gpu)
{
	struct nvstub_uvm_range *r, *rt;
	struct nvstub_uvm_map *m, *mt;

	lockdep_assert_held(&nvstub_rm_lock);
	list_for_each_entry_safe(r, rt, &uf->ranges, node) {
		if (r->chan && (!gpu || r->chan->gpu == gpu)) {
			nvstub_uvm_range_destroy(uf, r);
			continue;
		}
		list_for_each_entry_safe(m, mt, &r->maps, node)
			if (!gpu || m->gpu == gpu)
				nvstub_uvm_map_destroy(m);
	}
}

/*
 * nvUvmInterfaceAddressSpaceDestroy(), by the name and with the argument
 * nvidia.ko exports it under for UVM (nv_uvm_interface.h, 535 to 595):
 * UVM destroys its duplicate of a user's VA space (the handle its retains
 * of channels named) after it let go of every channel retained in it
 * (destroy_gpu_va_space, last on the deferred-free list).  A real call of
 * the stub's UVM, so that xpu.ko's probe of it watches it here.  stub: the
 * handle is the user's VA space itself, which RM frees with its handle.
 */
noinline void nvUvmInterfaceAddressSpaceDestroy(void *va_space)
{
	lockdep_assert_held(&nvstub_rm_lock);
	/* nothing to do here; the call must stay (GCC drops pure ones) */
	asm volatile("" : : "r" (va_space) : "memory");
}
EXPORT_SYMBOL(nvUvmInterfaceAddressSpaceDestroy);

static void nvstub_uvm_drop_vas(struct nvstub_uvm_file *uf,
				struct nvstub_gpu *gpu)
{
	struct nvstub_vas *vas = uf->gpu_vas[gpu->index];

	lockdep_assert_held(&nvstub_rm_lock);
	if (!vas)
		return;
	nvstub_uvm_drop_gpu(uf, gpu);	/* the channels first */
	nvUvmInterfaceAddressSpaceDestroy(vas);
	vas->page_dir--;		/* nvGpuOpsUnsetPageDirectory() */
	nvstub_pt_give_root(gpu);	/* uvm_page_tree_deinit() */
	nvstub_vas_put(vas);
	uf->gpu_vas[gpu->index] = NULL;
}

static struct nvstub_uvm_range *nvstub_uvm_range_add(struct nvstub_uvm_file *uf,
						     u64 base, u64 length,
						     u32 *status)
{
	struct nvstub_uvm_range *r;

	/* uvm_range_tree_add(): no overlap with any va_range of the va_space */
	list_for_each_entry(r, &uf->ranges, node) {
		if (base <= r->base + r->length - 1 && r->base <= base + length - 1) {
			*status = NV_ERR_UVM_ADDRESS_IN_USE;
			return NULL;
		}
	}
	*status = NV_ERR_NO_MEMORY;
	if (uf->nranges >= NVSTUB_UVM_MAX_RANGES)
		return NULL;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->base = base;
	r->length = length;
	INIT_LIST_HEAD(&r->maps);
	list_add_tail(&r->node, &uf->ranges);
	uf->nranges++;
	*status = NV_OK;
	return r;
}

/* --- the ioctls */

/* uvm_api_initialize(): once per file; again only with the same flags */
static u32 nvstub_uvm_initialize(struct nvstub_uvm_file *uf,
				 struct uvm_initialize_params *p)
{
	u32 status = NV_OK;

	down_write(&uf->lock);
	if (!uf->initialized) {
		/* uvm_va_space_create() */
		if (p->flags & ~UVM_INIT_FLAGS_MASK) {
			status = NV_ERR_INVALID_ARGUMENT;
		} else {
			uf->initialized = true;
			uf->flags = p->flags;
		}
	} else if (p->flags != uf->flags) {
		status = NV_ERR_INVALID_ARGUMENT;
	}
	up_write(&uf->lock);
	return status;
}

static bool nvstub_uvm_ready(struct nvstub_uvm_file *uf)
{
	bool ret;

	down_read(&uf->lock);
	ret = uf->initialized;
	up_read(&uf->lock);
	return ret;
}

/* uvm_va_space_register_gpu(): rmCtrlFd and (without MIG) hClient unused */
static u32 nvstub_uvm_register_gpu(struct nvstub_uvm_file *uf, void *arg)
{
	struct uvm_register_gpu_params *p = arg;
	struct nvstub_gpu *gpu = nvstub_uvm_gpu(p->gpu_uuid);

	u32 status;

	if (!gpu)
		return NV_ERR_GPU_UUID_NOT_FOUND;
	if (test_bit(gpu->index, uf->registered))
		return NV_ERR_INVALID_DEVICE;
	mutex_lock(&nvstub_rm_lock);
	status = nvstub_uvm_gpu_retain(gpu);
	mutex_unlock(&nvstub_rm_lock);
	if (status)
		return status;
	set_bit(gpu->index, uf->registered);
	p->numa_enabled = 0;
	p->numa_node_id = -1;
	return NV_OK;
}

static u32 nvstub_uvm_unregister_gpu(struct nvstub_uvm_file *uf, void *arg)
{
	struct uvm_gpu_params *p = arg;
	struct nvstub_gpu *gpu = nvstub_uvm_gpu(p->gpu_uuid);

	if (!gpu || !test_bit(gpu->index, uf->registered))
		return NV_ERR_INVALID_DEVICE;
	mutex_lock(&nvstub_rm_lock);
	nvstub_uvm_drop_vas(uf, gpu);	/* an implicit UNREGISTER_GPU_VASPACE */
	clear_bit(gpu->index, uf->registered);
	nvstub_uvm_gpu_release(gpu);
	mutex_unlock(&nvstub_rm_lock);
	return NV_OK;
}

/*
 * uvm_va_space_register_gpu_va_space(): nvGpuOpsDupAddressSpace() of the
 * user's FERMI_VASPACE_A, which must be externally owned, then UVM's page
 * tables become its page directory (nvGpuOpsSetPageDirectory: one owner).
 */
static u32 nvstub_uvm_register_gpu_va_space(struct nvstub_uvm_file *uf,
					    void *arg)
{
	struct uvm_register_gpu_va_space_params *p = arg;
	struct nvstub_gpu *gpu = nvstub_uvm_gpu(p->gpu_uuid);
	struct nvstub_object *o;
	struct nvstub_client *c;
	u32 status = NV_OK;

	if (!gpu || !test_bit(gpu->index, uf->registered))
		return NV_ERR_INVALID_DEVICE;
	mutex_lock(&nvstub_rm_lock);
	c = xa_load(&nvstub_clients, p->h_client);
	o = c ? nvstub_object_find(c, p->h_va_space) : NULL;
	if (!c)
		status = NV_ERR_INVALID_CLIENT;
	else if (!o)
		status = NV_ERR_OBJECT_NOT_FOUND;
	else if (o->hclass != FERMI_VASPACE_A)
		status = NV_ERR_INVALID_OBJECT;
	else if (o->gpu != gpu)
		status = NV_ERR_OTHER_DEVICE_FOUND;
	else if (!nvstub_may_dup_to_kernel(o))
		status = NV_ERR_INSUFFICIENT_PERMISSIONS;	/* the dup's share policy */
	else if (!o->vas->external)
		status = NV_ERR_INVALID_FLAGS;
	else if (uf->gpu_vas[gpu->index])
		status = NV_ERR_INVALID_DEVICE;		/* registered already */
	else if (o->vas->page_dir)
		status = NV_ERR_INVALID_DEVICE;		/* another va_space's */
	else	/* uvm_page_tree_init(): UVM's own root, charged to no one */
		status = nvstub_pt_take_root(gpu);
	if (!status) {
		o->vas->page_dir++;
		nvstub_vas_get(o->vas);
		uf->gpu_vas[gpu->index] = o->vas;
	}
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

static u32 nvstub_uvm_unregister_gpu_va_space(struct nvstub_uvm_file *uf,
					      void *arg)
{
	struct uvm_gpu_params *p = arg;
	struct nvstub_gpu *gpu = nvstub_uvm_gpu(p->gpu_uuid);

	if (!gpu || !uf->gpu_vas[gpu->index])
		return NV_ERR_INVALID_DEVICE;
	mutex_lock(&nvstub_rm_lock);
	nvstub_uvm_drop_vas(uf, gpu);
	mutex_unlock(&nvstub_rm_lock);
	return NV_OK;
}

static u32 nvstub_uvm_create_external_range(struct nvstub_uvm_file *uf,
					    void *arg)
{
	struct uvm_range_params *p = arg;
	u32 status;

	if (nvstub_uvm_range_invalid(p->base, p->length))
		return NV_ERR_INVALID_ADDRESS;
	nvstub_uvm_range_add(uf, p->base, p->length, &status);
	return status;
}

/* uvm_free(): an external range exactly, with all its mappings */
static u32 nvstub_uvm_free(struct nvstub_uvm_file *uf, void *arg)
{
	struct uvm_range_params *p = arg;
	struct nvstub_uvm_range *r;

	if (nvstub_uvm_range_invalid(p->base, p->length))
		return NV_ERR_INVALID_ADDRESS;
	list_for_each_entry(r, &uf->ranges, node) {
		if (r->chan || r->base != p->base || r->length != p->length)
			continue;
		mutex_lock(&nvstub_rm_lock);
		nvstub_uvm_range_destroy(uf, r);
		mutex_unlock(&nvstub_rm_lock);
		return NV_OK;
	}
	return NV_ERR_INVALID_ADDRESS;
}

/* uvm_map_external_allocation_on_gpu(): one GPU's mapping and UVM's dup */
static u32 nvstub_uvm_map_on_gpu(struct nvstub_uvm_file *uf,
				 struct nvstub_uvm_range *r,
				 struct nvstub_gpu *gpu,
				 struct uvm_map_external_head *h,
				 struct uvm_map_external_tail *t,
				 struct list_head *made)
{
	struct nvstub_vas *vas = uf->gpu_vas[gpu->index];
	struct nvstub_uvm_map *m, *tmp;
	struct nvstub_object *o;
	struct nvstub_client *c;
	struct nvstub_mem *mem;
	u32 status, parent;
	u64 end;

	lockdep_assert_held(&nvstub_rm_lock);
	/* older mappings of this GPU over the new one go first */
	list_for_each_entry_safe(m, tmp, &r->maps, node)
		if (m->gpu == gpu && h->base <= m->base + m->length - 1 &&
		    m->base <= h->base + h->length - 1)
			nvstub_uvm_map_destroy(m);

	/* nvGpuOpsDupMemory(): nvGpuOpsGetMemoryByHandle(), then the dup */
	c = xa_load(&nvstub_clients, t->h_client);
	if (!c)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	o = nvstub_object_find(c, t->h_memory);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != NV01_MEMORY_LOCAL_USER &&
	    o->hclass != NV01_MEMORY_SYSTEM)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	mem = o->mem.mem;
	/* set_ext_gpu_map_location(): the owning GPU is registered, no peers */
	if (!test_bit(o->gpu->index, uf->registered) ||
	    (mem->type == NVSTUB_MEM_VIDMEM && o->gpu != gpu))
		return NV_ERR_INVALID_DEVICE;
	/* uvm_va_range_map_rm_allocation() */
	if (check_add_overflow(h->offset, h->length, &end) ||
	    end > mem->size)
		return NV_ERR_INVALID_OFFSET;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return NV_ERR_NO_MEMORY;
	parent = o->parent->hclass == NV20_SUBDEVICE_0 ?
		 nvstub_uvm_session.subdevice[o->gpu->index] :
		 nvstub_uvm_session.device[o->gpu->index];
	status = nvstub_rm_dup_to_kernel(xa_load(&nvstub_clients,
						 nvstub_uvm_session.client),
					 parent, o, &m->h_dup);
	if (status) {
		kfree(m);
		return status;
	}
	m->gpu = gpu;
	m->vas = vas;
	m->base = h->base;
	m->length = h->length;
	status = nvstub_vas_map(vas, h->base, h->length, mem, h->offset, m,
				NULL, NULL);
	if (status) {
		struct nvstub_call call = { .kernel = true };

		nvstub_rm_free(&call, nvstub_uvm_session.client, m->h_dup);
		kfree(m);
		return status;
	}
	nvstub_vas_get(vas);
	list_add_tail(&m->node, made);
	return NV_OK;
}

static bool nvstub_uvm_attrs_valid(const struct uvm_gpu_mapping_attributes *a)
{
	/* uvm_map_external.c: the enums' ranges; format and bits go together */
	if (a->mapping_type > 3 || a->caching_type > 2 || a->format_type > 1 ||
	    a->compression_type > 1)
		return false;
	switch (a->element_bits) {
	case 0: case 1: case 2: case 4: case 5: case 6:
		break;
	default:
		return false;
	}
	return !a->format_type == !a->element_bits;
}

static u32 nvstub_uvm_map_external(struct nvstub_uvm_file *uf, void *arg)
{
	struct uvm_map_external_head *h = arg;
	struct uvm_gpu_mapping_attributes *attrs = arg + sizeof(*h);
	struct uvm_map_external_tail *t = (void *)&attrs[nvstub_abi->uvm_max_gpus];
	struct nvstub_uvm_range *r, *found = NULL;
	struct nvstub_uvm_map *m, *tmp;
	struct nvstub_gpu *gpu;
	LIST_HEAD(made);
	u32 status = NV_OK;
	u64 i;

	if (nvstub_uvm_range_invalid(h->base, h->length))
		return NV_ERR_INVALID_ADDRESS;
	if (!t->gpu_attributes_count ||
	    t->gpu_attributes_count > nvstub_abi->uvm_max_gpus)
		return NV_ERR_INVALID_ARGUMENT;
	list_for_each_entry(r, &uf->ranges, node) {
		if (!r->chan && r->base <= h->base &&
		    h->base + h->length - 1 <= r->base + r->length - 1) {
			found = r;
			break;
		}
	}
	if (!found)
		return NV_ERR_INVALID_ADDRESS;

	mutex_lock(&nvstub_rm_lock);
	for (i = 0; i < t->gpu_attributes_count && !status; i++) {
		if (!nvstub_uvm_attrs_valid(&attrs[i])) {
			status = NV_ERR_INVALID_ARGUMENT;
			break;
		}
		gpu = nvstub_uvm_gpu(attrs[i].gpu_uuid);
		if (!gpu || !uf->gpu_vas[gpu->index]) {
			status = NV_ERR_INVALID_DEVICE;
			break;
		}
		status = nvstub_uvm_map_on_gpu(uf, found, gpu, h, t, &made);
	}
	/* "any error destroys the mappings this call made" */
	list_for_each_entry_safe(m, tmp, &made, node) {
		if (status) {
			nvstub_uvm_map_destroy(m);
		} else {
			list_del(&m->node);
			list_add_tail(&m->node, &found->maps);
		}
	}
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/*
 * nvUvmInterfaceRetainChannel() and nvUvmInterfaceReleaseChannel(), by the
 * names and with the arguments nvidia.ko exports them under for UVM
 * (nv_uvm_interface.h, 535 to 595; nvGpuOpsRetainChannel() checks the
 * channel is in the VA space UVM registered): UVM calls them in the
 * registering thread and wherever it lets go.  They are real calls of the
 * stub's UVM, not inlined, so that what watches them on a host (xpu.ko's
 * probes, docs/security.md class 39) watches them here.  The retain takes
 * the stub's RM lock, which stands for the locks RM takes inside, and lets
 * it go before it returns, as RM does: uvm_retain_delay_us widens the time
 * between (RM retained, UVM not yet told), and uvm_retain_wait_us keeps the
 * caller at the entry first, before anything is looked at, as RM's locks
 * held by others would (_nvGpuOpsLocksAcquireAll).  stub: the release is called
 * under the RM lock (every path of UVM's that lets go holds it here); no
 * channel instance information is filled in.
 */
noinline u32 nvUvmInterfaceRetainChannel(void *va_space, u32 h_client,
					 u32 h_channel, void **retained,
					 void *instance_info)
{
	struct nvstub_object *o;
	struct nvstub_client *c;
	u32 status = NV_OK;

	if (READ_ONCE(nvstub_uvm_retain_wait_us))
		fsleep(READ_ONCE(nvstub_uvm_retain_wait_us));
	mutex_lock(&nvstub_rm_lock);
	c = xa_load(&nvstub_clients, h_client);
	o = c ? nvstub_object_find(c, h_channel) : NULL;
	if (!c)
		status = NV_ERR_INVALID_CLIENT;	/* stub: not verified */
	else if (!o || o->hclass != HOPPER_CHANNEL_GPFIFO_A)
		status = NV_ERR_INVALID_OBJECT_HANDLE;
	else if (o->chan->vas != va_space)
		status = NV_ERR_INVALID_CHANNEL;
	if (!status) {
		nvstub_chan_retain(o->chan);
		*retained = o->chan;
	}
	mutex_unlock(&nvstub_rm_lock);
	if (!status && READ_ONCE(nvstub_uvm_retain_delay_us))
		fsleep(READ_ONCE(nvstub_uvm_retain_delay_us));
	return status;
}
EXPORT_SYMBOL(nvUvmInterfaceRetainChannel);

noinline void nvUvmInterfaceReleaseChannel(void *retained)
{
	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_chan_unretain(retained);
}
EXPORT_SYMBOL(nvUvmInterfaceReleaseChannel);

/*
 * uvm_register_channel(): the channel retained through the interface above;
 * binding it sets bIsContextBound, which GPFIFO_SCHEDULE of an externally
 * owned VA space's channel needs.  A channel also takes a va_range
 * [base, base + length) of the va_space.
 */
static u32 nvstub_uvm_register_channel(struct nvstub_uvm_file *uf, void *arg)
{
	struct uvm_register_channel_params *p = arg;
	struct nvstub_gpu *gpu = nvstub_uvm_gpu(p->gpu_uuid);
	struct nvstub_uvm_range *r;
	struct nvstub_chan *chan;
	u32 status = NV_OK;
	void *retained;
	u64 end;

	if (!gpu || !uf->gpu_vas[gpu->index])
		return NV_ERR_INVALID_DEVICE;
	status = nvUvmInterfaceRetainChannel(uf->gpu_vas[gpu->index],
					     p->h_client, p->h_channel,
					     &retained, NULL);
	if (status)
		return status;
	chan = retained;
	mutex_lock(&nvstub_rm_lock);
	if (!p->base || !p->length || !IS_ALIGNED(p->base, PAGE_SIZE) ||
	    !IS_ALIGNED(p->length, PAGE_SIZE) ||
	    check_add_overflow(p->base, p->length - 1, &end))
		status = NV_ERR_INVALID_ADDRESS;
	if (!status) {
		list_for_each_entry(r, &uf->ranges, node) {
			if (r->h_client == p->h_client &&
			    r->h_channel == p->h_channel && r->chan) {
				status = NV_ERR_INVALID_CHANNEL;
				break;
			}
		}
	}
	r = status ? NULL : nvstub_uvm_range_add(uf, p->base, p->length,
						 &status);
	if (!r) {
		nvUvmInterfaceReleaseChannel(retained);
		goto out;
	}
	r->chan = chan;
	r->h_client = p->h_client;
	r->h_channel = p->h_channel;
	chan->bound = true;	/* nvGpuOpsBindChannelResources() */
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/* uvm_unregister_channel(): by (hClient, hChannel) alone */
static u32 nvstub_uvm_unregister_channel(struct nvstub_uvm_file *uf,
					 void *arg)
{
	struct uvm_unregister_channel_params *p = arg;
	struct nvstub_uvm_range *r;

	list_for_each_entry(r, &uf->ranges, node) {
		if (r->chan && r->h_client == p->h_client &&
		    r->h_channel == p->h_channel) {
			mutex_lock(&nvstub_rm_lock);
			nvstub_uvm_range_destroy(uf, r);
			mutex_unlock(&nvstub_rm_lock);
			return NV_OK;
		}
	}
	return NV_ERR_INVALID_CHANNEL;
}

/* The routed commands after UVM_INITIALIZE: (number, size, handler). */
struct nvstub_uvm_cmd {
	u32 nr;
	u32 size;		/* 0: UVM_MAP_EXTERNAL_ALLOCATION's, by version */
	u32 (*handler)(struct nvstub_uvm_file *uf, void *arg);
};

static const struct nvstub_uvm_cmd nvstub_uvm_cmds[] = {
	{ UVM_REGISTER_GPU, sizeof(struct uvm_register_gpu_params),
	  nvstub_uvm_register_gpu },
	{ UVM_UNREGISTER_GPU, sizeof(struct uvm_gpu_params),
	  nvstub_uvm_unregister_gpu },
	{ UVM_REGISTER_GPU_VASPACE, sizeof(struct uvm_register_gpu_va_space_params),
	  nvstub_uvm_register_gpu_va_space },
	{ UVM_UNREGISTER_GPU_VASPACE, sizeof(struct uvm_gpu_params),
	  nvstub_uvm_unregister_gpu_va_space },
	{ UVM_CREATE_EXTERNAL_RANGE, sizeof(struct uvm_range_params),
	  nvstub_uvm_create_external_range },
	{ UVM_MAP_EXTERNAL_ALLOCATION, 0, nvstub_uvm_map_external },
	{ UVM_FREE, sizeof(struct uvm_range_params), nvstub_uvm_free },
	{ UVM_REGISTER_CHANNEL, sizeof(struct uvm_register_channel_params),
	  nvstub_uvm_register_channel },
	{ UVM_UNREGISTER_CHANNEL, sizeof(struct uvm_unregister_channel_params),
	  nvstub_uvm_unregister_channel },
};

static u32 nvstub_uvm_cmd_size(const struct nvstub_uvm_cmd *cmd)
{
	if (cmd->size)
		return cmd->size;
	return sizeof(struct uvm_map_external_head) +
	       nvstub_abi->uvm_max_gpus * sizeof(struct uvm_gpu_mapping_attributes) +
	       sizeof(struct uvm_map_external_tail);
}

/* UVM_ROUTE_CMD: params in, rmStatus (the last u32 before padding), out */
static long nvstub_uvm_routed(struct nvstub_uvm_file *uf,
			      const struct nvstub_uvm_cmd *cmd,
			      void __user *up)
{
	u32 size = nvstub_uvm_cmd_size(cmd), *status;
	void *arg;
	long ret = 0;

	arg = kvzalloc(size, GFP_KERNEL);
	if (!arg)
		return -ENOMEM;
	if (copy_from_user(arg, up, size)) {
		ret = -EFAULT;
		goto out;
	}
	switch (cmd->nr) {
	case UVM_CREATE_EXTERNAL_RANGE:
	case UVM_FREE:
		status = &((struct uvm_range_params *)arg)->rm_status;
		break;
	case UVM_REGISTER_CHANNEL:
		status = &((struct uvm_register_channel_params *)arg)->rm_status;
		break;
	case UVM_MAP_EXTERNAL_ALLOCATION:
		status = arg + size - sizeof(u32);
		break;
	default:	/* the last word */
		status = arg + size - sizeof(u32);
		break;
	}
	if (cmd->nr == UVM_REGISTER_CHANNEL)
		down_read(&uf->lock);
	else
		down_write(&uf->lock);
	*status = uf->initialized ? cmd->handler(uf, arg) : NV_ERR_ILLEGAL_ACTION;
	if (cmd->nr == UVM_REGISTER_CHANNEL)
		up_read(&uf->lock);
	else
		up_write(&uf->lock);
	if (copy_to_user(up, arg, size))
		ret = -EFAULT;
out:
	kvfree(arg);
	return ret;
}

static int nvstub_uvm_open(struct inode *inode, struct file *file)
{
	struct nvstub_uvm_file *uf = kzalloc(sizeof(*uf), GFP_KERNEL);

	if (!uf)
		return -ENOMEM;
	init_rwsem(&uf->lock);
	INIT_LIST_HEAD(&uf->ranges);
	file->private_data = uf;
	return 0;
}

/* uvm_va_space_destroy(): every range, channel and registration goes */
static int nvstub_uvm_release(struct inode *inode, struct file *file)
{
	struct nvstub_uvm_file *uf = file->private_data;
	struct nvstub_uvm_range *r, *tmp;
	unsigned int i;

	mutex_lock(&nvstub_rm_lock);
	list_for_each_entry_safe(r, tmp, &uf->ranges, node)
		nvstub_uvm_range_destroy(uf, r);
	for (i = 0; i < nvstub_ngpus; i++) {
		nvstub_uvm_drop_vas(uf, &nvstub_gpus[i]);
		if (test_bit(i, uf->registered))
			nvstub_uvm_gpu_release(&nvstub_gpus[i]);
	}
	mutex_unlock(&nvstub_rm_lock);
	kfree(uf);
	return 0;
}

static long nvstub_uvm_ioctl(struct file *file, unsigned int cmd,
			     unsigned long arg)
{
	struct nvstub_uvm_file *uf = file->private_data;
	void __user *up = (void __user *)arg;
	unsigned int i;

	switch (cmd) {
	case UVM_DEINITIALIZE:
		return 0;
	case UVM_INITIALIZE: {
		struct uvm_initialize_params p;

		if (copy_from_user(&p, up, sizeof(p)))
			return -EFAULT;
		p.rm_status = nvstub_uvm_initialize(uf, &p);
		return copy_to_user(up, &p, sizeof(p)) ? -EFAULT : 0;
	}
	case UVM_MM_INITIALIZE: {
		struct uvm_mm_initialize_params p;
		struct file *va_file;

		if (copy_from_user(&p, up, sizeof(p)))
			return -EFAULT;
		/*
		 * uvm_api_mm_initialize(): uvmFd must be an initialized UVM file;
		 * stub: its va_space_mm is never enabled (no HMM, no ATS), so
		 * the answer is NV_WARN_NOTHING_TO_DO: the MM fd is not needed.
		 */
		va_file = fget(p.uvm_fd);
		if (!va_file || va_file->f_op != &nvstub_uvm_fops ||
		    !nvstub_uvm_ready(va_file->private_data))
			p.rm_status = NV_ERR_INVALID_ARGUMENT;
		else
			p.rm_status = NV_WARN_NOTHING_TO_DO;
		if (va_file)
			fput(va_file);
		return copy_to_user(up, &p, sizeof(p)) ? -EFAULT : 0;
	}
	case UVM_PAGEABLE_MEM_ACCESS: {
		struct uvm_pageable_mem_access_params p;

		if (copy_from_user(&p, up, sizeof(p)))
			return -EFAULT;
		if (!nvstub_uvm_ready(uf)) {
			p.rm_status = NV_ERR_ILLEGAL_ACTION;
		} else {
			/* no HMM, no ATS: pageable memory is not GPU-accessible */
			p.pageable_mem_access = 0;
			p.rm_status = NV_OK;
		}
		return copy_to_user(up, &p, sizeof(p)) ? -EFAULT : 0;
	}
	}
	for (i = 0; i < ARRAY_SIZE(nvstub_uvm_cmds); i++)
		if (nvstub_uvm_cmds[i].nr == cmd)
			return nvstub_uvm_routed(uf, &nvstub_uvm_cmds[i], up);
	return -EINVAL;
}

static int nvstub_uvm_mmap(struct file *file, struct vm_area_struct *vma)
{
	return nvstub_uvm_ready(file->private_data) ? -EINVAL : -EBADFD;
}

static const struct file_operations nvstub_uvm_fops = {
	.owner = THIS_MODULE,
	.open = nvstub_uvm_open,
	.release = nvstub_uvm_release,
	.unlocked_ioctl = nvstub_uvm_ioctl,
	.compat_ioctl = nvstub_uvm_ioctl,
	.mmap = nvstub_uvm_mmap,
};

/* nvGpuOpsCreateClient(), at load (uvm_global.c) */
static int nvstub_uvm_session_create(void)
{
	struct nvstub_call call = { .kernel = true };

	return nvstub_rm_alloc_kparams(&call, 0, 0, &nvstub_uvm_session.client,
				       NV01_ROOT_CLIENT, NULL) ? -ENOMEM : 0;
}

static void nvstub_uvm_session_destroy(void)
{
	struct nvstub_call call = { .kernel = true };

	if (!nvstub_uvm_session.client)
		return;
	mutex_lock(&nvstub_rm_lock);
	nvstub_rm_free(&call, nvstub_uvm_session.client, nvstub_uvm_session.client);
	mutex_unlock(&nvstub_rm_lock);
	nvstub_uvm_session.client = 0;
}

int nvstub_uvm_init(void)
{
	int ret;

	BUILD_BUG_ON(NVSTUB_MAX_GPUS > NVSTUB_UVM_MAX_GPUS);
	ret = nvstub_uvm_session_create();
	if (ret)
		goto err_session;
	ret = alloc_chrdev_region(&nvstub_uvm_dev, 0, NVSTUB_UVM_MINORS,
				  "nvidia-uvm");
	if (ret)
		goto err_session;
	cdev_init(&nvstub_uvm_cdev, &nvstub_uvm_fops);
	nvstub_uvm_cdev.owner = THIS_MODULE;
	ret = cdev_add(&nvstub_uvm_cdev, nvstub_uvm_dev, NVSTUB_UVM_MINORS);
	if (ret)
		goto err_region;
	return 0;

err_region:
	unregister_chrdev_region(nvstub_uvm_dev, NVSTUB_UVM_MINORS);
err_session:
	nvstub_uvm_session_destroy();
	return ret;
}

void nvstub_uvm_exit(void)
{
	cdev_del(&nvstub_uvm_cdev);
	unregister_chrdev_region(nvstub_uvm_dev, NVSTUB_UVM_MINORS);
	nvstub_uvm_session_destroy();
}
