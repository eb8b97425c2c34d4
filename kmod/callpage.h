/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_CALLPAGE_H
#define XPU_CALLPAGE_H

#include <linux/types.h>

struct xpu_callpage;

/* At load, before any call. */
void xpu_callpage_init(void);

/*
 * The pages of calls are an address space's, at the bottom of it, below
 * mmap_min_addr (callpage.c): at most XPU_CALL_SLOTS, one for each call in
 * flight there, kept between calls.
 */
#define XPU_CALL_SLOTS		15

/*
 * A page in current's address space holding LEN bytes of DATA, at *ADDR,
 * for a call xpu makes as current: only the driver, in current, can write
 * it, and no task of current's can put another page at *ADDR.  A page
 * serves one call at a time, so calls of one process may run at once, with
 * or without a lock of the slice's; past XPU_CALL_SLOTS at once, a call
 * waits (killable) for a page.  An ERR_PTR when it cannot be mapped.
 */
struct xpu_callpage *xpu_callpage_map(const void *data, size_t len,
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
 * A file of current's is released: the pages no call holds go from
 * current's address space (their mappings hold xpu.ko), to be mapped anew
 * by a later call.
 */
void xpu_callpages_release(void);

#endif /* XPU_CALLPAGE_H */
