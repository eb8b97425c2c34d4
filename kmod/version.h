/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_VERSION_H
#define XPU_VERSION_H

#include <linux/stringify.h>

#define XPU_VERSION_MAJOR	0
#define XPU_VERSION_MINOR	1
#define XPU_VERSION_PATCH	0

#define XPU_VERSION __stringify(XPU_VERSION_MAJOR) "." \
		    __stringify(XPU_VERSION_MINOR) "." \
		    __stringify(XPU_VERSION_PATCH)

#endif /* XPU_VERSION_H */
