/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-version differences, all in one place, for xpu.ko and the test
 * stub (tests/nvstub) alike.  The rest of the code uses the newest kernel's
 * names, or the xpu_ helpers below where the kernel has no one name; it
 * never tests LINUX_VERSION_CODE.  What a kernel has is decided by compile
 * probes (conftest.sh, whose answers every object gets as conftest.h, see
 * Kbuild) or, where the kernel's own headers say it, by the preprocessor;
 * each difference names the kernel change it follows.  Tested from 5.10 to
 * the newest kernel (README.md, docs/testing.md).
 */
#ifndef XPU_COMPAT_H
#define XPU_COMPAT_H

#ifndef XPU_CONFTEST_H
#error "conftest.h is missing: build with the module's Kbuild, which makes it"
#endif

#include <linux/bug.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/mm.h>

/*
 * hex2bin() and friends: <linux/hex.h> from 6.4, which <linux/kernel.h>
 * stopped including after 6.19; before 6.4 <linux/kernel.h> declares them
 * (conftest.sh).
 */
#ifdef XPU_HAVE_LINUX_HEX_H
#include <linux/hex.h>
#endif

/*
 * lockdep_assert(cond), for assertions over more than one lock:
 * d19c81378829 ("locking/lockdep: Provide lockdep_assert{,_once}()
 * helpers"), v5.15.  A macro: the preprocessor sees whether it is there.
 */
#ifndef lockdep_assert
#ifdef CONFIG_LOCKDEP
#define lockdep_assert(cond)	WARN_ON(debug_locks && !(cond))
#else
/* Without lockdep these kernels have no lockdep_is_held() either. */
#define lockdep_is_held(lock)	((void)(lock), 1)
#define lockdep_assert(cond)	((void)(cond))
#endif
#endif

/*
 * A VMA that its process cannot unmap, move, map over or mprotect
 * (VM_SEALED, mseal(2)'s flag, v6.10; a 64-bit flag only).
 * A flag, not a function, so no probe: its definition says.  Where it is,
 * XPU_VMA_SEALS is 1 and XPU_VM_SEALED the flag, else 0 and no flag.
 */
#if defined(VM_SEALED) && defined(CONFIG_64BIT)
#define XPU_VMA_SEALS		1
#define XPU_VM_SEALED		VM_SEALED
#else
#define XPU_VMA_SEALS		0
#define XPU_VM_SEALED		0
#endif

/*
 * vm_operations_struct.mprotect, with which a mapping's driver refuses
 * mprotect(2): "mm: Add 'mprotect' hook to struct vm_operations_struct",
 * v5.11, for SGX (conftest.sh).
 */
#ifdef XPU_HAVE_VM_OPS_MPROTECT
#define XPU_VMA_REFUSES_MPROTECT	1
#else
#define XPU_VMA_REFUSES_MPROTECT	0
#endif

/* vm_flags_set()/vm_flags_clear(): bc292ab00f6c, v6.3 (conftest.sh). */
#ifndef XPU_HAVE_VM_FLAGS_SET
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

/*
 * release_fault_lock(): 1235ccd05b6d, v6.6 (conftest.sh).  Before it a
 * fault held only the mmap lock.
 */
#ifndef XPU_HAVE_RELEASE_FAULT_LOCK
static inline void release_fault_lock(struct vm_fault *vmf)
{
	mmap_read_unlock(vmf->vma->vm_mm);
}
#endif

/* zap_special_vma_range(), formerly zap_vma_ptes(): 52a9e9cd181f, v7.1. */
#ifndef XPU_HAVE_ZAP_SPECIAL_VMA_RANGE
#define zap_special_vma_range(vma, address, size) \
	zap_vma_ptes(vma, address, size)
#endif

/*
 * The dma-buf namespace (the test stub's dma-bufs import it): named by an
 * identifier before cdd30ebb1b9f ("module: Convert symbol namespace to
 * string literal"), v6.13, by a string since (conftest.sh).  Before
 * 16b0314aa746 ("dma-buf: move dma-buf symbols into the DMA_BUF module
 * namespace"), v5.16, nothing is in it, and the import asks for nothing.
 */
#ifdef XPU_HAVE_MODULE_IMPORT_NS_STRING
#define XPU_IMPORT_NS_DMA_BUF MODULE_IMPORT_NS("DMA_BUF")
#else
#define XPU_IMPORT_NS_DMA_BUF MODULE_IMPORT_NS(DMA_BUF)
#endif

#endif /* XPU_COMPAT_H */
