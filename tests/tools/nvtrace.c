// SPDX-License-Identifier: Apache-2.0
/*
 * nvtrace.so — an LD_PRELOAD recorder of what a client sends to NVIDIA's driver.
 *
 *   LD_PRELOAD=.vm-cache/nvtrace.so NVTRACE_OUT=trace.txt nvidia-smi
 *
 * One line per ioctl on /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm (and per
 * open of a /dev/nvidia*, /proc/driver/nvidia* or /sys/bus/pci path), appended to
 * $NVTRACE_OUT (stderr without it). Lines hold no handles, pointers or process ids,
 * so that two runs — the simulated driver and a real one — can be diffed:
 *
 *   ctl  RM_CONTROL         nr=0x2a size=32 cmd=0x20801303 params=436 -> rc=0 status=0x0
 *   ctl  RM_ALLOC           nr=0x2b size=32 class=0x80 params=56 -> rc=0 status=0x0
 *   gpu  CARD_INFO          nr=0xc8 size=2304 -> rc=0
 *   uvm  UVM                cmd=0x17 size=? -> rc=0
 *   open /dev/nvidia-uvm -> ENOENT
 *
 * "dev" is ctl, gpu (any /dev/nvidiaN; the minor is not written, a slice's node
 * has its own), uvm, or the path. rc is the ioctl's return value, -errno when it
 * failed; status is the RM status written back in the struct (not for nv.c's own
 * escapes). IOCTL_XFER_CMD is recorded as the escape it carries, with "xfer".
 * NVTRACE_PID=1 prefixes each line with the process id (for multi-process runs).
 * NVTRACE_PARAMS=N appends the first N bytes (64 at most) of an RM_CONTROL's
 * params as the client passed them, in hex ("in=..."): what a control asks,
 * for controls whose params hold no handles or pointers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define NV_IOCTL_MAGIC 'F'
#define NV_ESC_IOCTL_XFER_CMD 211

static const char *escape_name(unsigned int nr)
{
	switch (nr) {
	case 0x27: return "RM_ALLOC_MEMORY";
	case 0x28: return "RM_ALLOC_OBJECT";
	case 0x29: return "RM_FREE";
	case 0x2a: return "RM_CONTROL";
	case 0x2b: return "RM_ALLOC";
	case 0x32: return "RM_CONFIG_GET";
	case 0x33: return "RM_CONFIG_SET";
	case 0x34: return "RM_DUP_OBJECT";
	case 0x35: return "RM_SHARE";
	case 0x37: return "RM_CONFIG_GET_EX";
	case 0x38: return "RM_CONFIG_SET_EX";
	case 0x39: return "RM_I2C_ACCESS";
	case 0x41: return "RM_IDLE_CHANNELS";
	case 0x4a: return "RM_VID_HEAP_CONTROL";
	case 0x4d: return "RM_ACCESS_REGISTRY";
	case 0x4e: return "RM_MAP_MEMORY";
	case 0x4f: return "RM_UNMAP_MEMORY";
	case 0x52: return "RM_GET_EVENT_DATA";
	case 0x54: return "RM_ALLOC_CONTEXT_DMA2";
	case 0x56: return "RM_ADD_VBLANK_CALLBACK";
	case 0x57: return "RM_MAP_MEMORY_DMA";
	case 0x58: return "RM_UNMAP_MEMORY_DMA";
	case 0x59: return "RM_BIND_CONTEXT_DMA";
	case 0x5c: return "RM_EXPORT_OBJECT_TO_FD";
	case 0x5d: return "RM_IMPORT_OBJECT_FROM_FD";
	case 0x5e: return "RM_UPDATE_DEVICE_MAPPING_INFO";
	case 0x5f: return "RM_NVLOG_CTRL";
	case 200: return "CARD_INFO";
	case 201: return "REGISTER_FD";
	case 206: return "ALLOC_OS_EVENT";
	case 207: return "FREE_OS_EVENT";
	case 209: return "STATUS_CODE";
	case 210: return "CHECK_VERSION_STR";
	case 211: return "IOCTL_XFER_CMD";
	case 212: return "ATTACH_GPUS_TO_FD";
	case 213: return "QUERY_DEVICE_INTR";
	case 214: return "SYS_PARAMS";
	case 215: return "NUMA_INFO";
	case 216: return "SET_NUMA_STATUS";
	case 217: return "EXPORT_TO_DMABUF_FD";
	case 218: return "WAIT_OPEN_COMPLETE";
	}
	return "?";
}

static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);

static void emit(const char *fmt, ...)
{
	char line[512];
	int n = 0, fd, saved = errno;
	va_list ap;
	const char *out = getenv("NVTRACE_OUT");

	if (getenv("NVTRACE_PID") && !strcmp(getenv("NVTRACE_PID"), "1"))
		n = snprintf(line, sizeof(line), "[%d] ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (out && *out) {
		fd = syscall(SYS_openat, AT_FDCWD, out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			if (write(fd, line, n) < 0) { /* nothing to do */ }
			close(fd);
		}
	} else if (write(2, line, n) < 0) {
		/* nothing to do */
	}
	errno = saved;
}

/* ctl, gpu, uvm or NULL (not an NVIDIA file) from the fd's device number. */
static const char *fd_kind(int fd, char *path, size_t len)
{
	char link[64];
	struct stat st;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, len - 1);
	path[n > 0 ? n : 0] = 0;
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode))
		return NULL;
	if (major(st.st_rdev) == 195)
		return minor(st.st_rdev) == 255 ? "ctl" : "gpu";
	if (!strncmp(path, "/dev/nvidia-uvm", 15))
		return "uvm";
	if (!strncmp(path, "/dev/nvidia", 11))
		return path;
	return NULL;
}

static uint32_t u32at(const void *p, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)p + off, 4);
	return v;
}

/* NVTRACE_PARAMS: how many bytes of a control's params to write */
static unsigned int params_wanted(void)
{
	static int want = -1;

	if (want < 0) {
		const char *e = getenv("NVTRACE_PARAMS");

		want = e ? atoi(e) : 0;
		if (want < 0 || want > 64)
			want = 64;
	}
	return want;
}

/* the params an RM_CONTROL's NVOS54 (STRUCT) points at, before the call */
static __thread unsigned char ctl_in[64];
static __thread unsigned int ctl_in_len;

static void params_take(const void *nvos54)
{
	uint64_t ptr;
	unsigned int n = u32at(nvos54, 24);

	memcpy(&ptr, (const char *)nvos54 + 16, 8);
	ctl_in_len = 0;
	if (!ptr || !params_wanted())
		return;
	if (n > params_wanted())
		n = params_wanted();
	memcpy(ctl_in, (const void *)(uintptr_t)ptr, n);
	ctl_in_len = n;
}

static void params_hex(char *out, size_t len)
{
	unsigned int i;
	size_t at;

	if (!ctl_in_len)
		return;
	at = snprintf(out, len, " in=");
	for (i = 0; i < ctl_in_len && at + 3 < len; i++)
		at += snprintf(out + at, len - at, "%02x", ctl_in[i]);
}

/*
 * pre: the struct as the client passed it (class and command are read from
 * it: the driver may rewrite them), post: as it came back (status).
 */
static void record_rm(const char *kind, unsigned int nr, unsigned int size,
		      const void *pre, const void *post, int rc, const char *xfer)
{
	const void *arg = pre;

	char detail[256] = "", status[32] = "";
	int status_off = -1;

	if (!arg)
		goto out;
	switch (nr) {
	case 0x2a:	/* NVOS54 */
		if (size == 32) {
			int n = snprintf(detail, sizeof(detail), " cmd=0x%08x params=%u",
					 u32at(arg, 8), u32at(arg, 24));

			params_hex(detail + n, sizeof(detail) - n);
			status_off = 28;
		}
		break;
	case 0x2b:	/* NVOS21 (32) or NVOS64 (48) */
		if (size == 32) {
			snprintf(detail, sizeof(detail), " class=0x%x params=%u",
				 u32at(arg, 12), u32at(arg, 24));
			status_off = 28;
		} else if (size == 48) {
			snprintf(detail, sizeof(detail), " class=0x%x params=%u",
				 u32at(arg, 12), u32at(arg, 32));
			status_off = 40;
		}
		break;
	case 0x27:	/* NVOS02 with fd */
		if (size == 56) {
			snprintf(detail, sizeof(detail), " class=0x%x", u32at(arg, 12));
			status_off = 40;
		}
		break;
	case 0x29:	/* NVOS00 */
		if (size == 16)
			status_off = 12;
		break;
	case 0x34:	/* NVOS55: status after hClient..flags */
		if (size == 28)
			status_off = 24;
		break;
	case 0x4a:	/* NVOS32 */
		if (size == 184) {
			snprintf(detail, sizeof(detail), " function=%u", u32at(arg, 8));
			status_off = 20;
		}
		break;
	case 0x4e:	/* NVOS33 with fd */
		if (size == 56)
			status_off = 40;
		break;
	case 0x4f:	/* NVOS34 */
		if (size == 32)
			status_off = 24;
		break;
	case 0x52: case 206: case 207:	/* status last in a 16-byte struct */
		if (size == 16)
			status_off = 12;
		break;
	}
	if (status_off >= 0 && rc == 0)
		snprintf(status, sizeof(status), " status=0x%x", u32at(post, status_off));
out:
	emit("%-4s %-20s nr=0x%02x size=%u%s%s -> rc=%d%s", kind, escape_name(nr), nr,
	     size, xfer, detail, rc, status);
}

int ioctl(int fd, unsigned long req, ...)
{
	char path[256];
	const char *kind;
	unsigned char pre[64] = { 0 };
	void *arg, *rmarg = NULL;
	unsigned int rmsize = 0;
	va_list ap;
	int rc;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real_ioctl)
		real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	kind = fd_kind(fd, path, sizeof(path));
	if (kind && arg && _IOC_TYPE(req) == NV_IOCTL_MAGIC) {
		/* the RM struct: the ioctl's argument, or what XFER_CMD points at */
		if (_IOC_NR(req) == NV_ESC_IOCTL_XFER_CMD && _IOC_SIZE(req) == 16) {
			uint64_t ptr;

			memcpy(&ptr, (char *)arg + 8, 8);
			rmarg = (void *)(uintptr_t)ptr;
			rmsize = u32at(arg, 4);
		} else {
			rmarg = arg;
			rmsize = _IOC_SIZE(req);
		}
		if (rmarg)
			memcpy(pre, rmarg, rmsize < sizeof(pre) ? rmsize : sizeof(pre));
		ctl_in_len = 0;
		if (rmarg && rmsize == 32 &&
		    (_IOC_NR(req) == 0x2a ||
		     (_IOC_NR(req) == NV_ESC_IOCTL_XFER_CMD &&
		      u32at(arg, 0) == 0x2a)))
			params_take(pre);
	}
	rc = real_ioctl(fd, req, arg);
	if (!kind)
		return rc;
	{
		int saved = errno, r = rc < 0 ? -saved : rc;

		if (!strcmp(kind, "uvm")) {
			emit("%-4s %-20s cmd=0x%lx -> rc=%d", kind, "UVM", req, r);
		} else if (_IOC_TYPE(req) != NV_IOCTL_MAGIC) {
			emit("%-4s %-20s req=0x%lx -> rc=%d", kind, "?", req, r);
		} else if (_IOC_NR(req) == NV_ESC_IOCTL_XFER_CMD && _IOC_SIZE(req) == 16 && arg) {
			/* {u32 cmd; u32 size; u64 ptr} */
			record_rm(kind, u32at(arg, 0), rmsize, rmarg ? pre : NULL, rmarg,
				  r, " xfer");
		} else {
			record_rm(kind, _IOC_NR(req), rmsize, arg ? pre : NULL, arg, r, "");
		}
		errno = saved;
	}
	return rc;
}

static int interesting(const char *p)
{
	return p && (!strncmp(p, "/dev/nvidia", 11) || !strncmp(p, "/proc/driver/nvidia", 19) ||
		     !strncmp(p, "/sys/bus/pci", 12));
}

static void record_open(const char *p, int rc)
{
	if (interesting(p))
		emit("open %s -> %s", p, rc >= 0 ? "ok" : strerrorname_np(errno));
}

#define OPEN_WRAPPER(name, ...)						\
	int rc;								\
	mode_t mode = 0;						\
	if (flags & (O_CREAT | __O_TMPFILE)) {				\
		va_list ap;						\
		va_start(ap, flags);					\
		mode = va_arg(ap, mode_t);				\
		va_end(ap);						\
	}								\
	if (!real_##name)						\
		real_##name = dlsym(RTLD_NEXT, #name);			\
	rc = real_##name(__VA_ARGS__, flags, mode);			\
	{ int saved = errno; record_open(p, rc); errno = saved; }	\
	return rc

int open(const char *p, int flags, ...) { OPEN_WRAPPER(open, p); }
int open64(const char *p, int flags, ...) { OPEN_WRAPPER(open64, p); }
int openat(int dirfd, const char *p, int flags, ...) { OPEN_WRAPPER(openat, dirfd, p); }
