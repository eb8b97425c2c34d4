// SPDX-License-Identifier: GPL-2.0
/*
 * GPU virtual address spaces: FERMI_VASPACE_A objects and a device's default
 * one, NV50_MEMORY_VIRTUAL reservations in them, RM_MAP_MEMORY_DMA and
 * RM_UNMAP_MEMORY_DMA, and FERMI_CONTEXT_SHARE_A, with the checks and status
 * codes of src/nvidia/src/kernel/gpu/mem_mgr/vaspace_api.c,
 * mem_mgr/vaspace.c (vaspaceGetByHandleOrDeviceDefault), mem_mgr/gpu_vaspace.c
 * (the VA limits), mem_mgr/virtual_mem.c (virtmemMapTo, virtmemUnmapFrom) and
 * gpu/fifo/kernel_ctxshare.c.
 *
 * A VA space is RM's VA heap (the ranges its virtual allocations reserved),
 * a list of mappings, through which the engine reads rings, and the page
 * tables those mappings need, as video memory of the heap's (below); an
 * externally owned one gets its mappings and tables from UVM.
 */
#include <linux/mm.h>
#include <linux/slab.h>

#include "nvstub.h"

/* gvaspaceGetReservedVaspaceBase(): VA below 1 MiB is never handed out */
#define NVSTUB_VA_START_MIN	(1ull << 20)
/* kern_gmmu_fmt_gh10x.c: the root level's virtAddrBitHi is 56 on Hopper */
#define NVSTUB_VA_LIMIT_MAX	((1ull << 57) - 1)
#define NVSTUB_VA_PAGE		(4ull << 10)
#define NVSTUB_MAX_VA_RANGES	4096	/* stub: per VA space */
#define NVSTUB_MAX_VA_MAPS	4096	/* stub: per VA space */
#define NVSTUB_MAX_SUBCTX	64	/* VEIDs of a TSG */

/*
 * Page tables (rule 5).  gmmu_walk.c _gmmuWalkCBLevelAlloc(): each level of
 * the walk is a memdesc of the level's whole size (mmuFmtLevelSize) in the
 * PDE aperture, video memory unless a registry key says otherwise, made when
 * a mapping first reaches it (mmuWalkMap) and freed when its last entry goes
 * (mmuWalkUnmap); the PDB, the root, comes with the VA space
 * (gvaspaceConstruct_).  Hopper's levels (kern_gmmu_fmt_gh10x.c): below the
 * root, 4 KiB tables of 512 PDEs covering 2^56, 2^47 and 2^38 bytes, PD0
 * (256 dual PDEs of 16 bytes: 2^29) and the small-page PT (512 PTEs: 2^21).
 * RM charges none of it to a process: only HEAP_FREE shows it.  An
 * externally owned VA space's tables are UVM's (uvm_page_tree.c), made from
 * the same heap and charged to no one either: the same walk, with the root
 * made at UVM's registration.
 * stub: every mapping uses small pages (a 64 KiB big-page PT is 256 bytes,
 * so the stub errs high) and the root is 4 KiB.
 */
#define NVSTUB_PT_BYTES		(4ull << 10)
static const u8 nvstub_pt_shift[] = { 56, 47, 38, 29, 21 };

/* Each table (level L, index I) a mapping of [VA, END] reaches, top down. */
#define nvstub_for_each_table(l, i, va, end)				\
	for (l = 0; l < ARRAY_SIZE(nvstub_pt_shift); l++)		\
		for (i = (va) >> nvstub_pt_shift[l];			\
		     i <= (end) >> nvstub_pt_shift[l]; i++)

static unsigned long nvstub_pt_key(unsigned int l, u64 i)
{
	return ((unsigned long)l << 60) | i;
}

u32 nvstub_pt_take_root(struct nvstub_gpu *gpu)
{
	return nvstub_heap_take(gpu, NVSTUB_PT_BYTES);
}

void nvstub_pt_give_root(struct nvstub_gpu *gpu)
{
	nvstub_heap_give(gpu, NVSTUB_PT_BYTES);
}

/*
 * Drop the first N references nvstub_pt_get() takes for [VA, END] (all:
 * ULONG_MAX); a table whose last user goes is freed.
 */
static void nvstub_pt_put(struct nvstub_vas *vas, u64 va, u64 end,
			  unsigned long n)
{
	unsigned long key, users;
	unsigned int l;
	u64 i;

	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_for_each_table(l, i, va, end) {
		if (!n--)
			return;
		key = nvstub_pt_key(l, i);
		users = xa_to_value(xa_load(&vas->pt, key));
		if (WARN_ON(!users))
			continue;
		if (users == 1) {
			xa_erase(&vas->pt, key);
			nvstub_heap_give(vas->gpu, NVSTUB_PT_BYTES);
		} else {
			/* an existing entry: no allocation */
			xa_store(&vas->pt, key, xa_mk_value(users - 1),
				 GFP_KERNEL);
		}
	}
}

/* A reference on every table a mapping of [VA, END] needs. */
static u32 nvstub_pt_get(struct nvstub_vas *vas, u64 va, u64 end)
{
	unsigned long key, users, done = 0;
	unsigned int l;
	u32 status;
	u64 i;

	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_for_each_table(l, i, va, end) {
		key = nvstub_pt_key(l, i);
		users = xa_to_value(xa_load(&vas->pt, key));
		if (!users) {
			status = nvstub_heap_take(vas->gpu, NVSTUB_PT_BYTES);
			if (status)
				goto undo;
		}
		if (xa_is_err(xa_store(&vas->pt, key, xa_mk_value(users + 1),
				       GFP_KERNEL))) {
			if (!users)
				nvstub_heap_give(vas->gpu, NVSTUB_PT_BYTES);
			status = NV_ERR_NO_MEMORY;
			goto undo;
		}
		done++;
	}
	return NV_OK;
undo:
	nvstub_pt_put(vas, va, end, done);
	return status;
}

static void nvstub_vas_release(struct kref *ref)
{
	struct nvstub_vas *vas = container_of(ref, struct nvstub_vas, ref);

	/*
	 * Every user is gone.  Mappings are each owned by a virtual
	 * allocation or a UVM mapping, which hold references, so none is left
	 * nor any page table, and the root went with its owner.
	 */
	WARN_ON(!list_empty(&vas->maps) || !xa_empty(&vas->pt) ||
		vas->root_owner);
	WARN_ON(!list_empty(&vas->ranges));	/* each holds a reference */
	xa_destroy(&vas->pt);
	kfree(vas);
}

/*
 * OWNER (the FERMI_VASPACE_A object or the device) makes an RM VA space, and
 * with it its PDB; an externally owned one gets its root from UVM.
 */
struct nvstub_vas *nvstub_vas_create(struct nvstub_gpu *gpu, u64 start,
				     u64 limit, bool external,
				     const void *owner)
{
	struct nvstub_vas *vas;

	lockdep_assert_held(&nvstub_rm_lock);
	vas = kzalloc(sizeof(*vas), GFP_KERNEL);
	if (!vas)
		return NULL;
	if (!external) {
		if (nvstub_pt_take_root(gpu)) {
			kfree(vas);
			return NULL;
		}
		vas->root_owner = owner;
	}
	xa_init(&vas->pt);
	kref_init(&vas->ref);
	vas->gpu = gpu;
	vas->start = start;
	vas->limit = limit;
	vas->external = external;
	INIT_LIST_HEAD(&vas->ranges);
	INIT_LIST_HEAD(&vas->maps);
	spin_lock_init(&vas->lock);
	return vas;
}

/* OWNER goes: the PDB it made goes with it (resserv frees its users first). */
void nvstub_vas_drop_root(struct nvstub_vas *vas, const void *owner)
{
	lockdep_assert_held(&nvstub_rm_lock);
	if (vas && owner && vas->root_owner == owner) {
		vas->root_owner = NULL;
		nvstub_pt_give_root(vas->gpu);
	}
}

void nvstub_vas_get(struct nvstub_vas *vas)
{
	kref_get(&vas->ref);
}

void nvstub_vas_put(struct nvstub_vas *vas)
{
	if (vas)
		kref_put(&vas->ref, nvstub_vas_release);
}

/*
 * vaspaceGetByHandleOrDeviceDefault(): H_VA_SPACE names a FERMI_VASPACE_A of
 * the client, or 0 the device's default VA space (none in the device's
 * MULTIPLE_VASPACES mode; a named one none in SINGLE_VASPACE mode).  No
 * reference is taken.  VAS_OBJ gets the named object (NULL for the default).
 */
u32 nvstub_vas_lookup(struct nvstub_client *c, struct nvstub_object *dev,
		      u32 h_va_space, struct nvstub_vas **out,
		      struct nvstub_object **vas_obj)
{
	struct nvstub_object *o;

	lockdep_assert_held(&nvstub_rm_lock);
	if (vas_obj)
		*vas_obj = NULL;
	if (!h_va_space) {
		if (dev->dev.va_mode == NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES)
			return NV_ERR_INVALID_STATE;
		if (!dev->dev.vas) {
			dev->dev.vas = nvstub_vas_create(dev->gpu,
							 NVSTUB_VA_START_MIN,
							 NVSTUB_VA_LIMIT_MAX,
							 false, dev);
			if (!dev->dev.vas)
				return NV_ERR_NO_MEMORY;
		}
		*out = dev->dev.vas;
		return NV_OK;
	}
	/* serverutilGetResourceRefWithType() */
	o = nvstub_object_find(c, h_va_space);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != FERMI_VASPACE_A)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	if (o->device->dev.va_mode == NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE)
		return NV_ERR_INVALID_STATE;
	if (o->gpu != dev->gpu)
		return NV_ERR_INVALID_DEVICE;	/* stub: one GPU per device */
	*out = o->vas;
	if (vas_obj)
		*vas_obj = o;
	return NV_OK;
}

/* resserv's refAddDependant(): OBJ is freed when ON is. */
void nvstub_object_depend(struct nvstub_object *obj, struct nvstub_object *on)
{
	lockdep_assert_held(&nvstub_rm_lock);
	if (!on)
		return;
	obj->depends_on = on;
	list_add_tail(&obj->dep_node, &on->dependants);
}

/* --- FERMI_VASPACE_A (vaspaceapiConstruct) */

u32 nvstub_vaspace_construct(struct nvstub_call *call,
			     struct nvstub_object *obj, void *params)
{
	struct nv_vaspace_allocation_parameters *p = params;
	struct nvstub_object *dev = obj->device;
	struct nvstub_vas *vas;
	u64 start, limit;
	u32 status;

	if (dev->dev.va_mode == NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE)
		return NV_ERR_INVALID_STATE;	/* "Per channel vaspace binding option has to be enabled!" */

	switch (p->index) {
	case NV_VASPACE_ALLOCATION_INDEX_GPU_NEW:
		break;
	case NV_VASPACE_ALLOCATION_INDEX_GPU_HOST:
		/* BAR1's VA space: kernel clients only */
		return call->kernel ? NV_ERR_NOT_SUPPORTED : NV_ERR_INVALID_ARGUMENT;
	case NV_VASPACE_ALLOCATION_INDEX_GPU_DEVICE:
		status = nvstub_vas_lookup(obj->client, dev, 0, &vas, NULL);
		if (status)
			return NV_ERR_INVALID_STATE;
		nvstub_vas_get(vas);
		vas->api_objs++;
		obj->vas = vas;
		p->va_base = vas->start;
		p->va_size = vas->limit + 1;
		return NV_OK;
	default:
		/* the global and FLA VA spaces: none on this GPU (stub) */
		return NV_ERR_INVALID_STATE;
	}

	if (p->big_page_size && p->big_page_size != NV_VASPACE_BIG_PAGE_SIZE_64K &&
	    p->big_page_size != NV_VASPACE_BIG_PAGE_SIZE_128K)
		return NV_ERR_INVALID_ARGUMENT;

	/* gvaspaceConstruct(): vaSize is VA_LIMIT + 1; 0 is the HW maximum */
	if (p->va_size) {
		limit = p->va_size - 1;
		if (limit > NVSTUB_VA_LIMIT_MAX)
			return NV_ERR_INVALID_ARGUMENT;
	} else {
		limit = NVSTUB_VA_LIMIT_MAX;
	}
	if (p->va_base)
		start = p->va_base;
	else if (p->flags & NV_VASPACE_ALLOCATION_FLAGS_ALLOW_ZERO_ADDRESS)
		start = 0;
	else
		start = NVSTUB_VA_START_MIN;
	if (start > limit)
		return NV_ERR_INVALID_ARGUMENT;

	vas = nvstub_vas_create(obj->gpu, start, limit,
				p->flags & NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED,
				obj);
	if (!vas)
		return NV_ERR_NO_MEMORY;
	vas->api_objs = 1;
	obj->vas = vas;
	/* "Return the actual VAS base and size." */
	p->va_base = start;
	p->va_size = limit + 1;
	return NV_OK;
}

/*
 * vaspaceapiDestruct(): the VA space, and a PDB made for it, go with the
 * last handle on it (vmmDestroyVaspace); while a duplicate is left, the
 * PDB its maker made is handed on to the handles left.
 */
void nvstub_vaspace_destruct(struct nvstub_object *obj)
{
	struct nvstub_vas *vas = obj->vas;

	vas->api_objs--;
	if (vas->root_owner == obj && vas->api_objs)
		vas->root_owner = vas;
	if (!vas->api_objs)
		nvstub_vas_drop_root(vas, vas);
	nvstub_vas_drop_root(vas, obj);
	nvstub_vas_put(vas);
}

/* --- RM's VA heap: virtual allocations (NV50_MEMORY_VIRTUAL) */

/*
 * Reserve SIZE bytes at *VA (FIXED) or at the lowest ALIGN-aligned free
 * address; NV_ERR_NO_MEMORY when there is no room, as RM's heap.
 */
u32 nvstub_vas_reserve(struct nvstub_vas *vas, u64 size, u64 align,
		       bool fixed, u64 *va, struct nvstub_va_range **out)
{
	struct nvstub_va_range *r, *nr;
	struct list_head *before;
	u64 at, end;

	lockdep_assert_held(&nvstub_rm_lock);
	if (!size || vas->nranges >= NVSTUB_MAX_VA_RANGES)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	align = max_t(u64, align, NVSTUB_VA_PAGE);
	if (!is_power_of_2(align))
		return NV_ERR_INVALID_ARGUMENT;
	at = fixed ? *va : ALIGN(vas->start, align);
	if (fixed && !IS_ALIGNED(at, NVSTUB_VA_PAGE))
		return NV_ERR_INVALID_OFFSET;

	/* the list is sorted by address; first fit */
	before = &vas->ranges;
	list_for_each_entry(r, &vas->ranges, node) {
		if (check_add_overflow(at, size - 1, &end))
			return NV_ERR_NO_MEMORY;
		if (end < r->va)
			break;
		if (at <= r->va + r->size - 1) {
			if (fixed)
				return NV_ERR_NO_MEMORY;
			at = r->va + r->size;
			if (at < r->va)
				return NV_ERR_NO_MEMORY;
			at = ALIGN(at, align);
		}
		before = &r->node;
	}
	if (at < vas->start || check_add_overflow(at, size - 1, &end) ||
	    end > vas->limit)
		return NV_ERR_NO_MEMORY;

	nr = kzalloc(sizeof(*nr), GFP_KERNEL);
	if (!nr)
		return NV_ERR_NO_MEMORY;
	nvstub_vas_get(vas);
	nr->vas = vas;
	nr->va = at;
	nr->size = size;
	list_add(&nr->node, before);
	vas->nranges++;
	*va = at;
	*out = nr;
	return NV_OK;
}

/*
 * A virtual allocation neither lazy nor externally managed, or sparse, pins
 * the page tables of its whole range when it is made, with no mapping
 * (gpu_vaspace.c gvaspaceAlloc: mmuWalkReserveEntries / mmuWalkSparsify),
 * until it goes: a table for each level the range reaches, shared with the
 * mappings made in it.  RM first reserves its page-table pool for the
 * worst case, every table new (virtual_mem.c, virtmemReserveMempool), so a
 * range whose tables cannot all be new fails at once, NV_ERR_NO_MEMORY,
 * with nothing taken -- and the walk below is bounded by the heap.
 */
u32 nvstub_vas_pin(struct nvstub_va_range *r)
{
	struct nvstub_gpu *gpu = r->vas->gpu;
	u64 end = r->va + r->size - 1, tables = 0;
	unsigned int l;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	for (l = 0; l < ARRAY_SIZE(nvstub_pt_shift); l++)
		tables += (end >> nvstub_pt_shift[l]) -
			  (r->va >> nvstub_pt_shift[l]) + 1;
	if (tables > (gpu->heap_total - gpu->heap_used) / NVSTUB_PT_BYTES)
		return NV_ERR_NO_MEMORY;
	status = nvstub_pt_get(r->vas, r->va, end);
	if (!status)
		r->pinned = true;
	return status;
}

/* The range goes, with every mapping OWNER made in it. */
void nvstub_vas_unreserve(struct nvstub_va_range *r, const void *owner)
{
	struct nvstub_vas *vas = r->vas;

	lockdep_assert_held(&nvstub_rm_lock);
	nvstub_vas_unmap(vas, ~0ull, owner);
	if (r->pinned)
		nvstub_pt_put(vas, r->va, r->va + r->size - 1, ULONG_MAX);
	list_del(&r->node);
	vas->nranges--;
	kfree(r);
	nvstub_vas_put(vas);
}

/* --- mappings */

u32 nvstub_vas_map(struct nvstub_vas *vas, u64 va, u64 length,
		   struct nvstub_mem *mem, u64 mem_offset, const void *owner,
		   struct nvstub_object *mappable,
		   struct nvstub_object *context)
{
	struct nvstub_va_map *m, *nm;
	u32 status;
	u64 end;

	lockdep_assert_held(&nvstub_rm_lock);
	if (!length || check_add_overflow(va, length - 1, &end))
		return NV_ERR_INVALID_LIMIT;
	if (vas->nmaps >= NVSTUB_MAX_VA_MAPS)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	nm = kzalloc(sizeof(*nm), GFP_KERNEL);
	if (!nm)
		return NV_ERR_NO_MEMORY;
	nm->va = va;
	nm->length = length;
	nm->mem = mem;
	nm->mem_offset = mem_offset;
	nm->owner = owner;
	nm->vas = vas;
	nm->mappable = mappable;
	nm->context = context;
	INIT_LIST_HEAD(&nm->mappable_node);
	INIT_LIST_HEAD(&nm->context_node);

	/* the list changes only under the RM lock, which we hold */
	spin_lock(&vas->lock);
	list_for_each_entry(m, &vas->maps, node) {
		if (va <= m->va + m->length - 1 && m->va <= end) {
			spin_unlock(&vas->lock);
			kfree(nm);
			return NV_ERR_STATE_IN_USE;	/* stub: no remapping */
		}
	}
	spin_unlock(&vas->lock);
	status = nvstub_pt_get(vas, va, end);
	if (status) {
		kfree(nm);
		return status;
	}
	nvstub_mem_get(mem);
	spin_lock(&vas->lock);
	list_add_tail(&nm->node, &vas->maps);
	vas->nmaps++;
	spin_unlock(&vas->lock);
	if (mappable)
		list_add_tail(&nm->mappable_node, &mappable->map_backrefs);
	if (context)
		list_add_tail(&nm->context_node, &context->ctx_backrefs);
	return NV_OK;
}

/* A mapping taken off its VA space's list: its tables and memory go. */
static void nvstub_va_map_free(struct nvstub_va_map *m)
{
	list_del(&m->mappable_node);
	list_del(&m->context_node);
	nvstub_pt_put(m->vas, m->va, m->va + m->length - 1, ULONG_MAX);
	nvstub_mem_put(m->mem);
	kfree(m);
}

/*
 * _clientUnmapInterBackRefMappings(): OBJ is freed or invalidated, and so
 * is every mapping made of it or in its context.
 */
void nvstub_vas_unmap_backrefs(struct nvstub_object *obj)
{
	struct nvstub_va_map *m;

	lockdep_assert_held(&nvstub_rm_lock);
	while ((m = list_first_entry_or_null(&obj->map_backrefs,
					     struct nvstub_va_map,
					     mappable_node)) ||
	       (m = list_first_entry_or_null(&obj->ctx_backrefs,
					     struct nvstub_va_map,
					     context_node))) {
		spin_lock(&m->vas->lock);
		list_del(&m->node);
		m->vas->nmaps--;
		spin_unlock(&m->vas->lock);
		nvstub_va_map_free(m);
	}
}

/*
 * Remove OWNER's mapping at VA, or all of OWNER's mappings when VA is ~0;
 * returns how many went.
 */
unsigned int nvstub_vas_unmap(struct nvstub_vas *vas, u64 va,
			      const void *owner)
{
	struct nvstub_va_map *m, *tmp;
	LIST_HEAD(gone);
	unsigned int n = 0;

	lockdep_assert_held(&nvstub_rm_lock);
	spin_lock(&vas->lock);
	list_for_each_entry_safe(m, tmp, &vas->maps, node) {
		if (m->owner == owner && (va == ~0ull || m->va == va)) {
			list_move(&m->node, &gone);
			vas->nmaps--;
			n++;
		}
	}
	spin_unlock(&vas->lock);
	list_for_each_entry_safe(m, tmp, &gone, node)
		nvstub_va_map_free(m);
	return n;
}

/*
 * What the GPU reads at VA (4-byte aligned): false when nothing is mapped
 * there (an MMU fault).  Video memory never written by the CPU reads 0.
 * Any context (the engine calls it under eng_lock).
 */
bool nvstub_vas_read32(struct nvstub_vas *vas, u64 va, u32 *val)
{
	struct nvstub_va_map *m;
	struct page *page;
	bool found = false;
	u64 off;

	spin_lock(&vas->lock);
	list_for_each_entry(m, &vas->maps, node) {
		if (va < m->va || va - m->va > m->length - 4)
			continue;
		off = m->mem_offset + (va - m->va);
		if (off > m->mem->size - 4)
			break;
		page = nvstub_mem_page(m->mem, off >> PAGE_SHIFT, false);
		*val = page ? READ_ONCE(*(u32 *)(page_address(page) +
						  (off & ~PAGE_MASK))) : 0;
		found = true;
		break;
	}
	spin_unlock(&vas->lock);
	return found;
}

/* --- RM_MAP_MEMORY_DMA / RM_UNMAP_MEMORY_DMA (NVOS46 / NVOS47) */

/* The client's device or subdevice HANDLE (the mapping's hDevice). */
static u32 nvstub_dma_device(struct nvstub_client *c, u32 handle,
			     struct nvstub_object **out)
{
	struct nvstub_object *o = nvstub_object_find(c, handle);

	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != NV01_DEVICE_0 && o->hclass != NV20_SUBDEVICE_0)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	*out = o;
	return NV_OK;
}

/* The virtual allocation HANDLE names (hDma); stub: no context DMAs. */
static u32 nvstub_dma_virtual(struct nvstub_client *c, u32 handle,
			      struct nvstub_object **out)
{
	struct nvstub_object *o = nvstub_object_find(c, handle);

	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != NV50_MEMORY_VIRTUAL || !o->mem.mem->range)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	*out = o;
	return NV_OK;
}

static u32 nvstub_map_dma(struct nvstub_call *call, u32 h_client,
			  u32 h_device, u32 h_dma, u32 h_memory, u64 offset,
			  u64 length, u32 flags, u64 *dma_offset)
{
	struct nvstub_object *dev, *virt, *mo;
	struct nvstub_va_range *r;
	struct nvstub_mem *vmem;
	struct nvstub_client *c;
	u64 va, adjust, end;
	u32 status;

	lockdep_assert_held(&nvstub_rm_lock);
	status = nvstub_client_get(call, h_client, &c);
	if (status)
		return status;
	status = nvstub_dma_device(c, h_device, &dev);
	if (status)
		return status;
	status = nvstub_dma_virtual(c, h_dma, &virt);
	if (status)
		return status;
	mo = nvstub_object_find(c, h_memory);
	if (!mo)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (mo->hclass != NV01_MEMORY_LOCAL_USER &&
	    mo->hclass != NV01_MEMORY_SYSTEM)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	if (mo->gpu != dev->gpu || virt->gpu != dev->gpu)
		return NV_ERR_INVALID_DEVICE;
	vmem = virt->mem.mem;
	r = vmem->range;
	/* stub: an externally owned VA space's page tables are UVM's */
	if (r->vas->external)
		return NV_ERR_INVALID_STATE;

	/* virtmemMapTo(): "Validate the offset and limit passed in." */
	if (!length)
		return NV_ERR_INVALID_LIMIT;
	if (check_add_overflow(offset, length, &end) || end > mo->mem.mem->size)
		return NV_ERR_INVALID_BASE;

	/*
	 * dmaOffset is relative to the virtual allocation, or absolute with
	 * DMA_OFFSET_FIXED; the physical misalignment (pteAdjust) is added to
	 * the address returned, whether or not the input had it.
	 */
	va = (flags & NVOS46_FLAGS_DMA_OFFSET_FIXED) ? *dma_offset :
						       r->va + *dma_offset;
	adjust = offset & (NVSTUB_VA_PAGE - 1);
	va &= ~(NVSTUB_VA_PAGE - 1);
	if (check_add_overflow(va, adjust + length, &end) || va < r->va ||
	    end > r->va + r->size)
		return NV_ERR_INVALID_LIMIT;
	status = nvstub_vas_map(r->vas, va, ALIGN(adjust + length, NVSTUB_VA_PAGE),
				mo->mem.mem, offset - adjust, vmem, mo, dev);
	if (status)
		return status;
	*dma_offset = va + adjust;
	return NV_OK;
}

u32 nvstub_esc_map_memory_dma(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos46_parameters_v580 *n = buf;
	struct nvos46_parameters *o = buf;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	if (size == sizeof(*n))
		status = nvstub_map_dma(call, n->h_client, n->h_device, n->h_dma,
					n->h_memory, n->offset, n->length,
					n->flags, &n->dma_offset);
	else
		status = nvstub_map_dma(call, o->h_client, o->h_device, o->h_dma,
					o->h_memory, o->offset, o->length,
					o->flags, &o->dma_offset);
	mutex_unlock(&nvstub_rm_lock);
	if (size == sizeof(*n))
		n->status = status;
	else
		o->status = status;
	return NV_OK;
}

/* virtmemUnmapFrom(): the mapping made at exactly dmaOffset. */
u32 nvstub_esc_unmap_memory_dma(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos47_parameters *p = buf;
	struct nvstub_object *dev, *virt;
	struct nvstub_client *c;
	struct nvstub_va_range *r;
	u64 va;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (!status)
		status = nvstub_dma_device(c, p->h_device, &dev);
	if (!status)
		status = nvstub_dma_virtual(c, p->h_dma, &virt);
	if (!status && !nvstub_object_find(c, p->h_memory))
		status = NV_ERR_OBJECT_NOT_FOUND;
	if (!status) {
		r = virt->mem.mem->range;
		va = p->dma_offset & ~(NVSTUB_VA_PAGE - 1);
		/* stub: from 550 a partial unmap (size) is not simulated */
		if (size == sizeof(*p) && p->size)
			status = NV_ERR_NOT_SUPPORTED;
		else if (!nvstub_vas_unmap(r->vas, va, virt->mem.mem))
			status = NV_ERR_INVALID_OBJECT_HANDLE;	/* intermapGetDmaMapping() */
	}
	mutex_unlock(&nvstub_rm_lock);
	/* the status is the last word: at 32 before 550, 40 from */
	*(u32 *)((u8 *)buf + size - 8) = status;
	return NV_OK;
}

/* --- FERMI_CONTEXT_SHARE_A (kctxshareapiConstruct, kctxshareInitCommon) */

u32 nvstub_ctxshare_construct(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params)
{
	struct nv_ctxshare_allocation_parameters *p = params;
	struct nvstub_tsg *tsg = obj->parent->tsg;
	struct nvstub_object *vas_obj = NULL;
	struct nvstub_ctxshare *cs;
	struct nvstub_vas *vas;
	u32 id, status;
	int i;

	if (tsg->legacy) {
		/* "we use the parent TSG's pVAS rather than the hVASpace param" */
		vas = tsg->vas;
	} else {
		status = nvstub_vas_lookup(obj->client, obj->device,
					   p->h_va_space, &vas, &vas_obj);
		if (status)
			return status;
	}
	/* "For external VAS, create subcontext only after SetPageDirectory()" */
	if (vas->external && !vas->page_dir)
		return NV_ERR_INVALID_STATE;

	switch (p->flags & NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_MASK) {
	case NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC:
		id = 0;
		break;
	case NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC:
		/* a free VEID from 63 down to 1, else 0 */
		id = 0;
		for (i = NVSTUB_MAX_SUBCTX - 1; i > 0; i--) {
			if (!(tsg->subctx_used & BIT_ULL(i))) {
				id = i;
				break;
			}
		}
		break;
	case NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED:
		id = p->subctx_id;
		break;
	default:
		return NV_ERR_INVALID_ARGUMENT;
	}
	/* the VEID heap's fixed-address allocation fails when it is taken */
	if (id >= NVSTUB_MAX_SUBCTX || (tsg->subctx_used & BIT_ULL(id)))
		return NV_ERR_NO_MEMORY;
	cs = kzalloc(sizeof(*cs), GFP_KERNEL);
	if (!cs)
		return NV_ERR_NO_MEMORY;
	kref_init(&cs->ref);
	tsg->subctx_used |= BIT_ULL(id);
	kref_get(&tsg->ref);
	cs->tsg = tsg;
	nvstub_vas_get(vas);
	cs->vas = vas;
	cs->subctx_id = id;
	obj->ctxshare = cs;
	p->subctx_id = id;
	nvstub_object_depend(obj, vas_obj);
	return NV_OK;
}

/* the last handle of a share: its VEID goes back to the TSG that made it */
static void nvstub_ctxshare_release(struct kref *ref)
{
	struct nvstub_ctxshare *cs = container_of(ref, struct nvstub_ctxshare,
						  ref);

	cs->tsg->subctx_used &= ~BIT_ULL(cs->subctx_id);
	nvstub_tsg_put(cs->tsg);
	nvstub_vas_put(cs->vas);
	kfree(cs);
}

void nvstub_ctxshare_destruct(struct nvstub_object *obj)
{
	lockdep_assert_held(&nvstub_rm_lock);
	kref_put(&obj->ctxshare->ref, nvstub_ctxshare_release);
}

/*
 * kctxshareapiCopyConstruct(): the duplicate, under a TSG of its client
 * (the class's parent), shares its source's data -- VA space, VEID, the
 * source's TSG -- and depends on its client's VA space object of that VA
 * space under its device, if there is one.  (RM also makes it depend on
 * its TSG's graphics-context object, which the stub does not model as an
 * object: it goes with its TSG, its parent, all the same.)  A channel may
 * name it only under its own parent TSG (nvstub_chan_vas).
 */
void nvstub_ctxshare_dup(struct nvstub_object *obj, struct nvstub_object *src)
{
	struct nvstub_ctxshare *cs = src->ctxshare;
	struct nvstub_object *o;

	lockdep_assert_held(&nvstub_rm_lock);
	kref_get(&cs->ref);
	obj->ctxshare = cs;
	list_for_each_entry(o, &obj->parent->parent->children, sibling)
		if (o->hclass == FERMI_VASPACE_A && !o->invalid &&
		    o->vas == cs->vas) {
			nvstub_object_depend(obj, o);
			break;
		}
}
