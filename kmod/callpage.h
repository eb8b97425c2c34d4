/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_CALLPAGE_H
#define XPU_CALLPAGE_H

#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>

struct xpu_callpage;

/*
 * A file's pages, kept for the processes that called through it
 * (callpage.c): one per call in flight, at most XPU_MAX_CALLPAGES.  LOCK
 * guards the list and each page's busy flag, never held across a call.
 */
struct xpu_callpages {
	spinlock_t lock;		/* the list, nr, each page's busy */
	struct list_head list;
	u32 nr;
};

#define XPU_MAX_CALLPAGES	16

static inline void xpu_callpages_init(struct xpu_callpages *cps)
{
	spin_lock_init(&cps->lock);
	INIT_LIST_HEAD(&cps->list);
	cps->nr = 0;
}

/*
 * A page in current's address space holding LEN bytes of DATA, at *ADDR,
 * for a call xpu makes as current: only the driver, in current, can write
 * it.  CPS is the calling file's pages; a page serves one call at a time,
 * so calls through one file may run at once, with or without a lock of
 * the slice's.  An ERR_PTR when it cannot be mapped.
 */
struct xpu_callpage *xpu_callpage_map(struct xpu_callpages *cps,
				      const void *data, size_t len,
				      unsigned long *addr);

/* Before the call: LEN bytes of DATA at OFF in the page CP. */
void xpu_callpage_write(struct xpu_callpage *cp, size_t off, const void *data,
			size_t len);

/*
 * After the call: the page is write-protected again and DATA gets its LEN
 * bytes (what the driver wrote back, unless a thread of the caller's wrote
 * in between: the caller checks what it relies on).  Returns whether it
 * stayed mapped where it was throughout; if not, what the driver read is
 * not known.  *SEALED, unless SEALED is NULL, says that nobody but the
 * driver can have written what DATA got: current was alone in its address
 * space from the call's start (callpage.c), and the page stayed.
 */
bool xpu_callpage_done(struct xpu_callpage *cp, void *data, size_t len,
		       bool *sealed);

/*
 * The file of CPS is released, no call through it in flight: its pages go
 * (unmapped in current's).
 */
void xpu_callpages_release(struct xpu_callpages *cps);

#endif /* XPU_CALLPAGE_H */
