# SPDX-License-Identifier: Apache-2.0
"""udev/60-xpu.rules applied to xpu.ko's real /dev/xpuctl (in the VM).

`udevadm test` simulates the "add" event of /sys/class/misc/xpuctl with the
rules in /run/udev/rules.d and prints each assignment as FILE:LINE KEY VALUE.
It runs in a mount namespace with a private /run and /dev, so the guest's
nodes are not touched.
"""

import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(REPO, "udev", "60-xpu.rules")
SYSPATH = "/sys/class/misc/xpuctl"


def udevadm_test(rules_text: str) -> str:
    if not shutil.which("udevadm") or not shutil.which("unshare"):
        pytest.skip("needs udevadm and unshare")
    if not os.path.exists(SYSPATH):
        pytest.skip(f"{SYSPATH} is missing: is xpu.ko loaded?")
    script = ("mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /dev && "
              "mkdir -p /run/udev/rules.d && cat > /run/udev/rules.d/60-xpu.rules && "
              f"udevadm test --action=add {SYSPATH}")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        "sh", "-c", script], input=rules_text, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    assert r.returncode == 0, r.stdout
    return r.stdout


def assignments(out: str) -> dict[str, str]:
    """KEY -> VALUE of the lines our rules file produced for xpuctl."""
    got = {}
    for m in re.finditer(r"^xpuctl: /run/udev/rules.d/60-xpu.rules:\d+ (\w+) (\S+)$",
                         out, re.MULTILINE):
        got[m.group(1)] = m.group(2)
    return got


def test_xpuctl_is_root_only_and_tagged():
    with open(RULES) as f:
        out = udevadm_test(f.read())
    assert assignments(out) == {"OWNER": "0", "GROUP": "0", "MODE": "0600"}, out
    tags = re.search(r"^TAGS=(\S*)$", out, re.MULTILINE)
    assert tags and ":systemd:" in tags.group(1), out
    assert re.search(r"^DEVNAME=/dev/xpuctl$", out, re.MULTILINE), out


def test_the_check_sees_a_changed_rule():
    """The assertions above read our file: a different mode shows up."""
    with open(RULES) as f:
        text = f.read().replace('MODE="0600"', 'MODE="0640"')
    assert assignments(udevadm_test(text))["MODE"] == "0640"
