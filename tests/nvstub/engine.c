// SPDX-License-Identifier: GPL-2.0
/*
 * The simulated engine: one kernel thread per GPU polls the doorbells of the
 * usermode regions mapped on that GPU, and runs the work of rung channels
 * round-robin, a timeslice each. A GPFIFO entry is a work item
 * {u32 duration_us; u32 reserved}; the engine sleeps for it, charges the time
 * it measured to the channel, its process and the engine, and advances GPGet
 * in USERD (Volta+ layout, clc86f.h) as items complete.
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "nvstub.h"

#define NVSTUB_IDLE_SLEEP_US	10000	/* nothing mapped: nothing to poll */
#define NVSTUB_MAX_ITEM_US	10000000u

/* Busy time per process on one GPU; under gpu->eng_lock. */
struct nvstub_proc {
	struct list_head node;
	pid_t tgid;
	unsigned int channels;		/* channels not yet released */
	u64 busy_ns;
	u64 items;
};

/* --- TSGs */

struct nvstub_tsg *nvstub_tsg_create(u32 engine_type)
{
	struct nvstub_tsg *tsg = kzalloc(sizeof(*tsg), GFP_KERNEL);

	if (!tsg)
		return NULL;
	kref_init(&tsg->ref);
	tsg->engine_type = engine_type;
	tsg->timeslice_us = nvstub_timeslice_us;
	return tsg;
}

static void nvstub_tsg_release(struct kref *ref)
{
	struct nvstub_tsg *tsg = container_of(ref, struct nvstub_tsg, ref);

	nvstub_vas_put(tsg->vas);
	kfree(tsg);
}

void nvstub_tsg_put(struct nvstub_tsg *tsg)
{
	kref_put(&tsg->ref, nvstub_tsg_release);
}

/* NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: "both bSkipSubmit and bSkipEnable can't be set" */
u32 nvstub_tsg_schedule(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
			const struct nva06c_ctrl_gpfifo_schedule_params *p)
{
	if (p->b_enable && p->b_skip_submit && p->b_skip_enable)
		return NV_ERR_INVALID_ARGUMENT;
	spin_lock(&gpu->eng_lock);
	tsg->scheduled = p->b_enable && !p->b_skip_submit && !p->b_skip_enable;
	spin_unlock(&gpu->eng_lock);
	return NV_OK;
}

void nvstub_tsg_set_timeslice(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
			      u64 us)
{
	spin_lock(&gpu->eng_lock);
	tsg->timeslice_us = us;
	spin_unlock(&gpu->eng_lock);
}

u64 nvstub_tsg_get_timeslice(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg)
{
	u64 us;

	spin_lock(&gpu->eng_lock);
	us = tsg->timeslice_us;
	spin_unlock(&gpu->eng_lock);
	return us;
}

/* --- channels */

static u32 *nvstub_userd(struct nvstub_chan *chan, unsigned int reg)
{
	return (u32 *)((u8 *)chan->userd_ptr + reg);
}

static void nvstub_chan_release(struct kref *ref)
{
	struct nvstub_chan *chan = container_of(ref, struct nvstub_chan, ref);
	struct nvstub_gpu *gpu = chan->gpu;

	spin_lock(&gpu->eng_lock);
	chan->proc->channels--;
	spin_unlock(&gpu->eng_lock);
	nvstub_mem_put(chan->userd);
	nvstub_vas_put(chan->vas);
	nvstub_tsg_put(chan->tsg);
	kfree(chan);
}

void nvstub_chan_get(struct nvstub_chan *chan)
{
	kref_get(&chan->ref);
}

void nvstub_chan_put(struct nvstub_chan *chan)
{
	kref_put(&chan->ref, nvstub_chan_release);
}

/* The record of TGID, or NEW (consumed) as a fresh one; dropping idle ones. */
static struct nvstub_proc *nvstub_proc_get(struct nvstub_gpu *gpu, pid_t tgid,
					   struct nvstub_proc **new)
{
	struct nvstub_proc *proc, *tmp;

	lockdep_assert_held(&gpu->eng_lock);
	list_for_each_entry(proc, &gpu->procs, node)
		if (proc->tgid == tgid)
			return proc;
	if (gpu->nprocs >= NVSTUB_MAX_PROCS) {
		list_for_each_entry_safe(proc, tmp, &gpu->procs, node) {
			if (!proc->channels) {
				list_del(&proc->node);
				kfree(proc);
				gpu->nprocs--;
				break;
			}
		}
	}
	proc = *new;
	*new = NULL;
	proc->tgid = tgid;
	list_add_tail(&proc->node, &gpu->procs);
	gpu->nprocs++;
	return proc;
}

u32 nvstub_chan_create(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
		       struct nvstub_client *client, u32 h_channel,
		       struct nvstub_mem *userd, u64 userd_offset,
		       struct nvstub_vas *vas, u64 gpfifo_va,
		       u32 entries, struct nvstub_chan **out)
{
	struct nvstub_proc *spare;
	struct nvstub_chan *chan;
	struct page *page;
	int chid;

	/* USERD's page exists from here on, whatever memory holds it */
	page = nvstub_mem_page(userd, userd_offset >> PAGE_SHIFT, true);
	if (!page)
		return NV_ERR_NO_MEMORY;

	chan = kzalloc(sizeof(*chan), GFP_KERNEL);
	spare = kzalloc(sizeof(*spare), GFP_KERNEL);
	if (!chan || !spare)
		goto err_free;
	chid = ida_alloc_max(&gpu->chids, nvstub_channel_ids - 1, GFP_KERNEL);
	if (chid < 0) {
		kfree(chan);
		kfree(spare);
		return NV_ERR_INSUFFICIENT_RESOURCES;
	}
	atomic_inc(&gpu->chids_used);

	kref_init(&chan->ref);
	chan->gpu = gpu;
	chan->chid = chid;
	chan->token = (NVSTUB_RUNLIST_ID << NV_VF_DOORBELL_RUNLIST_SHIFT) | chid;
	chan->runlist = tsg->runlist;
	chan->tgid = client->tgid;
	chan->h_client = client->handle;
	chan->h_channel = h_channel;
	chan->entries = entries;
	kref_get(&tsg->ref);
	chan->tsg = tsg;
	nvstub_mem_get(userd);
	chan->userd = userd;
	chan->userd_offset = userd_offset;
	chan->userd_ptr = page_address(page) + (userd_offset & ~PAGE_MASK);
	nvstub_vas_get(vas);
	chan->vas = vas;
	chan->gpfifo_va = gpfifo_va;
	/* RM sets up USERD with the ring empty */
	WRITE_ONCE(*nvstub_userd(chan, NVC86F_USERD_GP_GET), 0);
	WRITE_ONCE(*nvstub_userd(chan, NVC86F_USERD_GP_PUT), 0);

	spin_lock(&gpu->eng_lock);
	chan->proc = nvstub_proc_get(gpu, chan->tgid, &spare);
	chan->proc->channels++;
	list_add_tail(&chan->node, &gpu->channels);
	gpu->chans[chid] = chan;
	spin_unlock(&gpu->eng_lock);

	kfree(spare);
	*out = chan;
	return NV_OK;

err_free:
	kfree(chan);
	kfree(spare);
	return NV_ERR_NO_MEMORY;
}

/* The channel object is freed; the engine may still hold a reference. */
void nvstub_chan_destroy(struct nvstub_chan *chan)
{
	struct nvstub_gpu *gpu = chan->gpu;

	spin_lock(&gpu->eng_lock);
	chan->dead = true;
	list_del(&chan->node);
	gpu->chans[chan->chid] = NULL;
	if (gpu->cursor == chan)
		gpu->cursor = NULL;
	spin_unlock(&gpu->eng_lock);
	if (!chan->retainers)	/* else the last UVM retainer frees it */
		nvstub_chan_free_id(chan);
	nvstub_chan_put(chan);
}

void nvstub_chan_free_id(struct nvstub_chan *chan)
{
	ida_free(&chan->gpu->chids, chan->chid);
	atomic_dec(&chan->gpu->chids_used);
}

/*
 * NV2080_CTRL_CMD_FIFO_GET_PHYSICAL_CHANNEL_COUNT on a subdevice, as
 * subdeviceCtrlCmdGetPhysicalChannelCount (kernel_fifo_ctrl.c, 535 to 595;
 * non-privileged): the fewest channel ids of any runlist's channel-id
 * manager, and the most in use on any.  The stub has one manager of
 * `channel_ids`; RM counts the channel groups in use, the stub, which gives
 * a TSG no id of its own, its channels' ids (a UVM-retained channel's
 * included, as RM keeps its id until the last release).
 */
u32 nvstub_fifo_channel_count(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_fifo_get_physical_channel_count_params *p = params;

	p->phys_channel_count = nvstub_channel_ids;
	p->phys_channel_count_in_use = atomic_read(&obj->gpu->chids_used);
	return NV_OK;
}

/*
 * NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS on a subdevice: disable (and preempt:
 * the engine leaves the channel at its next poll) or enable the listed
 * channels, which may belong to any client.  As in
 * subdeviceCtrlCmdFifoDisableChannels* (kernel_fifo_ctrl.c): more than 64
 * entries is NV_ERR_INVALID_ARGUMENT; a runlist preempt event only for kernel
 * clients; a pair whose client (NV_ERR_INVALID_CLIENT) or channel
 * (NV_ERR_INVALID_CHANNEL) is not found is skipped, the others are still
 * acted on, and the last such error is the status.  bRewindGpPut is not
 * simulated.  Called under nvstub_rm_lock.
 */
u32 nvstub_fifo_disable_channels(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params)
{
	struct nv2080_ctrl_fifo_disable_channels_params *p = params;
	struct nvstub_gpu *gpu = obj->gpu;
	struct nvstub_object *ch;
	struct nvstub_client *c;
	u32 i, status = NV_OK;

	if (p->num_channels > NV2080_CTRL_FIFO_DISABLE_CHANNELS_MAX_ENTRIES)
		return NV_ERR_INVALID_ARGUMENT;
	if (p->p_runlist_preempt_event && !call->kernel)
		return NV_ERR_INSUFFICIENT_PERMISSIONS;
	for (i = 0; i < p->num_channels; i++) {
		c = xa_load(&nvstub_clients, p->h_client_list[i]);
		if (!c) {
			status = NV_ERR_INVALID_CLIENT;
			continue;
		}
		ch = nvstub_object_find(c, p->h_channel_list[i]);
		if (!ch || ch->hclass != HOPPER_CHANNEL_GPFIFO_A || ch->gpu != gpu) {
			status = NV_ERR_INVALID_CHANNEL;
			continue;
		}
		spin_lock(&gpu->eng_lock);
		ch->chan->disabled = p->b_disable;
		spin_unlock(&gpu->eng_lock);
	}
	if (!p->b_disable)
		wake_up_process(gpu->thread);
	return status;
}

/*
 * The idling of channels, as RmIdleChannels (gpu/fifo/kernel_idle_channels.c,
 * 535 to 595) takes it: N (client, device, channel) triples, each client the
 * caller's own H_CLIENT (NV_ERR_INSUFFICIENT_PERMISSIONS: "Don't allow other
 * clients' resources"), found (NV_ERR_INVALID_CLIENT), each device a device
 * or subdevice of it (NV_ERR_OBJECT_NOT_FOUND, NV_ERR_INVALID_OBJECT_HANDLE).
 * RM then takes the GPU lock of their GPUs and the firmware idles them with
 * the caller's flags and timeout (an RPC): what it checks and how it waits
 * is not in NVIDIA's source.  The stub checks that each channel is a channel
 * of the device's GPU (NV_ERR_INVALID_CHANNEL), and its channels have
 * nothing in flight a poll of the engine would not finish: NV_OK at once.
 * Under nvstub_rm_lock.
 */
static u32 nvstub_idle_channels(u32 h_client, u32 n, const u32 *clients,
				const u32 *devices, const u32 *channels)
{
	struct nvstub_object *d, *ch;
	struct nvstub_client *c;
	u32 i;

	for (i = 0; i < n; i++) {
		if (clients[i] != h_client)
			return NV_ERR_INSUFFICIENT_PERMISSIONS;
		c = xa_load(&nvstub_clients, clients[i]);
		if (!c)
			return NV_ERR_INVALID_CLIENT;
		d = nvstub_object_find(c, devices[i]);
		if (!d)
			return NV_ERR_OBJECT_NOT_FOUND;
		if (d->hclass != NV01_DEVICE_0 && d->hclass != NV20_SUBDEVICE_0)
			return NV_ERR_INVALID_OBJECT_HANDLE;
	}
	for (i = 0; i < n; i++) {
		c = xa_load(&nvstub_clients, clients[i]);
		d = nvstub_object_find(c, devices[i]);
		ch = nvstub_object_find(c, channels[i]);
		if (!ch || ch->hclass != HOPPER_CHANNEL_GPFIFO_A ||
		    ch->gpu != d->gpu)
			return NV_ERR_INVALID_CHANNEL;
	}
	return NV_OK;
}

/* N handles from user (or, for a kernel caller, kernel) memory at SRC */
static u32 nvstub_idle_list(bool kernel, u64 src, u32 n, u32 **out)
{
	u32 *l = kvmalloc_array(n, sizeof(u32), GFP_KERNEL | __GFP_NOWARN);

	if (!l)
		return NV_ERR_NO_MEMORY;
	if (kernel)
		memcpy(l, (void *)(uintptr_t)src, n * sizeof(u32));
	else if (copy_from_user(l, u64_to_user_ptr(src), n * sizeof(u32))) {
		kvfree(l);
		return NV_ERR_INVALID_ADDRESS;
	}
	*out = l;
	return NV_OK;
}

/*
 * The lists of the single form or of a list: FLAGS' CHANNEL field, else
 * NV_ERR_INVALID_FLAGS; an empty list is NV_OK, nothing looked up.  LIMIT
 * bounds a list's bytes (RMAPI_PARAM_COPY's, for the control; none for the
 * deprecated escape, which copies them in itself: "this should have a max
 * - but copying old behavior for now").
 */
static u32 nvstub_idle(struct nvstub_call *call, u32 h_client, u32 h_device,
		       u32 h_channel, u32 n, u64 pclients, u64 pdevices,
		       u64 pchannels, u32 flags, u64 limit, bool locked)
{
	u32 one[3] = { h_client, h_device, h_channel }, status;
	u32 *lists[3] = { &one[0], &one[1], &one[2] };
	u64 src[3] = { pclients, pdevices, pchannels };
	struct nvstub_client *c;
	bool copied = false;
	int i;

	switch (NVOS30_FLAGS_CHANNEL(flags)) {
	case NVOS30_FLAGS_CHANNEL_SINGLE:
		n = 1;
		break;
	case NVOS30_FLAGS_CHANNEL_LIST:
		if (!n)
			return NV_OK;
		if ((u64)n * sizeof(u32) > limit)
			return NV_ERR_INVALID_ARGUMENT;
		copied = true;
		memset(lists, 0, sizeof(lists));
		for (i = 0; i < 3; i++) {
			status = nvstub_idle_list(call->kernel, src[i], n,
						  &lists[i]);
			if (status)
				goto out;
		}
		break;
	default:
		return NV_ERR_INVALID_FLAGS;
	}
	if (locked) {
		status = nvstub_idle_channels(h_client, n, lists[0], lists[1],
					      lists[2]);
	} else {
		/* the escape's control, on the caller's own client */
		mutex_lock(&nvstub_rm_lock);
		status = nvstub_client_get(call, h_client, &c);
		if (!status)
			status = nvstub_idle_channels(h_client, n, lists[0],
						      lists[1], lists[2]);
		mutex_unlock(&nvstub_rm_lock);
	}
out:
	for (i = 0; copied && i < 3; i++)
		kvfree(lists[i]);
	return status;
}

/* NV_ESC_RM_IDLE_CHANNELS: the control, made by RmDeprecatedIdleChannels */
u32 nvstub_esc_idle_channels(struct nvstub_call *call,
			     struct nvos30_parameters *p)
{
	return nvstub_idle(call, p->h_client, p->h_device,
			   p->h_channel, p->num_channels, p->ph_clients,
			   p->ph_devices, p->ph_channels, p->flags, U64_MAX,
			   false);
}

/* NV0000_CTRL_CMD_IDLE_CHANNELS on the client.  Under nvstub_rm_lock. */
u32 nvstub_ctrl_idle_channels(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params)
{
	struct nv0000_ctrl_gpu_idle_channels_params *p = params;

	return nvstub_idle(call, obj->client->handle, p->h_device,
			   p->h_channel, p->num_channels, p->ph_clients,
			   p->ph_devices, p->ph_channels, p->flags,
			   (1u << 20), true);
}

/*
 * NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS on a device (kernel_fifo_ctrl.c): at
 * most 4096 handles (NV_ERR_INVALID_ARGUMENT), then all GPU locks and the
 * firmware, with the params as they came: channels of the device's client
 * on its GPU (the stub's reading of the firmware, as above).  Under
 * nvstub_rm_lock.
 */
u32 nvstub_ctrl_fifo_idle_channels(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params)
{
	struct nv0080_ctrl_fifo_idle_channels_params *p = params;
	struct nvstub_object *ch;
	u32 i;

	if (p->num_channels > NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS)
		return NV_ERR_INVALID_ARGUMENT;
	for (i = 0; i < p->num_channels; i++) {
		ch = nvstub_object_find(obj->client, p->h_channels[i]);
		if (!ch || ch->hclass != HOPPER_CHANNEL_GPFIFO_A ||
		    ch->gpu != obj->gpu)
			return NV_ERR_INVALID_CHANNEL;
	}
	return NV_OK;
}

/* --- doorbells */

static void nvstub_doorbell_release(struct kref *ref)
{
	struct nvstub_doorbell *db = container_of(ref, struct nvstub_doorbell, ref);
	unsigned int i;

	for (i = 0; i < NVSTUB_USERMODE_PAGES; i++)
		if (db->pages[i])
			__free_page(db->pages[i]);
	kfree(db);
}

void nvstub_doorbell_put(struct nvstub_doorbell *db)
{
	kref_put(&db->ref, nvstub_doorbell_release);
}

struct nvstub_doorbell *nvstub_doorbell_create(struct nvstub_gpu *gpu)
{
	struct nvstub_doorbell *db = kzalloc(sizeof(*db), GFP_KERNEL);
	unsigned int i;

	if (!db)
		return NULL;
	kref_init(&db->ref);
	db->gpu = gpu;
	for (i = 0; i < NVSTUB_USERMODE_PAGES; i++) {
		db->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!db->pages[i]) {
			nvstub_doorbell_put(db);
			return NULL;
		}
	}
	spin_lock(&gpu->eng_lock);
	list_add_tail(&db->node, &gpu->doorbells);
	db->listed = true;
	spin_unlock(&gpu->eng_lock);
	wake_up_process(gpu->thread);
	return db;
}

void nvstub_doorbell_unlist(struct nvstub_doorbell *db)
{
	struct nvstub_gpu *gpu = db->gpu;

	spin_lock(&gpu->eng_lock);
	if (db->listed)
		list_del(&db->node);
	db->listed = false;
	spin_unlock(&gpu->eng_lock);
}

/* Read and clear NOTIFY_CHANNEL_PENDING of every mapped usermode region. */
static void nvstub_poll_doorbells(struct nvstub_gpu *gpu)
{
	struct nvstub_doorbell *db;
	struct nvstub_chan *chan;
	u32 token, *bell;

	spin_lock(&gpu->eng_lock);
	list_for_each_entry(db, &gpu->doorbells, node) {
		bell = page_address(db->pages[0]) + NVC361_NOTIFY_CHANNEL_PENDING;
		token = xchg(bell, 0);
		if (!token)
			continue;
		chan = gpu->chans[token & NV_VF_DOORBELL_VECTOR_MASK];
		if (chan && chan->token == token)
			chan->rung = true;
	}
	spin_unlock(&gpu->eng_lock);
}

/* --- the engine thread */

static bool nvstub_chan_has_work(struct nvstub_chan *chan, u32 *put)
{
	*put = READ_ONCE(*nvstub_userd(chan, NVC86F_USERD_GP_PUT));
	return *put < chan->entries && *put != chan->gpget;
}

static bool nvstub_chan_runnable(struct nvstub_chan *chan)
{
	u32 put;

	return !chan->dead && !chan->disabled && !chan->faulted && chan->rung &&
	       chan->tsg->scheduled && nvstub_chan_has_work(chan, &put);
}

/* The next runnable channel after the cursor, with a reference; or NULL. */
static struct nvstub_chan *nvstub_pick(struct nvstub_gpu *gpu, u64 *slice_ns)
{
	struct nvstub_chan *chan, *start;
	struct list_head *pos;
	u32 put;

	spin_lock(&gpu->eng_lock);
	start = gpu->cursor;
	pos = start ? &start->node : &gpu->channels;
	for (pos = pos->next; ; pos = pos->next) {
		if (pos == &gpu->channels) {
			if (!start)
				break;
			continue;
		}
		chan = list_entry(pos, struct nvstub_chan, node);
		if (chan->rung && !nvstub_chan_has_work(chan, &put))
			chan->rung = false;	/* idle: wants a new doorbell */
		if (nvstub_chan_runnable(chan)) {
			gpu->cursor = chan;
			kref_get(&chan->ref);
			*slice_ns = clamp_t(u64, chan->tsg->timeslice_us, 1,
					    NVSTUB_MAX_SLICE_US) * NSEC_PER_USEC;
			spin_unlock(&gpu->eng_lock);
			return chan;
		}
		if (chan == start)
			break;
	}
	spin_unlock(&gpu->eng_lock);
	return NULL;
}

static void nvstub_sleep_ns(u64 ns)
{
	ktime_t t = ns_to_ktime(ns);

	/* kthread_stop() wakes us early */
	set_current_state(TASK_INTERRUPTIBLE);
	schedule_hrtimeout(&t, HRTIMER_MODE_REL);
}

/* Run CHAN for at most SLICE_NS, polling doorbells as it goes. */
static void nvstub_run_slice(struct nvstub_gpu *gpu, struct nvstub_chan *chan,
			     u64 slice_ns)
{
	u64 poll_ns = (u64)nvstub_doorbell_poll_us * NSEC_PER_USEC;
	u64 used = 0, run, last, now, elapsed;
	unsigned int done = 0;
	u32 put, dur;

	/*
	 * The channel holds the engine from here until it leaves: the time of
	 * the thread's own bookkeeping between sleeps is the channel's too (a
	 * GPU has none), so that one channel alone gets the whole engine.
	 */
	last = ktime_get_ns();
	while (used < slice_ns && done < chan->entries && !kthread_should_stop()) {
		spin_lock(&gpu->eng_lock);
		if (chan->dead || chan->disabled || !chan->tsg->scheduled) {
			spin_unlock(&gpu->eng_lock);
			break;		/* preempted: the item resumes later */
		}
		if (!nvstub_chan_has_work(chan, &put)) {
			if (put < chan->entries)
				chan->rung = false;
			spin_unlock(&gpu->eng_lock);
			break;
		}
		if (!chan->item_loaded) {
			/* the ring entry, read through the channel's VA space */
			if (!nvstub_vas_read32(chan->vas, chan->gpfifo_va +
					       (u64)chan->gpget * 8, &dur)) {
				chan->faulted = true;	/* an MMU fault: the channel stops */
				spin_unlock(&gpu->eng_lock);
				break;
			}
			dur = min(dur, NVSTUB_MAX_ITEM_US);
			chan->item_left_ns = (u64)dur * NSEC_PER_USEC;
			chan->item_loaded = true;
		}
		run = min3(chan->item_left_ns, slice_ns - used, poll_ns);
		spin_unlock(&gpu->eng_lock);

		if (run)
			nvstub_sleep_ns(run);
		nvstub_poll_doorbells(gpu);
		now = ktime_get_ns();
		elapsed = now - last;
		last = now;

		spin_lock(&gpu->eng_lock);
		used += elapsed;
		chan->busy_ns += elapsed;
		chan->proc->busy_ns += elapsed;
		gpu->busy_ns += elapsed;
		if (elapsed >= chan->item_left_ns) {
			chan->item_loaded = false;
			chan->item_left_ns = 0;
			chan->gpget = (chan->gpget + 1) & (chan->entries - 1);
			WRITE_ONCE(*nvstub_userd(chan, NVC86F_USERD_GP_GET),
				   chan->gpget);
			chan->items++;
			chan->proc->items++;
			gpu->items++;
			done++;
		} else {
			chan->item_left_ns -= elapsed;
		}
		spin_unlock(&gpu->eng_lock);
	}
}

static int nvstub_engine_thread(void *data)
{
	struct nvstub_gpu *gpu = data;
	struct nvstub_chan *chan;
	u64 slice_ns;
	bool idle;

	while (!kthread_should_stop()) {
		nvstub_poll_doorbells(gpu);
		chan = nvstub_pick(gpu, &slice_ns);
		if (chan) {
			nvstub_run_slice(gpu, chan, slice_ns);
			nvstub_chan_put(chan);
			cond_resched();
			continue;
		}
		spin_lock(&gpu->eng_lock);
		idle = list_empty(&gpu->doorbells);
		spin_unlock(&gpu->eng_lock);
		nvstub_sleep_ns((u64)(idle ? NVSTUB_IDLE_SLEEP_US :
				      nvstub_doorbell_poll_us) * NSEC_PER_USEC);
	}
	return 0;
}

int nvstub_engine_start(struct nvstub_gpu *gpu)
{
	struct task_struct *t;

	t = kthread_run(nvstub_engine_thread, gpu, "nvstub-eng/%u", gpu->index);
	if (IS_ERR(t))
		return PTR_ERR(t);
	gpu->thread = t;
	return 0;
}

void nvstub_engine_stop(struct nvstub_gpu *gpu)
{
	struct nvstub_proc *proc, *tmp;

	if (gpu->thread)
		kthread_stop(gpu->thread);
	gpu->thread = NULL;
	list_for_each_entry_safe(proc, tmp, &gpu->procs, node) {
		list_del(&proc->node);
		kfree(proc);
	}
	gpu->nprocs = 0;
}

/* --- debugfs: /sys/kernel/debug/nvstub/gpuN/{engine,channels,heap,processes} */

static int nvstub_engine_show(struct seq_file *s, void *unused)
{
	struct nvstub_gpu *gpu = s->private;
	struct nvstub_chan *chan;
	unsigned int n = 0, runnable = 0;
	u64 busy, items;

	spin_lock(&gpu->eng_lock);
	list_for_each_entry(chan, &gpu->channels, node) {
		n++;
		runnable += nvstub_chan_runnable(chan);
	}
	busy = gpu->busy_ns;
	items = gpu->items;
	spin_unlock(&gpu->eng_lock);
	seq_printf(s, "busy_ns=%llu items=%llu channels=%u runnable=%u\n",
		   busy, items, n, runnable);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_engine);

static int nvstub_channels_show(struct seq_file *s, void *unused)
{
	struct nvstub_gpu *gpu = s->private;
	struct nvstub_chan *chan;
	u32 put;

	spin_lock(&gpu->eng_lock);
	list_for_each_entry(chan, &gpu->channels, node) {
		put = READ_ONCE(*nvstub_userd(chan, NVC86F_USERD_GP_PUT));
		seq_printf(s, "token=%u pid=%d client=0x%x handle=0x%x busy_ns=%llu items=%llu gpget=%u gpput=%u retainers=%u state=%s\n",
			   chan->token, chan->tgid, chan->h_client,
			   chan->h_channel, chan->busy_ns, chan->items,
			   chan->gpget, put, READ_ONCE(chan->retainers),
			   chan->faulted ? "faulted" :
			   nvstub_chan_runnable(chan) ? "runnable" : "idle");
	}
	spin_unlock(&gpu->eng_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_channels);

static int nvstub_heap_show(struct seq_file *s, void *unused)
{
	struct nvstub_gpu *gpu = s->private;
	u64 total, free, internal;
	u32 allocs, users;

	mutex_lock(&nvstub_rm_lock);
	nvstub_heap_info(gpu, &total, &free);
	internal = gpu->heap_internal;
	allocs = gpu->heap_allocs;
	users = gpu->users;
	mutex_unlock(&nvstub_rm_lock);
	seq_printf(s, "total=%llu used=%llu free=%llu internal=%llu allocations=%u users=%u\n",
		   total, total - free, free, internal, allocs, users);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_heap);

static int nvstub_processes_show(struct seq_file *s, void *unused)
{
	struct nvstub_gpu *gpu = s->private;
	struct nvstub_proc *proc;

	spin_lock(&gpu->eng_lock);
	list_for_each_entry(proc, &gpu->procs, node)
		seq_printf(s, "pid=%d busy_ns=%llu items=%llu channels=%u\n",
			   proc->tgid, proc->busy_ns, proc->items,
			   proc->channels);
	spin_unlock(&gpu->eng_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvstub_processes);

void nvstub_engine_debugfs(struct nvstub_gpu *gpu)
{
	debugfs_create_file("engine", 0444, gpu->debugfs, gpu, &nvstub_engine_fops);
	debugfs_create_file("channels", 0444, gpu->debugfs, gpu,
			    &nvstub_channels_fops);
	debugfs_create_file("heap", 0444, gpu->debugfs, gpu, &nvstub_heap_fops);
	debugfs_create_file("processes", 0444, gpu->debugfs, gpu,
			    &nvstub_processes_fops);
}
