/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nvstub: a simulated NVIDIA kernel driver for tests (docs/nvstub.md).
 *
 * Locking, outermost first:
 *   nvstub_rm_lock (mutex)      the RM object world: clients, objects, handle
 *                               maps, heap counters, dup counts, CPU-mapping
 *                               records, file ctl links and attached GPUs.
 *                               Never held across copy_{from,to}_user().
 *   nvstub_file.ctx_lock (mutex) one file's mapping context; taken under the
 *                               RM lock (RM_MAP_MEMORY) or mmap_lock (mmap).
 *   nvstub_gpu.eng_lock (spin)  the engine's view of one GPU: channels,
 *                               doorbells, TSG scheduling, busy counters.
 */
#ifndef NVSTUB_H
#define NVSTUB_H

#include <linux/cdev.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/xarray.h>

#include "compat.h"
#include "nvabi.h"

#define NVSTUB_MAX_GPUS		16
/* GH100's accessCounterBufferCount (g_uvm_nvoc.c) */
#define NVSTUB_ACCESS_COUNTER_BUFFERS	1
#define NVSTUB_PCI_BUS_BASE	0x18
#define NVSTUB_VENDOR_ID	0x10de
#define NVSTUB_DEVICE_ID	0x2335
#define NVSTUB_SUBSYSTEM_ID	0x18bf		/* stub: an H200 SXM board */
#define NVSTUB_MODEL		"NVIDIA H200"
#define NVSTUB_BAR0_SIZE	(16ull << 20)
#define NVSTUB_BAR1_SIZE	(256ull << 30)
#define NVSTUB_USERMODE_OFFSET	0x30000		/* NV_VIRTUAL_FUNCTION in BAR0 */
#define NVSTUB_USERMODE_PAGES	(NVC361_NV_USERMODE__SIZE >> PAGE_SHIFT)
#define NVSTUB_MAX_CHANNELS	2048		/* channel ids per GPU */
/* channels a TSG holds at most: NV_RAMRL_ENTRY_TSG_LENGTH_MAX, Volta on */
#define NVSTUB_TSG_LENGTH_MAX	128
#define NVSTUB_RUNLIST_ID	1		/* keeps every token nonzero */
#define NVSTUB_SYSMEM_CAP	(256ul << 20)	/* real pages, all GPUs */
#define NVSTUB_MAX_OBJECTS	(1u << 18)	/* RM objects, all clients */
#define NVSTUB_MAX_CPU_MAPPINGS	4096		/* RM_MAP_MEMORY records per object */
#define NVSTUB_MAX_PROCS	256		/* engine process records per GPU */
#define NVSTUB_MAX_SLICE_US	1000000ull

/* One row of the per-version ABI table, chosen once at load (main.c). */
struct nvstub_abi {
	unsigned int since;		/* first driver major it applies to */
	u32 fb_info_max_list;		/* NV2080_CTRL_FB_INFO_MAX_LIST_SIZE */
	u32 fb_info_index_max;		/* NV2080_CTRL_FB_INFO_INDEX_MAX */
	u32 memalloc_size;		/* sizeof(NV_MEMORY_ALLOCATION_PARAMS) */
	u32 channel_alloc_size;		/* sizeof(NV_CHANNEL_ALLOC_PARAMS) */
	u32 nvos46_size;		/* sizeof(NVOS46_PARAMETERS) */
	u32 nvos47_size;		/* sizeof(NVOS47_PARAMETERS) */
	u32 gpfifo_schedule_size;	/* NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS */
	/* UVM_MAX_GPUS: UVM_MAP_EXTERNAL_ALLOCATION's attribute array (550) */
	u32 uvm_max_gpus;
	/*
	 * 550 changed several things at once: the device-allocation fd check
	 * is by f_op, the device factory checks deviceId, FB_GET_INFO V1
	 * became a deprecated control, WAIT_OPEN_COMPLETE appeared.
	 */
	bool since_550;
	/*
	 * From 565 GET_PID_INFO and GET_PIDS speak the calling task's pid
	 * namespace (gpu_rmapi.c _gpuConvertPid, osFindNsPid), for kernel
	 * callers too; before, the client's global ProcID.
	 */
	bool pid_in_caller_ns;
};

extern const struct nvstub_abi *nvstub_abi;
extern char nvstub_version[NV_RM_API_VERSION_STRING_LENGTH];
extern unsigned int nvstub_major;	/* the driver version's first number */
extern unsigned int nvstub_ngpus;
extern unsigned int nvstub_alloc_reread_delay_us;
extern unsigned int nvstub_copyin_delay_us;
extern unsigned int nvstub_control_delay_us;
extern unsigned int nvstub_copyout_delay_us;
extern unsigned int nvstub_map_delay_us;
extern unsigned int nvstub_open_delay_us;
extern unsigned int nvstub_close_delay_us;
extern unsigned int nvstub_uvm_retain_delay_us;
extern unsigned int nvstub_uvm_retain_wait_us;
extern unsigned int nvstub_timeslice_us;
extern u64 nvstub_gr_context_bytes;
/* gpuIsCCorApmFeatureEnabled() / gpuIsCCFeatureEnabled(), for every GPU */
enum { NVSTUB_PROTECTION_OFF, NVSTUB_PROTECTION_APM, NVSTUB_PROTECTION_CC };
extern unsigned int nvstub_memory_protection;
extern unsigned int nvstub_doorbell_poll_us;
extern unsigned int nvstub_channel_ids;
extern struct mutex nvstub_rm_lock;

static inline u32 nvstub_fb_info_v2_size(void)
{
	return sizeof(u32) + nvstub_abi->fb_info_max_list *
	       sizeof(struct nv2080_ctrl_fb_info);
}

struct nvstub_proc;
struct nvstub_call;
struct nvstub_object;

/* A channel's instance block, RAMFC in it (dev_ram.h, Maxwell to Ampere). */
#define NVSTUB_RAMIN_ALLOC_SIZE		4096

/* One RM control (ctrl.c's table, and info.c's for inventory controls). */
struct nvstub_ctrl {
	u32 cmd;
	u32 hclass;			/* the class whose objects export it */
	u32 size;			/* 0: by version, size_of() */
	u32 (*handler)(struct nvstub_call *call, struct nvstub_object *obj,
		       void *params);
	u32 (*size_of)(void);		/* params that moved between versions */
	unsigned int since;		/* the first driver major with it; 0: all */
};

/* struct nvstub_ctrl's hclass for a command every Memory class exports */
#define NVSTUB_CTRL_ANY_MEMORY	0xffffffffu
void nvstub_ctrl_debugfs(struct dentry *dir);

extern const struct nvstub_ctrl nvstub_info_ctrls[];
extern const unsigned int nvstub_info_nctrls;
struct nvos54_parameters;
u32 nvstub_build_version_v1(struct nvstub_call *call, struct nvos54_parameters *p);

struct nvstub_gpu {
	unsigned int index;		/* = minor number */
	u32 gpu_id;
	u8 bus;
	char bus_id[16];		/* 0000:BB:00.0 */
	char uuid[48];
	u8 uuid_bin[16];
	u64 reg_address;
	u64 fb_address;

	/* heap: under nvstub_rm_lock */
	u64 heap_total;
	u64 heap_used;			/* memory objects and RM's own (below) */
	/*
	 * RM's own video memory, charged to no process (rule 5): channels'
	 * instance blocks and TSGs' GR context buffers.
	 */
	u64 heap_internal;
	u64 heap_next;			/* fake offset of the next allocation */
	/* ACCESS_COUNTER_NOTIFY_BUFFER's one object, whoever's; rm lock */
	struct nvstub_object *access_counters;
	u32 heap_allocs;
	unsigned int attach_count;	/* ATTACH_GPUS_TO_FD references */
	/*
	 * nv->usage_count: open GPU files, ATTACH_GPUS_TO_FD references and
	 * kernel clients' open_gpu().  When it drops to 0 (persistence mode
	 * is off) RM shuts the GPU down and every client's devices on it go.
	 */
	unsigned int users;

	/*
	 * engine: eng_lock protects channels, doorbells, procs, chans[],
	 * cursor, busy_ns, items and every channel's and TSG's engine state
	 */
	spinlock_t eng_lock;
	struct list_head channels;
	struct list_head doorbells;
	struct list_head procs;
	unsigned int nprocs;
	struct nvstub_chan *chans[NVSTUB_MAX_CHANNELS];
	struct nvstub_chan *cursor;
	u64 busy_ns;
	u64 items;
	struct ida chids;
	atomic_t chids_used;		/* of chids: FIFO_GET_PHYSICAL_CHANNEL_COUNT */
	struct task_struct *thread;

	struct dentry *debugfs;
	struct proc_dir_entry *procfs;
};

extern struct nvstub_gpu *nvstub_gpus;

/* What a file's one mapping context describes (RM_MAP_MEMORY → mmap). */
enum nvstub_ctx_kind {
	NVSTUB_CTX_NONE,
	NVSTUB_CTX_SYSMEM,		/* ctl file: pages of a system-memory object */
	NVSTUB_CTX_VIDMEM,		/* GPU file: BAR1, pages made on first touch */
	NVSTUB_CTX_USERMODE,		/* GPU file: the usermode region */
};

struct nvstub_mem;
struct nvstub_doorbell;

struct nvstub_mmap_ctx {
	enum nvstub_ctx_kind kind;
	struct nvstub_mem *mem;		/* SYSMEM, VIDMEM: holds a reference */
	struct nvstub_doorbell *db;	/* USERMODE: holds a reference */
	unsigned long page_index;	/* first page of the mapping */
	unsigned long npages;		/* page-aligned length */
};

/* Per-open-file state: file->private_data. */
struct nvstub_export_fd;

struct nvstub_file {
	struct file *filp;
	struct nvstub_gpu *gpu;		/* NULL for /dev/nvidiactl */
	/*
	 * REGISTER_FD: the ctl file this one acts for (clientOSInfo). Set once
	 * under nvstub_rm_lock, read with READ_ONCE; ctl_filp pins it.
	 */
	struct nvstub_file *ctl;
	struct file *ctl_filp;
	u32 *attached_gpus;		/* ATTACH_GPUS_TO_FD, under rm lock */
	size_t nattached;
	struct address_space mapping;	/* GPU files: for unmap_mapping_range() */
	struct mutex ctx_lock;		/* protects ctx */
	struct nvstub_mmap_ctx ctx;
	/* objects exported into this control file (export.c); rm lock */
	struct nvstub_export_fd *exp;
};

static inline bool nvstub_file_is_ctl(const struct nvstub_file *nf)
{
	return !nf->gpu;
}

/* A file's clientOSInfo: the ctl file it is registered to, else itself. */
static inline struct nvstub_file *nvstub_os_info(struct nvstub_file *nf)
{
	struct nvstub_file *ctl = READ_ONCE(nf->ctl);

	return ctl ? ctl : nf;
}

struct nvstub_file *nvstub_file_lookup(struct file *f);
bool nvstub_fd_table_has_gpu(struct nvstub_gpu *gpu);

/* Backing store of a memory object, shared by its dup'ed handles. */
enum nvstub_mem_type {
	NVSTUB_MEM_VIDMEM,
	NVSTUB_MEM_SYSMEM,
	NVSTUB_MEM_VIRTUAL,		/* no storage (NV50_MEMORY_VIRTUAL) */
	NVSTUB_MEM_DUMMY,		/* RM_ALLOC_MEMORY size query handle */
};

struct nvstub_vas;
struct nvstub_va_range;

struct nvstub_mem {
	struct kref ref;		/* handles, contexts, VMAs, channels, GPU maps */
	unsigned int handles;		/* DupCount, under nvstub_rm_lock */
	enum nvstub_mem_type type;
	struct nvstub_gpu *gpu;
	bool protected;			/* VIDMEM: NVOS32_ALLOC_FLAGS_PROTECTED */
	u64 size;
	u64 heap_offset;		/* VIDMEM: fake physical offset */
	u64 cookie;			/* SYSMEM: fake physical base */
	unsigned long npages;
	struct page **pages;		/* SYSMEM */
	/*
	 * VIDMEM: the pages behind a BAR1 mapping, a GPU mapping the engine
	 * reads or a channel's USERD, made on first use (stub: video memory
	 * has no storage until then); index → struct page.
	 */
	struct xarray backing;
	/* VIRTUAL: the VA range it reserved, under nvstub_rm_lock */
	struct nvstub_va_range *range;
};

void nvstub_mem_get(struct nvstub_mem *mem);
void nvstub_mem_put(struct nvstub_mem *mem);
void *nvstub_mem_ptr(struct nvstub_mem *mem, u64 offset);
struct page *nvstub_mem_page(struct nvstub_mem *mem, unsigned long idx,
			     bool make);

/*
 * A GPU virtual address space: a FERMI_VASPACE_A object's, or a device's
 * default one (vaspaceGetByHandleOrDeviceDefault).  ranges and the flags are
 * under nvstub_rm_lock; maps also under lock, which the engine takes (under
 * eng_lock) to read a ring through its GPU virtual address.
 */
struct nvstub_vas {
	struct kref ref;		/* its object or device, users */
	struct nvstub_gpu *gpu;
	u64 start;			/* vasStart */
	u64 limit;			/* vasLimit, inclusive */
	bool external;			/* IS_EXTERNALLY_OWNED: UVM's page tables */
	unsigned int page_dir;		/* external: UVM registrations (SetPageDirectory) */
	struct list_head ranges;	/* RM's VA heap: nvstub_va_range */
	unsigned int nranges;
	spinlock_t lock;
	struct list_head maps;		/* nvstub_va_map, by owner */
	unsigned int nmaps;
	struct xarray pt;		/* page tables: level|index → users (rm_lock) */
	const void *root_owner;		/* who made RM's PDB, NULL: none */
	/*
	 * FERMI_VASPACE_A objects on it, a duplicate's too (vaspaceIncRefCnt):
	 * a PDB made for one of them goes with the last (rm_lock)
	 */
	unsigned int api_objs;
};

struct nvstub_va_range {
	struct list_head node;
	struct nvstub_vas *vas;		/* holds a reference */
	u64 va;
	u64 size;
	bool pinned;			/* holds its page tables (nvstub_vas_pin) */
};

/* One GPU mapping: VA [va, va + length) → mem at mem_offset. */
struct nvstub_va_map {
	struct list_head node;
	u64 va;
	u64 length;
	struct nvstub_mem *mem;		/* holds a reference */
	u64 mem_offset;
	const void *owner;		/* the virtual allocation or UVM range */
	/*
	 * RM_MAP_MEMORY_DMA's is an inter-mapping: it goes when the memory
	 * handle it mapped (the mappable) or the device it named (the
	 * context) is freed or invalidated (clientFreeResource,
	 * _clientUnmapInterBackRefMappings).  NULL for UVM's.
	 */
	struct nvstub_vas *vas;
	struct nvstub_object *mappable, *context;
	struct list_head mappable_node;	/* in mappable->map_backrefs */
	struct list_head context_node;	/* in context->ctx_backrefs */
};

/* The usermode region one GPU file mapped: its doorbell is polled. */
struct nvstub_doorbell {
	struct kref ref;		/* the owning file's context, VMAs */
	struct nvstub_gpu *gpu;
	struct list_head node;		/* gpu->doorbells, under eng_lock */
	bool listed;
	struct page *pages[NVSTUB_USERMODE_PAGES];
};

void nvstub_doorbell_put(struct nvstub_doorbell *db);

/* Engine state of a TSG; fields under gpu->eng_lock. */
struct nvstub_tsg {
	struct kref ref;		/* the TSG object, its channels */
	bool scheduled;
	bool runlist;			/* an engine object was made in it */
	u64 timeslice_us;
	u32 engine_type;
	/* RM state, under nvstub_rm_lock */
	bool internal;			/* made by RM for a channel under a device */
	bool legacy;			/* channels without a context share */
	unsigned int nchannels;
	struct nvstub_vas *vas;		/* legacy mode's VA space, or NULL */
	u64 subctx_used;		/* VEIDs 0..63 held by context shares */
	u64 gr_ctx_bytes;		/* its GR context buffers, once made */
	/*
	 * TSG objects sharing it, duplicates too (serverRefShare): its GR
	 * context buffers go with the last (rm_lock)
	 */
	unsigned int api_objs;
};

/*
 * A context share's data (KernelCtxShare, an RsShared): its VA space, its
 * VEID in the TSG that made it, shared by the share's duplicates
 * (kctxshareapiCopyConstruct: serverRefShare); the VEID goes back to that
 * TSG with the last of them.  Under nvstub_rm_lock.
 */
struct nvstub_ctxshare {
	struct kref ref;
	struct nvstub_tsg *tsg;		/* a reference */
	struct nvstub_vas *vas;		/* a reference */
	u32 subctx_id;
};

/* Engine state of a channel. */
struct nvstub_chan {
	struct kref ref;		/* the channel object, the engine */
	struct nvstub_gpu *gpu;
	struct nvstub_tsg *tsg;
	struct nvstub_proc *proc;
	u32 chid;
	u32 token;
	/*
	 * On a runlist: from its first engine object (channel_descendant.c),
	 * or at allocation when its TSG already had one (kernel_channel.c).
	 * Until then GET_WORK_SUBMIT_TOKEN is NV_ERR_INVALID_STATE.
	 */
	bool runlist;
	/*
	 * Externally owned VA space: UVM_REGISTER_CHANNEL bound its
	 * allocations (kchannelIsSchedulable()); under nvstub_rm_lock.
	 */
	bool bound;
	/*
	 * UVM's holds on it, one per UVM_REGISTER_CHANNEL (nvGpuOpsRetainChannel:
	 * a UVM_CHANNEL_RETAINER, which keeps the channel id and the instance
	 * block past the channel object, uvmchanrtnrConstruct; and a duplicate
	 * of its TSG, which keeps the graphics context); under nvstub_rm_lock.
	 */
	u32 retainers;
	pid_t tgid;
	u32 h_client;
	u32 h_channel;
	struct nvstub_mem *userd;	/* the memory holding USERD */
	u64 userd_offset;
	u32 *userd_ptr;			/* USERD's kernel address (its page is made) */
	struct nvstub_vas *vas;		/* the ring is read through it */
	u64 gpfifo_va;			/* gpFifoOffset: a GPU virtual address */
	u32 entries;
	/* under gpu->eng_lock */
	struct list_head node;
	bool dead;
	bool faulted;			/* the ring's VA was not mapped: MMU fault */
	bool rung;			/* a doorbell named it; cleared when idle */
	bool disabled;			/* NV2080 FIFO_DISABLE_CHANNELS */
	bool item_loaded;
	u32 gpget;
	u64 item_left_ns;
	u64 busy_ns;
	u64 items;
};

/* RM objects. */
struct nvstub_class;
struct nvstub_client;

struct nvstub_cpu_mapping {
	struct list_head node;
	u64 address;
	pid_t tgid;
};

struct nvstub_object {
	u32 handle;
	u32 hclass;
	const struct nvstub_class *cls;
	struct nvstub_client *client;
	struct nvstub_object *parent;
	struct list_head children;
	struct list_head sibling;
	struct nvstub_gpu *gpu;		/* NULL for the client object */
	struct nvstub_object *device;	/* nearest NV01_DEVICE_0 ancestor */
	struct list_head cpu_maps;	/* RM_MAP_MEMORY records */
	unsigned int ncpu_maps;
	/*
	 * resserv's dependants: objects freed with this one though not its
	 * children (refAddDependant: a channel on its context share or VA
	 * space, a context share or virtual allocation on its VA space).
	 */
	struct list_head dependants;
	struct list_head dep_node;	/* in depends_on->dependants */
	struct nvstub_object *depends_on;
	/*
	 * bInvalidated: destructed as the dependant of a freed object that is
	 * not its ancestor (serverFreeResourceTree's bInvalidateOnly).  The
	 * handle stays in the client until it, an ancestor or the client is
	 * freed: controls and dups answer NV_ERR_RESOURCE_LOST, a new object
	 * with the handle NV_ERR_INSERT_DUPLICATE_NAME, GET_HANDLE_INFO its
	 * class and parent.  Nothing of the union is valid.
	 */
	bool invalid;
	/* inter-mappings made of it, and in its context (struct nvstub_va_map) */
	struct list_head map_backrefs;
	struct list_head ctx_backrefs;
	/*
	 * Its share policy list once edited (bSharePolicyListModified: RM_SHARE
	 * or, on a client, SET_INHERITED_SHARE_POLICY), NULL before; objects
	 * below it without their own use it (rsAccessGetActiveShareList)
	 */
	struct nvstub_shares *shares;
	/* nvstub_free_tree(): on its list of what one free takes */
	bool pending;
	struct list_head free_node;
	union {
		u32 subdevice_inst;
		struct {
			u32 va_mode;
			struct nvstub_vas *vas;	/* the default VA space, made on use */
		} dev;
		struct nvstub_vas *vas;		/* FERMI_VASPACE_A */
		struct nvstub_ctxshare *ctxshare;	/* FERMI_CONTEXT_SHARE_A */
		struct {
			struct nvstub_mem *mem;
			/*
			 * isMemDescOwner: the allocating handle, until it
			 * is freed; then the next in dups (mem.c "Choose
			 * the new owner").
			 */
			bool owner;
			u32 attr;
			u32 attr2;
			struct list_head dups;	/* the handles of mem, a ring */
		} mem;
		struct nvstub_tsg *tsg;
		struct nvstub_chan *chan;
	};
};

struct nvstub_client {
	u32 handle;
	struct nvstub_file *owner;	/* pOSInfo: freed with this file */
	/*
	 * RS_PRIV_LEVEL_KERNEL and rmclientIsAdmin(): left out of the process
	 * lists.  A kernel client made as NV01_ROOT_NON_PRIV is not an admin.
	 */
	bool kernel_admin;
	struct pid *pid;		/* ProcID, namespace-aware */
	pid_t tgid;
	struct xarray objects;		/* handle → nvstub_object */
	struct nvstub_object *root;	/* the client's own object */
	u32 handle_gen;
};

/* What every RM entry point gets: the caller's file. */
struct nvstub_call {
	struct nvstub_file *nf;		/* the file the ioctl came through */
	struct nvstub_file *os_info;	/* clientOSInfo */
	/*
	 * A kernel-level RM client (kapi.c, RS_PRIV_LEVEL_KERNEL): params are
	 * kernel memory, every client is accessible, no fd-table check, and
	 * process ids are those of the initial pid namespace.
	 */
	bool kernel;
	bool non_priv;			/* kernel: allocating NV01_ROOT_NON_PRIV */
};

/* rm.c */
extern struct xarray nvstub_clients;
extern unsigned int nvstub_nclients;
extern unsigned int nvstub_nobjects;

u32 nvstub_rm_alloc(struct nvstub_call *call, u32 h_client, u32 h_parent,
		    u32 *h_object, u32 h_class, u64 uparams);
u32 nvstub_rm_alloc_kernel(struct nvstub_call *call, u32 h_client,
			   u32 h_parent, u32 *h_object, u32 h_class,
			   void *params);
u32 nvstub_rm_free(struct nvstub_call *call, u32 h_client, u32 h_object);
u32 nvstub_esc_alloc_context_dma(struct nvstub_call *call,
				 struct nvos39_parameters *p);
u32 nvstub_rm_dup(struct nvstub_call *call, struct nvos55_parameters *p);
u32 nvstub_rm_alloc_client_locked(struct nvstub_call *call, u32 *h_client);

/* export.c */
u32 nvstub_ctrl_export_object(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params);
u32 nvstub_ctrl_import_object(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params);
u32 nvstub_ctrl_export_objects(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params);
u32 nvstub_ctrl_import_objects(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params);
u32 nvstub_ctrl_export_info(struct nvstub_call *call,
			    struct nvstub_object *obj, void *params);
u32 nvstub_export_info_size(void);
void nvstub_export_release(struct nvstub_file *nf);
struct rs_share_policy;
u32 nvstub_share(struct nvstub_object *obj,
		 const struct rs_share_policy *p);
struct nvos57_parameters;
u32 nvstub_rm_share(struct nvstub_call *call, struct nvos57_parameters *p);
bool nvstub_may_dup_to_kernel(const struct nvstub_object *sobj);
u32 nvstub_rm_dup_to_kernel(struct nvstub_client *dst, u32 h_parent,
			    struct nvstub_object *src, u32 *h_new);
u32 nvstub_rm_dup_for_dmabuf(struct nvstub_client *dst, u32 h_device,
			     u32 h_subdevice, struct nvstub_gpu *gpu,
			     u32 h_client, u32 h_memory, u64 offset, u64 size,
			     u32 *h_new);
int nvstub_dmabuf_export(struct nvstub_file *nf, void *buf, u32 size);
int nvstub_dmabuf_init(void);
void nvstub_dmabuf_exit(void);
void nvstub_rm_free_clients_of(struct nvstub_file *nf);
void nvstub_gpu_get(struct nvstub_gpu *gpu);
void nvstub_gpu_put(struct nvstub_gpu *gpu);

/*
 * A kernel client of the driver's own (UVM's session, the dma-buf memory
 * manager) and, on each GPU it uses, a device and subdevice it makes with
 * the GPU's first user and frees with its last, holding the GPU meanwhile
 * (nvidia_dev_get).  Under nvstub_rm_lock.
 */
struct nvstub_kgpus {
	u32 client;
	u32 device[NVSTUB_MAX_GPUS];
	u32 subdevice[NVSTUB_MAX_GPUS];
	unsigned int users[NVSTUB_MAX_GPUS];
};
u32 nvstub_kgpus_get(struct nvstub_kgpus *k, struct nvstub_gpu *gpu,
		     bool *first);
void nvstub_kgpus_put(struct nvstub_kgpus *k, struct nvstub_gpu *gpu);
u32 nvstub_client_get(struct nvstub_call *call, u32 h_client,
		      struct nvstub_client **out);
struct nvstub_object *nvstub_object_find(struct nvstub_client *c, u32 h);
struct nvstub_object *nvstub_object_find_any(struct nvstub_client *c, u32 h);
bool nvstub_object_is_memory(const struct nvstub_object *o);
void nvstub_rm_exit(void);
u32 nvstub_rm_alloc_kparams(struct nvstub_call *call, u32 h_client,
			    u32 h_parent, u32 *h_object, u32 h_class,
			    void *params);

/* mem.c */
u32 nvstub_mem_construct(struct nvstub_object *obj, void *params);
void nvstub_mem_destruct(struct nvstub_object *obj);
void nvstub_mem_dup(struct nvstub_object *dst, struct nvstub_object *src);
u32 nvstub_esc_vid_heap(struct nvstub_call *call, struct nvos32_parameters *p);
u32 nvstub_esc_alloc_memory(struct nvstub_call *call, struct nvos02_with_fd *p,
			    u32 *esc);
u32 nvstub_esc_map_memory(struct nvstub_call *call, struct nvos33_with_fd *p);
u32 nvstub_esc_update_mapping(struct nvstub_call *call,
			      struct nvos56_parameters *p);
u32 nvstub_esc_unmap_memory(struct nvstub_call *call,
			    struct nvos34_parameters *p);
void nvstub_cpu_maps_free(struct nvstub_object *obj);
void nvstub_ctx_release(struct nvstub_file *nf);
int nvstub_mmap(struct file *filp, struct vm_area_struct *vma);
void nvstub_heap_info(struct nvstub_gpu *gpu, u64 *total, u64 *free);
u32 nvstub_heap_take(struct nvstub_gpu *gpu, u64 bytes);
void nvstub_heap_give(struct nvstub_gpu *gpu, u64 bytes);
extern atomic_long_t nvstub_sysmem_pages;

/* va.c */
void nvstub_vas_drop_root(struct nvstub_vas *vas, const void *owner);
u32 nvstub_pt_take_root(struct nvstub_gpu *gpu);
void nvstub_pt_give_root(struct nvstub_gpu *gpu);
struct nvstub_vas *nvstub_vas_create(struct nvstub_gpu *gpu, u64 start,
				     u64 limit, bool external,
				     const void *owner);
void nvstub_vas_get(struct nvstub_vas *vas);
void nvstub_vas_put(struct nvstub_vas *vas);
u32 nvstub_vas_lookup(struct nvstub_client *c, struct nvstub_object *dev,
		      u32 h_va_space, struct nvstub_vas **out,
		      struct nvstub_object **vas_obj);
u32 nvstub_vas_reserve(struct nvstub_vas *vas, u64 size, u64 align,
		       bool fixed, u64 *va, struct nvstub_va_range **out);
void nvstub_vas_unreserve(struct nvstub_va_range *r, const void *owner);
u32 nvstub_vas_pin(struct nvstub_va_range *r);
u32 nvstub_vas_map(struct nvstub_vas *vas, u64 va, u64 length,
		   struct nvstub_mem *mem, u64 mem_offset, const void *owner,
		   struct nvstub_object *mappable,
		   struct nvstub_object *context);
void nvstub_vas_unmap_backrefs(struct nvstub_object *obj);
unsigned int nvstub_vas_unmap(struct nvstub_vas *vas, u64 va,
			      const void *owner);
bool nvstub_vas_read32(struct nvstub_vas *vas, u64 va, u32 *val);
u32 nvstub_vaspace_construct(struct nvstub_call *call,
			     struct nvstub_object *obj, void *params);
void nvstub_vaspace_destruct(struct nvstub_object *obj);
u32 nvstub_ctxshare_construct(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params);
void nvstub_ctxshare_destruct(struct nvstub_object *obj);
void nvstub_ctxshare_dup(struct nvstub_object *obj, struct nvstub_object *src);
void nvstub_object_depend(struct nvstub_object *obj,
			  struct nvstub_object *on);
u32 nvstub_esc_map_memory_dma(struct nvstub_call *call, void *buf, u32 size);
u32 nvstub_esc_unmap_memory_dma(struct nvstub_call *call, void *buf,
				u32 size);

/* ctrl.c */
u32 nvstub_rm_control(struct nvstub_call *call, struct nvos54_parameters *p);
u32 nvstub_esc_bind_context_dma(struct nvstub_call *call,
				struct nvos49_parameters *p);

/* engine.c */
struct nvstub_tsg *nvstub_tsg_create(u32 engine_type);
void nvstub_tsg_put(struct nvstub_tsg *tsg);
u32 nvstub_tsg_schedule(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
			const struct nva06c_ctrl_gpfifo_schedule_params *p);
void nvstub_tsg_set_timeslice(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
			      u64 us);
u64 nvstub_tsg_get_timeslice(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg);
u32 nvstub_chan_create(struct nvstub_gpu *gpu, struct nvstub_tsg *tsg,
		       struct nvstub_client *client, u32 h_channel,
		       struct nvstub_mem *userd, u64 userd_offset,
		       struct nvstub_vas *vas, u64 gpfifo_va,
		       u32 entries, struct nvstub_chan **out);
void nvstub_chan_destroy(struct nvstub_chan *chan);
void nvstub_chan_free_id(struct nvstub_chan *chan);
void nvstub_chan_get(struct nvstub_chan *chan);
void nvstub_chan_put(struct nvstub_chan *chan);
void nvstub_chan_retain(struct nvstub_chan *chan);
void nvstub_chan_unretain(struct nvstub_chan *chan);
u32 nvUvmInterfaceRetainChannel(void *va_space, u32 h_client, u32 h_channel,
				void **retained, void *instance_info);
void nvUvmInterfaceReleaseChannel(void *retained);
void nvUvmInterfaceAddressSpaceDestroy(void *va_space);
struct nvstub_doorbell *nvstub_doorbell_create(struct nvstub_gpu *gpu);
struct nvos30_parameters;
u32 nvstub_esc_idle_channels(struct nvstub_call *call,
			     struct nvos30_parameters *p);
u32 nvstub_ctrl_idle_channels(struct nvstub_call *call,
			      struct nvstub_object *obj, void *params);
u32 nvstub_ctrl_fifo_idle_channels(struct nvstub_call *call,
				   struct nvstub_object *obj, void *params);
struct nvos38_parameters;
u32 nvstub_access_registry(struct nvstub_call *call,
			   struct nvos38_parameters *p);
void nvstub_registry_exit(void);
u32 nvstub_fifo_channel_count(struct nvstub_call *call,
			       struct nvstub_object *obj, void *params);
u32 nvstub_fifo_disable_channels(struct nvstub_call *call,
				 struct nvstub_object *obj, void *params);
void nvstub_doorbell_unlist(struct nvstub_doorbell *db);
int nvstub_engine_start(struct nvstub_gpu *gpu);
void nvstub_engine_stop(struct nvstub_gpu *gpu);
void nvstub_engine_debugfs(struct nvstub_gpu *gpu);

/* kapi.c: exported to kernel-level RM clients (xpu.ko) */
u32 nvidia_get_rm_ops(struct nvidia_modeset_rm_ops *rm_ops);

/* dev.c */
int nvstub_dev_init(void);
bool nvstub_os_event_exists(u32 hc, u32 fd);
void nvstub_dev_exit(void);

/* uvm.c */
int nvstub_uvm_init(void);
void nvstub_uvm_exit(void);

#endif /* NVSTUB_H */
