/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_HOSTMEM_H
#define XPU_HOSTMEM_H

#include <linux/bits.h>
#include <linux/types.h>

struct xpu_slice;

/*
 * System-memory objects xpu follows a slice (as many as video-memory
 * records, XPU_MAX_MEMRECS): past it an allocation is refused, bound or
 * not.  OS pages an object (16 GiB of 4 KiB pages): past it an allocation
 * is refused in a slice with a bound, left unrecorded in one without.  A
 * record costs a pointer a page (0.2 %), charged to the caller's memory
 * cgroup.
 */
#define XPU_MAX_HOSTMEM		65536
#define XPU_HOSTMEM_MAX_PAGES	BIT(22)
/* Records looked at by each allocation and free of a slice (hostmem.c). */
#define XPU_HOSTMEM_SWEEP_STEP	4

bool xpu_hostmem_fits(struct xpu_slice *slice, u64 want);
int xpu_hostmem_record(struct xpu_slice *slice, u32 hc, u32 ho);
void xpu_hostmem_sweep(struct xpu_slice *slice);
void xpu_hostmem_sweep_some(struct xpu_slice *slice, unsigned int n);
void xpu_hostmem_slice_release(struct xpu_slice *slice);

#endif
