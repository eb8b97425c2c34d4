/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_MEM_H
#define XPU_MEM_H

#include "hook.h"
#include "xpu.h"

/* current takes part in slice (it opened or calls through one of its files) */
int xpu_mem_join(struct xpu_slice *slice);
bool xpu_mem_is_member(struct xpu_slice *slice, struct pid *pid);
bool xpu_mem_may_retain(struct xpu_slice *slice, struct pid *pid);
bool xpu_mem_device_guarded(void);
void xpu_mem_refresh_all(struct xpu_slice *slice);
void xpu_mem_file_closed(struct xpu_slice *slice);
u32 xpu_mem_charge_locked(struct xpu_slice *slice, u64 bytes);
u32 xpu_mem_client_check_locked(struct xpu_file *xf, u32 hc);
void xpu_mem_fill(struct xpu_slice *slice, struct xpu_slice_info *out);
int xpu_mem_lock_admin(struct xpu_slice *slice);
int xpu_mem_set_limit(struct xpu_slice *slice, u64 limit);
bool xpu_mem_host_limit_lowers(const struct xpu_slice *slice, u64 limit);
int xpu_mem_host_limit_check(struct xpu_slice *slice, u64 limit);
void xpu_mem_slice_release(struct xpu_slice *slice);
void xpu_mem_file_release(struct xpu_file *xf);
u32 xpu_free_as_caller(struct xpu_file *xf, struct file *file,
		       u32 hc, u32 hp, u32 ho);

/*
 * An RM_ALLOC of a slice is made on xpu's copy of the caller's struct, E
 * (mem.c); sched.c makes those of the classes it tracks through these.
 */
struct xpu_escape;

/* What RM_ALLOC's struct E names, as RM reads it. */
void xpu_escape_alloc_args(const struct xpu_escape *e, u32 *hc, u32 *hp,
			   u32 *ho);

/* The caller's struct gets status VALUE (0 or -EFAULT). */
long xpu_escape_alloc_status(struct xpu_escape *e, u32 value);
/* What a channel's or TSG's allocation on E depends on, as RM reads it. */
u32 xpu_escape_alloc_dep(const struct xpu_escape *e, bool tsg);

/* What RM made, read where only xpu reads it. */
struct xpu_alloc_result {
	bool made;		/* the call was made (else -EINTR) */
	bool cheated;		/* the page moved, or RM's handles were rewritten */
	long drv_ret;		/* the driver's return */
	u32 hc, ho, status;	/* RM's: the client, the new object, its status */
	/*
	 * status is the driver's own word: the caller alone from the call's
	 * start, and the copy-back made (else a claim: ask RM)
	 */
	bool trusted;
};

/*
 * The driver's RM_ALLOC CMD on E, under the slice's mem_lock, which the
 * caller took, as every call on xpu's page; a handle the caller left to RM
 * xpu names (mem.c).  The caller's struct gets the results.  Returns what
 * the ioctl returns.  When R->made, mem_lock is still held: the caller
 * records what RM made before any other call of the slice can free or make
 * a handle, then unlocks; otherwise it is dropped.
 */
long xpu_mem_tracked_call(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, struct xpu_escape *e,
			  struct xpu_alloc_result *r);

long xpu_mem_rm_alloc(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
/* RM_MAP_MEMORY of a slice's control file, on xpu's copy (file.c checks it). */
long xpu_mem_map_memory(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg);
long xpu_mem_map_dma(struct xpu_file *xf, struct file *file,
		     unsigned int cmd, unsigned long arg);
long xpu_mem_rm_free(struct xpu_file *xf, struct file *file,
		     unsigned int cmd, unsigned long arg);
long xpu_mem_rm_share(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
long xpu_mem_rm_control(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg);
long xpu_mem_rm_dup(struct xpu_file *xf, struct file *file,
		    unsigned int cmd, unsigned long arg);
long xpu_mem_alloc_object(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);
long xpu_mem_vid_heap(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
long xpu_mem_export_dmabuf(struct xpu_file *xf, struct file *file,
			   unsigned int cmd, unsigned long arg);
long xpu_mem_sys_params(struct xpu_file *xf, struct file *file,
			unsigned int cmd, unsigned long arg);
long xpu_mem_refused_escape(struct xpu_file *xf, struct file *file,
			    unsigned int cmd, unsigned long arg);
long xpu_mem_call_on_copy(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg, void *data,
			  size_t len, bool make);
long xpu_mem_os_event(struct xpu_file *xf, struct file *file,
		      unsigned int cmd, unsigned long arg);
long xpu_mem_alloc_context_dma(struct xpu_file *xf, struct file *file,
			       unsigned int cmd, unsigned long arg);
long xpu_mem_alloc_memory(struct xpu_file *xf, struct file *file,
			  unsigned int cmd, unsigned long arg);

#endif /* XPU_MEM_H */
