// SPDX-License-Identifier: GPL-2.0
/*
 * nvstub: a simulated NVIDIA kernel driver for tests (docs/nvstub.md).
 * Module parameters, the per-version ABI table, the simulated GPUs, and what
 * they show in /proc/driver/nvidia (nv-procfs.c) and /sys/kernel/debug/nvstub.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "nvstub.h"

static int gpus = 2;
module_param(gpus, int, 0444);
MODULE_PARM_DESC(gpus, "simulated GPUs, 1..16; minors 0..gpus-1");

static unsigned long memory_mib = 81920;
module_param(memory_mib, ulong, 0444);
MODULE_PARM_DESC(memory_mib, "video memory per GPU in MiB (no RAM is reserved)");

static char *version = "580.126.20";
module_param(version, charp, 0444);
MODULE_PARM_DESC(version, "driver version reported and whose struct sizes apply");

static unsigned int alloc_reread_delay_us;
module_param(alloc_reread_delay_us, uint, 0444);
MODULE_PARM_DESC(alloc_reread_delay_us,
		 "delay before RM reads alloc params from user memory");

static unsigned int copyin_delay_us;
module_param(copyin_delay_us, uint, 0444);
MODULE_PARM_DESC(copyin_delay_us,
		 "delay before the escape copies an RM_FREE's, RM_ALLOC's, RM_ALLOC_OBJECT's, SYS_PARAMS', ATTACH_GPUS_TO_FD's or REGISTER_FD's argument in");

static unsigned int copyout_delay_us;
module_param(copyout_delay_us, uint, 0444);
MODULE_PARM_DESC(copyout_delay_us,
		 "delay after the escape copies an RM_FREE's, RM_ALLOC's, RM_ALLOC_CONTEXT_DMA2's or an OS event's struct back");

static unsigned int control_delay_us;
module_param(control_delay_us, uint, 0444);
MODULE_PARM_DESC(control_delay_us,
		 "delay before the escape copies an RM_CONTROL's struct in");

static unsigned int map_delay_us;
module_param(map_delay_us, uint, 0444);
MODULE_PARM_DESC(map_delay_us,
		 "delay before and after the escape's RM_MAP_MEMORY, which names a file by number");

static unsigned int open_delay_us;
module_param(open_delay_us, uint, 0444);
MODULE_PARM_DESC(open_delay_us,
		 "delay in the open of a GPU node, before the file is the driver's");

/* A delay a test may set while the stub is loaded (no reload): 0 to 10 s. */
static int nvstub_delay_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v > 10000000)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops nvstub_delay_ops = {
	.set = nvstub_delay_set,
	.get = param_get_uint,
};

module_param_cb(close_delay_us, &nvstub_delay_ops, &nvstub_close_delay_us,
		0644);
MODULE_PARM_DESC(close_delay_us,
		 "delay in the release of a control file, before its clients are freed (writable: 0..10000000)");

static unsigned int uvm_retain_delay_us;
module_param(uvm_retain_delay_us, uint, 0444);
MODULE_PARM_DESC(uvm_retain_delay_us,
		 "delay in nvUvmInterfaceRetainChannel after RM retained the channel and let go of its lock, before UVM is told");

static unsigned int uvm_retain_wait_us;
module_param(uvm_retain_wait_us, uint, 0444);
MODULE_PARM_DESC(uvm_retain_wait_us,
		 "delay at nvUvmInterfaceRetainChannel's entry, before RM looks at anything (RM's locks held by others)");

static unsigned int timeslice_us = 2000;
module_param(timeslice_us, uint, 0444);
MODULE_PARM_DESC(timeslice_us, "the engine's native timeslice");

/*
 * GR context buffers per TSG: their sizes come from the GSP firmware and are
 * not in NVIDIA's open source (docs/nvstub.md states the assumption).
 */
static unsigned int gr_context_kib = 2048;
module_param(gr_context_kib, uint, 0444);
MODULE_PARM_DESC(gr_context_kib,
		 "video memory a TSG's GR context buffers take, in KiB");

/*
 * Channel ids of a GPU: 2048 a runlist from GA100 on (NV_CHRAM_CHANNEL__SIZE_1;
 * FIFO_GET_INFO's MAX_CHANNEL_GROUPS_PER_ENGINE); fewer for a test that
 * runs them out.
 */
static unsigned int channel_ids = NVSTUB_MAX_CHANNELS;
module_param(channel_ids, uint, 0444);
MODULE_PARM_DESC(channel_ids, "channel ids of each GPU (1..2048)");

/*
 * Confidential computing (CC) or Ampere protected memory (APM) on every GPU:
 * video memory is then protected unless attr2 asks otherwise, and
 * GET_PID_INFO reports it in the protected figures as well as in the
 * others (vidmemConstruct, _gpuCollectMemInfo).
 */
static unsigned int memory_protection;
module_param(memory_protection, uint, 0444);
MODULE_PARM_DESC(memory_protection,
		 "0 off, 1 APM (protected unless UNPROTECTED), 2 CC (UNPROTECTED refused)");

static unsigned int doorbell_poll_us = 50;
module_param(doorbell_poll_us, uint, 0444);
MODULE_PARM_DESC(doorbell_poll_us, "how often the engine polls doorbell pages");

/*
 * Struct sizes that moved between driver versions (layouts-<version>.txt,
 * ctrl2080fb.h, nvos.h, alloc_channel.h, ctrla06fgpfifo.h, nv.c); newest
 * row first.
 */
static const struct nvstub_abi nvstub_abis[] = {
	{ .since = 580, .fb_info_max_list = 0x80, .fb_info_index_max = 0x3B,
	  .memalloc_size = 128, .channel_alloc_size = 368, .nvos46_size = 64,
	  .nvos47_size = 48, .gpfifo_schedule_size = 3, .since_550 = true,
	  .pid_in_caller_ns = true,
	  .uvm_max_gpus = 256 },
	{ .since = 575, .fb_info_max_list = 0x39, .fb_info_index_max = 0x38,
	  .memalloc_size = 128, .channel_alloc_size = 368, .nvos46_size = 56,
	  .nvos47_size = 48, .gpfifo_schedule_size = 3, .since_550 = true,
	  .pid_in_caller_ns = true,
	  .uvm_max_gpus = 256 },
	{ .since = 570, .fb_info_max_list = 0x39, .fb_info_index_max = 0x38,
	  .memalloc_size = 128, .channel_alloc_size = 368, .nvos46_size = 56,
	  .nvos47_size = 48, .gpfifo_schedule_size = 2, .since_550 = true,
	  .pid_in_caller_ns = true,
	  .uvm_max_gpus = 256 },
	{ .since = 565, .fb_info_max_list = 0x39, .fb_info_index_max = 0x38,
	  .memalloc_size = 128, .channel_alloc_size = 360, .nvos46_size = 56,
	  .nvos47_size = 48, .gpfifo_schedule_size = 2, .since_550 = true,
	  .pid_in_caller_ns = true,
	  .uvm_max_gpus = 256 },
	{ .since = 560, .fb_info_max_list = 0x39, .fb_info_index_max = 0x38,
	  .memalloc_size = 128, .channel_alloc_size = 360, .nvos46_size = 56,
	  .nvos47_size = 48, .gpfifo_schedule_size = 2, .since_550 = true,
	  .uvm_max_gpus = 256 },
	{ .since = 550, .fb_info_max_list = 0x37, .fb_info_index_max = 0x36,
	  .memalloc_size = 128, .channel_alloc_size = 360, .nvos46_size = 56,
	  .nvos47_size = 48, .gpfifo_schedule_size = 2, .since_550 = true,
	  .uvm_max_gpus = 256 },
	{ .since = 545, .fb_info_max_list = 0x37, .fb_info_index_max = 0x36,
	  .memalloc_size = 128, .channel_alloc_size = 360, .nvos46_size = 56,
	  .nvos47_size = 40, .gpfifo_schedule_size = 2, .since_550 = false,
	  .uvm_max_gpus = 32 },
	{ .since = 535, .fb_info_max_list = 0x36, .fb_info_index_max = 0x35,
	  .memalloc_size = 120, .channel_alloc_size = 360, .nvos46_size = 56,
	  .nvos47_size = 40, .gpfifo_schedule_size = 2, .since_550 = false,
	  .uvm_max_gpus = 32 },
};

const struct nvstub_abi *nvstub_abi;
char nvstub_version[NV_RM_API_VERSION_STRING_LENGTH];
unsigned int nvstub_major;
unsigned int nvstub_ngpus;
unsigned int nvstub_alloc_reread_delay_us;
unsigned int nvstub_copyin_delay_us;
unsigned int nvstub_copyout_delay_us;
unsigned int nvstub_control_delay_us;
unsigned int nvstub_map_delay_us;
unsigned int nvstub_open_delay_us;
unsigned int nvstub_close_delay_us;
unsigned int nvstub_uvm_retain_delay_us;
unsigned int nvstub_uvm_retain_wait_us;
unsigned int nvstub_timeslice_us;
unsigned int nvstub_doorbell_poll_us;
unsigned int nvstub_channel_ids;
u64 nvstub_gr_context_bytes;
unsigned int nvstub_memory_protection;
struct nvstub_gpu *nvstub_gpus;

/* The RM object world and the heaps (see nvstub.h for the lock order). */
DEFINE_MUTEX(nvstub_rm_lock);

static struct proc_dir_entry *nvstub_proc;
static struct dentry *nvstub_debugfs;

/* "NNN.NN[.NN]": the major picks the row; 535 is the oldest simulated. */
static const struct nvstub_abi *nvstub_parse_version(const char *v)
{
	unsigned int major = 0, dots = 0, i;
	const char *s;

	if (!v || !*v || strlen(v) >= NV_RM_API_VERSION_STRING_LENGTH)
		return NULL;
	for (s = v; *s; s++) {
		if (*s == '.') {
			if (s == v || s[1] == '.' || !s[1])
				return NULL;
			dots++;
		} else if (!isdigit(*s)) {
			return NULL;
		} else if (!dots) {
			major = major * 10 + (*s - '0');
			if (major > 9999)
				return NULL;
		}
	}
	if (!dots)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(nvstub_abis); i++)
		if (major >= nvstub_abis[i].since) {
			nvstub_major = major;
			return &nvstub_abis[i];
		}
	return NULL;
}

static int nvstub_check_params(void)
{
	if (gpus < 1 || gpus > NVSTUB_MAX_GPUS) {
		pr_err("gpus=%d: must be 1..%d\n", gpus, NVSTUB_MAX_GPUS);
		return -EINVAL;
	}
	/* FB info reports KiB in 32 bits */
	if (memory_mib < 1 || memory_mib > (U32_MAX >> 10)) {
		pr_err("memory_mib=%lu: must be 1..%u\n", memory_mib, U32_MAX >> 10);
		return -EINVAL;
	}
	nvstub_abi = nvstub_parse_version(version);
	if (!nvstub_abi) {
		pr_err("version=%s: must be a driver version, 535.x or newer\n",
		       version ? version : "(null)");
		return -EINVAL;
	}
	if (alloc_reread_delay_us > 10000000) {
		pr_err("alloc_reread_delay_us=%u: must be at most 10000000\n",
		       alloc_reread_delay_us);
		return -EINVAL;
	}
	if (copyin_delay_us > 10000000) {
		pr_err("copyin_delay_us=%u: must be at most 10000000\n",
		       copyin_delay_us);
		return -EINVAL;
	}
	if (copyout_delay_us > 10000000) {
		pr_err("copyout_delay_us=%u: must be at most 10000000\n",
		       copyout_delay_us);
		return -EINVAL;
	}
	if (control_delay_us > 10000000) {
		pr_err("control_delay_us=%u: must be at most 10000000\n",
		       control_delay_us);
		return -EINVAL;
	}
	if (uvm_retain_delay_us > 10000000) {
		pr_err("uvm_retain_delay_us=%u: must be at most 10000000\n",
		       uvm_retain_delay_us);
		return -EINVAL;
	}
	if (uvm_retain_wait_us > 10000000) {
		pr_err("uvm_retain_wait_us=%u: must be at most 10000000\n",
		       uvm_retain_wait_us);
		return -EINVAL;
	}
	if (map_delay_us > 10000000) {
		pr_err("map_delay_us=%u: must be at most 10000000\n",
		       map_delay_us);
		return -EINVAL;
	}
	if (open_delay_us > 10000000) {
		pr_err("open_delay_us=%u: must be at most 10000000\n",
		       open_delay_us);
		return -EINVAL;
	}
	if (timeslice_us < 1 || timeslice_us > NVSTUB_MAX_SLICE_US) {
		pr_err("timeslice_us=%u: must be 1..%llu\n", timeslice_us,
		       NVSTUB_MAX_SLICE_US);
		return -EINVAL;
	}
	if (gr_context_kib > 1024 * 1024) {
		pr_err("gr_context_kib=%u: must be at most 1048576\n",
		       gr_context_kib);
		return -EINVAL;
	}
	if (memory_protection > NVSTUB_PROTECTION_CC) {
		pr_err("memory_protection=%u: must be 0 (off), 1 (APM) or 2 (CC)\n",
		       memory_protection);
		return -EINVAL;
	}
	if (doorbell_poll_us < 1 || doorbell_poll_us > 1000000) {
		pr_err("doorbell_poll_us=%u: must be 1..1000000\n",
		       doorbell_poll_us);
		return -EINVAL;
	}
	if (channel_ids < 1 || channel_ids > NVSTUB_MAX_CHANNELS) {
		pr_err("channel_ids=%u: must be 1..%u\n", channel_ids,
		       NVSTUB_MAX_CHANNELS);
		return -EINVAL;
	}
	strscpy(nvstub_version, version, sizeof(nvstub_version));
	nvstub_ngpus = gpus;
	nvstub_alloc_reread_delay_us = alloc_reread_delay_us;
	nvstub_copyin_delay_us = copyin_delay_us;
	nvstub_copyout_delay_us = copyout_delay_us;
	nvstub_control_delay_us = control_delay_us;
	nvstub_map_delay_us = map_delay_us;
	nvstub_open_delay_us = open_delay_us;
	nvstub_uvm_retain_delay_us = uvm_retain_delay_us;
	nvstub_uvm_retain_wait_us = uvm_retain_wait_us;
	nvstub_timeslice_us = timeslice_us;
	nvstub_doorbell_poll_us = doorbell_poll_us;
	nvstub_channel_ids = channel_ids;
	nvstub_gr_context_bytes = (u64)gr_context_kib << 10;
	nvstub_memory_protection = memory_protection;
	return 0;
}

static void nvstub_gpu_init(struct nvstub_gpu *gpu, unsigned int i)
{
	gpu->index = i;
	gpu->bus = NVSTUB_PCI_BUS_BASE + i;
	/* gpuGenerate32BitId(): domain:16 | bus:8 | device:8 */
	gpu->gpu_id = (u32)gpu->bus << 8;
	snprintf(gpu->bus_id, sizeof(gpu->bus_id), "%04x:%02x:%02x.%1x", 0,
		 gpu->bus, 0, 0);
	snprintf(gpu->uuid, sizeof(gpu->uuid),
		 "GPU-6e767374-7562-4000-8000-%012x", i);
	/* NvProcessorUuid: the same 16 bytes, as UVM and GID_INFO name them */
	gpu->uuid_bin[0] = 0x6e;
	gpu->uuid_bin[1] = 0x76;
	gpu->uuid_bin[2] = 0x73;
	gpu->uuid_bin[3] = 0x74;
	gpu->uuid_bin[4] = 0x75;
	gpu->uuid_bin[5] = 0x62;
	gpu->uuid_bin[6] = 0x40;
	gpu->uuid_bin[8] = 0x80;
	gpu->uuid_bin[12] = i >> 24;
	gpu->uuid_bin[13] = i >> 16;
	gpu->uuid_bin[14] = i >> 8;
	gpu->uuid_bin[15] = i;
	gpu->reg_address = 0xa0000000ull + (u64)i * 2 * NVSTUB_BAR0_SIZE;
	gpu->fb_address = 0x380000000000ull + (u64)i * NVSTUB_BAR1_SIZE;
	gpu->heap_total = (u64)memory_mib << 20;
	spin_lock_init(&gpu->eng_lock);
	INIT_LIST_HEAD(&gpu->channels);
	INIT_LIST_HEAD(&gpu->doorbells);
	INIT_LIST_HEAD(&gpu->procs);
	ida_init(&gpu->chids);
	atomic_set(&gpu->chids_used, 0);
}

/* --- /proc/driver/nvidia */

static int nvstub_proc_version_show(struct seq_file *s, void *v)
{
	seq_printf(s, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (nvstub@localhost)  Thu Jan  1 00:00:00 UTC 1970\n",
		   nvstub_version);
	seq_printf(s, "GCC version:  %s\n", CONFIG_CC_VERSION_TEXT);
	return 0;
}

static int nvstub_proc_gpu_show(struct seq_file *s, void *v)
{
	struct nvstub_gpu *gpu = s->private;

	seq_printf(s, "Model: \t\t %s\n", NVSTUB_MODEL);
	seq_printf(s, "IRQ:   \t\t %d\n", 0);
	seq_printf(s, "GPU UUID: \t %s\n", gpu->uuid);
	seq_printf(s, "Video BIOS: \t %s\n", "96.00.af.00.01");
	seq_printf(s, "Bus Type: \t %s\n", "PCIe");
	seq_printf(s, "DMA Size: \t %d bits\n", 52);
	seq_printf(s, "DMA Mask: \t 0x%llx\n", (1ull << 52) - 1);
	seq_printf(s, "Bus Location: \t %s\n", gpu->bus_id);
	seq_printf(s, "Device Minor: \t %u\n", gpu->index);
	seq_printf(s, "GPU Firmware: \t %s\n", nvstub_version);
	seq_printf(s, "GPU Excluded:\t %s\n", "No");
	return 0;
}

static int nvstub_procfs_init(void)
{
	struct proc_dir_entry *dir;
	unsigned int i;

	nvstub_proc = proc_mkdir("driver/nvidia", NULL);
	if (!nvstub_proc)
		return -ENOMEM;
	if (!proc_create_single("version", 0444, nvstub_proc,
				nvstub_proc_version_show))
		goto err;
	dir = proc_mkdir("gpus", nvstub_proc);
	if (!dir)
		goto err;
	for (i = 0; i < nvstub_ngpus; i++) {
		struct nvstub_gpu *gpu = &nvstub_gpus[i];

		gpu->procfs = proc_mkdir(gpu->bus_id, dir);
		if (!gpu->procfs ||
		    !proc_create_single_data("information", 0444, gpu->procfs,
					     nvstub_proc_gpu_show, gpu))
			goto err;
	}
	return 0;
err:
	proc_remove(nvstub_proc);
	return -ENOMEM;
}

/* --- /sys/kernel/debug/nvstub */

static int nvstub_objects_show(struct seq_file *s, void *unused)
{
	unsigned int clients, objects;

	mutex_lock(&nvstub_rm_lock);
	clients = nvstub_nclients;
	objects = nvstub_nobjects;
	mutex_unlock(&nvstub_rm_lock);
	seq_printf(s, "clients=%u objects=%u\n", clients, objects);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_objects);

static void nvstub_debugfs_init(void)
{
	char name[16];
	unsigned int i;

	nvstub_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("objects", 0444, nvstub_debugfs, NULL,
			    &nvstub_objects_fops);
	nvstub_ctrl_debugfs(nvstub_debugfs);
	for (i = 0; i < nvstub_ngpus; i++) {
		snprintf(name, sizeof(name), "gpu%u", i);
		nvstub_gpus[i].debugfs = debugfs_create_dir(name, nvstub_debugfs);
		nvstub_engine_debugfs(&nvstub_gpus[i]);
	}
}

static void nvstub_gpus_stop(unsigned int n)
{
	while (n--)
		nvstub_engine_stop(&nvstub_gpus[n]);
}

static int __init nvstub_init(void)
{
	unsigned int i;
	int ret;

	nvabi_build_checks();
	ret = nvstub_check_params();
	if (ret)
		return ret;

	nvstub_gpus = kvcalloc(nvstub_ngpus, sizeof(*nvstub_gpus), GFP_KERNEL);
	if (!nvstub_gpus)
		return -ENOMEM;
	for (i = 0; i < nvstub_ngpus; i++) {
		nvstub_gpu_init(&nvstub_gpus[i], i);
		ret = nvstub_engine_start(&nvstub_gpus[i]);
		if (ret)
			goto err_stop;
	}
	ret = nvstub_procfs_init();
	if (ret)
		goto err_stop;
	nvstub_debugfs_init();
	ret = nvstub_dev_init();
	if (ret) {
		pr_err("cannot register major %d: %d\n", NV_MAJOR_DEVICE_NUMBER, ret);
		goto err_debugfs;
	}
	ret = nvstub_dmabuf_init();
	if (ret) {
		nvstub_dev_exit();
		goto err_debugfs;
	}
	ret = nvstub_uvm_init();
	if (ret) {
		pr_err("cannot register nvidia-uvm: %d\n", ret);
		nvstub_dmabuf_exit();
		nvstub_dev_exit();
		goto err_debugfs;
	}
	pr_info("%u simulated %s, %lu MiB each, driver %s\n", nvstub_ngpus,
		NVSTUB_MODEL, memory_mib, nvstub_version);
	return 0;

err_debugfs:
	debugfs_remove_recursive(nvstub_debugfs);
	proc_remove(nvstub_proc);
err_stop:
	nvstub_gpus_stop(i);
	kvfree(nvstub_gpus);
	return ret;
}

static void __exit nvstub_exit(void)
{
	unsigned int i;

	nvstub_uvm_exit();
	nvstub_dmabuf_exit();
	nvstub_dev_exit();
	debugfs_remove_recursive(nvstub_debugfs);
	proc_remove(nvstub_proc);
	nvstub_rm_exit();
	nvstub_registry_exit();
	nvstub_gpus_stop(nvstub_ngpus);
	for (i = 0; i < nvstub_ngpus; i++)
		ida_destroy(&nvstub_gpus[i].chids);
	kvfree(nvstub_gpus);
}

module_init(nvstub_init);
module_exit(nvstub_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated NVIDIA kernel driver for xpu's tests");
