// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the numbers and struct layouts of kmod/include/uapi/xpu.h as JSON, as
 * a C compiler sees them, for tests/unit/test_uapi.py to compare with xpud's
 * xpu/uapi.py.  List every XPU_* macro and every struct of the header here:
 * the test checks that nothing is missing.
 *
 *	cc -std=c11 -I kmod/include/uapi -o uapi_dump tests/tools/uapi_dump.c
 */
#include <stddef.h>
#include <stdio.h>
#include <xpu.h>

static const char *sep = "";

static void num(const char *name, unsigned long long value)
{
	printf("%s\n    \"%s\": %llu", sep, name, value);
	sep = ",";
}

static void str(const char *name, const char *value)
{
	/* The header's strings are plain names: nothing to escape. */
	printf("%s\n    \"%s\": \"%s\"", sep, name, value);
	sep = ",";
}

static void struct_begin(const char *name, size_t size, size_t align)
{
	printf("%s\n    \"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": [",
	       sep, name, size, align);
	sep = "";
}

static void field(const char *name, size_t offset, size_t size)
{
	printf("%s\n      {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu}",
	       sep, name, offset, size);
	sep = ",";
}

static void struct_end(void)
{
	printf("\n    ]}");
	sep = ",";
}

#define NUM(m)		num(#m, (unsigned long long)(m))
#define STR(m)		str(#m, m)
#define STRUCT(s)	struct_begin(#s, sizeof(struct s), _Alignof(struct s))
#define FIELD(s, f)	field(#f, offsetof(struct s, f), \
			      sizeof(((struct s *)0)->f))

int main(void)
{
	printf("{\n  \"constants\": {");
	NUM(XPU_IOC_TYPE);
	NUM(XPU_API_VERSION);
	STR(XPU_CTL_NAME);
	NUM(XPU_VERSION_FLAGS_ALL);
	NUM(XPU_IOC_VERSION);
	NUM(XPU_NAME_LEN);
	NUM(XPU_UUID_LEN);
	NUM(XPU_MODE_SHARED);
	NUM(XPU_MODE_EXCLUSIVE);
	NUM(XPU_POLICY_WEIGHTED);
	NUM(XPU_POLICY_FIXED);
	NUM(XPU_POLICY_PRIORITY);
	NUM(XPU_POLICY_NATIVE);
	NUM(XPU_PERIOD_MIN_US);
	NUM(XPU_PERIOD_MAX_US);
	NUM(XPU_GPU_LIST_FLAGS_ALL);
	NUM(XPU_IOC_GPU_LIST);
	NUM(XPU_GPU_SET_MODE);
	NUM(XPU_GPU_SET_POLICY);
	NUM(XPU_GPU_SET_PERIOD);
	NUM(XPU_GPU_SET_FLAGS_ALL);
	NUM(XPU_IOC_GPU_SET);
	NUM(XPU_PRIO_LOW);
	NUM(XPU_PRIO_NORMAL);
	NUM(XPU_PRIO_HIGH);
	NUM(XPU_SHARE_MAX);
	NUM(XPU_WEIGHT_MAX);
	NUM(XPU_MAX_SLICES);
	NUM(XPU_IOC_SLICE_CREATE);
	NUM(XPU_IOC_SLICE_GET);
	NUM(XPU_IOC_SLICE_SET);
	NUM(XPU_SLICE_SET_MEMORY);
	NUM(XPU_SLICE_SET_SHARE);
	NUM(XPU_SLICE_SET_WEIGHT);
	NUM(XPU_SLICE_SET_PRIORITY);
	NUM(XPU_SLICE_SET_HOST_MEMORY);
	NUM(XPU_SLICE_CREATE_FLAGS_ALL);
	NUM(XPU_SLICE_GET_FLAGS_ALL);
	NUM(XPU_SLICE_SET_FLAGS_ALL);
	NUM(XPU_DESTROY_FORCE);
	NUM(XPU_DESTROY_FLAGS_ALL);
	NUM(XPU_IOC_SLICE_DESTROY);
	NUM(XPU_SLICE_LIST_FLAGS_ALL);
	NUM(XPU_IOC_SLICE_LIST);
	NUM(XPU_NODE_GPU);
	NUM(XPU_NODE_CTL);
	NUM(XPU_NODE_UVM);
	NUM(XPU_NODE_FLAGS_ALL);
	NUM(XPU_IOC_NODE_ATTACH);
	NUM(XPU_IOC_NODE_DETACH);
	NUM(XPU_CGROUP_FLAGS_ALL);
	NUM(XPU_IOC_CGROUP_BIND);
	NUM(XPU_IOC_CGROUP_UNBIND);
	STR(XPU_GENL_NAME);
	STR(XPU_GENL_MCGRP_EVENTS);
	NUM(XPU_GENL_VERSION);
	NUM(XPU_EVENT_SLICE_CREATED);
	NUM(XPU_EVENT_SLICE_DESTROYED);
	NUM(XPU_EVENT_SLICE_CHANGED);
	NUM(XPU_EVENT_ALLOC_DENIED);
	NUM(XPU_EVENT_MAX);
	NUM(XPU_EA_SLICE_ID);
	NUM(XPU_EA_SLICE_NAME);
	NUM(XPU_EA_GPU_MINOR);
	NUM(XPU_EA_MEMORY_LIMIT);
	NUM(XPU_EA_MEMORY_USED);
	NUM(XPU_EA_PID);
	NUM(XPU_EA_SIZE);
	NUM(XPU_EA_PAD);
	NUM(XPU_EA_MAX);
	printf("\n  },\n  \"structs\": {");
	sep = "";

	STRUCT(xpu_version);
	FIELD(xpu_version, argsz);
	FIELD(xpu_version, flags);
	FIELD(xpu_version, api);
	FIELD(xpu_version, major);
	FIELD(xpu_version, minor);
	FIELD(xpu_version, patch);
	struct_end();

	STRUCT(xpu_gpu_info);
	FIELD(xpu_gpu_info, minor);
	FIELD(xpu_gpu_info, mode);
	FIELD(xpu_gpu_info, policy);
	FIELD(xpu_gpu_info, period_us);
	FIELD(xpu_gpu_info, nr_slices);
	FIELD(xpu_gpu_info, driver_major);
	FIELD(xpu_gpu_info, driver_minor);
	FIELD(xpu_gpu_info, driver_patch);
	FIELD(xpu_gpu_info, memory_total);
	FIELD(xpu_gpu_info, memory_sliced);
	FIELD(xpu_gpu_info, uuid);
	FIELD(xpu_gpu_info, channel_ids);
	FIELD(xpu_gpu_info, pad0);
	FIELD(xpu_gpu_info, memory_orphaned);
	FIELD(xpu_gpu_info, reserved);
	struct_end();

	STRUCT(xpu_gpu_list);
	FIELD(xpu_gpu_list, argsz);
	FIELD(xpu_gpu_list, flags);
	FIELD(xpu_gpu_list, count);
	FIELD(xpu_gpu_list, gpu_argsz);
	FIELD(xpu_gpu_list, gpus);
	struct_end();

	STRUCT(xpu_gpu_set);
	FIELD(xpu_gpu_set, argsz);
	FIELD(xpu_gpu_set, flags);
	FIELD(xpu_gpu_set, minor);
	FIELD(xpu_gpu_set, mode);
	FIELD(xpu_gpu_set, policy);
	FIELD(xpu_gpu_set, period_us);
	struct_end();

	STRUCT(xpu_slice_info);
	FIELD(xpu_slice_info, argsz);
	FIELD(xpu_slice_info, flags);
	FIELD(xpu_slice_info, id);
	FIELD(xpu_slice_info, gpu_minor);
	FIELD(xpu_slice_info, name);
	FIELD(xpu_slice_info, memory_limit);
	FIELD(xpu_slice_info, compute_share);
	FIELD(xpu_slice_info, weight);
	FIELD(xpu_slice_info, priority);
	FIELD(xpu_slice_info, pad0);
	FIELD(xpu_slice_info, memory_used);
	FIELD(xpu_slice_info, memory_peak);
	FIELD(xpu_slice_info, denied_allocs);
	FIELD(xpu_slice_info, killed);
	FIELD(xpu_slice_info, open_files);
	FIELD(xpu_slice_info, processes);
	FIELD(xpu_slice_info, run_ns);
	FIELD(xpu_slice_info, gated_ns);
	FIELD(xpu_slice_info, runnable_ns);
	FIELD(xpu_slice_info, gate_faults);
	FIELD(xpu_slice_info, share_obtained);
	FIELD(xpu_slice_info, channels);
	FIELD(xpu_slice_info, host_memory_limit);
	FIELD(xpu_slice_info, host_memory_used);
	FIELD(xpu_slice_info, rm_handles);
	FIELD(xpu_slice_info, os_events);
	FIELD(xpu_slice_info, devices);
	FIELD(xpu_slice_info, vaspaces);
	FIELD(xpu_slice_info, virtuals);
	FIELD(xpu_slice_info, tsgs);
	FIELD(xpu_slice_info, usermode);
	FIELD(xpu_slice_info, doorbell_files);
	FIELD(xpu_slice_info, uvm_files);
	FIELD(xpu_slice_info, uvm_channels);
	FIELD(xpu_slice_info, uvm_tsgs);
	FIELD(xpu_slice_info, pad1);
	FIELD(xpu_slice_info, uvm_retained);
	struct_end();

	STRUCT(xpu_slice_ref);
	FIELD(xpu_slice_ref, argsz);
	FIELD(xpu_slice_ref, flags);
	FIELD(xpu_slice_ref, id);
	FIELD(xpu_slice_ref, pad0);
	struct_end();

	STRUCT(xpu_slice_list);
	FIELD(xpu_slice_list, argsz);
	FIELD(xpu_slice_list, flags);
	FIELD(xpu_slice_list, count);
	FIELD(xpu_slice_list, pad0);
	FIELD(xpu_slice_list, ids);
	struct_end();

	STRUCT(xpu_node);
	FIELD(xpu_node, argsz);
	FIELD(xpu_node, flags);
	FIELD(xpu_node, id);
	FIELD(xpu_node, role);
	FIELD(xpu_node, fd);
	FIELD(xpu_node, pad0);
	struct_end();

	STRUCT(xpu_cgroup);
	FIELD(xpu_cgroup, argsz);
	FIELD(xpu_cgroup, flags);
	FIELD(xpu_cgroup, id);
	FIELD(xpu_cgroup, fd);
	struct_end();

	printf("\n  }\n}\n");
	return 0;
}
