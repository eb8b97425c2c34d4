# SPDX-License-Identifier: GPL-2.0
#
# xpu — slices of NVIDIA GPUs. Targets:
#   make               build kmod/xpu.ko for the running kernel (KDIR=... for another)
#   make check         install test dependencies, run unit tests, then the VM suite
#   make check-debug   the debug tier: the rig's self-tests and the VM suite on a
#                      KASAN/lockdep/kmemleak kernel (built once, then cached)
#   make demo          boot a VM with the simulated GPU, load xpu.ko, show the GPUs
#   make bench         overhead ratios measured side by side in one VM boot (JSON)
#   make vm-shell      an interactive shell in that VM
#   make clean
# Test dependencies are installed by tests/setup (Debian packages need root).

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
PY := $(CURDIR)/.venv/bin/python
VMRUN := tests/vm/run

ifeq ($(WERROR),1)
KBUILD_OPTS := KCFLAGS=-Werror
endif

# Modules the VM tests load, built against KDIR.  With VM_BUILD_DIR (tests/vm/run
# passes .vm-cache/build/<kernel>), their sources are copied there, keeping the
# repository's layout and the sources' times, and built there: each kernel has
# its own objects and runs for two kernels never overwrite each other's .ko.
VM_MODULE_DIRS := kmod tests/nvstub tests/vm/selftest tests/vm/planted
VM_BUILD_DIR ?=

.PHONY: all modules vm-modules setup check check-host check-vm check-debug demo bench vm-shell clean

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/kmod $(KBUILD_OPTS) modules

vm-modules:
	@set -e; for d in $(VM_MODULE_DIRS); do \
		src=$(CURDIR)/$$d; dst=$$src; \
		if [ -n "$(VM_BUILD_DIR)" ]; then \
			dst=$(abspath $(VM_BUILD_DIR))/$$d; mkdir -p $$dst; \
			(cd $$src && find . -type f \( -name '*.[ch]' -o -name Kbuild \
				-o -name Makefile \) ! -name '*.mod.c' -exec cp -p --parents {} $$dst/ \;); \
		fi; \
		$(MAKE) -s -C $(KDIR) M=$$dst $(KBUILD_OPTS) modules; \
	done

setup:
	tests/setup

check: setup
	$(MAKE) --no-print-directory check-host check-vm

check-host:
	$(PY) -m pytest -q tests/unit tests/rig

check-vm:
	$(VMRUN) --werror -- $(PY) -m pytest -q -p no:cacheprovider tests/vmtests

# The debug tier (docs/testing.md): tests/vm/debug-kernel builds Debian's kernel
# source with tests/vm/debug.config, or finds it cached, and prints the tree.
DEBUG_VM_TIMEOUT ?= 5400
check-debug: setup
	@set -e; tree=$$(tests/vm/debug-kernel); \
	echo "check-debug: kernel $$tree"; \
	XPU_DEBUG_KERNEL=$$tree $(PY) -m pytest -q -p no:cacheprovider \
		tests/rig/test_debug_tier.py; \
	$(VMRUN) --kernel $$tree --werror --timeout $(DEBUG_VM_TIMEOUT) -- \
		$(PY) -m pytest -q -p no:cacheprovider tests/vmtests

demo: setup
	$(VMRUN) -- tests/demo

bench: setup
	$(VMRUN) -- $(PY) tests/bench/bench.py

vm-shell: setup
	$(VMRUN) --shell

clean:
	@for d in $(VM_MODULE_DIRS); do \
		$(MAKE) -s -C $(KDIR) M=$(CURDIR)/$$d clean 2>/dev/null || \
		rm -f $$d/*.o $$d/*.ko $$d/*.mod* $$d/.*.cmd $$d/Module.symvers $$d/modules.order; \
	done
	rm -rf .vm-cache .pytest_cache
