/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The RM handles a slice's clients hold, counted and bounded per slice
 * (docs/security.md, "RM objects a slice holds").
 */
#ifndef XPU_HANDLES_H
#define XPU_HANDLES_H

#include <linux/list.h>
#include <linux/types.h>

struct xpu_file;
struct xpu_slice;

int xpu_handles_init(struct xpu_slice *slice);
void xpu_handles_destroy(struct xpu_slice *slice);

/*
 * Room for N more handles in SLICE, and a record for each on SPARE, before
 * the call that makes them: NV_OK, NV_ERR_INSUFFICIENT_RESOURCES past the
 * bound, NV_ERR_NO_MEMORY.  What the call did not use goes back with
 * xpu_handles_cancel().
 */
u32 xpu_handles_reserve(struct xpu_slice *slice, struct list_head *spare,
			u32 n);
void xpu_handles_cancel(struct xpu_slice *slice, struct list_head *spare);
/*
 * RM made H in client HC under HP, through XF's slice: a record from SPARE
 * goes on it.  A client (H == HC) is XF's.
 */
void xpu_handles_add(struct xpu_file *xf, struct list_head *spare, u32 hc,
		     u32 hp, u32 h);
/* RM freed H of client HC, and its descendants (all of it for a client). */
void xpu_handles_freed(struct xpu_slice *slice, u32 hc, u32 h);
bool xpu_handles_known(struct xpu_slice *slice, u32 hc, u32 h);
/* XF, a control file, is gone, and RM freed the clients made through it. */
void xpu_handles_file_release(struct xpu_file *xf);
u32 xpu_handles_count(struct xpu_slice *slice);

/* OS events the slice's clients hold now (a figure, read without the lock). */
u32 xpu_osevents_count(struct xpu_slice *slice);
/* Whether HC is a client made through SLICE's control files. */
bool xpu_handles_is_client(struct xpu_slice *slice, u32 hc);
/*
 * Whether a call through XF, a file of a slice, may name client HC: one made
 * through XF if it is a control file, through one of the slice's else.
 */
bool xpu_handles_file_client(struct xpu_file *xf, u32 hc);
/*
 * OS events (NV_ESC_ALLOC_OS_EVENT, FREE_OS_EVENT) through a slice's files,
 * under its mem_lock.  Whether the call may go to RM: HC must be a client
 * of the slice's, and an allocation (REC not NULL: its record, made here,
 * kfree()d if unused) must fit max_os_events; NV_OK or the status of the
 * refusal.  Then what RM did: an allocation's record goes on; an RM_FREE of
 * client HC that succeeded takes all its events (ALL), a FREE_OS_EVENT the
 * one of FD.
 */
struct xpu_osev;
u32 xpu_osevents_admit(struct xpu_slice *slice, u32 hc,
		       struct xpu_osev **rec);
bool xpu_osevents_has(struct xpu_slice *slice, u32 hc, u32 fd,
		      struct xpu_file *xf);
void xpu_osevents_add(struct xpu_file *xf, struct xpu_osev *rec, u32 hc,
		      u32 fd);
void xpu_osevents_freed(struct xpu_slice *slice, u32 hc, u32 fd, bool all);
int xpu_handles_module_init(void);
void xpu_handles_module_exit(void);

#endif
