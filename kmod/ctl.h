/* SPDX-License-Identifier: GPL-2.0 */
#ifndef XPU_CTL_H
#define XPU_CTL_H

int xpu_ctl_init(void);
void xpu_ctl_exit(void);

#endif /* XPU_CTL_H */
