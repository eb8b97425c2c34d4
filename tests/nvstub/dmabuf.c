// SPDX-License-Identifier: GPL-2.0
/*
 * NV_ESC_EXPORT_TO_DMABUF_FD (217), as the driver makes it: a dma-buf that
 * holds duplicates of a client's video memory (kernel-open/nvidia/nv.c,
 * nv-dmabuf.c `nv_dma_buf_export`; arch/nvalloc/unix/src/osapi.c
 * `RmDmabufVerifyMemHandle`, `RmDmabufGetClientAndDevice`; 535 to 595).
 *
 * - GPU files only (NV_ACTUAL_DEVICE_ONLY: -EINVAL on the control file),
 *   and the struct's exact size (2600 bytes before 570, 2608 since:
 *   `mappingType`, then 580's `bAllowMmap`, before the handles), else
 *   -EINVAL; otherwise the ioctl returns 0 and the status says.
 * - `fd` -1 makes a dma-buf of `totalSize` bytes for `totalObjects`
 *   handles and attaches `numObjects` of them from `index`; an `fd` of
 *   one such dma-buf attaches more to it.  Each handle is duplicated, with
 *   RM's own privilege (no share policy is asked: whoever's `hClient` is),
 *   into the GPU's memory-manager client, after checking that it is video
 *   memory of this GPU and that its range is page-aligned and inside it.
 *   The duplicates keep the memory, charged to no process (a kernel
 *   client), until the dma-buf's last reference goes.
 * - The stub maps nothing through the dma-buf (no storage behind video
 *   memory): an importer's map is refused.
 *
 * The GPU's client: RM's MemoryManager has one client, device and
 * subdevice per GPU from its start; the stub makes the device and
 * subdevice when a GPU's first dma-buf is made and frees them with its
 * last, holding the GPU meanwhile as nvidia_dev_get() does
 * (nvstub_kgpus_get(), rm.c, which UVM's session shares).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>

#include "nvstub.h"

XPU_IMPORT_NS_DMA_BUF;

#define NV_DMABUF_EXPORT_MAX_HANDLES	128
#define NV_DMABUF_MAPPING_FORCE_PCIE	1

/* nv_ioctl_export_to_dma_buf_fd_t, by where its arrays lie */
struct nvstub_dmabuf_layout {
	u32 size, handles, offsets, sizes, status;
	bool mapping_type;		/* at 32, from 570 */
};

static const struct nvstub_dmabuf_layout nvstub_dmabuf_535 = {
	.size = 2600, .handles = 32, .offsets = 544, .sizes = 1568,
	.status = 2592,
};
static const struct nvstub_dmabuf_layout nvstub_dmabuf_570 = {
	.size = 2608, .handles = 36, .offsets = 552, .sizes = 1576,
	.status = 2600, .mapping_type = true,
};

/* The head every version shares */
struct nvstub_dmabuf_head {
	s32 fd;
	u32 h_client;
	u32 total_objects;
	u32 num_objects;
	u32 index;
	u32 pad;
	u64 total_size;
};

struct nvstub_dmabuf_handle {
	u32 h_dup;			/* in nvstub_dmabuf_mm.client; 0: free */
	u64 size;
};

struct nvstub_dmabuf {
	struct nvstub_gpu *gpu;
	struct mutex lock;		/* the handles, in a reuse */
	u32 total_objects, num_objects;
	u64 total_size, attached_size;
	u8 mapping_type;
	struct nvstub_dmabuf_handle *handles;
};

/* the GPUs' memory-manager client, its devices and subdevices */
static struct nvstub_kgpus nvstub_dmabuf_mm;

static const struct dma_buf_ops nvstub_dmabuf_ops;

/* nv_dma_buf_undup_mem_handles_unlocked(): COUNT handles from INDEX */
static void nvstub_dmabuf_undup(struct nvstub_dmabuf *db, u32 index, u32 count)
{
	struct nvstub_call call = { .kernel = true };
	struct nvstub_dmabuf_handle *h;
	u32 i;

	lockdep_assert_held(&nvstub_rm_lock);
	for (i = 0; i < count; i++) {
		h = &db->handles[index + i];
		if (!h->h_dup)
			continue;
		nvstub_rm_free(&call, nvstub_dmabuf_mm.client, h->h_dup);
		db->attached_size -= h->size;
		db->num_objects--;
		h->h_dup = 0;
		h->size = 0;
	}
}

/* nv_dma_buf_dup_mem_handles() */
static u32 nvstub_dmabuf_dup(struct nvstub_dmabuf *db, const void *buf,
			     const struct nvstub_dmabuf_layout *l)
{
	const struct nvstub_dmabuf_head *p = buf;
	const u32 *handles = buf + l->handles;
	const u64 *offsets = buf + l->offsets, *sizes = buf + l->sizes;
	unsigned int gi = db->gpu->index;
	u32 i, index = p->index, st = NV_OK;
	struct nvstub_dmabuf_handle *h;

	mutex_lock(&nvstub_rm_lock);
	for (i = 0; i < p->num_objects; i++, index++) {
		h = &db->handles[index];
		if (h->h_dup) {
			st = NV_ERR_IN_USE;
			break;
		}
		if (sizes[i] > db->total_size - db->attached_size) {
			st = NV_ERR_INVALID_ARGUMENT;
			break;
		}
		st = nvstub_rm_dup_for_dmabuf(xa_load(&nvstub_clients,
						      nvstub_dmabuf_mm.client),
					      nvstub_dmabuf_mm.device[gi],
					      nvstub_dmabuf_mm.subdevice[gi],
					      db->gpu, p->h_client, handles[i],
					      offsets[i], sizes[i], &h->h_dup);
		if (st)
			break;
		h->size = sizes[i];
		db->attached_size += sizes[i];
		db->num_objects++;
	}
	if (!st && db->num_objects == db->total_objects &&
	    db->attached_size != db->total_size)
		st = NV_ERR_INVALID_ARGUMENT;
	if (st)
		nvstub_dmabuf_undup(db, p->index, i);
	mutex_unlock(&nvstub_rm_lock);
	return st;
}

static void nvstub_dmabuf_free(struct nvstub_dmabuf *db)
{
	kvfree(db->handles);
	mutex_destroy(&db->lock);
	kfree(db);
}

/* the last reference: the duplicates go, and with them the memory */
static void nvstub_dmabuf_release(struct dma_buf *buf)
{
	struct nvstub_dmabuf *db = buf->priv;

	mutex_lock(&nvstub_rm_lock);
	nvstub_dmabuf_undup(db, 0, db->total_objects);
	nvstub_kgpus_put(&nvstub_dmabuf_mm, db->gpu);
	mutex_unlock(&nvstub_rm_lock);
	nvstub_dmabuf_free(db);
}

/* no storage behind video memory here: nothing to map */
static struct sg_table *nvstub_dmabuf_map(struct dma_buf_attachment *a,
					  enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void nvstub_dmabuf_unmap(struct dma_buf_attachment *a,
				struct sg_table *sgt,
				enum dma_data_direction dir)
{
}

static const struct dma_buf_ops nvstub_dmabuf_ops = {
	.map_dma_buf = nvstub_dmabuf_map,
	.unmap_dma_buf = nvstub_dmabuf_unmap,
	.release = nvstub_dmabuf_release,
};

/* nv_dma_buf_create() */
static u32 nvstub_dmabuf_create(struct nvstub_gpu *gpu, void *buf,
				const struct nvstub_dmabuf_layout *l)
{
	struct nvstub_dmabuf_head *p = buf;
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct nvstub_dmabuf *db;
	struct dma_buf *dbuf;
	u32 st;
	int fd;

	if (p->index > p->total_objects - p->num_objects)
		return NV_ERR_INVALID_ARGUMENT;
	db = kzalloc(sizeof(*db), GFP_KERNEL_ACCOUNT);
	if (!db)
		return NV_ERR_NO_MEMORY;
	mutex_init(&db->lock);
	db->handles = kvcalloc(p->total_objects, sizeof(*db->handles),
			       GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!db->handles) {
		nvstub_dmabuf_free(db);
		return NV_ERR_NO_MEMORY;
	}
	db->gpu = gpu;
	db->total_objects = p->total_objects;
	db->total_size = p->total_size;
	db->mapping_type = l->mapping_type ? *(u8 *)(buf + 32) : 0;

	mutex_lock(&nvstub_rm_lock);
	st = nvstub_kgpus_get(&nvstub_dmabuf_mm, gpu, NULL);
	mutex_unlock(&nvstub_rm_lock);
	if (st) {
		nvstub_dmabuf_free(db);
		return st;
	}
	st = nvstub_dmabuf_dup(db, buf, l);
	if (st)
		goto put;

	exp.ops = &nvstub_dmabuf_ops;
	exp.size = p->total_size;
	exp.flags = O_RDWR | O_CLOEXEC;
	exp.priv = db;
	dbuf = dma_buf_export(&exp);
	if (IS_ERR(dbuf)) {
		st = NV_ERR_OPERATING_SYSTEM;
		mutex_lock(&nvstub_rm_lock);
		nvstub_dmabuf_undup(db, p->index, p->num_objects);
		mutex_unlock(&nvstub_rm_lock);
		goto put;
	}
	fd = dma_buf_fd(dbuf, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dbuf);	/* the release undoes the rest */
		return NV_ERR_OPERATING_SYSTEM;
	}
	p->fd = fd;
	return NV_OK;

put:
	mutex_lock(&nvstub_rm_lock);
	nvstub_kgpus_put(&nvstub_dmabuf_mm, gpu);
	mutex_unlock(&nvstub_rm_lock);
	nvstub_dmabuf_free(db);
	return st;
}

/* nv_dma_buf_reuse() */
static u32 nvstub_dmabuf_reuse(void *buf, const struct nvstub_dmabuf_layout *l)
{
	struct nvstub_dmabuf_head *p = buf;
	struct nvstub_dmabuf *db;
	struct dma_buf *dbuf;
	u32 st;

	dbuf = dma_buf_get(p->fd);
	if (IS_ERR(dbuf))
		return NV_ERR_OPERATING_SYSTEM;
	if (dbuf->ops != &nvstub_dmabuf_ops) {
		dma_buf_put(dbuf);
		return NV_ERR_INVALID_ARGUMENT;
	}
	db = dbuf->priv;
	if (mutex_lock_interruptible(&db->lock)) {
		dma_buf_put(dbuf);
		return NV_ERR_OPERATING_SYSTEM;
	}
	if (db->total_objects < p->num_objects ||
	    p->index > db->total_objects - p->num_objects ||
	    (l->mapping_type && *(u8 *)(buf + 32) != db->mapping_type))
		st = NV_ERR_INVALID_ARGUMENT;
	else
		st = nvstub_dmabuf_dup(db, buf, l);
	mutex_unlock(&db->lock);
	dma_buf_put(dbuf);
	return st;
}

/* nvidia_ioctl()'s NV_ESC_EXPORT_TO_DMABUF_FD, then nv_dma_buf_export() */
int nvstub_dmabuf_export(struct nvstub_file *nf, void *buf, u32 size)
{
	const struct nvstub_dmabuf_layout *l = nvstub_abi->since >= 570 ?
		&nvstub_dmabuf_570 : &nvstub_dmabuf_535;
	struct nvstub_dmabuf_head *p = buf;
	u32 st;

	if (size != l->size || nvstub_file_is_ctl(nf))
		return -EINVAL;
	if (!p->total_size || !p->num_objects || !p->total_objects ||
	    p->num_objects > NV_DMABUF_EXPORT_MAX_HANDLES ||
	    p->num_objects > p->total_objects ||
	    (l->mapping_type &&
	     *(u8 *)(buf + 32) > NV_DMABUF_MAPPING_FORCE_PCIE))
		st = NV_ERR_INVALID_ARGUMENT;
	else if (p->fd == -1)
		st = nvstub_dmabuf_create(nf->gpu, buf, l);
	else if (p->fd >= 0)
		st = nvstub_dmabuf_reuse(buf, l);
	else
		st = NV_ERR_INVALID_ARGUMENT;
	*(u32 *)(buf + l->status) = st;
	return 0;
}

/* the GPUs' memory-manager client, at load */
int nvstub_dmabuf_init(void)
{
	struct nvstub_call call = { .kernel = true };

	return nvstub_rm_alloc_kparams(&call, 0, 0, &nvstub_dmabuf_mm.client,
				       NV01_ROOT_CLIENT, NULL) ? -ENOMEM : 0;
}

void nvstub_dmabuf_exit(void)
{
	struct nvstub_call call = { .kernel = true };

	if (!nvstub_dmabuf_mm.client)
		return;
	mutex_lock(&nvstub_rm_lock);
	nvstub_rm_free(&call, nvstub_dmabuf_mm.client, nvstub_dmabuf_mm.client);
	mutex_unlock(&nvstub_rm_lock);
	nvstub_dmabuf_mm.client = 0;
}
