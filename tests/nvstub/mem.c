// SPDX-License-Identifier: GPL-2.0
/*
 * Memory: the simulated video-memory heap, system memory backed by real
 * pages, RM_VID_HEAP_CONTROL, RM_ALLOC_MEMORY's size query, RM_MAP_MEMORY's
 * mapping contexts and the mmap that follows them. Checks and status codes
 * follow src/nvidia/src/kernel/mem_mgr ({standard,video,system}_mem),
 * gpu/mem_mgr/mem_mgr, rmapi_deprecated_{vidheapctrl,allocmemory},
 * mapping_cpu, osapi (rm_create_mmap_context), nv-usermap and nv-mmap.
 */
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "compat.h"
#include "nvstub.h"

#define SZ_4K_ULL	(4ull << 10)
#define SZ_64K_ULL	(64ull << 10)
#define SZ_2M_ULL	(2ull << 20)
#define SZ_512M_ULL	(512ull << 20)
#define NVSTUB_SYSMEM_COOKIE	(1ull << 52)	/* fake physical addresses */

#define NVOS33_FLAGS_SKIP_SIZE_CHECK	BIT(8)
#define NVOS33_FLAGS_CACHING_TYPE_SHIFT	23	/* 25:23 */
#define NVOS33_FLAGS_CACHING_TYPE_MASK	(7u << NVOS33_FLAGS_CACHING_TYPE_SHIFT)
#define NVOS33_FLAGS_CACHING_TYPE_DEFAULT 6

atomic_long_t nvstub_sysmem_pages;
static u32 nvstub_sysmem_seq;		/* under nvstub_rm_lock */

static void nvstub_mem_release(struct kref *ref)
{
	struct nvstub_mem *mem = container_of(ref, struct nvstub_mem, ref);
	struct page *page;
	unsigned long i;

	xa_for_each(&mem->backing, i, page) {
		__free_page(page);
		atomic_long_dec(&nvstub_sysmem_pages);
	}
	xa_destroy(&mem->backing);
	if (mem->pages) {
		for (i = 0; i < mem->npages; i++)
			if (mem->pages[i])
				__free_page(mem->pages[i]);
		atomic_long_sub(mem->npages, &nvstub_sysmem_pages);
		kvfree(mem->pages);
	}
	kfree(mem);
}

void nvstub_mem_get(struct nvstub_mem *mem)
{
	kref_get(&mem->ref);
}

void nvstub_mem_put(struct nvstub_mem *mem)
{
	kref_put(&mem->ref, nvstub_mem_release);
}

/* A kernel pointer into system memory; OFFSET is < size, the access 4-byte. */
void *nvstub_mem_ptr(struct nvstub_mem *mem, u64 offset)
{
	return page_address(mem->pages[offset >> PAGE_SHIFT]) +
	       (offset & ~PAGE_MASK);
}

/*
 * Page IDX of system memory, or of video memory's backing store: made (zeroed,
 * counted against NVSTUB_SYSMEM_CAP with system memory) when MAKE, which may
 * sleep; NULL when there is none or no room.  Without MAKE any context.
 */
struct page *nvstub_mem_page(struct nvstub_mem *mem, unsigned long idx,
			     bool make)
{
	struct page *page, *old;

	if (mem->type == NVSTUB_MEM_SYSMEM)
		return idx < mem->npages ? mem->pages[idx] : NULL;
	if (mem->type != NVSTUB_MEM_VIDMEM || idx >= mem->size >> PAGE_SHIFT)
		return NULL;
	page = xa_load(&mem->backing, idx);
	if (page || !make)
		return page;

	if (atomic_long_inc_return(&nvstub_sysmem_pages) >
	    (long)(NVSTUB_SYSMEM_CAP >> PAGE_SHIFT))
		goto uncharge;
	page = alloc_page(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN);
	if (!page)
		goto uncharge;
	old = xa_cmpxchg(&mem->backing, idx, NULL, page, GFP_KERNEL);
	if (!old)
		return page;
	__free_page(page);	/* another fault made it first, or no memory */
	atomic_long_dec(&nvstub_sysmem_pages);
	return xa_is_err(old) ? NULL : old;
uncharge:
	atomic_long_dec(&nvstub_sysmem_pages);
	return NULL;
}

static u32 nvstub_attr_location(u32 attr)
{
	return (attr & NVOS32_ATTR_LOCATION_MASK) >> NVOS32_ATTR_LOCATION_SHIFT;
}

/*
 * memmgrDeterminePageSize() for Hopper: the attr's page size, or by default
 * 2 MiB from 2 MiB up and 64 KiB below (a client allocation gets big pages);
 * PMA hands out 64 KiB at least. System memory defaults to the OS page.
 * The chosen size is written back into attr (and attr2 for huge pages).
 */
static u64 nvstub_page_size(bool vidmem, u64 size, u32 *attr, u32 *attr2)
{
	u32 ps = (*attr & NVOS32_ATTR_PAGE_SIZE_MASK) >> NVOS32_ATTR_PAGE_SIZE_SHIFT;
	u32 huge = (*attr2 & NVOS32_ATTR2_PAGE_SIZE_HUGE_MASK) >>
		   NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT;
	u64 bytes;

	if (ps == NVOS32_ATTR_PAGE_SIZE_DEFAULT) {
		if (!vidmem)
			ps = NVOS32_ATTR_PAGE_SIZE_4KB;
		else if (size >= SZ_2M_ULL)
			ps = NVOS32_ATTR_PAGE_SIZE_HUGE;
		else
			ps = NVOS32_ATTR_PAGE_SIZE_BIG;
	}
	switch (ps) {
	case NVOS32_ATTR_PAGE_SIZE_4KB:
		bytes = SZ_4K_ULL;
		break;
	case NVOS32_ATTR_PAGE_SIZE_BIG:
		bytes = SZ_64K_ULL;
		break;
	default:
		if (huge == NVOS32_ATTR2_PAGE_SIZE_HUGE_512MB) {
			bytes = SZ_512M_ULL;
		} else if (huge == NVOS32_ATTR2_PAGE_SIZE_HUGE_DEFAULT ||
			   huge == NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB) {
			bytes = SZ_2M_ULL;
			huge = NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB;
		} else {
			return 0;	/* 256 GiB pages: not on Hopper */
		}
		*attr2 = (*attr2 & ~NVOS32_ATTR2_PAGE_SIZE_HUGE_MASK) |
			 (huge << NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT);
		break;
	}
	*attr = (*attr & ~NVOS32_ATTR_PAGE_SIZE_MASK) |
		(ps << NVOS32_ATTR_PAGE_SIZE_SHIFT);
	if (vidmem && bytes < SZ_64K_ULL)
		bytes = SZ_64K_ULL;	/* _vidmemPmaAllocate(): PMA granularity */
	return bytes;
}

static struct nvstub_mem *nvstub_mem_alloc(enum nvstub_mem_type type,
					   struct nvstub_gpu *gpu, u64 size)
{
	struct nvstub_mem *mem = kzalloc(sizeof(*mem), GFP_KERNEL);

	if (!mem)
		return NULL;
	kref_init(&mem->ref);
	xa_init(&mem->backing);
	mem->handles = 1;
	mem->type = type;
	mem->gpu = gpu;
	mem->size = size;
	return mem;
}

static u32 nvstub_sysmem_populate(struct nvstub_mem *mem)
{
	unsigned long i, n = mem->size >> PAGE_SHIFT;

	if (atomic_long_add_return(n, &nvstub_sysmem_pages) >
	    (long)(NVSTUB_SYSMEM_CAP >> PAGE_SHIFT)) {
		atomic_long_sub(n, &nvstub_sysmem_pages);
		return NV_ERR_NO_MEMORY;
	}
	mem->npages = n;	/* from here the release undoes the charge */
	mem->pages = kvcalloc(n, sizeof(*mem->pages), GFP_KERNEL | __GFP_NOWARN);
	if (!mem->pages) {
		atomic_long_sub(n, &nvstub_sysmem_pages);
		mem->npages = 0;
		return NV_ERR_NO_MEMORY;
	}
	for (i = 0; i < n; i++) {
		mem->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN);
		if (!mem->pages[i])
			return NV_ERR_NO_MEMORY;
	}
	mem->cookie = NVSTUB_SYSMEM_COOKIE + ((u64)(nvstub_sysmem_seq++ & 0xfffff) << 32);
	return NV_OK;
}

/*
 * NV50_MEMORY_VIRTUAL: SIZE bytes of GPU VA reserved in the VA space hVASpace
 * names (0: the device's default), at `offset` with FIXED_ADDRESS_ALLOCATE;
 * the address comes back in `offset`.  Unless lazy or externally managed
 * (or if sparse) it pins its range's page tables (nvstub_vas_pin).
 * Freeing the VA space frees it.
 */
static u32 nvstub_virtual_construct(struct nvstub_object *obj,
				    struct nv_memory_allocation_params *p,
				    u64 size, u32 attr, u32 attr2)
{
	struct nvstub_object *vas_obj;
	struct nvstub_va_range *range;
	struct nvstub_mem *mem;
	struct nvstub_vas *vas;
	u64 va = p->offset;
	u32 status;

	status = nvstub_vas_lookup(obj->client, obj->device, p->h_va_space,
				   &vas, &vas_obj);
	if (status)
		return status;
	mem = nvstub_mem_alloc(NVSTUB_MEM_VIRTUAL, obj->gpu, size);
	if (!mem)
		return NV_ERR_NO_MEMORY;
	status = nvstub_vas_reserve(vas, size, p->alignment,
				    p->flags & NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE,
				    &va, &range);
	if (status) {
		nvstub_mem_put(mem);
		return status;
	}
	if (nv_virtual_pins_tables(p->flags)) {
		status = nvstub_vas_pin(range);
		if (status) {
			nvstub_vas_unreserve(range, mem);
			nvstub_mem_put(mem);
			return status;
		}
	}
	mem->range = range;
	obj->mem.mem = mem;
	obj->mem.owner = true;
	obj->mem.attr = attr;
	obj->mem.attr2 = attr2;
	INIT_LIST_HEAD(&obj->mem.dups);
	nvstub_object_depend(obj, vas_obj);
	p->size = size;
	p->attr = attr;
	p->attr2 = attr2;
	p->limit = size - 1;
	p->offset = va;
	return NV_OK;
}

/*
 * vidmemConstruct()'s protection: with CC or APM on, memory is protected
 * unless attr2 asks UNPROTECTED, which CC refuses ("Non-CPR region not yet
 * created"); with neither, asking PROTECTED is refused.
 */
static u32 nvstub_vidmem_protection(struct nv_memory_allocation_params *p)
{
	u32 prot = (p->attr2 & NVOS32_ATTR2_MEMORY_PROTECTION_MASK) >>
		   NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT;

	if (nvstub_memory_protection &&
	    prot != NVOS32_ATTR2_MEMORY_PROTECTION_UNPROTECTED)
		p->flags |= NVOS32_ALLOC_FLAGS_PROTECTED;
	else if (nvstub_memory_protection == NVSTUB_PROTECTION_CC)
		return NV_ERR_INVALID_ARGUMENT;
	else if (!nvstub_memory_protection &&
		 prot == NVOS32_ATTR2_MEMORY_PROTECTION_PROTECTED)
		return NV_ERR_INVALID_ARGUMENT;
	return NV_OK;
}

/*
 * NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM, NV50_MEMORY_VIRTUAL, and the
 * parameterless NV01_MEMORY_SYSTEM_DYNAMIC handle of the size query.
 */
u32 nvstub_mem_construct(struct nvstub_object *obj, void *params)
{
	struct nv_memory_allocation_params *p = params;
	struct nvstub_gpu *gpu = obj->gpu;
	enum nvstub_mem_type type;
	struct nvstub_mem *mem;
	u64 page, size;
	u32 attr, attr2, loc, status;

	lockdep_assert_held(&nvstub_rm_lock);
	if (obj->hclass == NV01_MEMORY_SYSTEM_DYNAMIC) {
		mem = nvstub_mem_alloc(NVSTUB_MEM_DUMMY, gpu, 0);
		if (!mem)
			return NV_ERR_NO_MEMORY;
		obj->mem.mem = mem;
		obj->mem.owner = true;
		INIT_LIST_HEAD(&obj->mem.dups);
		return NV_OK;
	}

	/* stdmemValidateParams() */
	if (p->internalflags)
		return NV_ERR_INVALID_ARGUMENT;
	if (!p->size)
		return NV_ERR_INVALID_ARGUMENT;
	p->flags |= NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED;
	p->flags &= ~NVOS32_ALLOC_FLAGS_KERNEL_MAPPING_MAP;
	p->address = 0;
	if (!p->owner || p->owner == 0xFFFFFFFF ||
	    (p->owner >= HEAP_OWNER_RM_SCRATCH_BEGIN &&
	     p->owner <= HEAP_OWNER_RM_SCRATCH_END))
		return NV_ERR_INVALID_OWNER;
	if (!(p->flags & NVOS32_ALLOC_FLAGS_USE_BEGIN_END) &&
	    (p->range_lo || p->range_hi))
		return NV_ERR_INVALID_ARGUMENT;

	loc = nvstub_attr_location(p->attr);
	switch (obj->hclass) {
	case NV01_MEMORY_LOCAL_USER:	/* vidmemConstruct() */
		if (loc != NVOS32_ATTR_LOCATION_VIDMEM ||
		    (p->flags & NVOS32_ALLOC_FLAGS_VIRTUAL))
			return NV_ERR_INVALID_ARGUMENT;
		status = nvstub_vidmem_protection(p);
		if (status)
			return status;
		type = NVSTUB_MEM_VIDMEM;
		break;
	case NV01_MEMORY_SYSTEM:	/* sysmemConstruct() */
		if (loc == NVOS32_ATTR_LOCATION_VIDMEM ||
		    (p->flags & NVOS32_ALLOC_FLAGS_VIRTUAL))
			return NV_ERR_INVALID_ARGUMENT;
		type = NVSTUB_MEM_SYSMEM;
		break;
	default:			/* virtmemConstruct() */
		if (!(p->flags & NVOS32_ALLOC_FLAGS_VIRTUAL))
			return NV_ERR_INVALID_ARGUMENT;
		type = NVSTUB_MEM_VIRTUAL;
		break;
	}

	attr = p->attr;
	attr2 = p->attr2;
	page = nvstub_page_size(type == NVSTUB_MEM_VIDMEM, p->size, &attr, &attr2);
	if (!page)
		return NV_ERR_INVALID_STATE;
	if (p->size > U64_MAX - (page - 1))
		return NV_ERR_INVALID_LIMIT;
	size = ALIGN(p->size, page);

	if (type == NVSTUB_MEM_VIDMEM && size > gpu->heap_total - gpu->heap_used)
		return NV_ERR_NO_MEMORY;
	if (type == NVSTUB_MEM_SYSMEM && size > NVSTUB_SYSMEM_CAP)
		return NV_ERR_NO_MEMORY;

	if (type == NVSTUB_MEM_VIRTUAL)
		return nvstub_virtual_construct(obj, p, size, attr, attr2);

	mem = nvstub_mem_alloc(type, gpu, size);
	if (!mem)
		return NV_ERR_NO_MEMORY;
	if (type == NVSTUB_MEM_SYSMEM) {
		status = nvstub_sysmem_populate(mem);
		if (status) {
			nvstub_mem_put(mem);
			return status;
		}
	} else if (type == NVSTUB_MEM_VIDMEM) {
		mem->protected = nvstub_memory_protection &&
				 (p->flags & NVOS32_ALLOC_FLAGS_PROTECTED);
		mem->heap_offset = gpu->heap_next;
		gpu->heap_next = (gpu->heap_next + size) % gpu->heap_total;
		gpu->heap_used += size;
		gpu->heap_allocs++;
	}

	obj->mem.mem = mem;
	obj->mem.owner = true;
	obj->mem.attr = attr;
	obj->mem.attr2 = attr2;
	INIT_LIST_HEAD(&obj->mem.dups);
	p->size = size;
	p->attr = attr;
	p->attr2 = attr2;
	p->limit = size - 1;
	p->offset = mem->heap_offset;
	return NV_OK;
}

/*
 * Freeing a handle; the memory goes with its last one (DupCount).  The
 * owner's handle passes ownership to the next handle in the ring, the dup
 * made from it most recently (_memDestructCommonWithDevice, "Choose the new
 * owner"): a kernel client's (UVM's) ownership is counted for no process.
 */
void nvstub_mem_destruct(struct nvstub_object *obj)
{
	struct nvstub_mem *mem = obj->mem.mem;

	lockdep_assert_held(&nvstub_rm_lock);
	if (obj->mem.owner && !list_empty(&obj->mem.dups))
		list_next_entry(obj, mem.dups)->mem.owner = true;
	list_del(&obj->mem.dups);
	if (--mem->handles == 0 && mem->type == NVSTUB_MEM_VIDMEM) {
		mem->gpu->heap_used -= mem->size;
		mem->gpu->heap_allocs--;
	}
	if (!mem->handles && mem->range) {
		nvstub_vas_unreserve(mem->range, mem);
		mem->range = NULL;
	}
	nvstub_mem_put(mem);
}

/* memCopyConstruct(): the dup goes into the ring right after its source. */
void nvstub_mem_dup(struct nvstub_object *dst, struct nvstub_object *src)
{
	lockdep_assert_held(&nvstub_rm_lock);
	dst->mem = src->mem;
	dst->mem.owner = false;
	list_add(&dst->mem.dups, &src->mem.dups);
	dst->mem.mem->handles++;
	nvstub_mem_get(dst->mem.mem);
}

void nvstub_heap_info(struct nvstub_gpu *gpu, u64 *total, u64 *free)
{
	lockdep_assert_held(&nvstub_rm_lock);
	*total = gpu->heap_total;
	*free = gpu->heap_total - gpu->heap_used;
}

/*
 * RM's own video memory (rule 5): PMA hands it out as it does memory
 * objects', so only the heap's free figure shows it, never PID_INFO.
 */
u32 nvstub_heap_take(struct nvstub_gpu *gpu, u64 bytes)
{
	lockdep_assert_held(&nvstub_rm_lock);
	if (bytes > gpu->heap_total - gpu->heap_used)
		return NV_ERR_NO_MEMORY;
	gpu->heap_used += bytes;
	gpu->heap_internal += bytes;
	return NV_OK;
}

void nvstub_heap_give(struct nvstub_gpu *gpu, u64 bytes)
{
	lockdep_assert_held(&nvstub_rm_lock);
	gpu->heap_used -= bytes;
	gpu->heap_internal -= bytes;
}

/* --- RM_VID_HEAP_CONTROL (rmapi_deprecated_vidheapctrl.c) */

/* The parts of AllocSize, AllocTiledPitchHeight and AllocSizeRange in common. */
struct nvstub_heap_req {
	u32 *h_memory;
	u32 *type, *flags, *attr, *attr2, *format, *compr_covg, *zcull_covg;
	u32 *ctag_offset, *owner, *partition_stride;
	u64 *size, *alignment, *offset, *limit, *address;
	u64 range_lo, range_hi;
	u32 width, height;
	s32 pitch;
};

static u32 nvstub_vid_heap_alloc(struct nvstub_call *call,
				 struct nvos32_parameters *a,
				 struct nvstub_heap_req *r)
{
	struct nv_memory_allocation_params p = {
		.owner = *r->owner,
		.type = *r->type,
		.flags = *r->flags,
		.width = r->width,
		.height = r->height,
		.pitch = r->pitch,
		.attr = *r->attr,
		.attr2 = *r->attr2,
		.format = *r->format,
		.compr_covg = *r->compr_covg,
		.zcull_covg = *r->zcull_covg,
		.range_lo = r->range_lo,
		.range_hi = r->range_hi,
		.size = *r->size,
		.alignment = *r->alignment,
		.offset = *r->offset,
		.limit = *r->limit,
		.address = *r->address,
		.ctag_offset = *r->ctag_offset,
		.h_va_space = a->h_va_space,
		.numa_node = -1,
	};
	u32 h = *r->h_memory, hclass, status;

	*r->partition_stride = 256;
	if (!(p.flags & NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED))
		h = 0;	/* RmAlloc generates one */
	if (p.flags & NVOS32_ALLOC_FLAGS_VIRTUAL)
		hclass = NV50_MEMORY_VIRTUAL;
	else if (nvstub_attr_location(p.attr) == NVOS32_ATTR_LOCATION_VIDMEM)
		hclass = NV01_MEMORY_LOCAL_USER;
	else
		hclass = NV01_MEMORY_SYSTEM;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_rm_alloc_kernel(call, a->h_root, a->h_object_parent, &h,
					hclass, &p);
	mutex_unlock(&nvstub_rm_lock);

	*r->h_memory = h;
	a->free = 0;
	a->total = 0;
	*r->size = p.size;
	*r->offset = p.offset;
	*r->attr = p.attr;
	*r->attr2 = p.attr2;
	*r->format = p.format;
	*r->limit = p.limit;
	*r->address = p.address;
	*r->compr_covg = p.compr_covg;
	*r->zcull_covg = p.zcull_covg;
	*r->ctag_offset = p.ctag_offset;
	return status;
}

#define NVSTUB_HEAP_REQ(s)						\
	.h_memory = &(s)->h_memory, .type = &(s)->type,			\
	.flags = &(s)->flags, .attr = &(s)->attr, .attr2 = &(s)->attr2,	\
	.format = &(s)->format, .compr_covg = &(s)->compr_covg,		\
	.zcull_covg = &(s)->zcull_covg, .ctag_offset = &(s)->ctag_offset,	\
	.owner = &(s)->owner, .partition_stride = &(s)->partition_stride,	\
	.size = &(s)->size, .alignment = &(s)->alignment,		\
	.offset = &(s)->offset, .limit = &(s)->limit,			\
	.address = &(s)->address

static u32 nvstub_vid_heap_info(struct nvstub_call *call,
				struct nvos32_parameters *a)
{
	struct nvstub_client *c;
	struct nvstub_object *dev;
	u64 total, free;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, a->h_root, &c);
	if (status)
		goto out;
	/* RmDeprecatedFindOrCreateSubDeviceHandle() on hObjectParent */
	dev = nvstub_object_find(c, a->h_object_parent);
	if (!dev) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	if (dev->hclass != NV01_DEVICE_0) {
		status = NV_ERR_INVALID_OBJECT_PARENT;
		goto out;
	}
	nvstub_heap_info(dev->gpu, &total, &free);
	a->free = free;
	a->total = total;		/* HEAP_SIZE + FB_TAX_SIZE (0) */
	a->data.info.base = 0;
	a->data.info.size = free;	/* the largest free block */
	a->data.info.offset = total - free;
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

u32 nvstub_esc_vid_heap(struct nvstub_call *call, struct nvos32_parameters *a)
{
	if (a->ivc_heap_number > 0)
		return NV_ERR_NOT_SUPPORTED;

	switch (a->function) {
	case NVOS32_FUNCTION_ALLOC_SIZE: {
		struct nvos32_alloc_size *s = &a->data.alloc_size;
		struct nvstub_heap_req r = {
			NVSTUB_HEAP_REQ(s),
			.width = s->width,
			.height = s->height,
		};

		if (s->flags & NVOS32_ALLOC_FLAGS_USE_BEGIN_END) {
			r.range_lo = s->range_begin;
			r.range_hi = s->range_end;
		}
		return nvstub_vid_heap_alloc(call, a, &r);
	}
	case NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT: {
		struct nvos32_alloc_tiled *s = &a->data.alloc_tiled;
		struct nvstub_heap_req r = {
			NVSTUB_HEAP_REQ(s),
			.width = s->width,
			.height = s->height,
			.pitch = s->pitch,
		};

		s->size = (u64)s->height * s->pitch;
		if (s->flags & NVOS32_ALLOC_FLAGS_USE_BEGIN_END) {
			r.range_lo = s->range_begin;
			r.range_hi = s->range_end;
		}
		return nvstub_vid_heap_alloc(call, a, &r);
	}
	case NVOS32_FUNCTION_ALLOC_SIZE_RANGE: {
		struct nvos32_alloc_range *s = &a->data.alloc_range;
		struct nvstub_heap_req r = {
			NVSTUB_HEAP_REQ(s),
			.range_lo = s->range_begin,
			.range_hi = s->range_end,
		};

		return nvstub_vid_heap_alloc(call, a, &r);
	}
	case NVOS32_FUNCTION_FREE: {
		u32 status;

		if (!(a->data.free.flags & NVOS32_FREE_FLAGS_MEMORY_HANDLE_PROVIDED))
			return NV_ERR_INVALID_ARGUMENT;
		mutex_lock(&nvstub_rm_lock);
		status = nvstub_rm_free(call, a->h_root, a->data.free.h_memory);
		mutex_unlock(&nvstub_rm_lock);
		return status;
	}
	/*
	 * _nvos32FunctionHwFree: RmFree(hRoot, hResourceHandle), whatever the
	 * handle names -- memory, a TSG, a device, the client -- and whatever
	 * the flags say.
	 */
	case NVOS32_FUNCTION_HW_FREE: {
		u32 status;

		mutex_lock(&nvstub_rm_lock);
		status = nvstub_rm_free(call, a->h_root,
					a->data.hw_free.h_resource_handle);
		mutex_unlock(&nvstub_rm_lock);
		return status;
	}
	case NVOS32_FUNCTION_INFO:
		return nvstub_vid_heap_info(call, a);
	case NVOS32_FUNCTION_RELEASE_COMPR:
	case NVOS32_FUNCTION_REACQUIRE_COMPR:
	case NVOS32_FUNCTION_GET_MEM_ALIGNMENT:
	case NVOS32_FUNCTION_HW_ALLOC:
	case NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR:
		return NV_ERR_NOT_SUPPORTED;	/* RM has them; the stub does not */
	default:
		return NV_ERR_INVALID_ARGUMENT;
	}
}

/* --- RM_ALLOC_MEMORY (rmapi_deprecated_allocmemory.c) */

#define NVOS02_FLAGS_PHYSICALITY(f)	(((f) >> 4) & 0xf)
#define NVOS02_FLAGS_LOCATION(f)	(((f) >> 8) & 0xf)
#define NVOS02_FLAGS_LOCATION_PCI	0
#define NVOS02_FLAGS_LOCATION_VIDMEM	2
#define NVOS02_FLAGS_COHERENCY(f)	(((f) >> 12) & 0xf)
#define NVOS02_FLAGS_COHERENCY_WRITE_BACK 5
#define NVOS02_FLAGS_ALLOC(f)		(((f) >> 16) & 0x3)
#define NVOS02_FLAGS_ALLOC_NONE		1
#define NVOS02_FLAGS_KERNEL_MAPPING_MAP	BIT(19)
#define NVOS02_FLAGS_MAPPING(f)		(((f) >> 30) & 0x3)
#define NVOS02_FLAGS_MAPPING_DEFAULT	0
#define NVOS32_TYPE_IMAGE		0
#define NVOS32_TYPE_NOTIFIER		13
#define NVOS32_ATTR_PHYSICALITY_SHIFT	27	/* 28:27 */
#define NVOS32_ATTR_COHERENCY_SHIFT	29	/* 31:29 */

/*
 * _rmAllocMemorySystem(): RM_ALLOC of NV01_MEMORY_SYSTEM at limit + 1 bytes,
 * owner 'shim', with the NVOS02 flags turned into NVOS32 attributes
 * (RmDeprecatedConvertOs02ToOs32Flags: a location other than PCI or video
 * memory, a coherency past WRITE_BACK, are NV_ERR_INVALID_FLAGS; only PCI
 * is system memory here).  With MAPPING_DEFAULT RM maps it at once
 * (RmMapMemory) and the escape makes the mapping context in the control
 * file FD names (rm_create_mmap_context), which the stub's RM_MAP_MEMORY
 * does in one.  When that fails the escape itself fails (*ESC, -EINVAL from
 * the ioctl) and the memory stays, status NV_OK, as RM leaves it.  pMemory
 * comes back as the mapping's address, else NULL.
 */
static u32 nvstub_alloc_memory_system(struct nvstub_call *call,
				      struct nvos02_with_fd *a, u32 *esc)
{
	struct nvos02_parameters *p = &a->params;
	struct nv_memory_allocation_params m = {
		.owner = 0x7368696D,
		.type = (p->flags & NVOS02_FLAGS_KERNEL_MAPPING_MAP) ?
			NVOS32_TYPE_NOTIFIER : NVOS32_TYPE_IMAGE,
		.size = p->limit + 1,
	};
	struct nvos33_with_fd map = {
		.params = {
			.h_client = p->h_root,
			.h_device = p->h_object_parent,
			.h_memory = p->h_object_new,
			.length = p->limit + 1,
		},
		.fd = a->fd,
	};
	u32 f = p->flags, h = p->h_object_new, status;

	if (NVOS02_FLAGS_LOCATION(f) != NVOS02_FLAGS_LOCATION_PCI ||
	    NVOS02_FLAGS_ALLOC(f) == NVOS02_FLAGS_ALLOC_NONE)
		return NV_ERR_INVALID_FLAGS;
	if (NVOS02_FLAGS_COHERENCY(f) > NVOS02_FLAGS_COHERENCY_WRITE_BACK)
		return NV_ERR_INVALID_FLAGS;
	m.attr = (NVOS32_ATTR_LOCATION_PCI << NVOS32_ATTR_LOCATION_SHIFT) |
		 ((NVOS02_FLAGS_PHYSICALITY(f) ? 1u : 2u) <<
		  NVOS32_ATTR_PHYSICALITY_SHIFT) |
		 (NVOS02_FLAGS_COHERENCY(f) << NVOS32_ATTR_COHERENCY_SHIFT);
	if (p->flags & NVOS02_FLAGS_KERNEL_MAPPING_MAP)
		m.flags |= NVOS32_ALLOC_FLAGS_KERNEL_MAPPING_MAP;
	p->p_memory = 0;
	mutex_lock(&nvstub_rm_lock);
	status = nvstub_rm_alloc_kernel(call, p->h_root, p->h_object_parent, &h,
					NV01_MEMORY_SYSTEM, &m);
	mutex_unlock(&nvstub_rm_lock);
	if (status || NVOS02_FLAGS_MAPPING(f) != NVOS02_FLAGS_MAPPING_DEFAULT)
		return status;
	map.params.h_memory = h;
	if (nvstub_esc_map_memory(call, &map) == NV_OK)
		p->p_memory = map.params.p_linear_address;
	else
		*esc = NV_ERR_INVALID_ARGUMENT;
	return NV_OK;
}

u32 nvstub_esc_alloc_memory(struct nvstub_call *call, struct nvos02_with_fd *a,
			    u32 *esc)
{
	struct nvos02_parameters *p = &a->params;
	struct nvstub_client *c;
	struct nvstub_object *dev;
	u32 status, h = p->h_object_new;

	switch (p->h_class) {
	case NV01_MEMORY_LOCAL_USER:
		break;
	case NV01_MEMORY_SYSTEM:
		return nvstub_alloc_memory_system(call, a, esc);
	case NV01_MEMORY_LOCAL_PRIVILEGED:
	case NV01_MEMORY_SYSTEM_DYNAMIC:
	case NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
	case NV01_MEMORY_FRAMEBUFFER_CONSOLE:
	case NV01_MEMORY_LIST_SYSTEM:
	case NV01_MEMORY_LIST_FBMEM:
	case NV01_MEMORY_LIST_OBJECT:
	case NV01_MEMORY_FLA:
		return NV_ERR_NOT_SUPPORTED;	/* RM has them; the stub does not */
	default:
		return NV_ERR_INVALID_CLASS;
	}

	/*
	 * _rmAllocMemoryLocalUser(): "query the heap size" (TOTAL_RAM_SIZE) and
	 * leave a dummy NV01_MEMORY_SYSTEM_DYNAMIC handle to keep clients happy.
	 */
	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_root, &c);
	if (status)
		goto out;
	dev = nvstub_object_find(c, p->h_object_parent);
	if (!dev) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	if (dev->hclass != NV01_DEVICE_0) {
		status = NV_ERR_INVALID_OBJECT_PARENT;
		goto out;
	}
	status = nvstub_rm_alloc_kernel(call, p->h_root, p->h_object_parent, &h,
					NV01_MEMORY_SYSTEM_DYNAMIC, NULL);
	if (!status)
		p->limit = dev->gpu->heap_total - 1;
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/* --- RM_MAP_MEMORY / RM_UNMAP_MEMORY */

void nvstub_cpu_maps_free(struct nvstub_object *obj)
{
	struct nvstub_cpu_mapping *m, *tmp;

	list_for_each_entry_safe(m, tmp, &obj->cpu_maps, node) {
		list_del(&m->node);
		kfree(m);
	}
	obj->ncpu_maps = 0;
}

static void nvstub_cpu_map_remove(struct nvstub_object *obj,
				  struct nvstub_cpu_mapping *m)
{
	list_del(&m->node);
	obj->ncpu_maps--;
	kfree(m);
}

/*
 * refFindCpuMappingWithFilter() with serverutilMappingFilterCurrentUserProc:
 * OBJ's mapping at ADDRESS made by the calling process, or NULL.
 */
static struct nvstub_cpu_mapping *nvstub_cpu_map_find(struct nvstub_object *obj,
						      u64 address)
{
	struct nvstub_cpu_mapping *m;

	list_for_each_entry(m, &obj->cpu_maps, node)
		if (m->address == address && m->tgid == task_tgid_nr(current))
			return m;
	return NULL;
}

/*
 * nv_add_mapping_context_to_file(): the file named by FD gets the mapping
 * context: a ctl file for system memory, a file of the memory's GPU else.
 */
static u32 nvstub_ctx_add(struct nvstub_object *obj, int fd,
			  enum nvstub_ctx_kind kind, u64 offset, u64 length)
{
	struct nvstub_mmap_ctx *ctx;
	struct nvstub_file *nf;
	struct file *f;
	u32 status = NV_OK;
	u64 first = offset >> PAGE_SHIFT;
	u64 last = (offset + length + PAGE_SIZE - 1) >> PAGE_SHIFT;

	f = fget(fd);
	if (!f)
		return NV_ERR_INVALID_ARGUMENT;
	nf = nvstub_file_lookup(f);	/* a major-195 file of ours */
	if (!nf || nvstub_file_is_ctl(nf) != (kind == NVSTUB_CTX_SYSMEM) ||
	    (nf->gpu && nf->gpu != obj->gpu)) {
		status = NV_ERR_INVALID_ARGUMENT;
		goto out;
	}

	mutex_lock(&nf->ctx_lock);
	ctx = &nf->ctx;
	if (ctx->kind != NVSTUB_CTX_NONE) {
		status = NV_ERR_STATE_IN_USE;
		goto unlock;
	}
	if (kind == NVSTUB_CTX_USERMODE) {
		ctx->db = nvstub_doorbell_create(obj->gpu);
		if (!ctx->db) {
			status = NV_ERR_NO_MEMORY;
			goto unlock;
		}
	} else {
		ctx->mem = obj->mem.mem;
		nvstub_mem_get(ctx->mem);
	}
	ctx->page_index = first;
	ctx->npages = last - first;
	ctx->kind = kind;
unlock:
	mutex_unlock(&nf->ctx_lock);
out:
	fput(f);
	return status;
}

/* The file's context ends with the file (nvidia_close). */
void nvstub_ctx_release(struct nvstub_file *nf)
{
	struct nvstub_mmap_ctx *ctx = &nf->ctx;

	mutex_lock(&nf->ctx_lock);
	if (ctx->mem)
		nvstub_mem_put(ctx->mem);
	if (ctx->db) {
		nvstub_doorbell_unlist(ctx->db);
		nvstub_doorbell_put(ctx->db);
	}
	memset(ctx, 0, sizeof(*ctx));
	mutex_unlock(&nf->ctx_lock);
}

u32 nvstub_esc_map_memory(struct nvstub_call *call, struct nvos33_with_fd *a)
{
	struct nvos33_parameters *p = &a->params;
	struct nvstub_cpu_mapping *m = NULL;
	struct nvstub_object *obj, *ctxobj;
	enum nvstub_ctx_kind kind;
	struct nvstub_client *c;
	u64 length, base, end;
	u32 status;

	/* escape.c: "Don't allow userspace to override the caching type" */
	p->flags = (p->flags & ~NVOS33_FLAGS_CACHING_TYPE_MASK) |
		   (NVOS33_FLAGS_CACHING_TYPE_DEFAULT << NVOS33_FLAGS_CACHING_TYPE_SHIFT);

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (status)
		goto out;
	obj = nvstub_object_find(c, p->h_memory);
	if (!obj) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	if (obj->hclass == HOPPER_USERMODE_A) {
		kind = NVSTUB_CTX_USERMODE;
		length = NVC361_NV_USERMODE__SIZE;
		base = obj->gpu->reg_address + NVSTUB_USERMODE_OFFSET;
	} else if (obj->hclass == NV01_MEMORY_SYSTEM) {
		kind = NVSTUB_CTX_SYSMEM;
		length = obj->mem.mem->size;
		base = obj->mem.mem->cookie;
	} else if (obj->hclass == NV01_MEMORY_LOCAL_USER) {
		kind = NVSTUB_CTX_VIDMEM;
		length = obj->mem.mem->size;
		base = obj->gpu->fb_address + obj->mem.mem->heap_offset;
	} else {
		status = NV_ERR_NOT_SUPPORTED;
		goto out;
	}

	/* the context: the client itself, or a device/subdevice of that GPU */
	if (p->h_device != p->h_client) {
		ctxobj = nvstub_object_find(c, p->h_device);
		if (!ctxobj) {
			status = NV_ERR_OBJECT_NOT_FOUND;
			goto out;
		}
		if (ctxobj->hclass != NV01_DEVICE_0 &&
		    ctxobj->hclass != NV20_SUBDEVICE_0) {
			status = NV_ERR_INVALID_OBJECT_HANDLE;
			goto out;
		}
		if (ctxobj->gpu != obj->gpu) {
			status = NV_ERR_INVALID_DEVICE;
			goto out;
		}
	}

	/* memMap_IMPL() */
	if (p->offset >= length) {
		status = NV_ERR_INVALID_BASE;
		goto out;
	}
	if (!p->length) {
		status = NV_ERR_INVALID_LIMIT;
		goto out;
	}
	if (p->flags & NVOS33_FLAGS_SKIP_SIZE_CHECK) {
		status = NV_ERR_INSUFFICIENT_PERMISSIONS;
		goto out;
	}
	if (check_add_overflow(p->offset, p->length, &end) || end > length) {
		status = NV_ERR_INVALID_LIMIT;
		goto out;
	}
	if (obj->ncpu_maps >= NVSTUB_MAX_CPU_MAPPINGS) {
		status = NV_ERR_INSUFFICIENT_RESOURCES;
		goto out;
	}
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		status = NV_ERR_NO_MEMORY;
		goto out;
	}
	m->address = base + p->offset;
	m->tgid = task_tgid_nr(current);
	list_add_tail(&m->node, &obj->cpu_maps);
	obj->ncpu_maps++;
	p->p_linear_address = m->address;

	/* rm_create_mmap_context(): only the client's own process */
	if (c->tgid != task_tgid_nr(current))
		status = NV_ERR_INVALID_CLIENT;
	else if (p->h_device == p->h_client && kind != NVSTUB_CTX_SYSMEM)
		status = NV_ERR_INVALID_ARGUMENT;
	else
		status = nvstub_ctx_add(obj, a->fd, kind, p->offset, p->length);
	if (status)
		nvstub_cpu_map_remove(obj, m);	/* escape.c unmaps again */
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

u32 nvstub_esc_unmap_memory(struct nvstub_call *call,
			    struct nvos34_parameters *p)
{
	struct nvstub_cpu_mapping *m;
	struct nvstub_object *obj;
	struct nvstub_client *c;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_client_get(call, p->h_client, &c);
	if (status)
		goto out;
	obj = nvstub_object_find(c, p->h_memory);
	if (!obj) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	m = nvstub_cpu_map_find(obj, p->p_linear_address);
	if (m)
		nvstub_cpu_map_remove(obj, m);
	status = m ? NV_OK : NV_ERR_OBJECT_NOT_FOUND;
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/*
 * RM_UPDATE_DEVICE_MAPPING_INFO (osapi.c RmUpdateDeviceMappingInfo, escape.c;
 * 535 to 595): user space moved a mapping (mremap) and tells RM its new CPU
 * address, which a later RM_UNMAP_MEMORY names.  The client is looked up
 * without asking whose it is (serverAcquireClient, not the file's check of
 * the other escapes); hDevice must be a device or subdevice of it; the
 * object a Memory or a channel (KernelCcuApi is not simulated), not a
 * usermode object; and the mapping one of the calling process's own
 * (serverutilMappingFilterCurrentUserProc), so another client can be named
 * but none of its mappings reached.  An unknown client reads
 * NV_ERR_INVALID_OBJECT up to 550 (_serverFindClientEntry) and
 * NV_ERR_INVALID_OBJECT_HANDLE from 555 (_serverGetAndLockClientEntryByHandle).
 */
u32 nvstub_esc_update_mapping(struct nvstub_call *call,
			      struct nvos56_parameters *p)
{
	struct nvstub_object *dev, *obj;
	struct nvstub_cpu_mapping *m;
	struct nvstub_client *c;
	u32 status;

	mutex_lock(&nvstub_rm_lock);
	c = xa_load(&nvstub_clients, p->h_client);
	if (!c) {
		status = nvstub_major >= 555 ? NV_ERR_INVALID_OBJECT_HANDLE :
					       NV_ERR_INVALID_OBJECT;
		goto out;
	}
	/* clientGetResourceRef() finds an invalidated handle, without object */
	dev = nvstub_object_find_any(c, p->h_device);
	if (!dev) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	if (dev->invalid || (dev->hclass != NV01_DEVICE_0 &&
			     dev->hclass != NV20_SUBDEVICE_0)) {
		status = NV_ERR_INVALID_OBJECT_HANDLE;
		goto out;
	}
	obj = nvstub_object_find_any(c, p->h_memory);
	if (!obj) {
		status = NV_ERR_OBJECT_NOT_FOUND;
		goto out;
	}
	if (obj->invalid || (!nvstub_object_is_memory(obj) &&
			     obj->hclass != HOPPER_CHANNEL_GPFIFO_A)) {
		status = NV_ERR_INVALID_OBJECT_HANDLE;
		goto out;
	}
	m = nvstub_cpu_map_find(obj, p->p_old_cpu_address);
	if (m)
		m->address = p->p_new_cpu_address;
	status = m ? NV_OK : NV_ERR_OBJECT_NOT_FOUND;
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/* --- mmap (nv-mmap.c) */

static struct page *nvstub_vma_page(struct vm_area_struct *vma,
				    unsigned long addr)
{
	struct nvstub_file *nf = vma->vm_file->private_data;
	unsigned long idx = nf->ctx.page_index + ((addr - vma->vm_start) >> PAGE_SHIFT);

	if (nf->ctx.kind == NVSTUB_CTX_SYSMEM || nf->ctx.kind == NVSTUB_CTX_VIDMEM)
		return nvstub_mem_page(nf->ctx.mem, idx, true);
	if (nf->ctx.kind == NVSTUB_CTX_USERMODE)
		return idx < NVSTUB_USERMODE_PAGES ? nf->ctx.db->pages[idx] : NULL;
	return NULL;
}

static void nvstub_vma_open(struct vm_area_struct *vma)
{
	struct nvstub_file *nf = vma->vm_file->private_data;

	if (nf->ctx.kind == NVSTUB_CTX_USERMODE)
		kref_get(&((struct nvstub_doorbell *)vma->vm_private_data)->ref);
	else
		nvstub_mem_get(vma->vm_private_data);
}

static void nvstub_vma_close(struct vm_area_struct *vma)
{
	struct nvstub_file *nf = vma->vm_file->private_data;

	if (nf->ctx.kind == NVSTUB_CTX_USERMODE)
		nvstub_doorbell_put(vma->vm_private_data);
	else
		nvstub_mem_put(vma->vm_private_data);
}

/*
 * nvidia_fault(): GPU mappings are re-inserted after a revocation (zap);
 * system-memory mappings on the ctl file are not revocable.  stub: a BAR1
 * page of video memory gets its backing page at its first touch.
 */
static vm_fault_t nvstub_vma_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct nvstub_file *nf = vma->vm_file->private_data;
	struct page *page;

	if (vma->vm_pgoff != 0 || (nf->ctx.kind != NVSTUB_CTX_USERMODE &&
				   nf->ctx.kind != NVSTUB_CTX_VIDMEM))
		return VM_FAULT_SIGBUS;
	page = nvstub_vma_page(vma, vmf->address);
	if (!page)
		return VM_FAULT_SIGBUS;
	return vmf_insert_pfn(vma, vmf->address & PAGE_MASK, page_to_pfn(page));
}

/* nvidia_vma_access(): ptrace and /proc/PID/mem */
static int nvstub_vma_access(struct vm_area_struct *vma, unsigned long addr,
			     void *buf, int len, int write)
{
	unsigned long off = addr & ~PAGE_MASK;
	struct page *page;
	void *kaddr;

	if (len < 0)
		return -EINVAL;
	if (write && !(vma->vm_flags & VM_WRITE))
		return -EACCES;
	page = nvstub_vma_page(vma, addr);
	if (!page)
		return -EINVAL;
	len = min_t(int, len, PAGE_SIZE - off);
	kaddr = page_address(page) + off;
	if (write)
		memcpy(kaddr, buf, len);
	else
		memcpy(buf, kaddr, len);
	return len;
}

static const struct vm_operations_struct nvstub_vm_ops = {
	.open = nvstub_vma_open,
	.close = nvstub_vma_close,
	.fault = nvstub_vma_fault,
	.access = nvstub_vma_access,
};

static int nvstub_mmap_sysmem(struct vm_area_struct *vma,
			      struct nvstub_mmap_ctx *ctx)
{
	unsigned long i, pages = vma_pages(vma);
	int ret;

	/* nvidia_mmap_helper(): the ctl node may map any part up to the end */
	if (ctx->page_index + pages > ctx->mem->npages)
		return -ERANGE;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	for (i = 0; i < pages; i++) {
		ret = vm_insert_page(vma, vma->vm_start + (i << PAGE_SHIFT),
				     ctx->mem->pages[ctx->page_index + i]);
		if (ret)
			return ret;
	}
	nvstub_mem_get(ctx->mem);
	vma->vm_private_data = ctx->mem;
	return 0;
}

static int nvstub_mmap_usermode(struct vm_area_struct *vma,
				struct nvstub_mmap_ctx *ctx)
{
	unsigned long i, pages = vma_pages(vma);
	int ret;

	/* a GPU node maps exactly what RM_MAP_MEMORY described */
	if (pages != ctx->npages ||
	    ctx->page_index + pages > NVSTUB_USERMODE_PAGES)
		return -ENXIO;
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	for (i = 0; i < pages; i++) {
		ret = remap_pfn_range(vma, vma->vm_start + (i << PAGE_SHIFT),
				      page_to_pfn(ctx->db->pages[ctx->page_index + i]),
				      PAGE_SIZE, vma->vm_page_prot);
		if (ret)
			return -EAGAIN;
	}
	kref_get(&ctx->db->ref);
	vma->vm_private_data = ctx->db;
	return 0;
}

/* BAR1: a GPU node maps exactly what RM_MAP_MEMORY described; by faults */
static int nvstub_mmap_vidmem(struct vm_area_struct *vma,
			      struct nvstub_mmap_ctx *ctx)
{
	if (vma_pages(vma) != ctx->npages ||
	    ctx->page_index + ctx->npages > ctx->mem->size >> PAGE_SHIFT)
		return -ENXIO;
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	nvstub_mem_get(ctx->mem);
	vma->vm_private_data = ctx->mem;
	return 0;
}

int nvstub_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct nvstub_file *nf = filp->private_data;
	struct nvstub_mmap_ctx *ctx = &nf->ctx;
	int ret;

	/*
	 * Once valid, a context never changes until the file is released, which
	 * cannot happen while it is being mapped; the lock orders the read.
	 */
	mutex_lock(&nf->ctx_lock);
	if (ctx->kind == NVSTUB_CTX_NONE) {
		ret = -EINVAL;
		goto out;
	}
	if (vma->vm_pgoff != 0) {
		ret = -EINVAL;
		goto out;
	}
	/* stub: device memory is never copy-on-write (vmf_insert_pfn needs it) */
	if (!(vma->vm_flags & VM_SHARED)) {
		ret = -EINVAL;
		goto out;
	}

	switch (ctx->kind) {
	case NVSTUB_CTX_SYSMEM:
		ret = nvstub_mmap_sysmem(vma, ctx);
		break;
	case NVSTUB_CTX_USERMODE:
		ret = nvstub_mmap_usermode(vma, ctx);
		break;
	case NVSTUB_CTX_VIDMEM:
		ret = nvstub_mmap_vidmem(vma, ctx);
		break;
	default:
		ret = -ENXIO;
		break;
	}
	if (!ret)
		vma->vm_ops = &nvstub_vm_ops;
out:
	mutex_unlock(&nf->ctx_lock);
	return ret;
}
