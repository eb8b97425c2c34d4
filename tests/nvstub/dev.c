// SPDX-License-Identifier: GPL-2.0
/*
 * The character devices and the ioctl entry as kernel-open/nvidia/nv.c has
 * them (nvidia_fops, nvidia_ioctl), and the escape table of
 * src/nvidia/arch/nvalloc/unix/src/escape.c (RmIoctl) with rm_ioctl()'s and
 * rm_perform_version_check()'s part of osapi.c.
 */
#include <linux/cdev.h>
#include <linux/delay.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "info.h"
#include "nvstub.h"

static int nvidia_open(struct inode *inode, struct file *filp);
static int nvidia_close(struct inode *inode, struct file *filp);
static void nvstub_free_os_events(struct nvstub_file *nf, u32 hc);
static __poll_t nvidia_poll(struct file *filp, poll_table *wait);
static long nvidia_unlocked_ioctl(struct file *filp, unsigned int cmd,
				  unsigned long arg);

/*
 * Writable, as nv.c's: an interposer finds this table through an open
 * file's f_op and may change it in place.
 */
static struct file_operations nvidia_fops = {
	.owner = THIS_MODULE,
	.poll = nvidia_poll,
	.unlocked_ioctl = nvidia_unlocked_ioctl,
	.compat_ioctl = nvidia_unlocked_ioctl,
	.mmap = nvstub_mmap,
	.open = nvidia_open,
	.release = nvidia_close,
};

static struct cdev nvstub_gpu_cdev;
static struct cdev nvstub_ctl_cdev;

/* Every live struct nvstub_file, to tell our private_data from others'. */
static DEFINE_XARRAY(nvstub_files);

/* SYS_PARAMS' memblock size: set once (under nvstub_rm_lock). */
static u64 nvstub_memblock_size;

/*
 * nv_get_file_private(): F is a major-195 file whose private data is ours.
 * The real driver trusts private_data there; the stub checks it.
 */
struct nvstub_file *nvstub_file_lookup(struct file *f)
{
	struct nvstub_file *nf = f->private_data;

	if (imajor(file_inode(f)) != NV_MAJOR_DEVICE_NUMBER || !nf)
		return NULL;
	return xa_load(&nvstub_files, (unsigned long)nf) == nf ? nf : NULL;
}

static int nvstub_match_gpu_file(const void *data, struct file *f,
				 unsigned int fd)
{
	struct nvstub_file *nf;

	if (!f->private_data)
		return 0;
	/* nv_match_dev_state(): from 550 the f_op, before it the major */
	if (nvstub_abi->since_550 && f->f_op != &nvidia_fops)
		return 0;
	nf = nvstub_file_lookup(f);
	return nf && nf->gpu == data;
}

/* nv_is_gpu_accessible(): the caller's fd table holds a file of GPU. */
bool nvstub_fd_table_has_gpu(struct nvstub_gpu *gpu)
{
	return current->files &&
	       iterate_fd(current->files, 0, nvstub_match_gpu_file, gpu);
}

static int nvidia_open(struct inode *inode, struct file *filp)
{
	unsigned int minor = iminor(inode);
	struct nvstub_file *nf;
	int ret;

	if (minor != NV_MINOR_CONTROL && minor >= nvstub_ngpus)
		return -ENODEV;
	if (minor != NV_MINOR_CONTROL && READ_ONCE(nvstub_open_delay_us))
		fsleep(READ_ONCE(nvstub_open_delay_us));
	nf = kzalloc(sizeof(*nf), GFP_KERNEL);
	if (!nf)
		return -ENOMEM;
	nf->filp = filp;
	mutex_init(&nf->ctx_lock);
	if (minor != NV_MINOR_CONTROL) {
		nf->gpu = &nvstub_gpus[minor];
		/* nv_init_mapping_revocation(): per-file unmap_mapping_range() */
		address_space_init_once(&nf->mapping);
		nf->mapping.host = inode;
		nf->mapping.a_ops = inode->i_mapping->a_ops;
		filp->f_mapping = &nf->mapping;
	}
	ret = xa_insert(&nvstub_files, (unsigned long)nf, nf, GFP_KERNEL);
	if (ret) {
		kfree(nf);
		return ret;
	}
	if (nf->gpu) {
		mutex_lock(&nvstub_rm_lock);
		nvstub_gpu_get(nf->gpu);
		mutex_unlock(&nvstub_rm_lock);
	}
	filp->private_data = nf;
	return 0;
}

static void nvstub_detach_gpus(struct nvstub_file *nf, size_t n)
{
	unsigned int i;
	size_t k;

	lockdep_assert_held(&nvstub_rm_lock);
	for (k = 0; k < n; k++)
		for (i = 0; i < nvstub_ngpus; i++)
			if (nf->attached_gpus[k] &&
			    nvstub_gpus[i].gpu_id == nf->attached_gpus[k]) {
				nvstub_gpus[i].attach_count--;
				nvstub_gpu_put(&nvstub_gpus[i]);
			}
}

static int nvidia_close(struct inode *inode, struct file *filp)
{
	struct nvstub_file *nf = filp->private_data;

	if (!nf->gpu && READ_ONCE(nvstub_close_delay_us))
		fsleep(READ_ONCE(nvstub_close_delay_us));
	nvstub_rm_free_clients_of(nf);
	nvstub_free_os_events(nf, 0);
	nvstub_export_release(nf);
	nvstub_ctx_release(nf);

	mutex_lock(&nvstub_rm_lock);
	nvstub_detach_gpus(nf, nf->nattached);
	if (nf->gpu)
		nvstub_gpu_put(nf->gpu);
	mutex_unlock(&nvstub_rm_lock);
	kfree(nf->attached_gpus);
	if (nf->ctl_filp)
		fput(nf->ctl_filp);

	xa_erase(&nvstub_files, (unsigned long)nf);
	kfree(nf);
	return 0;
}

static __poll_t nvidia_poll(struct file *filp, poll_table *wait)
{
	return 0;	/* no OS events in the stub */
}

/* --- escapes nv.c handles itself */

static int nvstub_card_info(struct nv_ioctl_card_info *ci, size_t n)
{
	unsigned int i;

	/* nvidia_read_card_info(): "Clear each card's flags field the lazy way" */
	memset(ci, 0, n * sizeof(*ci));
	if (n < nvstub_ngpus)
		return -EINVAL;
	for (i = 0; i < nvstub_ngpus; i++) {
		struct nvstub_gpu *gpu = &nvstub_gpus[i];

		ci[i].valid = 1;
		ci[i].pci_info.domain = 0;
		ci[i].pci_info.bus = gpu->bus;
		ci[i].pci_info.slot = 0;
		ci[i].pci_info.vendor_id = NVSTUB_VENDOR_ID;
		ci[i].pci_info.device_id = NVSTUB_DEVICE_ID;
		ci[i].gpu_id = gpu->gpu_id;
		ci[i].interrupt_line = 0;
		ci[i].reg_address = gpu->reg_address;
		ci[i].reg_size = NVSTUB_BAR0_SIZE;
		ci[i].fb_address = gpu->fb_address;
		ci[i].fb_size = NVSTUB_BAR1_SIZE;
		ci[i].minor_number = gpu->index;
	}
	return 0;
}

static int nvstub_attach_gpus(struct nvstub_file *nf, u32 *ids, size_t size)
{
	size_t n = size / sizeof(u32), k;
	unsigned int i;
	int ret = 0;

	if (n == 0 || size % sizeof(u32))
		return -EINVAL;

	mutex_lock(&nvstub_rm_lock);
	if (nf->nattached) {
		ret = -EINVAL;
		goto out;
	}
	nf->attached_gpus = kmemdup(ids, size, GFP_KERNEL);
	if (!nf->attached_gpus) {
		ret = -ENOMEM;
		goto out;
	}
	for (k = 0; k < n; k++) {
		if (!ids[k])
			continue;
		for (i = 0; i < nvstub_ngpus; i++)
			if (nvstub_gpus[i].gpu_id == ids[k])
				break;
		if (i == nvstub_ngpus) {	/* nvidia_dev_get() failed */
			nvstub_detach_gpus(nf, k);
			kfree(nf->attached_gpus);
			nf->attached_gpus = NULL;
			ret = -EINVAL;
			goto out;
		}
		nvstub_gpus[i].attach_count++;
		nvstub_gpu_get(&nvstub_gpus[i]);
	}
	nf->nattached = n;
out:
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}

/* RmPerformVersionCheck() */
static int nvstub_check_version(struct nv_ioctl_rm_api_version *p, size_t size)
{
	bool relaxed;
	unsigned int i;
	char c;

	if (size != sizeof(*p))
		return -EINVAL;
	p->reply = NV_RM_API_VERSION_REPLY_RECOGNIZED;
	if (p->cmd == NV_RM_API_VERSION_CMD_QUERY) {
		strcpy(p->version_string, nvstub_version);
		return 0;
	}
	relaxed = p->cmd == NV_RM_API_VERSION_CMD_RELAXED;
	for (i = 0; i < NV_RM_API_VERSION_STRING_LENGTH; i++) {
		c = p->version_string[i];
		if (c != nvstub_version[i])
			break;
		if (relaxed && c == '.')
			return 0;
		if (c == '\0')
			return 0;
	}
	p->version_string[NV_RM_API_VERSION_STRING_LENGTH - 1] = '\0';
	pr_err_ratelimited("NVRM: API mismatch: the client '%s' (pid %d) has the version %s, but this kernel module has the version %s.\n",
			   current->comm, task_tgid_nr(current),
			   p->version_string, nvstub_version);
	strcpy(p->version_string, nvstub_version);
	return -EINVAL;
}

static int nvstub_sys_params(struct nv_ioctl_sys_params *p, size_t size)
{
	int ret = 0;

	if (size != sizeof(*p))
		return -EINVAL;
	mutex_lock(&nvstub_rm_lock);
	if (!nvstub_memblock_size)
		nvstub_memblock_size = p->memblock_size;
	else if (nvstub_memblock_size != p->memblock_size)
		ret = -EBUSY;
	mutex_unlock(&nvstub_rm_lock);
	return ret;
}

/*
 * NUMA_INFO (nv.c, osapi.c rm_get_gpu_numa_info, kern_mem_sys_ctrl.c
 * subdeviceCtrlCmdFbGetNumaInfo; 535 to 595), GPU files only: the GPU's
 * NUMA node and the range of its memory onlined as one, none on the
 * stub's H200, which is not coherent with the CPU (NV0000_CTRL_NO_NUMA_NODE,
 * 0 and 0, no offline page there, status DISABLED, no auto-online), and the
 * memory-block size SYS_PARAMS set (0 before).  From 545 the caller's
 * offline-address count goes to RM as the room it has, and past 64 RM
 * refuses it (NV_ERR_INVALID_ARGUMENT: -EBUSY); 535 sets it to 64 itself.
 */
static int nvstub_numa_info(struct nv_ioctl_numa_info *p, size_t size)
{
	if (size != sizeof(*p))
		return -EINVAL;
	if (nvstub_abi->since >= 545 && p->offline_addresses.num_entries >
	    NV_IOCTL_NUMA_INFO_MAX_OFFLINE_ADDRESSES)
		return -EBUSY;
	p->nid = NV0000_CTRL_NO_NUMA_NODE;
	p->numa_mem_addr = 0;
	p->numa_mem_size = 0;
	p->offline_addresses.num_entries = 0;
	p->status = NV_IOCTL_NUMA_STATUS_DISABLED;
	p->use_auto_online = 0;
	mutex_lock(&nvstub_rm_lock);
	p->memblock_size = nvstub_memblock_size;
	mutex_unlock(&nvstub_rm_lock);
	return 0;
}

/* --- RmIoctl */

enum nvstub_where { NVSTUB_ANY, NVSTUB_CTL, NVSTUB_GPU };

struct nvstub_escape {
	u32 nr;
	u32 size;		/* 0: by version, see nvstub_escape_size() */
	enum nvstub_where where;
	u32 status;		/* offset of status, for unsimulated ones */
	u32 (*handler)(struct nvstub_call *call, void *buf, u32 size);
};

static void nvstub_put_status(void *buf, u32 off, u32 status)
{
	memcpy(buf + off, &status, sizeof(status));
}

/*
 * OS events (osapi.c allocate_os_event / free_os_event / free_os_events):
 * one list for the whole driver, on the control device.  ALLOC_OS_EVENT
 * ties (hClient, fd) to the file it was called on, any file, with neither
 * checked: the client need not exist, nor be the caller's; the only rule is
 * one event a (hClient, fd), looked for through the whole list, and any
 * failure reads NV_ERR_INSUFFICIENT_RESOURCES.  FREE_OS_EVENT takes the
 * event of (hClient, fd), whoever made it (NV_ERR_INVALID_EVENT if none).
 * An RM_FREE of a client that succeeds takes every event of that handle
 * (escape.c, rm_client_free_os_events), and a file's close the events tied
 * to it (RmFreeUnusedClients).  No count bounds the list.  The stub posts
 * no event (RM_GET_EVENT_DATA: NV_ERR_NOT_SUPPORTED).
 */
struct nvstub_os_event {
	struct list_head link;
	struct nvstub_file *nf;
	u32 h_parent, fd;
};

static LIST_HEAD(nvstub_os_events);
static DEFINE_SPINLOCK(nvstub_os_events_lock);

static u32 nvstub_alloc_os_event(struct nvstub_file *nf, u32 hc, u32 fd)
{
	struct nvstub_os_event *ev = kmalloc(sizeof(*ev), GFP_KERNEL), *e;

	if (!ev)
		return NV_ERR_INSUFFICIENT_RESOURCES;
	ev->nf = nf;
	ev->h_parent = hc;
	ev->fd = fd;
	spin_lock(&nvstub_os_events_lock);
	list_for_each_entry(e, &nvstub_os_events, link) {
		if (e->h_parent == hc && e->fd == fd) {
			spin_unlock(&nvstub_os_events_lock);
			kfree(ev);
			return NV_ERR_INSUFFICIENT_RESOURCES;
		}
	}
	list_add(&ev->link, &nvstub_os_events);
	spin_unlock(&nvstub_os_events_lock);
	return NV_OK;
}

static u32 nvstub_free_os_event(u32 hc, u32 fd)
{
	struct nvstub_os_event *e;

	spin_lock(&nvstub_os_events_lock);
	list_for_each_entry(e, &nvstub_os_events, link) {
		if (e->h_parent == hc && e->fd == fd) {
			list_del(&e->link);
			spin_unlock(&nvstub_os_events_lock);
			kfree(e);
			return NV_OK;
		}
	}
	spin_unlock(&nvstub_os_events_lock);
	return NV_ERR_INVALID_EVENT;
}

/* Whether (HC, FD) has an OS event (osUserHandleToKernelPtr's search). */
bool nvstub_os_event_exists(u32 hc, u32 fd)
{
	struct nvstub_os_event *e;
	bool found = false;

	spin_lock(&nvstub_os_events_lock);
	list_for_each_entry(e, &nvstub_os_events, link) {
		if (e->h_parent == hc && e->fd == fd) {
			found = true;
			break;
		}
	}
	spin_unlock(&nvstub_os_events_lock);
	return found;
}

/* The events of client HC (NF NULL), or those tied to NF. */
static void nvstub_free_os_events(struct nvstub_file *nf, u32 hc)
{
	struct nvstub_os_event *e, *n;
	LIST_HEAD(gone);

	spin_lock(&nvstub_os_events_lock);
	list_for_each_entry_safe(e, n, &nvstub_os_events, link)
		if (nf ? e->nf == nf : e->h_parent == hc)
			list_move(&e->link, &gone);
	spin_unlock(&nvstub_os_events_lock);
	list_for_each_entry_safe(e, n, &gone, link)
		kfree(e);
}

static u32 nvstub_esc_rm_free(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos00_parameters *p = buf;

	mutex_lock(&nvstub_rm_lock);
	p->status = nvstub_rm_free(call, p->h_root, p->h_object_old);
	mutex_unlock(&nvstub_rm_lock);
	if (p->status == NV_OK && p->h_object_old == p->h_root)
		nvstub_free_os_events(NULL, p->h_root);
	return NV_OK;
}

static u32 nvstub_esc_rm_control(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos54_parameters *p = buf;

	p->status = nvstub_rm_control(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_idle_channels(struct nvstub_call *call, void *buf,
				       u32 size)
{
	struct nvos30_parameters *p = buf;

	p->status = nvstub_esc_idle_channels(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_access_registry(struct nvstub_call *call, void *buf,
					 u32 size)
{
	struct nvos38_parameters *p = buf;

	p->status = nvstub_access_registry(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_dup(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos55_parameters *p = buf;

	mutex_lock(&nvstub_rm_lock);
	p->status = nvstub_rm_dup(call, p);
	mutex_unlock(&nvstub_rm_lock);
	return NV_OK;
}

static u32 nvstub_esc_rm_share(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos57_parameters *p = buf;

	mutex_lock(&nvstub_rm_lock);
	p->status = nvstub_rm_share(call, p);
	mutex_unlock(&nvstub_rm_lock);
	return NV_OK;
}

static u32 nvstub_esc_vid_heap_control(struct nvstub_call *call, void *buf,
				       u32 size)
{
	struct nvos32_parameters *p = buf;

	p->status = nvstub_esc_vid_heap(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_alloc_memory(struct nvstub_call *call, void *buf,
				      u32 size)
{
	struct nvos02_with_fd *p = buf;
	u32 esc = NV_OK;

	p->params.status = nvstub_esc_alloc_memory(call, p, &esc);
	return esc;
}

static u32 nvstub_esc_rm_alloc_context_dma(struct nvstub_call *call,
					   void *buf, u32 size)
{
	struct nvos39_parameters *p = buf;

	p->status = nvstub_esc_alloc_context_dma(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_map(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos33_with_fd *p = buf;

	p->params.status = nvstub_esc_map_memory(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_unmap(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos34_parameters *p = buf;

	p->status = nvstub_esc_unmap_memory(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_bind_context_dma(struct nvstub_call *call,
					  void *buf, u32 size)
{
	struct nvos49_parameters *p = buf;

	p->status = nvstub_esc_bind_context_dma(call, p);
	return NV_OK;
}

static u32 nvstub_esc_rm_update_mapping(struct nvstub_call *call, void *buf,
					u32 size)
{
	struct nvos56_parameters *p = buf;

	p->status = nvstub_esc_update_mapping(call, p);
	return NV_OK;
}

static u32 nvstub_esc_status_code(struct nvstub_call *call, void *buf,
				  u32 size)
{
	struct nv_ioctl_status_code *p = buf;
	unsigned int i;

	/* nv_get_adapter_state() */
	for (i = 0; i < nvstub_ngpus; i++) {
		if (p->domain == 0 && p->bus == nvstub_gpus[i].bus && p->slot == 0) {
			p->status = NV_OK;
			return NV_OK;
		}
	}
	return NV_ERR_INVALID_ARGUMENT;
}

/* NV_ESC_REGISTER_FD: this file acts for a ctl file from now on. */
static u32 nvstub_esc_register_fd(struct nvstub_call *call, void *buf,
				  u32 size)
{
	struct nv_ioctl_register_fd *p = buf;
	struct nvstub_file *nf = call->nf, *ctl;
	struct file *f;
	u32 status = NV_OK;

	mutex_lock(&nvstub_rm_lock);
	if (nf->ctl) {
		status = NV_ERR_INVALID_STATE;
		goto out;
	}
	f = fget(p->ctl_fd);
	if (!f) {
		status = NV_ERR_INVALID_ARGUMENT;
		goto out;
	}
	ctl = nvstub_file_lookup(f);
	if (!ctl || iminor(file_inode(f)) != NV_MINOR_CONTROL ||
	    ctl == nf || ctl->ctl) {	/* no self-links, no chains */
		fput(f);
		status = NV_ERR_INVALID_ARGUMENT;
		goto out;
	}
	/* pinned until this file is closed */
	nf->ctl_filp = f;
	WRITE_ONCE(nf->ctl, ctl);
out:
	mutex_unlock(&nvstub_rm_lock);
	return status;
}

/* RM_ALLOC: NVOS21 or NVOS64 by size; the device rule depends on the class */
static u32 nvstub_esc_rm_alloc(struct nvstub_call *call, void *buf, u32 size)
{
	struct nvos21_parameters *p21 = buf;
	struct nvos64_parameters *p64 = buf;
	u32 status;

	switch (p21->h_class) {
	case NV01_ROOT:
	case NV01_ROOT_CLIENT:
	case NV01_ROOT_NON_PRIV:
		if (!nvstub_file_is_ctl(call->nf))
			return NV_ERR_INVALID_ARGUMENT;
		/* "Force userspace client allocations to be the _CLIENT class." */
		p21->h_class = NV01_ROOT_CLIENT;
		break;
	case NV01_EVENT:
	case NV01_EVENT_OS_EVENT:
	case NV01_EVENT_KERNEL_CALLBACK:
	case NV01_EVENT_KERNEL_CALLBACK_EX:
		break;
	default:
		if (!nvstub_file_is_ctl(call->nf))
			return NV_ERR_INVALID_ARGUMENT;
		break;
	}

	status = nvstub_rm_alloc(call, p21->h_root, p21->h_object_parent,
				 &p21->h_object_new, p21->h_class,
				 p21->p_alloc_parms);
	if (size == sizeof(*p64))
		p64->status = status;
	else
		p21->status = status;
	return NV_OK;
}

/*
 * RM_ALLOC_OBJECT: Nv01AllocObjectWithSecInfo(), an allocation with no
 * parameters (escape.c); the control node only, like RM_ALLOC.  Classes that
 * need parameters refuse NULL themselves; a device takes instance 0 before
 * 550 (nvstub_device_construct).
 */
static u32 nvstub_esc_rm_alloc_object(struct nvstub_call *call, void *buf,
				      u32 size)
{
	struct nvos05_parameters *p = buf;

	p->status = nvstub_rm_alloc(call, p->h_root, p->h_object_parent,
				    &p->h_object_new, p->h_class, 0);
	return NV_OK;
}

static const struct nvstub_escape nvstub_escapes[] = {
	{ NV_ESC_RM_ALLOC_MEMORY, sizeof(struct nvos02_with_fd), NVSTUB_GPU, 0,
	  nvstub_esc_rm_alloc_memory },
	{ NV_ESC_RM_ALLOC_OBJECT, sizeof(struct nvos05_parameters), NVSTUB_CTL,
	  0, nvstub_esc_rm_alloc_object },
	{ NV_ESC_RM_FREE, sizeof(struct nvos00_parameters), NVSTUB_CTL, 0,
	  nvstub_esc_rm_free },
	{ NV_ESC_RM_VID_HEAP_CONTROL, sizeof(struct nvos32_parameters),
	  NVSTUB_CTL, 0, nvstub_esc_vid_heap_control },
	{ NV_ESC_RM_I2C_ACCESS, NVOS_I2C_ACCESS_SIZE, NVSTUB_GPU,
	  NVOS_I2C_ACCESS_STATUS },
	{ NV_ESC_RM_IDLE_CHANNELS, NVOS30_SIZE, NVSTUB_CTL, 0,
	  nvstub_esc_rm_idle_channels },
	{ NV_ESC_RM_MAP_MEMORY, sizeof(struct nvos33_with_fd), NVSTUB_CTL, 0,
	  nvstub_esc_rm_map },
	{ NV_ESC_RM_UNMAP_MEMORY, sizeof(struct nvos34_parameters), NVSTUB_CTL,
	  0, nvstub_esc_rm_unmap },
	{ NV_ESC_RM_ACCESS_REGISTRY, NVOS38_SIZE, NVSTUB_CTL, 0,
	  nvstub_esc_rm_access_registry },
	{ NV_ESC_RM_ALLOC_CONTEXT_DMA2, sizeof(struct nvos39_parameters),
	  NVSTUB_CTL, 0, nvstub_esc_rm_alloc_context_dma },
	{ NV_ESC_RM_BIND_CONTEXT_DMA, NVOS49_SIZE, NVSTUB_CTL, 0,
	  nvstub_esc_rm_bind_context_dma },
	{ NV_ESC_RM_MAP_MEMORY_DMA, 0, NVSTUB_CTL, 0, nvstub_esc_map_memory_dma },
	{ NV_ESC_RM_UNMAP_MEMORY_DMA, 0, NVSTUB_CTL, 0,
	  nvstub_esc_unmap_memory_dma },
	{ NV_ESC_RM_DUP_OBJECT, sizeof(struct nvos55_parameters), NVSTUB_CTL, 0,
	  nvstub_esc_rm_dup },
	{ NV_ESC_RM_SHARE, NVOS57_SIZE, NVSTUB_CTL, 0, nvstub_esc_rm_share },
	{ NV_ESC_STATUS_CODE, sizeof(struct nv_ioctl_status_code), NVSTUB_CTL, 0,
	  nvstub_esc_status_code },
	{ NV_ESC_RM_CONTROL, sizeof(struct nvos54_parameters), NVSTUB_CTL, 0,
	  nvstub_esc_rm_control },
	{ NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO, NVOS56_SIZE, NVSTUB_CTL, 0,
	  nvstub_esc_rm_update_mapping },
	{ NV_ESC_REGISTER_FD, sizeof(struct nv_ioctl_register_fd), NVSTUB_ANY, 0,
	  nvstub_esc_register_fd },
};

/* NVOS46 and NVOS47 changed size; their status is their last word */
static u32 nvstub_escape_size(const struct nvstub_escape *e, u32 *status)
{
	u32 size = e->size;

	if (e->nr == NV_ESC_RM_MAP_MEMORY_DMA)
		size = nvstub_abi->nvos46_size;
	else if (e->nr == NV_ESC_RM_UNMAP_MEMORY_DMA)
		size = nvstub_abi->nvos47_size;
	*status = e->size ? e->status : size - 8;
	return size;
}

static u32 nvstub_rm_ioctl(struct nvstub_file *nf, u32 nr, void *buf, u32 size)
{
	struct nvstub_call call = { .nf = nf, .os_info = nvstub_os_info(nf) };
	const struct nvstub_escape *e;
	unsigned int i;
	u32 want, status_off;

	switch (nr) {	/* rm_ioctl(): the OS-event escapes */
	case NV_ESC_ALLOC_OS_EVENT:
	case NV_ESC_FREE_OS_EVENT: {
		struct nv_ioctl_os_event *p = buf;

		if (size != NV_IOCTL_OS_EVENT_SIZE)
			return NV_ERR_INVALID_ARGUMENT;
		p->status = nr == NV_ESC_ALLOC_OS_EVENT ?
			nvstub_alloc_os_event(nf, p->h_client, p->fd) :
			nvstub_free_os_event(p->h_client, p->fd);
		return NV_OK;
	}
	case NV_ESC_RM_GET_EVENT_DATA:
		if (size != NVOS41_SIZE)
			return NV_ERR_INVALID_ARGUMENT;
		nvstub_put_status(buf, NVOS41_STATUS, NV_ERR_NOT_SUPPORTED);
		return NV_OK;
	}

	for (i = 0; i < ARRAY_SIZE(nvstub_escapes); i++) {
		e = &nvstub_escapes[i];
		if (e->nr != nr)
			continue;
		want = nvstub_escape_size(e, &status_off);
		if (size != want)
			return NV_ERR_INVALID_ARGUMENT;
		if ((e->where == NVSTUB_CTL && !nvstub_file_is_ctl(nf)) ||
		    (e->where == NVSTUB_GPU && nvstub_file_is_ctl(nf)))
			return NV_ERR_INVALID_ARGUMENT;
		if (!e->handler) {
			/* RM has it; the stub does not simulate it */
			nvstub_put_status(buf, status_off, NV_ERR_NOT_SUPPORTED);
			return NV_OK;
		}
		return e->handler(&call, buf, size);
	}

	if (nr == NV_ESC_RM_ALLOC) {
		if (size != sizeof(struct nvos21_parameters) &&
		    size != sizeof(struct nvos64_parameters))
			return NV_ERR_INVALID_ARGUMENT;
		return nvstub_esc_rm_alloc(&call, buf, size);
	}
	return NV_ERR_GENERIC;	/* "unknown NVRM ioctl command" */
}

static int nvstub_dispatch(struct nvstub_file *nf, u32 nr, void *buf, u32 size)
{
	bool ctl = nvstub_file_is_ctl(nf);

	switch (nr) {
	case NV_ESC_WAIT_OPEN_COMPLETE:
		if (!nvstub_abi->since_550)
			break;
		if (size != sizeof(struct nv_ioctl_wait_open_complete))
			return -EINVAL;
		memset(buf, 0, size);	/* rc 0, adapter status NV_OK */
		return 0;
	case NV_ESC_QUERY_DEVICE_INTR:
		return -EINVAL;		/* GPU only, and no registers mapped */
	case NV_ESC_CARD_INFO:
		if (!ctl)
			return -EINVAL;
		return nvstub_card_info(buf, size / sizeof(struct nv_ioctl_card_info));
	case NV_ESC_ATTACH_GPUS_TO_FD:
		if (!ctl)
			return -EINVAL;
		return nvstub_attach_gpus(nf, buf, size);
	case NV_ESC_CHECK_VERSION_STR:
		if (!ctl)
			return -EINVAL;
		return nvstub_check_version(buf, size);
	case NV_ESC_SYS_PARAMS:
		if (!ctl)
			return -EINVAL;
		return nvstub_sys_params(buf, size);
	case NV_ESC_EXPORT_TO_DMABUF_FD:
		return nvstub_dmabuf_export(nf, buf, size);
	case NV_ESC_NUMA_INFO:
		if (ctl)
			return -EINVAL;		/* NV_ACTUAL_DEVICE_ONLY */
		return nvstub_numa_info(buf, size);
	}
	return nvstub_rm_ioctl(nf, nr, buf, size) == NV_OK ? 0 : -EINVAL;
}

/*
 * nvidia_ioctl(): the argument (or the XFER'd one) is copied in whole,
 * dispatched and copied back, also on error, but not after a fault.
 */
static long nvidia_unlocked_ioctl(struct file *filp, unsigned int cmd,
				  unsigned long arg)
{
	struct nvstub_file *nf = filp->private_data;
	void __user *uptr = (void __user *)arg;
	u32 size = _IOC_SIZE(cmd), nr = _IOC_NR(cmd);
	struct nv_ioctl_xfer xfer;
	void *buf;
	int ret;

	if (nr == NV_ESC_IOCTL_XFER_CMD) {
		if (size != sizeof(xfer))
			return -EINVAL;
		if (copy_from_user(&xfer, uptr, sizeof(xfer)))
			return -EFAULT;
		nr = xfer.cmd;
		size = xfer.size;
		uptr = u64_to_user_ptr(xfer.ptr);
		if (size > NV_ABSOLUTE_MAX_IOCTL_SIZE)
			return -EINVAL;
	}

	buf = kmalloc(size, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	if ((nr == NV_ESC_RM_FREE || nr == NV_ESC_RM_ALLOC ||
	     nr == NV_ESC_RM_ALLOC_OBJECT ||
	     nr == NV_ESC_SYS_PARAMS || nr == NV_ESC_ATTACH_GPUS_TO_FD ||
	     nr == NV_ESC_REGISTER_FD) && READ_ONCE(nvstub_copyin_delay_us))
		fsleep(READ_ONCE(nvstub_copyin_delay_us));
	if (nr == NV_ESC_RM_CONTROL && READ_ONCE(nvstub_control_delay_us))
		fsleep(READ_ONCE(nvstub_control_delay_us));
	if (nr == NV_ESC_RM_MAP_MEMORY && READ_ONCE(nvstub_map_delay_us))
		fsleep(READ_ONCE(nvstub_map_delay_us));
	if (copy_from_user(buf, uptr, size)) {
		kfree(buf);
		return -EFAULT;
	}
	ret = nvstub_dispatch(nf, nr, buf, size);
	if (ret != -EFAULT && copy_to_user(uptr, buf, size))
		ret = -EFAULT;
	if ((nr == NV_ESC_RM_FREE || nr == NV_ESC_RM_ALLOC ||
	     nr == NV_ESC_RM_ALLOC_CONTEXT_DMA2 ||
	     nr == NV_ESC_ALLOC_OS_EVENT || nr == NV_ESC_FREE_OS_EVENT) &&
	    READ_ONCE(nvstub_copyout_delay_us))
		fsleep(READ_ONCE(nvstub_copyout_delay_us));
	if (nr == NV_ESC_RM_MAP_MEMORY && READ_ONCE(nvstub_map_delay_us))
		fsleep(READ_ONCE(nvstub_map_delay_us));
	kfree(buf);
	return ret;
}

/* Major 195 in two ranges, minors 0..gpus-1 and 255, as nv.c from 545. */
int nvstub_dev_init(void)
{
	dev_t gpus = MKDEV(NV_MAJOR_DEVICE_NUMBER, 0);
	dev_t ctl = MKDEV(NV_MAJOR_DEVICE_NUMBER, NV_MINOR_CONTROL);
	int ret;

	ret = register_chrdev_region(gpus, nvstub_ngpus, "nvidia");
	if (ret)
		return ret;
	ret = register_chrdev_region(ctl, 1, "nvidiactl");
	if (ret)
		goto err_unregister_gpus;

	cdev_init(&nvstub_gpu_cdev, &nvidia_fops);
	nvstub_gpu_cdev.owner = THIS_MODULE;
	ret = cdev_add(&nvstub_gpu_cdev, gpus, nvstub_ngpus);
	if (ret)
		goto err_unregister_ctl;
	cdev_init(&nvstub_ctl_cdev, &nvidia_fops);
	nvstub_ctl_cdev.owner = THIS_MODULE;
	ret = cdev_add(&nvstub_ctl_cdev, ctl, 1);
	if (ret)
		goto err_del_gpus;
	return 0;

err_del_gpus:
	cdev_del(&nvstub_gpu_cdev);
err_unregister_ctl:
	unregister_chrdev_region(ctl, 1);
err_unregister_gpus:
	unregister_chrdev_region(gpus, nvstub_ngpus);
	return ret;
}

void nvstub_dev_exit(void)
{
	cdev_del(&nvstub_ctl_cdev);
	cdev_del(&nvstub_gpu_cdev);
	unregister_chrdev_region(MKDEV(NV_MAJOR_DEVICE_NUMBER, NV_MINOR_CONTROL), 1);
	unregister_chrdev_region(MKDEV(NV_MAJOR_DEVICE_NUMBER, 0), nvstub_ngpus);
	xa_destroy(&nvstub_files);
}
