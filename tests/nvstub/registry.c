// SPDX-License-Identifier: GPL-2.0
/*
 * NV_ESC_RM_ACCESS_REGISTRY (NVOS38) and the registry it reads and writes,
 * as RM keeps them (arch/nvalloc/unix/src/osapi.c RmAccessRegistry,
 * registry.c, os.c; 535 to 595):
 * - the client is looked up, not checked to be the caller's (an unknown one
 *   is NV_ERR_INVALID_CLIENT); hObject equal to it names the global
 *   registry, a device or subdevice of it that GPU's (a missing handle
 *   NV_ERR_OBJECT_NOT_FOUND, another class NV_ERR_INVALID_OBJECT_HANDLE);
 * - the key's name (ParmStrLength bytes and its NUL) and DevNode (read
 *   and unused) are at most NVOS38_MAX_REGISTRY_STRING_LENGTH with the NUL
 *   (NV_ERR_INVALID_STRING_LENGTH), copied in (NV_ERR_OPERATING_SYSTEM when
 *   they cannot be); a name not ending in its NUL is NV_ERR_INVALID_ARGUMENT;
 *   a binary value is 1..NVOS38_MAX_REGISTRY_BINARY_LENGTH bytes;
 * - anyone may write: a device's write asks for an administrator only to
 *   write every GPU of the device, which here is the one; the global
 *   registry takes any caller's key;
 * - a read looks in the GPU's keys, then in the global ones, by name
 *   without case; a DWORD read takes a binary key's first word; a key not
 *   found is NV_ERR_GENERIC;
 * - a write changes a key of the registry it names, or prepends a new one,
 *   kept until the driver unloads: nothing bounds their number.
 * Unknown access types are NV_ERR_INVALID_ACCESS_TYPE.  The driver's debug
 * level (ResmanDebugLevel) is a key like any other here.
 */

#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "nvstub.h"

struct nvstub_reg {
	struct list_head link;
	struct nvstub_gpu *gpu;		/* NULL: the global registry */
	char *name;
	bool binary;
	u32 data;
	u8 *bin;
	u32 len;
};

/* newest first, as RM prepends; under nvstub_reg_lock */
static LIST_HEAD(nvstub_registry);
static DEFINE_MUTEX(nvstub_reg_lock);

/* regFindRegistryEntry(): GPU's keys first, then the global ones */
static struct nvstub_reg *nvstub_reg_find(struct nvstub_gpu *gpu,
					  const char *name, bool binary)
{
	struct nvstub_reg *r;

	if (gpu)
		list_for_each_entry(r, &nvstub_registry, link)
			if (r->gpu == gpu && r->binary == binary &&
			    !strcasecmp(r->name, name))
				return r;
	list_for_each_entry(r, &nvstub_registry, link)
		if (!r->gpu && r->binary == binary && !strcasecmp(r->name, name))
			return r;
	return NULL;
}

/* RmWrite...(): the registry's own key, or a new one */
static struct nvstub_reg *nvstub_reg_key(struct nvstub_gpu *gpu,
					 const char *name, bool binary)
{
	struct nvstub_reg *r = nvstub_reg_find(gpu, name, binary);

	if (r && r->gpu == gpu)
		return r;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->name = kstrdup(name, GFP_KERNEL);
	if (!r->name) {
		kfree(r);
		return NULL;
	}
	r->gpu = gpu;
	r->binary = binary;
	list_add(&r->link, &nvstub_registry);
	return r;
}

static u32 nvstub_reg_access(struct nvstub_gpu *gpu, u32 type, const char *name,
			     u32 *data, u8 *bin, u32 *len)
{
	struct nvstub_reg *r;
	u8 *copy;

	switch (type) {
	case NVOS38_ACCESS_TYPE_READ_DWORD:
		if (!name)
			return NV_ERR_INVALID_ARGUMENT;
		r = nvstub_reg_find(gpu, name, false);
		if (r) {
			*data = r->data;
			return NV_OK;
		}
		r = nvstub_reg_find(gpu, name, true);
		if (!r || r->len < sizeof(u32))
			return NV_ERR_GENERIC;
		memcpy(data, r->bin, sizeof(u32));
		return NV_OK;
	case NVOS38_ACCESS_TYPE_WRITE_DWORD:
		if (!name)
			return NV_ERR_INVALID_ARGUMENT;
		r = nvstub_reg_key(gpu, name, false);
		if (!r)
			return NV_ERR_GENERIC;
		r->data = *data;
		return NV_OK;
	case NVOS38_ACCESS_TYPE_READ_BINARY:
		if (!name)
			return NV_ERR_INVALID_ARGUMENT;
		r = nvstub_reg_find(gpu, name, true);
		if (!r || *len < r->len)
			return NV_ERR_GENERIC;
		memcpy(bin, r->bin, r->len);
		*len = r->len;
		return NV_OK;
	case NVOS38_ACCESS_TYPE_WRITE_BINARY:
		if (!name)
			return NV_ERR_INVALID_ARGUMENT;
		copy = kmemdup(bin, *len, GFP_KERNEL);
		if (!copy)
			return NV_ERR_GENERIC;
		r = nvstub_reg_key(gpu, name, true);
		if (!r) {
			kfree(copy);
			return NV_ERR_GENERIC;
		}
		kfree(r->bin);
		r->bin = copy;
		r->len = *len;
		return NV_OK;
	default:
		return NV_ERR_INVALID_ACCESS_TYPE;
	}
}

/* The registry's target: no GPU for the client itself.  Under rm_lock. */
static u32 nvstub_reg_target(u32 h_client, u32 h_object,
			     struct nvstub_gpu **gpu)
{
	struct nvstub_client *c = xa_load(&nvstub_clients, h_client);
	struct nvstub_object *o;

	*gpu = NULL;
	if (!c)
		return NV_ERR_INVALID_CLIENT;
	if (h_object == h_client)
		return NV_OK;
	o = nvstub_object_find(c, h_object);
	if (!o)
		return NV_ERR_OBJECT_NOT_FOUND;
	if (o->hclass != NV01_DEVICE_0 && o->hclass != NV20_SUBDEVICE_0)
		return NV_ERR_INVALID_OBJECT_HANDLE;
	*gpu = o->gpu;
	return NV_OK;
}

/* A string of LEN bytes and its NUL from user memory (rmapiParamsAcquire). */
static u32 nvstub_reg_string(u64 uptr, u32 len, char **out)
{
	char *s;

	len++;				/* the caller's length has no NUL */
	if (!len || len > NVOS38_MAX_REGISTRY_STRING_LENGTH)
		return NV_ERR_INVALID_STRING_LENGTH;
	s = kzalloc(len, GFP_KERNEL);
	if (!s)
		return NV_ERR_OPERATING_SYSTEM;
	if (copy_from_user(s, u64_to_user_ptr(uptr), len)) {
		kfree(s);
		return NV_ERR_OPERATING_SYSTEM;
	}
	*out = s;
	return NV_OK;
}

u32 nvstub_access_registry(struct nvstub_call *call, struct nvos38_parameters *p)
{
	bool bin_type = p->access_type == NVOS38_ACCESS_TYPE_READ_BINARY ||
			p->access_type == NVOS38_ACCESS_TYPE_WRITE_BINARY;
	char *devnode = NULL, *name = NULL;
	struct nvstub_gpu *gpu;
	u32 len = p->binary_data_length, status;
	u8 *bin = NULL;

	mutex_lock(&nvstub_rm_lock);
	status = nvstub_reg_target(p->h_client, p->h_object, &gpu);
	mutex_unlock(&nvstub_rm_lock);
	if (status)
		return status;
	if (p->dev_node_length) {
		status = nvstub_reg_string(p->p_dev_node, p->dev_node_length,
					   &devnode);
		if (status)
			goto out;
	}
	if (p->parm_str_length) {
		status = nvstub_reg_string(p->p_parm_str, p->parm_str_length,
					   &name);
		if (status == NV_OK && name[p->parm_str_length] != '\0')
			status = NV_ERR_INVALID_ARGUMENT;
		if (status)
			goto out;
	}
	if (bin_type) {
		if (!len || len > NVOS38_MAX_REGISTRY_BINARY_LENGTH) {
			status = NV_ERR_INVALID_STRING_LENGTH;
			goto out;
		}
		bin = kzalloc(len, GFP_KERNEL);
		if (!bin) {
			status = NV_ERR_OPERATING_SYSTEM;
			goto out;
		}
		if (p->access_type == NVOS38_ACCESS_TYPE_WRITE_BINARY &&
		    copy_from_user(bin, u64_to_user_ptr(p->p_binary_data), len)) {
			status = NV_ERR_OPERATING_SYSTEM;
			goto out;
		}
	}
	mutex_lock(&nvstub_reg_lock);
	status = nvstub_reg_access(gpu, p->access_type, name, &p->data, bin,
				   &len);
	mutex_unlock(&nvstub_reg_lock);
	if (bin) {
		/* the length read goes back; nothing on error */
		if (status || p->access_type != NVOS38_ACCESS_TYPE_READ_BINARY)
			len = 0;
		if (len && copy_to_user(u64_to_user_ptr(p->p_binary_data), bin,
					len))
			status = NV_ERR_OPERATING_SYSTEM;
		p->binary_data_length = len;
	}
out:
	kfree(bin);
	kfree(name);
	kfree(devnode);
	return status;
}

void nvstub_registry_exit(void)
{
	struct nvstub_reg *r, *tmp;

	list_for_each_entry_safe(r, tmp, &nvstub_registry, link) {
		list_del(&r->link);
		kfree(r->bin);
		kfree(r->name);
		kfree(r);
	}
}
