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
 *  - Structs hold only __u32 and __u64 (pointers travel as __u64), padding
 *    is explicit, every __u64 sits at an offset that is a multiple of 8 and
 *    every struct's size is a multiple of 8: the layout is then the same for
 *    32-bit and 64-bit callers.  tests/unit/test_uapi.py checks all of it.
 *  - Every ioctl's argument starts with argsz and flags.  The caller sets
 *    argsz to the size of the struct it knows; a struct only ever grows at
 *    its end.  The kernel requires argsz to cover the fields the ioctl had
 *    when it was introduced, writes no more than min(argsz, what it knows)
 *    and reports in argsz how many bytes it wrote.
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

#endif /* _UAPI_XPU_H */
