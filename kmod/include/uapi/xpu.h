/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * xpu: slices of NVIDIA GPUs -- the interface of the admin device /dev/xpuctl.
 *
 * This is the one definition of the interface; xpud's xpu/uapi.py mirrors it
 * and tests/unit/test_uapi.py compares the two, number by number and field
 * by field.
 *
 * Rules every ioctl here follows, so that old and new user space and kernels
 * can talk to each other:
 *  - Structs hold only __u32, __s32 (file descriptors), __u64 (pointers
 *    travel as __u64) and __u8 arrays whose length is a multiple of 8
 *    (names); padding is explicit, every __u64 sits at an offset that is a
 *    multiple of 8 and every struct's size is a multiple of 8: the layout is
 *    then the same for 32-bit and 64-bit callers.  tests/unit/test_uapi.py
 *    checks all of it.
 *  - Every ioctl's argument starts with argsz and flags.  The caller sets
 *    argsz to the size of the struct it knows; a struct only ever grows at
 *    its end.  The kernel requires argsz to cover the fields the ioctl had
 *    when it was introduced.  An ioctl that writes its struct back (VERSION,
 *    SLICE_CREATE/GET/SET) writes no more than min(argsz, what it knows) and
 *    reports in argsz how many bytes it wrote; the others write nothing back
 *    but the counts their comments name.
 *  - Each flags word has an _ALL mask; a bit outside it fails with -EINVAL, so
 *    a caller can probe for a feature.
 *  - The kernel dispatches on the type, number and direction of the command;
 *    the size encoded in the number is that of the struct the caller was
 *    built with, and argsz, not that size, says how much of it is valid.
 */
#ifndef _UAPI_XPU_H
#define _UAPI_XPU_H

#include <linux/types.h>
#include <linux/ioctl.h>

/*
 * The ioctl type.  0xE6 is free in Documentation/userspace-api/ioctl/
 * ioctl-number.rst (neighbours: 0xE5 fuse, 0xEC cros_ec) and no header of the
 * 6.1 tree or of /usr/include builds ioctls on it.  It is also far from 'F'
 * (0x46), NVIDIA's own type, which xpu interposes on: an xpu command can never
 * be mistaken for a driver command, or the other way round.
 */
#define XPU_IOC_TYPE	0xE6

/*
 * The API version, reported by XPU_IOC_VERSION.  Raised only if an existing
 * ioctl changes incompatibly; additions are found through argsz and flags.
 */
#define XPU_API_VERSION	1

/* The name of the admin device, /dev/xpuctl. */
#define XPU_CTL_NAME	"xpuctl"

/* -------- ioctls on /dev/xpuctl -------- */

/**
 * XPU_IOC_VERSION - _IOWR(XPU_IOC_TYPE, 0x00, struct xpu_version)
 *
 * Report the version of the loaded xpu.ko and the API it speaks.  Any caller
 * that can open /dev/xpuctl may ask.
 *
 * The caller sets argsz to sizeof(struct xpu_version) and flags to 0; the
 * kernel fills in the rest.  On return argsz holds the number of bytes the
 * kernel wrote, which is less than the caller's argsz when the caller knows
 * fields this kernel does not (those are left as the caller set them).
 *
 * Return: 0 on success, -errno on failure:
 *	-EFAULT: the struct could not be read or written;
 *	-EINVAL: argsz is smaller than offsetofend(struct xpu_version, patch),
 *		 or flags has a bit outside XPU_VERSION_FLAGS_ALL.
 */
struct xpu_version {
	__u32	argsz;		/* in: size of the caller's struct; out: bytes written */
	__u32	flags;		/* in: none defined yet, must be 0 */
	__u32	api;		/* out: XPU_API_VERSION of the kernel */
	__u32	major;		/* out: xpu.ko's version, major.minor.patch, */
	__u32	minor;		/*	as in /sys/module/xpu/version */
	__u32	patch;
};

#define XPU_VERSION_FLAGS_ALL	0

#define XPU_IOC_VERSION		_IOWR(XPU_IOC_TYPE, 0x00, struct xpu_version)

/* -------- GPUs -------- */

/* Sizes of the name fields; names are NUL-terminated within them. */
#define XPU_NAME_LEN		32
#define XPU_UUID_LEN		48	/* "GPU-" + 36 characters + NUL, padded */

/* How a GPU treats opens that belong to no slice (struct xpu_gpu_info.mode). */
#define XPU_MODE_SHARED		0	/* allowed */
/*
 * XPU_MODE_EXCLUSIVE: refused with EPERM while the GPU has slices, unless the
 * opener has CAP_SYS_ADMIN in the initial user namespace; the control node,
 * shared by all GPUs, then makes no device on the GPU outside a slice for
 * anyone else (NV_ERR_INSUFFICIENT_PERMISSIONS).
 */
#define XPU_MODE_EXCLUSIVE	1

/* The compute scheduler's policy for a GPU (struct xpu_gpu_info.policy). */
#define XPU_POLICY_WEIGHTED	0	/* shares are minimums; idle time by weight */
#define XPU_POLICY_FIXED	1	/* a slice never exceeds its share */
#define XPU_POLICY_PRIORITY	2	/* a higher class gates lower ones */
#define XPU_POLICY_NATIVE	3	/* no gating */

#define XPU_PERIOD_MIN_US	1000
#define XPU_PERIOD_MAX_US	1000000

/**
 * struct xpu_gpu_info - one GPU the interposed driver serves
 *
 * Filled in by XPU_IOC_GPU_LIST; the settable fields (mode, policy,
 * period_us) are changed with XPU_IOC_GPU_SET.
 */
struct xpu_gpu_info {
	__u32	minor;		/* /dev/nvidiaN */
	__u32	mode;		/* XPU_MODE_* */
	__u32	policy;		/* XPU_POLICY_* */
	__u32	period_us;	/* scheduling period */
	__u32	nr_slices;
	__u32	driver_major;	/* the driver's version, e.g. 580.126.20 */
	__u32	driver_minor;
	__u32	driver_patch;
	__u64	memory_total;	/* bytes of video memory, as the driver says */
	__u64	memory_sliced;	/* sum of the slices' memory limits */
	__u8	uuid[XPU_UUID_LEN];	/* "GPU-…", as the driver reports it */
	/*
	 * The channel ids its slices share out: RM's (the fewest of any
	 * runlist's), or xpu.ko's parameter channel_ids where that is lower.
	 * Was reserved (0) before.
	 */
	__u32	channel_ids;
	__u32	pad0;
	/*
	 * Bytes of video memory destroyed slices freed that something
	 * outside every slice still keeps (an export fd or a dma-buf passed
	 * out): held by xpu.ko, charged to the GPU, until nothing else keeps
	 * it.  New memory limits are checked against memory_total less
	 * memory_sliced and this.  Was reserved (0) before session 65.
	 */
	__u64	memory_orphaned;
	__u64	reserved[2];
};

/**
 * XPU_IOC_GPU_LIST - _IOWR(XPU_IOC_TYPE, 0x01, struct xpu_gpu_list)
 *
 * List the GPUs.  The caller points gpus at an array of count entries of
 * struct xpu_gpu_info each gpu_argsz bytes long (sizeof(struct xpu_gpu_info) of the
 * caller's header); the kernel fills min(count, GPUs) entries and sets count
 * to the number of GPUs, so a call with count 0 asks for the size.  Anyone
 * who can open /dev/xpuctl may ask.
 *
 * Return: 0, or -EFAULT, or -EINVAL (argsz too small, unknown flags,
 * gpu_argsz smaller than offsetofend(struct xpu_gpu_info, uuid) while count
 * is not 0).
 */
struct xpu_gpu_list {
	__u32	argsz;
	__u32	flags;		/* none defined: 0 */
	__u32	count;		/* in: entries at gpus; out: GPUs there are */
	__u32	gpu_argsz;	/* in: the size of one entry */
	__u64	gpus;		/* in: user pointer to struct xpu_gpu_info[count] */
};

#define XPU_GPU_LIST_FLAGS_ALL	0

#define XPU_IOC_GPU_LIST	_IOWR(XPU_IOC_TYPE, 0x01, struct xpu_gpu_list)

/**
 * XPU_IOC_GPU_SET - _IOWR(XPU_IOC_TYPE, 0x02, struct xpu_gpu_set)
 *
 * Change a GPU's mode, policy or period; flags say which.  Needs
 * CAP_SYS_ADMIN.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL (unknown flags or a value out of
 * range), -ENODEV (no such GPU).
 */
struct xpu_gpu_set {
	__u32	argsz;
	__u32	flags;		/* XPU_GPU_SET_* */
	__u32	minor;
	__u32	mode;
	__u32	policy;
	__u32	period_us;
};

#define XPU_GPU_SET_MODE	0x1U
#define XPU_GPU_SET_POLICY	0x2U
#define XPU_GPU_SET_PERIOD	0x4U
#define XPU_GPU_SET_FLAGS_ALL	(XPU_GPU_SET_MODE | XPU_GPU_SET_POLICY | \
				 XPU_GPU_SET_PERIOD)

#define XPU_IOC_GPU_SET		_IOWR(XPU_IOC_TYPE, 0x02, struct xpu_gpu_set)

/* -------- slices -------- */

#define XPU_PRIO_LOW		0
#define XPU_PRIO_NORMAL		1
#define XPU_PRIO_HIGH		2

#define XPU_SHARE_MAX		1000	/* compute_share is in 0.1 % steps */
#define XPU_WEIGHT_MAX		10000
#define XPU_MAX_SLICES		1024	/* per host */

/**
 * struct xpu_slice_info - a slice: its settings and what it uses
 *
 * A slice is a share of one GPU.  Its id N names its nodes /dev/xpuN and
 * /dev/xpuN-ctl.  name: 1 to XPU_NAME_LEN - 1 characters of [A-Za-z0-9_.-],
 * not starting with '.' or '-', unique on the host.
 */
struct xpu_slice_info {
	__u32	argsz;
	__u32	flags;		/* XPU_SLICE_SET_* for XPU_IOC_SLICE_SET */
	__u32	id;		/* out of CREATE; in for GET and SET */
	__u32	gpu_minor;	/* the parent GPU, /dev/nvidiaN */
	__u8	name[XPU_NAME_LEN];
	__u64	memory_limit;	/* bytes of video memory, at least 1 MiB */
	__u32	compute_share;	/* guaranteed share, 0..XPU_SHARE_MAX */
	__u32	weight;		/* 1..XPU_WEIGHT_MAX; idle time by weight */
	__u32	priority;	/* XPU_PRIO_* */
	__u32	pad0;
	/* Usage: filled in by GET (and CREATE, SET), ignored on input. */
	__u64	memory_used;	/* bytes, as the driver attributes them */
	__u64	memory_peak;
	__u64	denied_allocs;	/* allocations refused for a limit */
	__u64	killed;		/* processes killed for cheating the limit */
	__u32	open_files;	/* driver files open in the slice */
	__u32	processes;	/* processes that used the slice's files */
	/* Compute (docs/compute.md): filled in like the usage above. */
	__u64	run_ns;		/* time the slice held its GPU */
	__u64	gated_ns;	/* time it wanted the GPU and was held back */
	__u64	runnable_ns;	/* time it wanted the GPU */
	__u64	gate_faults;	/* doorbell writes that had to wait */
	__u32	share_obtained;	/* run time over the last second, per mille */
	__u32	channels;	/* GPU channels the slice's clients own */
	/*
	 * System memory RM allocates for the slice's clients (NV01_MEMORY_SYSTEM:
	 * pinned host pages, charged to no memory cgroup): a bound in bytes,
	 * 0 for none (CREATE, and SET with XPU_SLICE_SET_HOST_MEMORY), and
	 * what is held now (out), counted until the last reference to the
	 * pages other than xpu's goes (docs/security.md, class 25).
	 */
	__u64	host_memory_limit;
	__u64	host_memory_used;
	/*
	 * RM handles (clients and objects) the slice's clients hold now, as
	 * xpu follows them; bounded by xpu.ko's max_handles parameter
	 * (docs/security.md, "RM objects a slice holds").
	 */
	__u32	rm_handles;
	/*
	 * OS events (NV_ESC_ALLOC_OS_EVENT) the slice's clients hold now;
	 * bounded by xpu.ko's max_os_events parameter (docs/security.md,
	 * class 27).  Was reserved (0) before.
	 */
	__u32	os_events;
	/*
	 * The RM objects xpu.ko keeps a record of for the slice now, by kind
	 * (docs/security.md, class 7), each bounded by xpu.ko's max_records
	 * parameter, and the files its doorbell page is mapped through,
	 * bounded by max_doorbell_files (class 3).  `channels` above is the
	 * channels' count.  Filled in when argsz covers them (since session
	 * 46); an older xpu.ko writes back an argsz that ends at os_events.
	 */
	__u32	devices;
	__u32	vaspaces;	/* VA spaces with RM's page directories */
	__u32	virtuals;	/* virtual allocations that pin page tables */
	__u32	tsgs;
	__u32	usermode;	/* usermode (doorbell) objects */
	__u32	doorbell_files;
	/*
	 * UVM files opened through the slice's UVM node that xpu.ko holds
	 * (the tenant's, and closed ones until UVM has let go of them), and
	 * the channels and TSGs freed while one was open, which UVM may still
	 * retain: counted against max_records, their bytes charged to the
	 * slice (part of memory_used) until every UVM file of the slice open
	 * at their free is gone (docs/security.md, class 39).  Filled in when
	 * argsz covers them (since session 48).
	 */
	__u32	uvm_files;
	__u32	uvm_channels;
	__u32	uvm_tsgs;
	__u32	pad1;
	__u64	uvm_retained;
};

#define XPU_SLICE_CREATE_FLAGS_ALL	0
#define XPU_SLICE_GET_FLAGS_ALL		0

/**
 * XPU_IOC_SLICE_CREATE - _IOWR(XPU_IOC_TYPE, 0x10, struct xpu_slice_info)
 *
 * Create a slice from name, gpu_minor, memory_limit, compute_share, weight
 * and priority; flags must be 0.  On return id and the usage fields are
 * filled in.  Needs CAP_SYS_ADMIN.  The sum of the memory limits of a GPU's
 * slices may not exceed its memory, nor the sum of their shares 100 %.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL (a field out of range, a bad
 * name), -ENODEV (no such GPU), -EEXIST (the name is taken), -ENOSPC (the
 * GPU's memory or compute is all given to slices already, or too many
 * slices), -ENOMEM.
 */
#define XPU_IOC_SLICE_CREATE	_IOWR(XPU_IOC_TYPE, 0x10, struct xpu_slice_info)

/**
 * XPU_IOC_SLICE_GET - _IOWR(XPU_IOC_TYPE, 0x11, struct xpu_slice_info)
 *
 * Read slice id.  Anyone who can open /dev/xpuctl may ask.
 *
 * Return: 0, or -EFAULT, -EINVAL, -ENOENT (no slice with that id).
 */
#define XPU_IOC_SLICE_GET	_IOWR(XPU_IOC_TYPE, 0x11, struct xpu_slice_info)

/**
 * XPU_IOC_SLICE_SET - _IOWR(XPU_IOC_TYPE, 0x12, struct xpu_slice_info)
 *
 * Change the settings flags names of slice id, at once, while it runs.  A
 * memory limit below what the slice uses now is refused (-EBUSY): free
 * memory first.  A lower memory limit waits for the slice's calls into the
 * driver to end, at most 1 s (-EAGAIN past that: one may be stalled on its
 * caller's memory); a higher one waits for nothing.  Needs CAP_SYS_ADMIN.
 * On return the struct holds the slice as it now is.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL, -ENOENT, -EBUSY, -EAGAIN,
 * -ENOSPC.
 */
#define XPU_IOC_SLICE_SET	_IOWR(XPU_IOC_TYPE, 0x12, struct xpu_slice_info)

#define XPU_SLICE_SET_MEMORY	0x1U
#define XPU_SLICE_SET_SHARE	0x2U
#define XPU_SLICE_SET_WEIGHT	0x4U
#define XPU_SLICE_SET_PRIORITY	0x8U
#define XPU_SLICE_SET_HOST_MEMORY 0x10U
#define XPU_SLICE_SET_FLAGS_ALL	(XPU_SLICE_SET_MEMORY | XPU_SLICE_SET_SHARE | \
				 XPU_SLICE_SET_WEIGHT | XPU_SLICE_SET_PRIORITY | \
				 XPU_SLICE_SET_HOST_MEMORY)

/**
 * XPU_IOC_SLICE_DESTROY - _IOWR(XPU_IOC_TYPE, 0x13, struct xpu_slice_ref)
 *
 * Destroy slice id: its nodes and cgroup bindings stop naming it at once.
 * While driver files of the slice are open the call fails with -EBUSY,
 * unless XPU_DESTROY_FORCE is set: then every process that opened one of
 * the slice's files still open is sent SIGKILL, and the slice goes when its
 * last file closes.  Needs
 * CAP_SYS_ADMIN.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL, -ENOENT, -EBUSY.
 */
struct xpu_slice_ref {
	__u32	argsz;
	__u32	flags;		/* XPU_DESTROY_* */
	__u32	id;
	__u32	pad0;
};

#define XPU_DESTROY_FORCE	0x1U
#define XPU_DESTROY_FLAGS_ALL	XPU_DESTROY_FORCE

#define XPU_IOC_SLICE_DESTROY	_IOWR(XPU_IOC_TYPE, 0x13, struct xpu_slice_ref)

/**
 * XPU_IOC_SLICE_LIST - _IOWR(XPU_IOC_TYPE, 0x14, struct xpu_slice_list)
 *
 * List the ids of the slices: the kernel writes min(count, slices) ids to
 * the array at ids and sets count to the number of slices.  Anyone who can
 * open /dev/xpuctl may ask.
 *
 * Return: 0, or -EFAULT, -EINVAL.
 */
struct xpu_slice_list {
	__u32	argsz;
	__u32	flags;		/* none defined: 0 */
	__u32	count;		/* in: room at ids; out: slices there are */
	__u32	pad0;
	__u64	ids;		/* in: user pointer to __u32[count] */
};

#define XPU_SLICE_LIST_FLAGS_ALL	0

#define XPU_IOC_SLICE_LIST	_IOWR(XPU_IOC_TYPE, 0x14, struct xpu_slice_list)

/* -------- which slice a file belongs to -------- */

#define XPU_NODE_GPU		0	/* a node 195:g of the slice's GPU */
#define XPU_NODE_CTL		1	/* a node 195:255 */
#define XPU_NODE_UVM		2	/* a node of xpu.ko's misc device xpu-uvm */

/**
 * XPU_IOC_NODE_ATTACH - _IOWR(XPU_IOC_TYPE, 0x20, struct xpu_node)
 * XPU_IOC_NODE_DETACH - _IOWR(XPU_IOC_TYPE, 0x21, struct xpu_node)
 *
 * Make a device node a node of slice id, or stop it being one.  fd is an
 * O_PATH (or any) file descriptor of a character device node carrying the
 * driver's numbers: 195:<the slice's GPU minor> for XPU_NODE_GPU, 195:255
 * for XPU_NODE_CTL; for XPU_NODE_UVM, the numbers of xpu.ko's misc device
 * xpu-uvm (/sys/class/misc/xpu-uvm/dev), whose open makes a UVM file of the
 * host's UVM driver that xpu.ko holds for the slice (docs/security.md,
 * class 39).  From then on every open of that inode — directly or
 * through a bind mount of it — is in the slice.  A node belongs to one slice
 * at most; attaching it again to the same slice succeeds and changes
 * nothing.  Needs CAP_SYS_ADMIN.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL (unknown role or flags, or the
 * node's minor does not fit the role and slice), -EBADF, -ENODEV (not a
 * character device of major 195, or for XPU_NODE_UVM not xpu-uvm's),
 * -ENOENT (no such slice, or on DETACH the node is not the slice's),
 * -EEXIST (the node belongs to another slice, or to a destroyed one),
 * -ENOSPC (too many nodes).
 *
 * The nodes of a destroyed slice refuse every open (-ENXIO) for as long as
 * anything but xpu.ko holds their inode: a bind mount of /dev/xpuN into a
 * container never turns into an unsliced GPU node.
 *
 * A bound node (and a destroyed slice's node until it goes) holds the mount
 * it was attached through: unmounting that filesystem fails with -EBUSY, and
 * a lazy unmount keeps it alive until the node is detached, or xpu.ko
 * unloaded.
 */
struct xpu_node {
	__u32	argsz;
	__u32	flags;		/* none defined: 0 */
	__u32	id;		/* the slice */
	__u32	role;		/* XPU_NODE_* */
	__s32	fd;
	__u32	pad0;
};

#define XPU_NODE_FLAGS_ALL	0

#define XPU_IOC_NODE_ATTACH	_IOWR(XPU_IOC_TYPE, 0x20, struct xpu_node)
#define XPU_IOC_NODE_DETACH	_IOWR(XPU_IOC_TYPE, 0x21, struct xpu_node)

/**
 * XPU_IOC_CGROUP_BIND - _IOWR(XPU_IOC_TYPE, 0x22, struct xpu_cgroup)
 * XPU_IOC_CGROUP_UNBIND - _IOWR(XPU_IOC_TYPE, 0x23, struct xpu_cgroup)
 *
 * Bind slice id to a cgroup v2 directory (fd, opened O_DIRECTORY or
 * O_PATH), or undo it.  An open of a driver node by a task in that cgroup or
 * below it, through no slice node, is in the slice.  A cgroup is bound to
 * one slice at most (binding it again to the same slice succeeds); the
 * nearest bound ancestor decides.  Needs CAP_SYS_ADMIN.
 *
 * Return: 0, or -EPERM, -EFAULT, -EINVAL, -EBADF (fd is not a cgroup v2
 * directory), -ENOENT, -EEXIST, -ENOSPC.
 */
struct xpu_cgroup {
	__u32	argsz;
	__u32	flags;		/* none defined: 0 */
	__u32	id;
	__s32	fd;
};

#define XPU_CGROUP_FLAGS_ALL	0

#define XPU_IOC_CGROUP_BIND	_IOWR(XPU_IOC_TYPE, 0x22, struct xpu_cgroup)
#define XPU_IOC_CGROUP_UNBIND	_IOWR(XPU_IOC_TYPE, 0x23, struct xpu_cgroup)

/* -------- events: generic netlink family "xpu" -------- */

/*
 * xpu.ko announces what changes on the generic netlink family XPU_GENL_NAME,
 * version XPU_GENL_VERSION, multicast group XPU_GENL_MCGRP_EVENTS (resolve
 * both through the nlctrl family, as for any genetlink family).  Joining the
 * group needs CAP_SYS_ADMIN where the kernel can check it on a join
 * (GENL_MCAST_CAP_SYS_ADMIN); the events name processes.
 *
 * Each message is one XPU_EVENT_* command with the XPU_EA_* attributes its
 * comment lists; a listener ignores attributes it does not know, and
 * commands it does not know.  Events are not guaranteed: when a listener's
 * receive buffer overflows, its next recv() fails with ENOBUFS and it must
 * read the state again with XPU_IOC_SLICE_LIST / XPU_IOC_SLICE_GET.
 * The family has no commands to send to it.
 */
#define XPU_GENL_NAME		"xpu"
#define XPU_GENL_VERSION	1
#define XPU_GENL_MCGRP_EVENTS	"events"

/* Commands: what happened.  Each lists the attributes it carries. */
#define XPU_EVENT_SLICE_CREATED		1	/* SLICE_ID, SLICE_NAME, GPU_MINOR, MEMORY_LIMIT */
#define XPU_EVENT_SLICE_DESTROYED	2	/* as CREATED */
#define XPU_EVENT_SLICE_CHANGED		3	/* as CREATED: the settings now */
#define XPU_EVENT_ALLOC_DENIED		4	/* as CREATED, and PID, SIZE, MEMORY_USED */
#define XPU_EVENT_MAX			4

/* Attributes (0 is unused, as in every netlink family). */
#define XPU_EA_SLICE_ID		1	/* u32: the slice's id */
#define XPU_EA_SLICE_NAME	2	/* string: its name, NUL-terminated */
#define XPU_EA_GPU_MINOR	3	/* u32: minor number of its GPU */
#define XPU_EA_MEMORY_LIMIT	4	/* u64: its memory limit, bytes */
#define XPU_EA_MEMORY_USED	5	/* u64: what it held at the event, bytes */
#define XPU_EA_PID		6	/* u32: the process (thread group id) */
#define XPU_EA_SIZE		7	/* u64: bytes asked for */
#define XPU_EA_PAD		8	/* padding before u64 attributes */
#define XPU_EA_MAX		8

#endif /* _UAPI_XPU_H */
