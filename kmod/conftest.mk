# SPDX-License-Identifier: GPL-2.0
# The rule that makes conftest.h (conftest.sh's answers) in a module's build
# directory; kmod/Kbuild and tests/nvstub/Kbuild include it after setting
# XPU_CONFTEST to conftest.sh's path.  The probes compile as the module's
# objects do: the kernel's include paths and flags, and compiler_types.h,
# which kbuild gives every object.
XPU_CONFTEST_FLAGS = $(NOSTDINC_FLAGS) $(LINUXINCLUDE) $(KBUILD_CPPFLAGS) \
	$(KBUILD_CFLAGS) $(KBUILD_CFLAGS_MODULE) \
	-include $(srctree)/include/linux/compiler_types.h

quiet_cmd_conftest = CONFTEST $@
      cmd_conftest = $(CONFIG_SHELL) $(XPU_CONFTEST) $(CC) $(XPU_CONFTEST_FLAGS) \
		>$@.tmp && mv -f $@.tmp $@

$(obj)/conftest.h: $(XPU_CONFTEST) FORCE
	$(call if_changed,conftest)

targets += conftest.h
clean-files += conftest.h
