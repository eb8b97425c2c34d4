// SPDX-License-Identifier: GPL-2.0
/*
 * Objects exported to a control file and imported from it, as RM does on
 * Linux (arch/nvalloc/unix/src/rmobjexportimport.c, and the controls
 * NV0000_CTRL_CMD_OS_UNIX_{EXPORT,IMPORT}_OBJECT(S)_{TO,FROM}_FD in
 * arch/nvalloc/unix/src/os.c).
 *
 * An export duplicates the object into RM's own client (hObjExportRmClient,
 * kernel privilege: no share policy applies), under a device of that client
 * for the object's GPU, or its subdevice when the device is not a parent
 * the class allows, or the client itself for an object under no device.
 * The control file named by fd keeps the duplicate's handle in a table
 * (nvfp->handles, maxObjects long, made by the first export into it) until
 * it is closed, so an exported object outlives its source, its client and
 * the process that made it.  An import duplicates it again, with kernel
 * privilege, into the caller's client under the parent it names: a
 * duplicate like any other, whatever its class.  The plural import first
 * asks the object's address space (GET_ADDR_SPACE_TYPE) and fails for one
 * that is neither video nor system memory; the singular one does not ask.
 * RM's client goes with the last exported handle (RmUnrefObjExportImport),
 * and its devices with their GPU's last user, as every client's do: what
 * was exported there can no longer be imported.
 */
#include <linux/file.h>
#include <linux/slab.h>

#include "nvstub.h"

/* hObjExportRmClient and its objects; under nvstub_rm_lock */
static u32 nvstub_export_client;
static unsigned int nvstub_export_refs;
static u32 nvstub_export_device[NVSTUB_MAX_GPUS];
static u32 nvstub_export_subdevice[NVSTUB_MAX_GPUS];

/* nvfp->handles, maxHandles, deviceInstance and metadata */
struct nvstub_export_fd {
	u32 *handles;
	u16 max;
	u32 device_instance;
	u8 metadata[NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE];
};

/* RmRefObjExportImport() */
static u32 nvstub_export_ref(void)
{
	struct nvstub_call call = { .kernel = true };
	u32 st;

	lockdep_assert_held(&nvstub_rm_lock);
	if (nvstub_export_refs++)
		return NV_OK;
	memset(nvstub_export_device, 0, sizeof(nvstub_export_device));
	memset(nvstub_export_subdevice, 0, sizeof(nvstub_export_subdevice));
	st = nvstub_rm_alloc_client_locked(&call, &nvstub_export_client);
	if (st) {
		nvstub_export_refs = 0;
		nvstub_export_client = 0;
	}
	return st;
}

/* RmUnrefObjExportImport() */
static void nvstub_export_unref(void)
{
	struct nvstub_call call = { .kernel = true };

	lockdep_assert_held(&nvstub_rm_lock);
	if (WARN_ON(!nvstub_export_refs) || --nvstub_export_refs)
		return;
	nvstub_rm_free(&call, nvstub_export_client, nvstub_export_client);
	nvstub_export_client = 0;
}

/*
 * The device (and subdevice) of RM's client for GPU, made again when its
 * handle is free (serverutilValidateNewResourceHandle): the GPU's last
 * user took it.
 */
static u32 nvstub_export_device_of(struct nvstub_gpu *gpu)
{
	struct nvstub_call call = { .kernel = true };
	struct nv0080_alloc_parameters dp = { .device_id = gpu->index };
	struct nvstub_client *c = xa_load(&nvstub_clients, nvstub_export_client);
	unsigned int i = gpu->index;
	u32 st;

	if (nvstub_export_device[i] &&
	    nvstub_object_find_any(c, nvstub_export_device[i]))
		return NV_OK;
	nvstub_export_device[i] = 0;
	nvstub_export_subdevice[i] = 0;
	st = nvstub_rm_alloc_kernel(&call, nvstub_export_client,
				    nvstub_export_client,
				    &nvstub_export_device[i], NV01_DEVICE_0, &dp);
	if (st)
		return st;
	st = nvstub_rm_alloc_kernel(&call, nvstub_export_client,
				    nvstub_export_device[i],
				    &nvstub_export_subdevice[i], NV20_SUBDEVICE_0,
				    NULL);
	if (st) {
		nvstub_rm_free(&call, nvstub_export_client,
			       nvstub_export_device[i]);
		nvstub_export_device[i] = 0;
	}
	return st;
}

/* RmExportObject(): *H_EXP, a duplicate of (SRC, H_SRC) in RM's client */
static u32 nvstub_export_object(struct nvstub_client *src, u32 h_src,
				u32 *h_exp, u32 *dev_inst)
{
	struct nvstub_call call = { .kernel = true };
	struct nvos55_parameters p = { 0 };
	struct nvstub_object *o;
	u32 st;

	o = nvstub_object_find_any(src, h_src);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	st = nvstub_export_ref();
	if (st)
		return st;
	p.h_client = nvstub_export_client;
	p.h_parent = nvstub_export_client;
	p.h_client_src = src->handle;
	p.h_object_src = h_src;
	*dev_inst = NV_MAX_DEVICES;
	if (o->device) {
		st = nvstub_export_device_of(o->device->gpu);
		if (st)
			goto fail;
		*dev_inst = o->device->gpu->index;
		p.h_parent = nvstub_export_device[*dev_inst];
	}
	st = nvstub_rm_dup(&call, &p);
	if (st == NV_ERR_INVALID_OBJECT_PARENT && o->device) {
		p.h_parent = nvstub_export_subdevice[*dev_inst];
		p.h_object = 0;
		st = nvstub_rm_dup(&call, &p);
	}
	if (st)
		goto fail;
	*h_exp = p.h_object;
	return NV_OK;
fail:
	nvstub_export_unref();
	return st;
}

/* RmFreeObjExportHandle() */
static void nvstub_export_put(u32 h_exp)
{
	struct nvstub_call call = { .kernel = true };

	nvstub_rm_free(&call, nvstub_export_client, h_exp);
	nvstub_export_unref();
}

/*
 * RmImportObject(): a duplicate of H_EXP into the caller's client C under
 * H_PARENT, at *H_OBJ (0: RM's choice).  With TYPE, the object must be
 * memory (GET_ADDR_SPACE_TYPE answers REGMEM for other GPU resources, and
 * RmImportObject takes only video, system and fabric memory).
 */
static u32 nvstub_import_object(struct nvstub_client *c, u32 h_parent,
				u32 *h_obj, u32 h_exp, u8 *type)
{
	struct nvstub_call call = { .kernel = true };
	struct nvos55_parameters p = { 0 };
	struct nvstub_object *o;
	u32 st;

	o = nvstub_object_find_any(xa_load(&nvstub_clients,
					   nvstub_export_client), h_exp);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (type) {
		if (!nvstub_object_is_memory(o) || !o->mem.mem)
			return NV_ERR_INVALID_ARGUMENT;
		*type = o->mem.mem->type == NVSTUB_MEM_VIDMEM ?
			NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_VIDMEM :
			NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_SYSMEM;
	}
	p.h_client = c->handle;
	p.h_parent = h_parent;
	p.h_object = *h_obj;
	p.h_client_src = nvstub_export_client;
	p.h_object_src = h_exp;
	st = nvstub_rm_dup(&call, &p);
	if (!st)
		*h_obj = p.h_object;
	return st;
}

/* nv_get_file_private(fd, NV_TRUE): a control file of the caller's */
static struct nvstub_file *nvstub_export_file(s32 fd, struct file **fp)
{
	struct nvstub_file *nf;
	struct file *f;

	if (fd < 0)
		return NULL;
	f = fget(fd);
	if (!f)
		return NULL;
	nf = nvstub_file_lookup(f);
	if (!nf || !nvstub_file_is_ctl(nf)) {
		fput(f);
		return NULL;
	}
	*fp = f;
	return nf;
}

/* _initializeExportObjectFd() */
static u32 nvstub_export_fd_init(struct nvstub_file *nf, struct nvstub_client *c,
				 u32 h_device, u16 max, const u8 *metadata)
{
	struct nvstub_export_fd *x;
	struct nvstub_object *dev = NULL;

	if (nf->exp)
		return NV_ERR_STATE_IN_USE;
	if (h_device) {
		dev = nvstub_object_find_any(c, h_device);
		if (!dev)
			return NV_ERR_OBJECT_NOT_FOUND;
		if (dev->hclass != NV01_DEVICE_0)
			return NV_ERR_INVALID_PARAMETER;
	}
	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (x)
		x->handles = kcalloc(max, sizeof(*x->handles), GFP_KERNEL);
	if (!x || !x->handles) {
		kfree(x);
		return NV_ERR_NO_MEMORY;
	}
	x->max = max;
	x->device_instance = dev ? dev->gpu->index : NV_MAX_DEVICES;
	if (metadata)
		memcpy(x->metadata, metadata, sizeof(x->metadata));
	nf->exp = x;
	return NV_OK;
}

/* cliresCtrlCmdOsUnixExportObjectToFd() */
u32 nvstub_ctrl_export_object(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_os_unix_export_object_to_fd_params *p = params;
	struct nvstub_file *nf;
	struct file *f;
	u32 st, h = 0, inst;

	if (p->flags & NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_FLAGS_EMPTY_FD_TRUE)
		return NV_ERR_INVALID_PARAMETER;	/* the library's own */
	if (p->object.type != NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM ||
	    p->fd == -1)
		return NV_ERR_INVALID_PARAMETER;
	st = nvstub_export_object(obj->client, p->object.h_object, &h, &inst);
	if (st)
		return st;
	nf = nvstub_export_file(p->fd, &f);
	if (!nf) {
		nvstub_export_put(h);
		return NV_ERR_INVALID_PARAMETER;
	}
	st = nvstub_export_fd_init(nf, obj->client, p->object.h_device, 1, NULL);
	if (st)
		nvstub_export_put(h);
	else
		nf->exp->handles[0] = h;
	fput(f);
	return st;
}

/* cliresCtrlCmdOsUnixImportObjectFromFd() */
u32 nvstub_ctrl_import_object(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_os_unix_import_object_from_fd_params *p = params;
	struct nvstub_file *nf;
	struct file *f;
	u32 st;

	if (p->object.type != NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM ||
	    p->fd == -1)
		return NV_ERR_INVALID_PARAMETER;
	nf = nvstub_export_file(p->fd, &f);
	if (!nf)
		return NV_ERR_INVALID_PARAMETER;
	if (!nf->exp || !nf->exp->max || !nf->exp->handles[0])
		st = NV_ERR_INVALID_PARAMETER;
	else
		st = nvstub_import_object(obj->client, p->object.h_parent,
					  &p->object.h_object,
					  nf->exp->handles[0], NULL);
	fput(f);
	return st;
}

/* cliresCtrlCmdOsUnixExportObjectsToFd() */
u32 nvstub_ctrl_export_objects(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_os_unix_export_objects_to_fd_params *p = params;
	struct nvstub_export_fd *x;
	struct nvstub_file *nf;
	bool made = false;
	u32 *h = NULL, st = NV_OK, inst;
	struct file *f;
	unsigned int i;

	nf = nvstub_export_file(p->fd, &f);
	if (!nf)
		return NV_ERR_INVALID_PARAMETER;
	if (!nf->exp) {
		if (!p->max_objects) {
			st = NV_ERR_INVALID_PARAMETER;
			goto out;
		}
		st = nvstub_export_fd_init(nf, obj->client, p->h_device,
					   p->max_objects, p->metadata);
		if (st)
			goto out;
		made = true;
	}
	x = nf->exp;
	if (p->num_objects > NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS) {
		st = NV_ERR_INVALID_PARAMETER;
		goto out;
	}
	if ((u32)p->num_objects + p->index > x->max) {
		st = NV_ERR_OUT_OF_RANGE;
		goto out;
	}
	h = kcalloc(max_t(u16, p->num_objects, 1), sizeof(*h), GFP_KERNEL);
	if (!h) {
		st = NV_ERR_NO_MEMORY;
		goto out;
	}
	for (i = 0; i < p->num_objects; i++) {
		if (!p->objects[i])
			continue;
		st = nvstub_export_object(obj->client, p->objects[i], &h[i],
					  &inst);
		if (st)
			goto out;
		if (inst != x->device_instance) {
			st = NV_ERR_INVALID_PARAMETER;
			goto out;
		}
	}
	for (i = 0; i < p->num_objects; i++) {
		u32 *slot = &x->handles[i + p->index];

		if (*slot)
			nvstub_export_put(*slot);
		*slot = h[i];
	}
out:
	if (st && h)
		for (i = 0; i < p->num_objects; i++)
			if (h[i])
				nvstub_export_put(h[i]);
	kfree(h);
	if (st && made) {
		kfree(nf->exp->handles);
		kfree(nf->exp);
		nf->exp = NULL;
	}
	fput(f);
	return st;
}

/* cliresCtrlCmdOsUnixImportObjectsFromFd(): all or none */
u32 nvstub_ctrl_import_objects(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_os_unix_import_objects_from_fd_params *p = params;
	struct nvstub_call kcall = { .kernel = true };
	struct nvstub_export_fd *x;
	struct nvstub_file *nf;
	unsigned int i = 0;
	struct file *f;
	u32 st = NV_OK;

	nf = nvstub_export_file(p->fd, &f);
	if (!nf)
		return NV_ERR_INVALID_PARAMETER;
	x = nf->exp;
	if (!x ||
	    p->num_objects > NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS) {
		st = NV_ERR_INVALID_PARAMETER;
		goto out;
	}
	if ((u32)p->num_objects + p->index > x->max) {
		st = NV_ERR_OUT_OF_RANGE;
		goto out;
	}
	for (i = 0; i < p->num_objects; i++) {
		u32 h_exp = x->handles[i + p->index];

		if (!h_exp) {
			p->object_types[i] =
				NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE;
			continue;
		}
		st = nvstub_import_object(obj->client, p->h_parent,
					  &p->objects[i], h_exp,
					  &p->object_types[i]);
		if (st)
			break;
	}
	/*
	 * RM frees every handle named before the failing one, whether it
	 * imported it or not (a slot with nothing exported names a handle
	 * the caller may already use): so does the stub.
	 */
	if (st)
		while (i--)
			if (p->objects[i])
				nvstub_rm_free(&kcall, obj->client->handle,
					       p->objects[i]);
out:
	fput(f);
	return st;
}

/* GET_EXPORT_OBJECT_INFO's params: gpuInstanceId from 545 */
u32 nvstub_export_info_size(void)
{
	return nvstub_abi->since >= 545 ?
		sizeof(struct nv0000_ctrl_os_unix_get_export_object_info_params) :
		sizeof(struct nv0000_ctrl_os_unix_get_export_object_info_params_v535);
}

/*
 * cliresCtrlCmdOsUnixGetExportObjectInfo(): what the first export into the
 * control file FD made its table with (_initializeExportObjectFd), on any
 * client of the caller's: the device instance (NV_MAX_DEVICES for an object
 * under no device), from 545 the device's MIG GPU instance (NV_U32_MAX
 * without one, as on every GPU here), the table's length and the exporter's
 * metadata (zeros for the singular export).  A negative fd, one that is no
 * control file of the caller's, and a control file nothing was exported to
 * are NV_ERR_INVALID_PARAMETER.
 */
u32 nvstub_ctrl_export_info(struct nvstub_call *call,
			    struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_os_unix_get_export_object_info_params_v535 *old = params;
	struct nv0000_ctrl_os_unix_get_export_object_info_params *p = params;
	struct nvstub_export_fd *x;
	struct nvstub_file *nf;
	struct file *f;

	nf = nvstub_export_file(p->fd, &f);
	if (!nf)
		return NV_ERR_INVALID_PARAMETER;
	x = nf->exp;
	if (x && nvstub_export_info_size() == sizeof(*p)) {
		p->device_instance = x->device_instance;
		p->gpu_instance_id = U32_MAX;
		p->max_objects = x->max;
		memcpy(p->metadata, x->metadata, sizeof(p->metadata));
	} else if (x) {
		old->device_instance = x->device_instance;
		old->max_objects = x->max;
		memcpy(old->metadata, x->metadata, sizeof(old->metadata));
	}
	fput(f);
	return x ? NV_OK : NV_ERR_INVALID_PARAMETER;
}

/* rm_cleanup_file_private(): a closing control file lets its exports go */
void nvstub_export_release(struct nvstub_file *nf)
{
	struct nvstub_export_fd *x;
	unsigned int i;

	mutex_lock(&nvstub_rm_lock);
	x = nf->exp;
	nf->exp = NULL;
	if (x)
		for (i = 0; i < x->max; i++)
			if (x->handles[i])
				nvstub_export_put(x->handles[i]);
	mutex_unlock(&nvstub_rm_lock);
	if (x)
		kfree(x->handles);
	kfree(x);
}
