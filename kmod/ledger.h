/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ledger (ledger.c): video memory a slice freed that something else
 * still holds stays charged to the slice.
 */
#ifndef XPU_LEDGER_H
#define XPU_LEDGER_H

#include <linux/types.h>

struct file;
struct inode;
struct xpu_file;
struct xpu_gpu;
struct xpu_slice;

int xpu_ledger_init(void);
void xpu_ledger_exit(void);
u32 xpu_ledger_free(struct xpu_file *xf, struct file *file,
		    u32 hc, u32 hp, u32 ho, bool *settled, u64 *gone);
bool xpu_ledger_room(struct xpu_slice *slice);
int xpu_ledger_record(struct xpu_file *xf, u32 hc, u32 hp, u32 ho, u64 size,
		      bool made);
u64 xpu_ledger_unseen(struct xpu_file *xf);
int xpu_ledger_release(struct xpu_file *xf, int (*release)(struct inode *,
							   struct file *),
		       struct inode *inode, struct file *file);
void xpu_ledger_file_exit(struct xpu_file *xf);
bool xpu_ledger_reprobe(struct xpu_slice *slice, unsigned int max);
/* what an admin's read of a slice looks at, at most */
#define XPU_LEDGER_REPROBE_STEP	16
int xpu_ledger_slice_init(struct xpu_slice *slice, struct xpu_gpu *gpu);
void xpu_ledger_slice_release(struct xpu_slice *slice);
void xpu_ledger_orphans_settle(struct xpu_gpu *gpu, unsigned int max);

#endif /* XPU_LEDGER_H */
