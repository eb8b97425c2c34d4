// SPDX-License-Identifier: GPL-2.0
/*
 * Slice events for xpud: the generic netlink family "xpu", multicast group
 * "events" (include/uapi/xpu.h says what each message carries).  Nothing
 * here is needed for enforcement: an event that cannot be sent (no memory,
 * a listener's full buffer) is dropped, and listeners re-read the state.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/sched.h>
#include <net/genetlink.h>
#include <uapi/xpu.h>

#include "events.h"
#include "xpu.h"

/*
 * The events name processes: joining takes CAP_SYS_ADMIN where the kernel
 * can check it at the join (the flag came with Linux 6.7 and was
 * backported); elsewhere any local process may listen.
 */
#ifdef GENL_MCAST_CAP_SYS_ADMIN
#define XPU_MCGRP_FLAGS	GENL_MCAST_CAP_SYS_ADMIN
#else
#define XPU_MCGRP_FLAGS	0
#endif

static const struct genl_multicast_group xpu_mcgrps[] = {
	{ .name = XPU_GENL_MCGRP_EVENTS, .flags = XPU_MCGRP_FLAGS },
};

static struct genl_family xpu_genl = {
	.name = XPU_GENL_NAME,
	.version = XPU_GENL_VERSION,
	.maxattr = XPU_EA_MAX,
	.module = THIS_MODULE,
	.mcgrps = xpu_mcgrps,
	.n_mcgrps = ARRAY_SIZE(xpu_mcgrps),
};

static bool xpu_events_on;

static struct sk_buff *xpu_event_new(u8 cmd, struct xpu_slice *slice,
				     void **hdr)
{
	struct sk_buff *skb;

	if (!READ_ONCE(xpu_events_on) ||
	    !genl_has_listeners(&xpu_genl, &init_net, 0))
		return NULL;
	skb = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!skb)
		return NULL;
	*hdr = genlmsg_put(skb, 0, 0, &xpu_genl, 0, cmd);
	if (!*hdr ||
	    nla_put_u32(skb, XPU_EA_SLICE_ID, slice->id) ||
	    nla_put_string(skb, XPU_EA_SLICE_NAME, slice->name) ||
	    nla_put_u32(skb, XPU_EA_GPU_MINOR, slice->gpu->minor) ||
	    nla_put_u64_64bit(skb, XPU_EA_MEMORY_LIMIT,
			      READ_ONCE(slice->memory_limit), XPU_EA_PAD)) {
		nlmsg_free(skb);
		return NULL;
	}
	return skb;
}

static void xpu_event_send(struct sk_buff *skb, void *hdr)
{
	genlmsg_end(skb, hdr);
	/* -ESRCH: the last listener left meanwhile; nothing to do either way. */
	genlmsg_multicast(&xpu_genl, skb, 0, 0, GFP_KERNEL);
}

void xpu_event_slice(u8 cmd, struct xpu_slice *slice)
{
	struct sk_buff *skb;
	void *hdr;

	skb = xpu_event_new(cmd, slice, &hdr);
	if (skb)
		xpu_event_send(skb, hdr);
}

/*
 * A tenant can be refused as fast as it can call, and every event costs
 * each listener (xpud) a wake-up and a parse: at most XPU_DENY_EVENTS a
 * second per slice are told.  slice->denied, which XPU_IOC_SLICE_GET
 * reports, counts every one.
 */
#define XPU_DENY_EVENTS		10

void xpu_event_denied(struct xpu_slice *slice, u64 size)
{
	struct sk_buff *skb;
	void *hdr;

	lockdep_assert_held(&slice->mem_lock);	/* slice->used is stable */
	if (!slice->deny_ev_n || time_after(jiffies, slice->deny_ev_start + HZ)) {
		slice->deny_ev_start = jiffies;
		slice->deny_ev_n = 0;
	}
	if (slice->deny_ev_n >= XPU_DENY_EVENTS)
		return;
	slice->deny_ev_n++;
	skb = xpu_event_new(XPU_EVENT_ALLOC_DENIED, slice, &hdr);
	if (!skb)
		return;
	if (nla_put_u32(skb, XPU_EA_PID, task_tgid_nr(current)) ||
	    nla_put_u64_64bit(skb, XPU_EA_SIZE, size, XPU_EA_PAD) ||
	    nla_put_u64_64bit(skb, XPU_EA_MEMORY_USED, slice->used,
			      XPU_EA_PAD)) {
		nlmsg_free(skb);
		return;
	}
	xpu_event_send(skb, hdr);
}

int xpu_events_init(void)
{
	int ret = genl_register_family(&xpu_genl);

	if (ret) {
		pr_err("cannot register the generic netlink family '%s': %d\n",
		       XPU_GENL_NAME, ret);
		return ret;
	}
	WRITE_ONCE(xpu_events_on, true);
	return 0;
}

void xpu_events_exit(void)
{
	WRITE_ONCE(xpu_events_on, false);
	genl_unregister_family(&xpu_genl);
}
