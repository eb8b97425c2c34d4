# SPDX-License-Identifier: GPL-2.0
#
# xpu — slices of NVIDIA GPUs. Targets:
#   make               build kmod/xpu.ko for the running kernel (KDIR=... for another)
#   make check         install test dependencies, run unit tests, then the VM suite
#                      (on 6.1), then a part of it on the matrix's other kernels
#   make check-debug   the debug tier: the rig's self-tests and the VM suite on a
#                      KASAN/lockdep/kmemleak kernel (built once, then cached)
#   make demo          boot a VM with the simulated GPU, load xpu.ko, show the GPUs
#   make bench         overhead ratios measured side by side in one VM boot (JSON)
#   make vm-shell      an interactive shell in that VM
#   make install       xpu.ko (KVER=...), xpud, xpuctl, units, rules (DESTDIR, PREFIX)
#   make uninstall
#   make dkms-install  register kmod/ with DKMS, build and install it for KVER
#   make dkms-remove
#   make lint          checkpatch --strict, sparse, ruff
#   make proto         regenerate xpud/xpu/k8s/_proto's gRPC code (committed)
#   make clean
# Test dependencies are installed by tests/setup (Debian packages need root).

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
PY := $(CURDIR)/.venv/bin/python
VMRUN := tests/vm/run

ifeq ($(WERROR),1)
KBUILD_OPTS := KCFLAGS=-Werror
endif
# The compiler a kernel's headers name may not be on this host: Debian 11's
# 5.10 headers ask for gcc-10 and Debian 13's x86_64-linux-gnu-gcc-14,
# neither of which Debian 12 ships.  Modules are
# then built with plain gcc (the kernel does not require its own compiler for
# modules; dkms makes the same choice).
KERNEL_GCC := $(shell sed -n 's/^CONFIG_CC_VERSION_TEXT="\([A-Za-z0-9_.-]*gcc[0-9.-]*\) .*/\1/p' \
	$(KDIR)/.config 2>/dev/null)
ifneq ($(KERNEL_GCC),)
ifeq ($(shell command -v $(KERNEL_GCC)),)
KBUILD_OPTS += CC=gcc
endif
endif

# Modules the VM tests load, built against KDIR.  With VM_BUILD_DIR (tests/vm/run
# passes .vm-cache/build/<kernel>), their sources are copied there, keeping the
# repository's layout and the sources' times, and built there: each kernel has
# its own objects and runs for two kernels never overwrite each other's .ko.
# The stub first: xpu.ko links against its nvidia_get_rm_ops (kmod/Kbuild).
VM_MODULE_DIRS := tests/nvstub kmod tests/vm/selftest tests/vm/planted
VM_BUILD_DIR ?=

.PHONY: all modules vm-modules setup check check-host check-vm check-matrix check-debug demo bench \
	vm-shell clean install install-kmod install-tools uninstall dkms-install dkms-remove \
	lint check-install check-kernels proto

all: modules

# KMOD_DIR: build a copy of kmod/ instead (tests/host/build-kernels does).
KMOD_DIR ?= $(CURDIR)/kmod
modules:
	$(MAKE) -C $(KDIR) M=$(KMOD_DIR) $(KBUILD_OPTS) modules

vm-modules:
	@set -e; top=$(abspath $(or $(VM_BUILD_DIR),$(CURDIR))); \
	if [ -n "$(VM_BUILD_DIR)" ]; then \
		for d in $(VM_MODULE_DIRS); do \
			mkdir -p $$top/$$d; \
			(cd $(CURDIR)/$$d && find . -type f \( -name '*.[ch]' -o -name Kbuild \
				-o -name Makefile -o -name '*.sh' -o -name '*.mk' \) \
				! -name '*.mod.c' ! -name conftest.h \
				-exec cp -p --parents {} $$top/$$d/ \;); \
		done; \
	fi; \
	for d in $(VM_MODULE_DIRS); do \
		$(MAKE) -s -C $(KDIR) M=$$top/$$d $(KBUILD_OPTS) \
			NVIDIA_SYMVERS=$$top/tests/nvstub/Module.symvers modules; \
	done

setup:
	tests/setup

check: setup
	$(MAKE) --no-print-directory lint check-host check-vm check-matrix

check-host:
	$(PY) -m pytest -q tests/unit tests/rig tests/host

# The fuzzer's seeds on the 6.1 boot (docs/testing.md): the other boots run
# the first alone.  Seed 17 found a kill only at 535's struct sizes.
CHECK_FUZZ_SEEDS ?= 17,41

# KMEM_TESTS need kernel-memory accounting, which the other boots leave off
# (tests/vm/run says why): a boot of their own, with one vCPU.
KMEM_TESTS := tests/vmtests/test_hostile_objects.py::test_xpu_s_record_of_each_file_is_charged_to_the_opener_s_memory_cgroup \
	tests/vmtests/test_hostile_objects.py::test_the_ledger_s_record_of_memory_held_is_charged_to_the_freer
# Tests (node ids or their prefixes) the 6.1 boot leaves out because another
# boot of the same run takes them: CI's debug part, which runs them after
# `make check`, on the debug kernel or on plain 6.1 (.ci/run, docs/testing.md).
# Empty for `make check` alone: the whole suite.
CHECK_VM_DESELECT ?=
check-vm:
	$(VMRUN) --werror --timeout 3600 -- env XPU_FUZZ_SEED=$(CHECK_FUZZ_SEEDS) $(PY) -m pytest -q -p no:cacheprovider tests/vmtests $(addprefix --deselect ,$(CHECK_VM_DESELECT))
	$(VMRUN) --kmem --werror --timeout 600 -- $(PY) -m pytest -q -p no:cacheprovider $(KMEM_TESTS)

# The matrix's other booted kernels (docs/testing.md, README.md): Debian 11's
# 5.10 and Debian 12's 6.12 (tests/vm/debian-kernel), one boot each, with
# the tests of what differs between kernels: the link to the driver, the
# uaccess and misc-device paths, the hooks' install and unload, memory limits
# through cgroup v2, compute gating (faults, PTE zaps, file references), a
# tenant in its own pid namespace filling its 1 GiB slice through xpud,
# userfaultfd, the ledger with UVM (whose ABI changes with the driver's
# version), and NVIDIA's own libcuda.  The whole suite runs on 6.1 above.
# Since session 41 the boots without a version of their own (6.12) also run
# the whole hostile suite: 6.12 takes page faults under per-VMA locks
# (6.4+), which compute's gating, the call pages and the stalled tenant meet
# differently from 6.1, and the boots got cheap enough (docs/testing.md).
# 5.10's boot loads the stub as driver 535 (the branch older hosts run, and
# the other struct sizes: docs/nvstub.md), 6.12's as 580, the default.
MATRIX_KERNELS ?= 5.10 6.12
MATRIX_STUB_VERSIONS ?= 5.10=535.288.01
MATRIX_TESTS ?= tests/vmtests/test_kernel_link.py \
	tests/vmtests/test_xpu_skeleton.py::test_device_is_a_root_only_misc_device \
	tests/vmtests/test_xpu_skeleton.py::test_unwritable_struct_is_efault \
	tests/vmtests/test_xpu_mem.py::test_exact_fit_succeeds_one_byte_more_fails \
	tests/vmtests/test_xpu_mem.py::test_cgroup_binding_puts_opens_in_the_slice \
	tests/vmtests/test_xpu_mem.py::test_kill_9_mid_allocation_returns_usage_to_zero \
	tests/vmtests/test_xpu_mem.py::test_unload_and_reload_with_files_open \
	tests/vmtests/test_xpu_mem.py::test_xpu_refuses_to_load_without_the_driver \
	tests/vmtests/test_xpu_uvm.py \
	tests/vmtests/test_xpu_compute.py::test_fixed_holds_each_slice_to_its_share \
	tests/vmtests/test_xpu_compute.py::test_kill_of_a_gated_process_frees_everything \
	tests/vmtests/test_xpu_compute.py::test_a_cuda_like_client_is_held_to_its_share \
	'tests/vmtests/test_xpud_daemon.py::test_a_tenant_in_its_own_pid_namespace_fills_its_slice_exactly[580.126.20]' \
	tests/vmtests/test_nvidia_userspace.py::test_libcuda_cuinit \
	$(sort $(wildcard tests/vmtests/test_hostile_*.py))
# A boot with the stub at another version than the default runs, besides,
# every test of what talks to RM: the stub's rules, xpu.ko's memory, objects,
# ledger and admin paths, the hostile suite and the fuzzer (docs/testing.md:
# at 535 on 5.10, about 10 minutes; the rest of the suite -- xpud, containers,
# Kubernetes, metrics -- does not depend on the driver's version and runs on
# 6.1 only).
MATRIX_VERSION_TESTS ?= tests/vmtests/test_kernel_link.py \
	tests/vmtests/test_memory.py tests/vmtests/test_controls.py \
	tests/vmtests/test_objects.py tests/vmtests/test_uvm.py \
	tests/vmtests/test_export.py \
	tests/vmtests/test_gpu_va.py tests/vmtests/test_engine.py \
	tests/vmtests/test_dispatch.py tests/vmtests/test_gpu_lifetime.py \
	tests/vmtests/test_xpu_skeleton.py tests/vmtests/test_xpu_ctl.py \
	tests/vmtests/test_xpu_mem.py tests/vmtests/test_xpu_uvm.py \
	tests/vmtests/test_hostile_mem.py tests/vmtests/test_hostile_objects.py \
	tests/vmtests/test_hostile_nodes.py tests/vmtests/test_hostile_fuzz.py \
	tests/vmtests/test_hostile_hostmem.py \
	tests/vmtests/test_xpu_compute.py::test_fixed_holds_each_slice_to_its_share \
	tests/vmtests/test_xpu_compute.py::test_kill_of_a_gated_process_frees_everything \
	tests/vmtests/test_xpu_compute.py::test_a_cuda_like_client_is_held_to_its_share \
	tests/vmtests/test_hostile_compute.py::test_a_doorbell_written_through_proc_mem_is_gated \
	'tests/vmtests/test_xpud_daemon.py::test_a_tenant_in_its_own_pid_namespace_fills_its_slice_exactly[535.288.01]' \
	tests/vmtests/test_nvidia_userspace.py::test_libcuda_cuinit
# Of those files, the tests of xpud's and xpuctl's side, which do not change
# with the driver's version and start the most processes: they run on 6.1.
MATRIX_VERSION_DESELECT ?= \
	tests/vmtests/test_xpu_ctl.py::test_xpud_makes_slices_with_nodes \
	tests/vmtests/test_hostile_mem.py::test_a_stalled_tenant_holds_neither_the_admin_nor_xpud
# Of every matrix boot's tests, those whose kernel path another test of the
# boot takes already and that cost a reload: class 39's fallback sight
# (uvm_probes=0: uvm.c's file pinning, the same code on every kernel) and
# its race (the stub's delay; what the probes do on each kernel,
# test_a_channel_retained_through_a_uvm_file_passed_in_stays_charged and
# test_a_tsg_stays_charged_while_uvm_retains_any_of_its_channels show).
MATRIX_DESELECT ?= \
	'tests/vmtests/test_xpu_uvm.py::test_a_channel_uvm_retains_stays_charged_to_its_slice[files]' \
	tests/vmtests/test_xpu_uvm.py::test_a_tsg_freed_while_the_driver_retains_its_channel_stays_charged
check-matrix:
	@set -e; for k in $(MATRIX_KERNELS); do \
		v=; for p in $(MATRIX_STUB_VERSIONS); do \
			case $$p in "$$k="*) v=$${p#*=};; esac; \
		done; \
		echo "check-matrix: kernel $$k, driver $${v:-the stub's default}"; \
		$(VMRUN) --kernel $$k $${v:+--stub-param version=$$v} --werror --timeout 1800 -- \
			$(PY) -m pytest -q -p no:cacheprovider \
			$(addprefix --deselect ,$(MATRIX_DESELECT)) \
			$$(if [ -n "$$v" ]; then echo $(MATRIX_VERSION_TESTS) \
				$(addprefix --deselect ,$(MATRIX_VERSION_DESELECT)); \
			else echo $(MATRIX_TESTS); fi); \
	done

# The debug tier (docs/testing.md): tests/vm/debug-kernel builds Debian's kernel
# source with tests/vm/debug.config, or finds it cached, and prints the tree.
# DEBUG_SELFTESTS and DEBUG_TESTS choose what runs (CI runs a part: .ci/run).
DEBUG_VM_TIMEOUT ?= 5400
DEBUG_SELFTESTS ?= tests/rig/test_debug_tier.py
DEBUG_TESTS ?= tests/vmtests
# The fuzzer's seeds on the debug kernel: all of CHECK_FUZZ_SEEDS by hand;
# CI's part runs the second alone, since the matrix's boots run the first.
DEBUG_FUZZ_SEEDS ?= $(CHECK_FUZZ_SEEDS)
# Tests (node ids) of DEBUG_TESTS the debug boot leaves out (CI's part:
# .ci/run says which and why).
DEBUG_DESELECT ?=
# xpu.ko's parameters for the debug boot (K=V ...): CI's part lowers the
# bounds on records and doorbell files, so the tests that fill them show the
# same refusals with fewer objects (docs/testing.md).
DEBUG_XPU_PARAMS ?=
check-debug: setup
	@set -e; tree=$$(tests/vm/debug-kernel); \
	echo "check-debug: kernel $$tree"; \
	XPU_DEBUG_KERNEL=$$tree $(PY) -m pytest -q -p no:cacheprovider \
		$(DEBUG_SELFTESTS); \
	$(VMRUN) --kernel $$tree --werror --timeout $(DEBUG_VM_TIMEOUT) \
		$(addprefix --xpu-param ,$(DEBUG_XPU_PARAMS)) -- \
		env XPU_FUZZ_SEED=$(DEBUG_FUZZ_SEEDS) \
		$(PY) -m pytest -q -p no:cacheprovider --durations=15 $(DEBUG_TESTS) \
		$(addprefix --deselect ,$(DEBUG_DESELECT))

demo: setup
	$(VMRUN) -- tests/demo

bench: setup
	$(VMRUN) -- $(PY) tests/bench/bench.py

vm-shell: setup
	$(VMRUN) --shell

# -- Installation -------------------------------------------------------------
# Paths follow the GNU conventions; the systemd, udev and kmod directories
# under $(LIBDIR) are ones those tools read also for PREFIX=/usr/local.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
DATADIR ?= $(PREFIX)/share
DOCDIR ?= $(DATADIR)/doc/xpu
SYSCONFDIR ?= /etc
UNITDIR ?= $(LIBDIR)/systemd/system
UDEVRULESDIR ?= $(LIBDIR)/udev/rules.d
MODULESLOADDIR ?= $(LIBDIR)/modules-load.d
MODPROBEDIR ?= $(LIBDIR)/modprobe.d
TMPFILESDIR ?= $(LIBDIR)/tmpfiles.d
SYSUSERSDIR ?= $(LIBDIR)/sysusers.d
COMPLETIONDIR ?= $(DATADIR)/bash-completion/completions
# xpu's Python package and its dependencies, apart from the system's.
PYLIBDIR ?= $(LIBDIR)/xpu/python
MODDIR ?= /lib/modules/$(KVER)/extra
# The interpreter xpud and xpuctl run with (Python >= 3.9).
PYTHON3 ?= /usr/bin/python3
# PYDEPS=pip: xpud's dependencies from PyPI at the versions tests/ pins;
# PYDEPS=system: none, the distribution's packages provide them.
PYDEPS ?= pip
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' $(CURDIR)/dkms.conf)
INSTALL ?= install

# name in the tree -> where it goes
INSTALL_DATA_FILES := \
	systemd/xpud.service:$(UNITDIR)/xpud.service \
	systemd/xpu-k8s.service:$(UNITDIR)/xpu-k8s.service \
	systemd/xpu-cdi-refresh.service:$(UNITDIR)/xpu-cdi-refresh.service \
	systemd/xpu-cdi-refresh.path:$(UNITDIR)/xpu-cdi-refresh.path \
	udev/60-xpu.rules:$(UDEVRULESDIR)/60-xpu.rules \
	packaging/xpu-modules-load.conf:$(MODULESLOADDIR)/xpu.conf \
	packaging/xpu-modprobe.conf:$(MODPROBEDIR)/xpu.conf \
	packaging/xpu-tmpfiles.conf:$(TMPFILESDIR)/xpu.conf \
	packaging/xpu-sysusers.conf:$(SYSUSERSDIR)/xpu.conf \
	xpud/completion/xpuctl.bash:$(COMPLETIONDIR)/xpuctl \
	packaging/xpud.toml:$(DOCDIR)/xpud.toml.example \
	README.md:$(DOCDIR)/README.md \
	docs/xpud.md:$(DOCDIR)/xpud.md \
	docs/api.md:$(DOCDIR)/api.md \
	docs/containers.md:$(DOCDIR)/containers.md \
	docs/kubernetes.md:$(DOCDIR)/kubernetes.md
LAUNCHERS := xpud:daemon xpuctl:cli xpu-container-runtime:cdi.runtime \
	xpu-cdi-hook:cdi.hook xpu-k8s:k8s.main
# Only a real installation touches the running system.
LIVE := $(if $(DESTDIR),,1)

install: install-kmod install-tools

install-kmod: modules
	$(INSTALL) -D -m 0644 kmod/xpu.ko $(DESTDIR)$(MODDIR)/xpu.ko
	$(if $(LIVE),depmod -a $(KVER))

install-tools:
	@set -e; for f in $(INSTALL_DATA_FILES); do \
		src=$${f%%:*}; dst=$(DESTDIR)$${f#*:}; \
		echo "  INSTALL $$dst"; \
		case $$src in \
		*.service) mkdir -p "$${dst%/*}"; \
			sed -e 's|/usr/bin/|$(BINDIR)/|g' -e 's|/usr/share/doc/xpu|$(DOCDIR)|g' \
				"$$src" >"$$dst"; chmod 0644 "$$dst" ;; \
		*) $(INSTALL) -D -m 0644 "$$src" "$$dst" ;; \
		esac; \
	done
	rm -rf $(DESTDIR)$(PYLIBDIR)
	@# pip builds in the source directory: give it a copy, not the tree.
	set -e; src=$$(mktemp -d); trap 'rm -rf "$$src"' EXIT; \
	cp -r xpud/. "$$src/"; rm -rf "$$src/build" "$$src"/*.egg-info; \
	$(PYTHON3) -m pip install -q --disable-pip-version-check --no-cache-dir \
		--no-compile --no-warn-script-location \
		--target $(DESTDIR)$(PYLIBDIR) \
		$(if $(filter system,$(PYDEPS)),--no-deps,-c $(CURDIR)/tests/requirements-dev.txt) "$$src"
	rm -rf $(DESTDIR)$(PYLIBDIR)/bin
	@set -e; for l in $(LAUNCHERS); do \
		name=$${l%%:*}; dst=$(DESTDIR)$(BINDIR)/$$name; \
		echo "  INSTALL $$dst"; \
		mkdir -p $(DESTDIR)$(BINDIR); \
		sed -e 's|@PYTHON3@|$(PYTHON3)|' -e 's|@PYLIBDIR@|$(PYLIBDIR)|' \
			-e "s|@NAME@|$$name|" -e "s|@MODULE@|$${l#*:}|" \
			packaging/launcher.in >"$$dst"; \
		chmod 0755 "$$dst"; \
	done
	@# The configuration is the administrator's: never overwritten.
	@set -e; cfg=$(DESTDIR)$(SYSCONFDIR)/xpu/xpud.toml; \
	if [ -e "$$cfg" ]; then echo "  KEEP    $$cfg (exists; the default is $(DOCDIR)/xpud.toml.example)"; \
	else echo "  INSTALL $$cfg"; $(INSTALL) -D -m 0644 packaging/xpud.toml "$$cfg"; fi
ifneq ($(LIVE),)
	-command -v systemd-sysusers >/dev/null && systemd-sysusers $(SYSUSERSDIR)/xpu.conf
	-command -v systemd-tmpfiles >/dev/null && systemd-tmpfiles --create $(TMPFILESDIR)/xpu.conf
	-[ -d /run/systemd/system ] && systemctl daemon-reload
	-[ -d /run/udev ] && udevadm control --reload
	@echo "xpu installed: start it with  systemctl enable --now xpud"
endif

uninstall:
	-$(if $(LIVE),[ -d /run/systemd/system ] && systemctl disable --now xpu-k8s.service xpud.service xpu-cdi-refresh.path)
	rm -f $(DESTDIR)$(MODDIR)/xpu.ko
	$(if $(LIVE),-depmod -a $(KVER))
	@for f in $(INSTALL_DATA_FILES); do echo "  RM      $(DESTDIR)$${f#*:}"; rm -f "$(DESTDIR)$${f#*:}"; done
	@for l in $(LAUNCHERS); do echo "  RM      $(DESTDIR)$(BINDIR)/$${l%%:*}"; rm -f "$(DESTDIR)$(BINDIR)/$${l%%:*}"; done
	rm -rf $(DESTDIR)$(PYLIBDIR)
	-rmdir $(DESTDIR)$(LIBDIR)/xpu $(DESTDIR)$(DOCDIR) 2>/dev/null
	@# An unedited configuration goes; an edited one, and the state in
	@# /var/lib/xpu, stay.
	@cfg=$(DESTDIR)$(SYSCONFDIR)/xpu/xpud.toml; \
	if [ -e "$$cfg" ] && cmp -s "$$cfg" packaging/xpud.toml; then \
		echo "  RM      $$cfg"; rm -f "$$cfg"; rmdir "$${cfg%/*}" 2>/dev/null || true; \
	elif [ -e "$$cfg" ]; then echo "  KEEP    $$cfg (edited)"; fi
ifneq ($(LIVE),)
	-[ -d /run/systemd/system ] && systemctl daemon-reload
	-[ -d /run/udev ] && udevadm control --reload
endif

# -- DKMS -------------------------------------------------------------------
# DKMS's own places, when not its defaults (/usr/src, /var/lib/dkms,
# /lib/modules: its --sourcetree, --dkmstree, --installtree); KDIR given on
# the command line is passed as --kernelsourcedir.  tests/host/test_dkms.py
# points them at private trees.  DKMS_OPTS: more options for every dkms call.
DKMS_SOURCETREE ?=
DKMS_TREE ?=
DKMS_INSTALLTREE ?=
DKMS_OPTS ?=
DKMS = dkms $(if $(DKMS_SOURCETREE),--sourcetree $(DKMS_SOURCETREE)) \
	$(if $(DKMS_TREE),--dkmstree $(DKMS_TREE)) \
	$(if $(DKMS_INSTALLTREE),--installtree $(DKMS_INSTALLTREE)) $(DKMS_OPTS)
DKMS_KDIR = $(if $(filter command line,$(origin KDIR)),--kernelsourcedir $(KDIR))
DKMS_SRC = $(or $(DKMS_SOURCETREE),/usr/src)/xpu-$(VERSION)
DKMS_REGISTERED = $(or $(DKMS_TREE),/var/lib/dkms)/xpu/$(VERSION)

# dkms.conf and kmod/'s sources, flat, in /usr/src/xpu-VERSION.
DKMS_FILES = Kbuild Makefile *.sh *.mk *.c *.h include/uapi/*.h

# The NVIDIA driver's own DKMS module, when it is one: xpu.ko is built after
# it (BUILD_DEPENDS, written into the dkms.conf installed) so that the
# driver's module is there to take nvidia_get_rm_ops's version from
# (kmod/nvidia-symvers.sh).  By default the DKMS module that built the module
# exporting nvidia_get_rm_ops for KVER (depmod's modules.symbols, under
# NVIDIA_MODULES_ROOT); NVIDIA_DKMS=NAME names it, NVIDIA_DKMS= says none.
# Its name differs by packaging (nvidia on Ubuntu and with NVIDIA's own
# packages, nvidia-current on Debian), and dkms refuses to build a module
# whose BUILD_DEPENDS is not registered: hence decided here, per host.
dkms-install:
	@command -v dkms >/dev/null || { echo "dkms is not installed (apt install dkms, or dnf install dkms)" >&2; exit 1; }
	@if [ -e $(DKMS_REGISTERED) ]; then \
		echo "dkms remove xpu/$(VERSION) --all"; $(DKMS) remove xpu/$(VERSION) --all; fi
	rm -rf $(DKMS_SRC)
	mkdir -p $(DKMS_SRC)
	install -m 0644 dkms.conf $(DKMS_SRC)/
	cd kmod && cp --parents $(DKMS_FILES) $(DKMS_SRC)/
	rm -f $(DKMS_SRC)/conftest.h $(DKMS_SRC)/nvidia.symvers
	@set -e; \
	$(if $(filter undefined,$(origin NVIDIA_DKMS)), \
	ko=$$(modinfo -b $(or $(NVIDIA_MODULES_ROOT),/) -k $(KVER) -F filename \
		symbol:nvidia_get_rm_ops 2>/dev/null | head -n 1); \
	dep=; \
	if [ -n "$$ko" ]; then \
		for m in $(or $(DKMS_TREE),/var/lib/dkms)/*/*/$(KVER)/*/module/$${ko##*/}; do \
			[ -e "$$m" ] || continue; \
			m=$${m#$(or $(DKMS_TREE),/var/lib/dkms)/}; dep=$${m%%/*}; break; \
		done; \
	fi, \
	dep="$(NVIDIA_DKMS)"); \
	if [ -n "$$dep" ]; then \
		echo "  dkms.conf: BUILD_DEPENDS[0]=\"$$dep\" (the NVIDIA driver's DKMS module)"; \
		echo "BUILD_DEPENDS[0]=\"$$dep\"" >>$(DKMS_SRC)/dkms.conf; \
	else \
		echo "  dkms.conf: no BUILD_DEPENDS (the NVIDIA driver for $(KVER) is not a DKMS module here)"; \
	fi
	$(DKMS) add xpu/$(VERSION)
	$(DKMS) build xpu/$(VERSION) -k $(KVER) $(DKMS_KDIR)
	$(DKMS) install xpu/$(VERSION) -k $(KVER) $(DKMS_KDIR)

dkms-remove:
	@if [ -e $(DKMS_REGISTERED) ]; then \
		echo "dkms remove xpu/$(VERSION) --all"; $(DKMS) remove xpu/$(VERSION) --all; fi
	rm -rf $(DKMS_SRC)

# kubelet's APIs as our own .proto files; the Python grpcio-tools makes of them
# is committed (tests/unit/k8s/test_proto.py checks that it is up to date).
proto: setup
	cd xpud && $(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. xpu/k8s/_proto/*.proto

# -- Lint and the kernel matrix ---------------------------------------------------
lint: setup
	tests/host/lint

# xpu.ko against every kernel tree here, with -Werror (tests/host/build-kernels).
check-kernels:
	tests/host/build-kernels

clean:
	@for d in $(VM_MODULE_DIRS); do \
		$(MAKE) -s -C $(KDIR) M=$(CURDIR)/$$d clean 2>/dev/null || \
		rm -f $$d/*.o $$d/*.ko $$d/*.mod* $$d/.*.cmd $$d/Module.symvers $$d/modules.order; \
	done
	rm -rf .vm-cache .pytest_cache
