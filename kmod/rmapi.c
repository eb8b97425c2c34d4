// SPDX-License-Identifier: GPL-2.0
/*
 * xpu's own RM client, kernel-privileged, through nvidia_get_rm_ops(): the
 * interface the driver exports to nvidia-modeset (nv-modeset-interface.h,
 * nv-kernel-rmapi-ops.h).  Used to find the GPUs, and to ask RM how much video
 * memory it attributes to a process — a figure no user thread can change.
 *
 * The minor number and UUID of each GPU come from the driver's own
 * /proc/driver/nvidia/gpus/<bus id>/information, joined by PCI location.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "nvabi.h"
#include "rmapi.h"
#include "xpu.h"

/* The driver's export (nv-modeset-interface.c): xpu.ko depends on the driver. */
extern u32 nvidia_get_rm_ops(struct nvidia_modeset_rm_ops *rm_ops);

static struct nvidia_modeset_rm_ops xpu_rm;
static bool xpu_rm_have;
static char xpu_rm_version[64];
static u32 xpu_rm_ver[3];
static const struct nv_abi_version *xpu_abi;

/*
 * Serialises kernel RM calls: the stack xpu_rm_sp is for one thread at a
 * time, and so is the query buffer.
 */
static DEFINE_MUTEX(xpu_rm_lock);
static struct nvidia_stack_s *xpu_rm_sp;
static struct nvidia_kernel_rmapi_ops *xpu_rm_ops;
static struct nv2080_ctrl_gpu_get_pid_info_params *xpu_rm_pidinfo;
static u32 xpu_rm_client;

static u32 xpu_rm_call(void)
{
	lockdep_assert_held(&xpu_rm_lock);
	xpu_rm.op(xpu_rm_sp, xpu_rm_ops);
	switch (xpu_rm_ops->op) {
	case NV01_FREE:
		return xpu_rm_ops->params.free.status;
	case NV04_ALLOC:
		return xpu_rm_ops->params.alloc.status;
	default:
		return xpu_rm_ops->params.control.status;
	}
}

static u32 xpu_rm_alloc_in(u32 h_client, u32 h_parent, u32 *h_new,
			   u32 h_class, void *params, u32 size)
{
	struct nvos64_parameters *a = &xpu_rm_ops->params.alloc;
	u32 status;

	lockdep_assert_held(&xpu_rm_lock);
	memset(xpu_rm_ops, 0, sizeof(*xpu_rm_ops));
	xpu_rm_ops->op = NV04_ALLOC;
	a->h_root = h_client;
	a->h_object_parent = h_parent;
	a->h_object_new = *h_new;
	a->h_class = h_class;
	a->p_alloc_parms = (u64)(uintptr_t)params;
	a->params_size = size;
	status = xpu_rm_call();
	if (status == NV_OK)
		*h_new = a->h_object_new;
	return status;
}

static u32 xpu_rm_alloc_locked(u32 h_parent, u32 *h_new, u32 h_class,
			       void *params, u32 size)
{
	return xpu_rm_alloc_in(xpu_rm_client, h_parent, h_new, h_class, params,
			       size);
}

static u32 xpu_rm_control_as(u32 h_client, u32 h_object, u32 cmd,
			     void *params, u32 size)
{
	struct nvos54_parameters *c = &xpu_rm_ops->params.control;

	memset(xpu_rm_ops, 0, sizeof(*xpu_rm_ops));
	xpu_rm_ops->op = NV04_CONTROL;
	c->h_client = h_client;
	c->h_object = h_object;
	c->cmd = cmd;
	c->params = (u64)(uintptr_t)params;
	c->params_size = size;
	return xpu_rm_call();
}

static u32 xpu_rm_control_locked(u32 h_object, u32 cmd, void *params, u32 size)
{
	return xpu_rm_control_as(xpu_rm_client, h_object, cmd, params, size);
}

/*
 * Free xpu's own client, and with it its devices.  The only kernel-privileged
 * free xpu makes: RM lets a kernel caller free any client's objects, so xpu
 * never frees a handle a user could have named (docs/security.md).
 */
static void xpu_rm_free_own_client(void)
{
	struct nvos00_parameters *f;

	mutex_lock(&xpu_rm_lock);
	memset(xpu_rm_ops, 0, sizeof(*xpu_rm_ops));
	xpu_rm_ops->op = NV01_FREE;
	f = &xpu_rm_ops->params.free;
	f->h_root = xpu_rm_client;
	f->h_object_parent = xpu_rm_client;
	f->h_object_old = xpu_rm_client;
	xpu_rm_call();
	mutex_unlock(&xpu_rm_lock);
}

/* open_gpu()'s counterpart, after xpu's devices are gone. */
static void xpu_rm_close_gpus(void)
{
	unsigned int i;

	for (i = 0; i < xpu_nr_gpus; i++)
		xpu_rm.close_gpu(xpu_gpus[i].gpu_id, xpu_rm_sp);
	xpu_nr_gpus = 0;
}

/* From 565, RM names processes as the calling task's pid namespace sees them. */
bool xpu_rm_pids_in_caller_ns(void)
{
	return xpu_rm_ver[0] >= 565;
}

/*
 * The video memory RM charges to each of N processes on GPU, in one
 * GET_PID_INFO (at most NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT entries):
 * one call per batch rather than per process keeps the cost of a slice's
 * refresh nearly independent of its number of members.
 *
 * Which number names a process depends on the driver (docs/memory.md): up
 * to 560 RM compares the global tgid; from 565 it compares the pid as the
 * *calling task's* pid namespace sees it (_gpuConvertPid), for xpu's
 * kernel-privileged calls too, which run in whatever task made the call
 * that needs the figure -- a tenant in its own pid namespace, another
 * slice's process, xpud.  So from 565 each pid is translated for current;
 * a process current's namespace cannot see makes the query run from a work
 * item, in the initial namespace, which sees them all.  *UNSEEN says so.
 */
static int xpu_rm_pid_query(struct xpu_gpu *gpu, struct pid *const *pids,
			    u64 *bytes, struct xpu_vidmem_usage *raw, u32 n,
			    bool *unseen)
{
	struct pid_namespace *ns = NULL;
	struct nv2080_ctrl_gpu_pid_info *e;
	u32 status, i;
	pid_t nr;
	int ret = -EIO;

	if (xpu_rm_pids_in_caller_ns()) {
		ns = task_active_pid_ns(current);
		if (!ns) {
			*unseen = true;
			return -ESRCH;
		}
	}
	mutex_lock(&xpu_rm_lock);
	memset(xpu_rm_pidinfo, 0, offsetof(typeof(*xpu_rm_pidinfo),
					   pid_info_list[n]));
	xpu_rm_pidinfo->pid_info_list_count = n;
	for (i = 0; i < n; i++) {
		nr = ns ? pid_nr_ns(pids[i], ns) : pid_nr(pids[i]);
		if (!nr) {
			mutex_unlock(&xpu_rm_lock);
			*unseen = true;
			return -ESRCH;
		}
		e = &xpu_rm_pidinfo->pid_info_list[i];
		e->pid = nr;
		e->index = NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE;
	}
	status = xpu_rm_control_locked(gpu->h_subdevice,
				       NV2080_CTRL_CMD_GPU_GET_PID_INFO,
				       xpu_rm_pidinfo, sizeof(*xpu_rm_pidinfo));
	if (status == NV_OK) {
		for (i = 0; i < n; i++) {
			e = &xpu_rm_pidinfo->pid_info_list[i];
			/* A process RM has never seen has no entry: it holds nothing. */
			if (e->result != NV_OK)
				memset(&e->vid_mem_usage, 0,
				       sizeof(e->vid_mem_usage));
			/*
			 * The protected figures are parts of the others
			 * (_gpuCollectMemInfo adds protected memory to both):
			 * adding them would charge CC or APM memory twice.
			 */
			if (bytes)
				bytes[i] = e->vid_mem_usage.mem_private +
					   e->vid_mem_usage.mem_shared_owned;
			if (raw) {
				raw[i].priv = e->vid_mem_usage.mem_private;
				raw[i].owned = e->vid_mem_usage.mem_shared_owned;
				raw[i].duped = e->vid_mem_usage.mem_shared_duped;
			}
		}
		ret = 0;
	}
	mutex_unlock(&xpu_rm_lock);
	return ret;
}

struct xpu_pid_work {
	struct work_struct work;
	struct xpu_gpu *gpu;
	struct pid *const *pids;
	u64 *bytes;
	struct xpu_vidmem_usage *raw;
	u32 n;
	int ret;
};

static void xpu_pid_work_fn(struct work_struct *work)
{
	struct xpu_pid_work *pw = container_of(work, struct xpu_pid_work, work);
	bool unseen = false;

	/* a kworker's namespace is the initial one: every process is seen */
	pw->ret = xpu_rm_pid_query(pw->gpu, pw->pids, pw->bytes, pw->raw, pw->n,
				   &unseen);
}

static int xpu_rm_pid_figures(struct xpu_gpu *gpu, struct pid *const *pids,
			      u64 *bytes, struct xpu_vidmem_usage *raw, u32 n)
{
	struct xpu_pid_work pw = { .gpu = gpu, .pids = pids, .bytes = bytes,
				   .raw = raw, .n = n };
	bool unseen = false;
	int ret;

	if (!xpu_rm_have)
		return -ENODEV;
	if (!n || n > NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT)
		return -EINVAL;
	ret = xpu_rm_pid_query(gpu, pids, bytes, raw, n, &unseen);
	if (!unseen)
		return ret;
	INIT_WORK_ONSTACK(&pw.work, xpu_pid_work_fn);
	queue_work(system_unbound_wq, &pw.work);
	flush_work(&pw.work);
	destroy_work_on_stack(&pw.work);
	return pw.ret;
}

int xpu_rm_pid_usage(struct xpu_gpu *gpu, struct pid *const *pids,
		     u64 *bytes, u32 n)
{
	return xpu_rm_pid_figures(gpu, pids, bytes, NULL, n);
}

/* --- the ledger's clients (ledger.c) */

/*
 * A kernel client of the ledger's, made by the calling thread, which must
 * outlive it: RM names a client's memory by the process that made it
 * (ProcID), and a kernel client made as NV01_ROOT_NON_PRIV is not an admin,
 * so the process lists count it (client.c rmclientIsAdmin).  A device and
 * subdevice on GPU, or on every GPU (GPU NULL).
 */
int xpu_rm_client_create(struct xpu_rm_client *c, struct xpu_gpu *gpu)
{
	struct nv0080_alloc_parameters dev = { };
	struct nv2080_alloc_parameters sub = { };
	u32 status, h = 0;
	unsigned int i;

	memset(c, 0, sizeof(*c));
	if (!xpu_rm_have)
		return -ENODEV;
	mutex_lock(&xpu_rm_lock);
	status = xpu_rm_alloc_in(0, 0, &h, NV01_ROOT_NON_PRIV, NULL, 0);
	if (status)
		goto out;
	c->h = h;
	for (i = 0; i < xpu_nr_gpus && !status; i++) {
		if (gpu && gpu != &xpu_gpus[i])
			continue;
		dev.device_id = xpu_gpus[i].device_instance;
		status = xpu_rm_alloc_in(h, h, &c->dev[i], NV01_DEVICE_0,
					 &dev, sizeof(dev));
		if (!status)
			status = xpu_rm_alloc_in(h, c->dev[i], &c->sub[i],
						 NV20_SUBDEVICE_0, &sub,
						 sizeof(sub));
	}
out:
	mutex_unlock(&xpu_rm_lock);
	if (status) {
		pr_err("cannot make a client of the ledger's (status 0x%x)\n",
		       status);
		xpu_rm_client_destroy(c);
		return -EIO;
	}
	c->pid = get_task_pid(current, PIDTYPE_TGID);
	return 0;
}

/* The client goes, and every duplicate it holds with it. */
void xpu_rm_client_destroy(struct xpu_rm_client *c)
{
	if (!c->h)
		return;
	xpu_rm_client_free(c, c->h);
	c->h = 0;
	put_pid(c->pid);
	c->pid = NULL;
}

/*
 * A duplicate of (h_client, h_object) -- H_CLIENT 0: C's own --, video
 * memory of GPU, into C under its subdevice (SUBDEVICE) or device.
 * Kernel-privileged: RM applies no share policy to it; the caller undoes it
 * if the object was not the caller's to free (ledger.c).
 */
u32 xpu_rm_client_dup(struct xpu_rm_client *c, struct xpu_gpu *gpu,
		      bool subdevice, u32 h_client, u32 h_object, u32 *h_new)
{
	struct nvos55_parameters *d = &xpu_rm_ops->params.dup_object;
	unsigned int i = gpu - xpu_gpus;
	u32 status;

	if (!xpu_rm_have || !c->h || !c->dev[i])
		return NV_ERR_INVALID_STATE;
	mutex_lock(&xpu_rm_lock);
	memset(xpu_rm_ops, 0, sizeof(*xpu_rm_ops));
	xpu_rm_ops->op = NV04_DUP_OBJECT;
	d->h_client = c->h;
	d->h_parent = subdevice ? c->sub[i] : c->dev[i];
	d->h_client_src = h_client ? h_client : c->h;
	d->h_object_src = h_object;
	xpu_rm.op(xpu_rm_sp, xpu_rm_ops);
	status = d->status;
	if (status == NV_OK)
		*h_new = d->h_object;
	mutex_unlock(&xpu_rm_lock);
	return status;
}

/* A free in C, a client of the ledger's: nothing a caller names. */
void xpu_rm_client_free(struct xpu_rm_client *c, u32 h_object)
{
	struct nvos00_parameters *f;

	mutex_lock(&xpu_rm_lock);
	memset(xpu_rm_ops, 0, sizeof(*xpu_rm_ops));
	xpu_rm_ops->op = NV01_FREE;
	f = &xpu_rm_ops->params.free;
	f->h_root = c->h;
	f->h_object_parent = c->h;
	f->h_object_old = h_object;
	xpu_rm_call();
	mutex_unlock(&xpu_rm_lock);
}

/* Control CMD of object H of C, with its params P. */
static u32 xpu_rm_client_control(struct xpu_rm_client *c, u32 h, u32 cmd,
				 void *p, u32 size)
{
	u32 status;

	mutex_lock(&xpu_rm_lock);
	status = xpu_rm_control_as(c->h, h, cmd, p, size);
	mutex_unlock(&xpu_rm_lock);
	return status;
}

/* Whether C's handles H1 and H2 name the same memory. */
bool xpu_rm_client_same(struct xpu_rm_client *c, u32 h1, u32 h2)
{
	struct nv0000_ctrl_client_objects_are_duplicates_params p = {
		.h_object1 = h1, .h_object2 = h2,
	};

	return xpu_rm_client_control(c, c->h,
				     NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES,
				     &p, sizeof(p)) == NV_OK && p.b_duplicates;
}

/*
 * Where the video memory of C's handle H begins, as RM places it (NV0041
 * GET_SURFACE_PHYS_ATTR of offset 0, AT_GPU): one memory's while it lives,
 * the same through every duplicate (they share its memdesc), so it sorts
 * the ledger's handles by memory without asking RM of each pair.  False
 * when RM does not say (535 has no such control) or the memory is not
 * video memory; a kernel caller passes the control's privilege check.
 */
bool xpu_rm_client_where(struct xpu_rm_client *c, u32 h, u64 *where)
{
	struct nv0041_ctrl_get_surface_phys_attr_params p = { .mem_offset = 0 };

	if (xpu_rm_client_control(c, h, NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR,
				  &p, sizeof(p)) != NV_OK ||
	    p.mem_aperture != NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_VIDMEM)
		return false;
	*where = p.mem_offset;
	return true;
}

/*
 * What RM charges C's process on GPU: private, shared-owned, shared-duped.
 * RM walks the memory of every client of that process (_gpuCollectMemInfo).
 */
int xpu_rm_client_usage(struct xpu_rm_client *c, struct xpu_gpu *gpu,
			struct xpu_vidmem_usage *u)
{
	if (!c->pid)
		return -ENODEV;
	return xpu_rm_pid_figures(gpu, &c->pid, NULL, u, 1);
}

/*
 * NV2080 FIFO_DISABLE_CHANNELS through xpu's own subdevice of GPU, naming the
 * channels of other clients: how UVM stops channels too (nv_gpu_ops.c).
 * N is at most NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES.  Returns RM's
 * status; pairs RM cannot find are skipped by RM and reported in it.
 */
u32 xpu_rm_disable_channels(struct xpu_gpu *gpu, bool disable,
			    const u32 *clients, const u32 *channels, u32 n)
{
	struct nv2080_ctrl_fifo_disable_channels_params *p;
	u32 status;

	if (!xpu_rm_have)
		return NV_ERR_INVALID_STATE;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return NV_ERR_NO_MEMORY;
	p->b_disable = disable;
	p->num_channels = n;
	memcpy(p->h_client_list, clients, n * sizeof(u32));
	memcpy(p->h_channel_list, channels, n * sizeof(u32));
	mutex_lock(&xpu_rm_lock);
	status = xpu_rm_control_locked(gpu->h_subdevice,
				       NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS,
				       p, sizeof(*p));
	mutex_unlock(&xpu_rm_lock);
	kfree(p);
	return status;
}

/*
 * One query of RM's, CMD on H_OBJECT of client H_CLIENT with PARAMS, as
 * xpu's kernel client: RM's status, NV_ERR_INVALID_STATE without the driver.
 */
static u32 xpu_rm_ask(u32 h_client, u32 h_object, u32 cmd, void *params,
		      u32 size)
{
	u32 status;

	if (!xpu_rm_have)
		return NV_ERR_INVALID_STATE;
	mutex_lock(&xpu_rm_lock);
	status = xpu_rm_control_as(h_client, h_object, cmd, params, size);
	mutex_unlock(&xpu_rm_lock);
	return status;
}

/* CLIENT_GET_HANDLE_INFO's INDEX about H_OBJECT, asked of H_CLIENT; 0: none */
static u64 xpu_rm_handle_info(u32 h_client, u32 h_object, u32 index)
{
	struct nv0000_ctrl_client_get_handle_info_params p = {
		.h_object = h_object,
		.index = index,
	};

	if (!h_client || !h_object ||
	    xpu_rm_ask(h_client, h_client, NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO,
		       &p, sizeof(p)) != NV_OK)
		return 0;
	return p.data.i_result;
}

/*
 * The class of H_OBJECT in client H_CLIENT, as RM says (NV0000
 * CLIENT_GET_HANDLE_INFO, asked of that client); 0 when RM has no such
 * object.  A query: xpu acts on nothing a caller names.  (Not the channel's
 * work-submit token: RM refuses that until the channel has a runlist, which
 * its first engine object gives it.)
 */
u32 xpu_rm_object_class(u32 h_client, u32 h_object)
{
	return xpu_rm_handle_info(h_client, h_object,
				  NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_CLASSID);
}

/* Whether RM has a client of handle H: its CLIENT_GET_HANDLE_INFO answers. */
bool xpu_rm_client_exists(u32 h)
{
	struct nv0000_ctrl_client_get_handle_info_params p = {
		.h_object = h,
		.index = NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_CLASSID,
	};

	return h && xpu_rm_ask(h, h, NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO,
			       &p, sizeof(p)) == NV_OK;
}

/* The handle of H_OBJECT's parent in H_CLIENT, as RM says; 0 if none. */
u32 xpu_rm_object_parent(u32 h_client, u32 h_object)
{
	return xpu_rm_handle_info(h_client, h_object,
				  NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO_INDEX_PARENT);
}

/*
 * Whether RM keeps H_OBJECT of H_CLIENT only as an invalidated handle: the
 * dependent of a freed object that was not its ancestor (a channel of a
 * freed context share or VA space, a virtual allocation of a freed VA
 * space), destructed, its handle left until it or an ancestor is freed
 * (resserv's bInvalidateOnly).  CLIENT_GET_HANDLE_INFO still answers such a
 * handle's class.  Asked with a command no class exports, without params:
 * RM looks the command up only for a live object, so it acts on nothing.
 */
bool xpu_rm_object_lost(u32 h_client, u32 h_object)
{
	return h_client && h_object &&
	       xpu_rm_ask(h_client, h_object, XPU_CTRL_CMD_UNEXPORTED, NULL, 0) ==
	       NV_ERR_RESOURCE_LOST;
}

/*
 * The number of OS pages of system-memory object H_OBJECT in client
 * H_CLIENT (NV003E GET_SURFACE_NUM_PHYS_PAGES), into *N; RM's status: an
 * object of any other class is NV_ERR_NOT_SUPPORTED, none at all
 * NV_ERR_OBJECT_NOT_FOUND.  A query: it changes nothing.
 */
u32 xpu_rm_sysmem_npages(u32 h_client, u32 h_object, u32 *n)
{
	struct nv003e_ctrl_get_surface_num_phys_pages_params p = {};
	u32 status = xpu_rm_ask(h_client, h_object,
				NV003E_CTRL_CMD_GET_SURFACE_NUM_PHYS_PAGES,
				&p, sizeof(p));

	*n = p.num_pages;
	return status;
}

/*
 * The struct page of each of the first *N OS pages of that object, into
 * PAGES (a kernel buffer: the control is for kernel callers only, and RM
 * writes the pointers straight into it); *N gets how many RM wrote.
 */
u32 xpu_rm_sysmem_pages(u32 h_client, u32 h_object, struct page **pages,
			u32 *n)
{
	struct nv003e_ctrl_get_surface_phys_pages_params p = {
		.p_pages = (u64)(uintptr_t)pages,
		.num_pages = *n,
	};
	u32 status = xpu_rm_ask(h_client, h_object,
				NV003E_CTRL_CMD_GET_SURFACE_PHYS_PAGES,
				&p, sizeof(p));

	*n = status == NV_OK ? min(p.num_pages, *n) : 0;
	return status;
}

void xpu_rm_driver_version(u32 *major, u32 *minor, u32 *patch)
{
	*major = xpu_rm_ver[0];
	*minor = xpu_rm_ver[1];
	*patch = xpu_rm_ver[2];
}

u32 xpu_rm_fb_info_v2_size(void)
{
	return xpu_abi->fb_info_v2_size;
}

u32 xpu_rm_alloc_params_size(void)
{
	return xpu_abi->memory_alloc_params_size;
}

u32 xpu_rm_vaspace_params_size(void)
{
	return xpu_abi->vaspace_alloc_params_size;
}

u32 xpu_rm_map_dma_params_size(void)
{
	return xpu_abi->map_dma_params_size;
}

u32 xpu_rm_channel_params_size(void)
{
	return xpu_abi->channel_alloc_params_size;
}

/* "Device Minor:" and "GPU UUID:" of the driver's procfs file for a GPU. */
static int xpu_rm_read_procfs(struct xpu_gpu *gpu, const struct nv_gpu_info *gi)
{
	char path[80], *buf, *line, *p;
	struct file *f;
	loff_t pos = 0;
	ssize_t n;
	int found = 0;

	snprintf(path, sizeof(path),
		 "/proc/driver/nvidia/gpus/%04x:%02x:%02x.%x/information",
		 gi->pci_info.domain, gi->pci_info.bus, gi->pci_info.slot,
		 gi->pci_info.function);
	f = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf) {
		filp_close(f, NULL);
		return -ENOMEM;
	}
	n = kernel_read(f, buf, PAGE_SIZE - 1, &pos);
	filp_close(f, NULL);
	for (p = buf; n > 0 && (line = strsep(&p, "\n"));) {
		char *val = strchr(line, ':');

		if (!val)
			continue;
		*val++ = '\0';
		val = strim(val);
		if (!strcmp(strim(line), "Device Minor") &&
		    !kstrtou32(val, 10, &gpu->minor))
			found |= 1;
		else if (!strcmp(strim(line), "GPU UUID"))
			found |= strscpy(gpu->uuid, val, sizeof(gpu->uuid)) > 0 ? 2 : 0;
	}
	kfree(buf);
	return found == 3 ? 0 : -EINVAL;
}

static int xpu_rm_add_gpu(const struct nv_gpu_info *gi)
{
	struct nv0000_ctrl_gpu_get_id_info_v2_params id = { .gpu_id = gi->gpu_id };
	struct nv0080_alloc_parameters dev = { };
	struct nv2080_alloc_parameters sub = { };
	struct nv2080_ctrl_fb_info fb[1] = { };
	struct nv2080_ctrl_fifo_get_physical_channel_count_params chc = { };
	struct xpu_gpu *gpu = &xpu_gpus[xpu_nr_gpus];
	u32 fbv2_size = xpu_abi->fb_info_v2_size;
	u32 *fbv2;
	u32 status;
	int ret;

	/*
	 * Hold the GPU open, as nvidia-modeset does: without it, the last
	 * GPU file closing (persistence mode off) shuts the GPU down and RM
	 * deletes every client's devices on it, xpu's own included
	 * (RmShutdownAdapter, rmapiDelPendingDevices).
	 */
	ret = xpu_rm.open_gpu(gi->gpu_id, xpu_rm_sp);
	if (ret) {
		pr_err("GPU %04x:%02x:%02x.%x: the driver cannot open it (%d)\n",
		       gi->pci_info.domain, gi->pci_info.bus, gi->pci_info.slot,
		       gi->pci_info.function, ret);
		return ret;
	}
	gpu->gpu_id = gi->gpu_id;
	ret = xpu_rm_read_procfs(gpu, gi);
	if (ret) {
		xpu_rm.close_gpu(gi->gpu_id, xpu_rm_sp);
		pr_err("GPU %04x:%02x:%02x.%x: no minor number or UUID in /proc/driver/nvidia (%d)\n",
		       gi->pci_info.domain, gi->pci_info.bus, gi->pci_info.slot,
		       gi->pci_info.function, ret);
		return ret;
	}
	fbv2 = kzalloc(fbv2_size, GFP_KERNEL);
	if (!fbv2) {
		xpu_rm.close_gpu(gi->gpu_id, xpu_rm_sp);
		return -ENOMEM;
	}
	mutex_lock(&xpu_rm_lock);
	status = xpu_rm_control_locked(xpu_rm_client,
				       NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
				       &id, sizeof(id));
	if (status)
		goto out;
	dev.device_id = id.device_instance;
	gpu->h_device = 0;
	status = xpu_rm_alloc_locked(xpu_rm_client, &gpu->h_device,
				     NV01_DEVICE_0, &dev, sizeof(dev));
	if (status)
		goto out;
	gpu->h_subdevice = 0;
	status = xpu_rm_alloc_locked(gpu->h_device, &gpu->h_subdevice,
				     NV20_SUBDEVICE_0, &sub, sizeof(sub));
	if (status)
		goto out;
	/* V2 carries its entries inline: a count, then {index, data} pairs. */
	fbv2[0] = 1;
	fb[0].index = NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE;
	memcpy(&fbv2[1], fb, sizeof(fb));
	status = xpu_rm_control_locked(gpu->h_subdevice,
				       NV2080_CTRL_CMD_FB_GET_INFO_V2,
				       fbv2, fbv2_size);
	if (status)
		goto out;
	memcpy(fb, &fbv2[1], sizeof(fb));
	gpu->memory_total = (u64)fb[0].data << 10;
	/*
	 * The channel ids its slices share out (sched.c): the fewest of any
	 * runlist's.  Asked once: they are fixed at the GPU's construction.
	 */
	gpu->channel_ids = 0;
	if (xpu_rm_control_locked(gpu->h_subdevice,
				  NV2080_CTRL_CMD_FIFO_GET_PHYSICAL_CHANNEL_COUNT,
				  &chc, sizeof(chc)) == NV_OK &&
	    chc.phys_channel_count && chc.phys_channel_count != U32_MAX)
		gpu->channel_ids = chc.phys_channel_count;
	else
		pr_warn("GPU %u: RM does not say how many channel ids it has; the channel_ids parameter, or 2048, is taken\n",
			gpu->minor);
	gpu->gpu_id = gi->gpu_id;
	gpu->device_instance = id.device_instance;
	gpu->mode = XPU_MODE_SHARED;
	gpu->policy = XPU_POLICY_WEIGHTED;
	gpu->period_us = 20000;
	mutex_init(&gpu->query_lock);
	xpu_nr_gpus++;
out:
	mutex_unlock(&xpu_rm_lock);
	kfree(fbv2);
	if (status) {
		pr_err("GPU %u: kernel RM call failed with status 0x%x\n",
		       gpu->minor, status);
		xpu_rm.close_gpu(gi->gpu_id, xpu_rm_sp);
		return -EIO;
	}
	pr_info("GPU %u (%s): %llu MiB, %u channel ids\n", gpu->minor,
		gpu->uuid, gpu->memory_total >> 20, gpu->channel_ids);
	return 0;
}

int xpu_rm_init(void)
{
	struct nv_gpu_info *gi;
	u32 n, i, status, h = 0;
	int ret;

	/*
	 * Linked, not symbol_get(): NVIDIA exports it with plain EXPORT_SYMBOL,
	 * which symbol_get() refuses from 6.6 and in the stable branches that
	 * took that change.  The driver answers a mismatched version with its
	 * own.
	 */
	xpu_rm.version_string = "";
	nvidia_get_rm_ops(&xpu_rm);
	strscpy(xpu_rm_version, xpu_rm.version_string, sizeof(xpu_rm_version));
	xpu_rm.version_string = xpu_rm_version;
	status = nvidia_get_rm_ops(&xpu_rm);
	if (status != NV_OK || !xpu_rm.op || !xpu_rm.alloc_stack ||
	    !xpu_rm.enumerate_gpus || !xpu_rm.open_gpu || !xpu_rm.close_gpu) {
		pr_err("nvidia_get_rm_ops refused version %s; refusing to load\n",
		       xpu_rm_version);
		return -ENODEV;
	}
	if (sscanf(xpu_rm_version, "%u.%u.%u", &xpu_rm_ver[0], &xpu_rm_ver[1],
		   &xpu_rm_ver[2]) < 2) {
		pr_err("cannot read driver version '%s'; refusing to load\n",
		       xpu_rm_version);
		return -EINVAL;
	}
	xpu_abi = nv_abi_for_version(xpu_rm_ver[0]);

	ret = -ENOMEM;
	xpu_rm_ops = kzalloc(sizeof(*xpu_rm_ops), GFP_KERNEL);
	xpu_rm_pidinfo = kzalloc(sizeof(*xpu_rm_pidinfo), GFP_KERNEL);
	gi = kcalloc(NV_MAX_GPUS, sizeof(*gi), GFP_KERNEL);
	if (!xpu_rm_ops || !xpu_rm_pidinfo || !gi)
		goto err_free;
	ret = xpu_rm.alloc_stack(&xpu_rm_sp);
	if (ret)
		goto err_free;
	xpu_rm_have = true;

	mutex_lock(&xpu_rm_lock);
	xpu_rm_client = 0;
	status = xpu_rm_alloc_locked(0, &h, NV01_ROOT, NULL, 0);
	xpu_rm_client = h;
	mutex_unlock(&xpu_rm_lock);
	if (status) {
		pr_err("cannot allocate a kernel RM client (status 0x%x)\n", status);
		ret = -EIO;
		goto err_stack;
	}
	n = xpu_rm.enumerate_gpus(gi);
	for (i = 0; i < n && i < XPU_MAX_GPUS; i++) {
		ret = xpu_rm_add_gpu(&gi[i]);
		if (ret)
			goto err_client;
	}
	kfree(gi);
	pr_info("driver %s, %u GPU(s)\n", xpu_rm_version, xpu_nr_gpus);
	return 0;

err_client:
	xpu_rm_free_own_client();
	xpu_rm_close_gpus();
err_stack:
	xpu_rm.free_stack(xpu_rm_sp);
	xpu_rm_have = false;
err_free:
	kfree(gi);
	kfree(xpu_rm_pidinfo);
	kfree(xpu_rm_ops);
	return ret;
}

void xpu_rm_exit(void)
{
	if (!xpu_rm_have)
		return;
	/* Freeing the client frees its devices and subdevices. */
	xpu_rm_free_own_client();
	xpu_rm_close_gpus();
	xpu_rm.free_stack(xpu_rm_sp);
	xpu_rm_have = false;
	kfree(xpu_rm_pidinfo);
	kfree(xpu_rm_ops);
}
