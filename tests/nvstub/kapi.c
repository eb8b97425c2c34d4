// SPDX-License-Identifier: GPL-2.0
/*
 * The driver's interface for kernel-level RM clients, as the real driver
 * exports it to nvidia-modeset: nvidia_get_rm_ops()
 * (kernel-open/nvidia/nv-modeset-interface.c) with rm_kernel_rmapi_op()
 * (src/nvidia/arch/nvalloc/unix/src/osapi.c) behind .op.  Calls made through
 * it run with kernel privilege (RS_PRIV_LEVEL_KERNEL): params are kernel
 * memory, every client is reachable, no fd-table check.
 */
#include <linux/module.h>
#include <linux/string.h>

#include "nvstub.h"

static int nvstub_kapi_alloc_stack(struct nvidia_stack_s **sp)
{
	*sp = NULL;	/* no alternate stacks on x86_64 */
	return 0;
}

static void nvstub_kapi_free_stack(struct nvidia_stack_s *sp)
{
}

static u32 nvstub_kapi_enumerate_gpus(struct nv_gpu_info *info)
{
	unsigned int i;

	for (i = 0; i < nvstub_ngpus && i < NV_MAX_GPUS; i++) {
		memset(&info[i], 0, sizeof(info[i]));
		info[i].gpu_id = nvstub_gpus[i].gpu_id;
		info[i].pci_info.domain = 0;
		info[i].pci_info.bus = nvstub_gpus[i].bus;
		info[i].pci_info.slot = 0;
		info[i].pci_info.function = 0;
	}
	return i;
}

static struct nvstub_gpu *nvstub_kapi_gpu(u32 gpu_id)
{
	unsigned int i;

	for (i = 0; i < nvstub_ngpus; i++)
		if (nvstub_gpus[i].gpu_id == gpu_id)
			return &nvstub_gpus[i];
	return NULL;
}

/* nvidia_dev_get(): the GPU stays up while a kernel client holds it */
static int nvstub_kapi_open_gpu(u32 gpu_id, struct nvidia_stack_s *sp)
{
	struct nvstub_gpu *gpu = nvstub_kapi_gpu(gpu_id);

	if (!gpu)
		return -ENODEV;
	mutex_lock(&nvstub_rm_lock);
	nvstub_gpu_get(gpu);
	mutex_unlock(&nvstub_rm_lock);
	return 0;
}

static void nvstub_kapi_close_gpu(u32 gpu_id, struct nvidia_stack_s *sp)
{
	struct nvstub_gpu *gpu = nvstub_kapi_gpu(gpu_id);

	if (!gpu)
		return;
	mutex_lock(&nvstub_rm_lock);
	nvstub_gpu_put(gpu);
	mutex_unlock(&nvstub_rm_lock);
}

static int nvstub_kapi_set_callbacks(const void *cb)
{
	return 0;
}

/* rm_kernel_rmapi_op(): the result goes into the op's own status field. */
static void nvstub_kapi_op(struct nvidia_stack_s *sp, void *ops_cmd)
{
	struct nvidia_kernel_rmapi_ops *ops = ops_cmd;
	struct nvstub_call call = { .kernel = true };
	struct nvos64_parameters *a = &ops->params.alloc;
	struct nvos00_parameters *f = &ops->params.free;

	switch (ops->op) {
	case NV04_ALLOC:
		/*
		 * The stub keeps one client class for every privilege level;
		 * a NON_PRIV kernel client is not an admin (client.c
		 * rmclientIsAdmin: bIsRootNonPriv), so the process lists
		 * name it by the task that made it.
		 */
		call.non_priv = a->h_class == NV01_ROOT_NON_PRIV;
		if (a->h_class == NV01_ROOT || a->h_class == NV01_ROOT_NON_PRIV)
			a->h_class = NV01_ROOT_CLIENT;
		a->status = nvstub_rm_alloc_kparams(&call, a->h_root,
						    a->h_object_parent,
						    &a->h_object_new, a->h_class,
						    (void *)(uintptr_t)a->p_alloc_parms);
		break;
	case NV01_FREE:
		mutex_lock(&nvstub_rm_lock);
		f->status = nvstub_rm_free(&call, f->h_root, f->h_object_old);
		mutex_unlock(&nvstub_rm_lock);
		break;
	case NV04_CONTROL:
		ops->params.control.status =
			nvstub_rm_control(&call, &ops->params.control);
		break;
	case NV04_DUP_OBJECT:
		/* with kernel privilege: no share policy applies */
		mutex_lock(&nvstub_rm_lock);
		ops->params.dup_object.status =
			nvstub_rm_dup(&call, &ops->params.dup_object);
		mutex_unlock(&nvstub_rm_lock);
		break;
	default:
		/* the stub serves no other kernel operation */
		ops->params.control.status = NV_ERR_NOT_SUPPORTED;
		break;
	}
}

u32 nvidia_get_rm_ops(struct nvidia_modeset_rm_ops *rm_ops)
{
	const struct nvidia_modeset_rm_ops ops = {
		.version_string = nvstub_version,
		.alloc_stack = nvstub_kapi_alloc_stack,
		.free_stack = nvstub_kapi_free_stack,
		.enumerate_gpus = nvstub_kapi_enumerate_gpus,
		.open_gpu = nvstub_kapi_open_gpu,
		.close_gpu = nvstub_kapi_close_gpu,
		.op = nvstub_kapi_op,
		.set_callbacks = nvstub_kapi_set_callbacks,
	};

	if (!rm_ops->version_string ||
	    strcmp(rm_ops->version_string, nvstub_version)) {
		rm_ops->version_string = nvstub_version;
		return NV_ERR_GENERIC;
	}
	*rm_ops = ops;
	return NV_OK;
}
/* As nv-modeset-interface.c exports it: plain, not _GPL (symbol_get refuses it). */
EXPORT_SYMBOL(nvidia_get_rm_ops);
