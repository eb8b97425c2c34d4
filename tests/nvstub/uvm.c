// SPDX-License-Identifier: GPL-2.0
/*
 * A minimal /dev/nvidia-uvm (kernel-open/nvidia-uvm: uvm.c, uvm_api.h,
 * uvm_linux_ioctl.h, uvm_ioctl.h): what libcuda's cuInit asks of it.
 *
 * A dynamic character major named "nvidia-uvm" with minors 0 (nvidia-uvm)
 * and 1 (nvidia-uvm-tools), as the real module registers; nvidia-modprobe
 * -u makes the nodes from /proc/devices. ioctl numbers are the raw UVM
 * command numbers. A routed command copies its params in, sets rmStatus
 * (NV_ERR_ILLEGAL_ACTION before UVM_INITIALIZE for the commands that check),
 * and copies them back; the ioctl itself returns 0.
 *
 * stub: only UVM_INITIALIZE, UVM_DEINITIALIZE, UVM_MM_INITIALIZE and
 * UVM_PAGEABLE_MEM_ACCESS are simulated. Every other number is -EINVAL, which is what the real module
 * answers for a number it does not route (uvm_test_ioctl without
 * uvm_enable_builtin_tests); mmap is -EBADFD before UVM_INITIALIZE (as the
 * real one) and -EINVAL after (stub: no managed memory).
 */
#include <linux/cdev.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "nvstub.h"

#define UVM_INITIALIZE			0x30000001
#define UVM_DEINITIALIZE		0x30000002
#define UVM_PAGEABLE_MEM_ACCESS		39
#define UVM_MM_INITIALIZE		75
#define NV_WARN_NOTHING_TO_DO		0x10006
#define UVM_INIT_FLAGS_MASK		0x3ull	/* DISABLE_HMM | MULTI_PROCESS_SHARING_MODE */
#define NV_ERR_ILLEGAL_ACTION		0x16
#define NVSTUB_UVM_MINORS		2	/* nvidia-uvm, nvidia-uvm-tools */

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

struct nvstub_uvm_file {
	struct mutex lock;
	bool initialized;
	u64 flags;			/* the va_space's initialization_flags */
};

static dev_t nvstub_uvm_dev;
static const struct file_operations nvstub_uvm_fops;
static struct cdev nvstub_uvm_cdev;

static int nvstub_uvm_open(struct inode *inode, struct file *file)
{
	struct nvstub_uvm_file *uf = kzalloc(sizeof(*uf), GFP_KERNEL);

	if (!uf)
		return -ENOMEM;
	mutex_init(&uf->lock);
	file->private_data = uf;
	return 0;
}

static int nvstub_uvm_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

/* uvm_api_initialize(): once per file; again only with the same flags */
static u32 nvstub_uvm_initialize(struct nvstub_uvm_file *uf,
				 struct uvm_initialize_params *p)
{
	u32 status = NV_OK;

	mutex_lock(&uf->lock);
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
	mutex_unlock(&uf->lock);
	return status;
}

static bool nvstub_uvm_ready(struct nvstub_uvm_file *uf)
{
	bool ret;

	mutex_lock(&uf->lock);
	ret = uf->initialized;
	mutex_unlock(&uf->lock);
	return ret;
}

static long nvstub_uvm_ioctl(struct file *file, unsigned int cmd,
			     unsigned long arg)
{
	struct nvstub_uvm_file *uf = file->private_data;
	void __user *up = (void __user *)arg;

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

int nvstub_uvm_init(void)
{
	int ret;

	ret = alloc_chrdev_region(&nvstub_uvm_dev, 0, NVSTUB_UVM_MINORS,
				  "nvidia-uvm");
	if (ret)
		return ret;
	cdev_init(&nvstub_uvm_cdev, &nvstub_uvm_fops);
	nvstub_uvm_cdev.owner = THIS_MODULE;
	ret = cdev_add(&nvstub_uvm_cdev, nvstub_uvm_dev, NVSTUB_UVM_MINORS);
	if (ret)
		unregister_chrdev_region(nvstub_uvm_dev, NVSTUB_UVM_MINORS);
	return ret;
}

void nvstub_uvm_exit(void)
{
	cdev_del(&nvstub_uvm_cdev);
	unregister_chrdev_region(nvstub_uvm_dev, NVSTUB_UVM_MINORS);
}
