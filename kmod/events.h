/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Events on the generic netlink family "xpu" (include/uapi/xpu.h): each
 * call is one multicast message, or nothing when nobody listens.  Callers
 * may hold xpu_lock or a slice's mem_lock (both mutexes); never a spinlock.
 */
#ifndef XPU_EVENTS_H
#define XPU_EVENTS_H

#include <linux/types.h>

struct xpu_slice;

int xpu_events_init(void);
void xpu_events_exit(void);

/* XPU_EVENT_SLICE_CREATED, _DESTROYED or _CHANGED for SLICE. */
void xpu_event_slice(u8 cmd, struct xpu_slice *slice);
/* XPU_EVENT_ALLOC_DENIED: the current process asked SLICE for SIZE bytes. */
void xpu_event_denied(struct xpu_slice *slice, u64 size);

#endif
