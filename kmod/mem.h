/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_MEM_H
#define XPU_MEM_H

#include "hook.h"
#include "xpu.h"

/* current takes part in slice (it opened or calls through one of its files) */
int xpu_mem_join(struct xpu_slice *slice);
bool xpu_mem_is_member(struct xpu_slice *slice, struct pid *pid);
void xpu_mem_refresh_all(struct xpu_slice *slice);
long xpu_mem_charge(struct xpu_slice *slice, u64 bytes);
void xpu_mem_fill(struct xpu_slice *slice, struct xpu_slice_info *out);
int xpu_mem_set_limit(struct xpu_slice *slice, u64 limit);
void xpu_mem_slice_release(struct xpu_slice *slice);
void xpu_mem_file_release(struct xpu_file *xf);
u32 xpu_free_as_caller(struct xpu_file *xf, struct file *file,
		       u32 hc, u32 hp, u32 ho);

long xpu_mem_rm_alloc(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
long xpu_mem_rm_free(struct xpu_file *xf, struct file *file,
		     unsigned int cmd, unsigned long arg);
long xpu_mem_rm_control(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg);
long xpu_mem_rm_dup(struct xpu_file *xf, struct file *file,
		    unsigned int cmd, unsigned long arg);
long xpu_mem_alloc_object(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);
long xpu_mem_vid_heap(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
long xpu_mem_alloc_memory(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);

#endif /* XPU_MEM_H */
