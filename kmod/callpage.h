/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_CALLPAGE_H
#define XPU_CALLPAGE_H

#include <linux/types.h>

struct xpu_callpage;

/*
 * A page in current's address space holding LEN bytes of DATA, at *ADDR,
 * for a call xpu makes as current: only the driver, in current, can write
 * it.  An ERR_PTR when it cannot be mapped.
 */
struct xpu_callpage *xpu_callpage_map(const void *data, size_t len,
				      unsigned long *addr);

/*
 * After the call: DATA gets the page's LEN bytes (what the driver wrote
 * back) and the page is unmapped.  Returns whether it stayed mapped where
 * it was throughout; if not, what the driver read is not known.
 */
bool xpu_callpage_done(struct xpu_callpage *cp, void *data, size_t len);

#endif /* XPU_CALLPAGE_H */
