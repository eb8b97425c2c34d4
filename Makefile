# SPDX-License-Identifier: GPL-2.0
#
# xpu — slices of NVIDIA GPUs. Targets:
#   make               build kmod/xpu.ko for the running kernel (KDIR=... for another)
#   make check         install test dependencies, run unit tests, then the VM suite
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

# Modules the VM tests load, built against KDIR.
VM_MODULE_DIRS := kmod tests/nvstub tests/vm/selftest

.PHONY: all modules vm-modules setup check check-host check-vm demo bench vm-shell clean

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/kmod $(KBUILD_OPTS) modules

vm-modules:
	@set -e; for d in $(VM_MODULE_DIRS); do \
		$(MAKE) -s -C $(KDIR) M=$(CURDIR)/$$d $(KBUILD_OPTS) modules; \
	done

setup:
	tests/setup

check: setup
	$(MAKE) --no-print-directory check-host check-vm

check-host:
	$(PY) -m pytest -q tests/unit tests/rig

check-vm:
	$(VMRUN) --werror -- $(PY) -m pytest -q -p no:cacheprovider tests/vmtests

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
