/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-version differences, all in one place: the rest of nvstub uses these
 * names and never tests LINUX_VERSION_CODE itself.
 */
#ifndef NVSTUB_COMPAT_H
#define NVSTUB_COMPAT_H

#include <linux/mm.h>
#include <linux/version.h>

/* 6.3 (bc292ab00f6c "mm: introduce vma->vm_flags wrapper functions") */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define nvstub_vm_flags_set(vma, flags)		vm_flags_set(vma, flags)
#define nvstub_vm_flags_clear(vma, flags)	vm_flags_clear(vma, flags)
#else
static inline void nvstub_vm_flags_set(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void nvstub_vm_flags_clear(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

#endif /* NVSTUB_COMPAT_H */
