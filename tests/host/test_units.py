# SPDX-License-Identifier: Apache-2.0
"""systemd-analyze verify on the installed unit, and udev parsing the rules.

systemd 252 (Debian 12) has no `udevadm verify`; `udevadm test` reads every
rules file and reports each invalid line as FILE:LINE. It also applies the
result to the device it simulates, so it runs in a private mount namespace
with its own /run and /dev.
"""

import os
import re
import shutil
from pathlib import Path

import pytest
from hostutil import REPO, need_root, run

UNIT_REL = "usr/lib/systemd/system/xpud.service"


@pytest.fixture(scope="module")
def vroot(tmp_path_factory, kver):
    """A root for `systemd-analyze verify --root`: the installed unit, the
    host's own units (for the targets it names) and the commands it runs."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    root = tmp_path_factory.mktemp("vroot")
    r = run(["make", "--no-print-directory", "install-tools", f"DESTDIR={root}",
             "PREFIX=/usr", "PYDEPS=system"])
    assert r.returncode == 0, r.stdout
    for d in ("bin", "sbin"):
        (root / d).symlink_to(f"usr/{d}")
    for unit in Path("/usr/lib/systemd/system").iterdir():
        dst = root / "usr/lib/systemd/system" / unit.name
        if not dst.exists() and not dst.is_symlink():
            if unit.is_symlink():
                dst.symlink_to(os.readlink(unit))
            elif unit.is_file():
                shutil.copy2(unit, dst)
    for cmd in ("/usr/sbin/modprobe", "/usr/bin/kill"):
        dst = root / cmd.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.realpath(cmd), dst)
    return root


def verify(root: Path, unit: str = "/" + UNIT_REL):
    return run(["systemd-analyze", "verify", f"--root={root}", unit])


def test_unit_verifies_cleanly(vroot):
    r = verify(vroot)
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_k8s_unit_verifies_cleanly(vroot):
    r = verify(vroot, "/usr/lib/systemd/system/xpu-k8s.service")
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_cdi_refresh_units_verify_cleanly(vroot):
    """The path unit that rewrites the CDI spec when NVIDIA's changes, and
    the service it starts (xpuctl cdi refresh)."""
    for name in ("xpu-cdi-refresh.path", "xpu-cdi-refresh.service"):
        r = verify(vroot, f"/usr/lib/systemd/system/{name}")
        assert r.returncode == 0 and r.stdout == "", (name, r.stdout)
    service = (vroot / "usr/lib/systemd/system/"
               "xpu-cdi-refresh.service").read_text()
    assert "ExecStart=/usr/bin/xpuctl cdi refresh\n" in service
    assert "SuccessExitStatus=3\n" in service


def test_verify_catches_a_bad_unit(vroot):
    """The check above can fail: a misspelt key and bad device rights."""
    bad = vroot / "usr/lib/systemd/system/xpud-bad.service"
    text = (vroot / UNIT_REL).read_text()
    bad.write_text(text.replace("NoNewPrivileges=yes",
                                "NoNewPrivilege=yes\nDeviceAllow=char-nvidia rwx"))
    try:
        r = verify(vroot, "/usr/lib/systemd/system/xpud-bad.service")
        assert "Unknown key name 'NoNewPrivilege'" in r.stdout or \
            "Unknown key 'NoNewPrivilege'" in r.stdout, r.stdout
        assert "Invalid device rights" in r.stdout, r.stdout
    finally:
        bad.unlink()


def test_unit_contract():
    """What the issue asks of the unit, read from the file itself."""
    keys: dict[str, list[str]] = {}
    for line in (REPO / "systemd/xpud.service").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    assert keys["Type"] == ["notify"]
    assert keys["Restart"] == ["on-failure"]
    assert keys["WatchdogSec"] and keys["ProtectSystem"] == ["strict"]
    assert keys["DevicePolicy"] == ["closed"] and keys["NoNewPrivileges"] == ["yes"]
    allowed = {v.split()[0] for v in keys["DeviceAllow"]}
    assert {"char-nvidia", "char-nvidiactl", "char-nvidia-frontend", "char-misc"} <= allowed
    assert "-/etc/cdi" in keys["ReadWritePaths"][0].split()
    assert "nvidia-persistenced.service" in keys["After"][0].split()
    # UVM's node first, so that xpu.ko interposes on its open at load
    assert keys["ExecStartPre"] == ["-+/usr/bin/nvidia-modprobe -u -c=0",
                                    "+/sbin/modprobe xpu"]


def udevadm_test(rules: dict[str, str], devpath: str) -> str:
    """`udevadm test DEVPATH` with RULES (name -> text) in /run/udev/rules.d,
    in a mount namespace whose /run and /dev are private."""
    need_root()
    if not shutil.which("unshare") or not shutil.which("udevadm"):
        pytest.skip("needs unshare and udevadm")
    script = ["mount -t tmpfs tmpfs /run", "mount -t tmpfs tmpfs /dev",
              "mkdir -p /run/udev/rules.d"]
    for name, text in rules.items():
        script.append(f"cat > /run/udev/rules.d/{name} <<'EOF'\n{text}EOF")
    script.append(f"udevadm test {devpath}")
    r = run(["unshare", "--mount", "--propagation", "private", "sh", "-ec",
             "\n".join(script)])
    if "Operation not permitted" in r.stdout and "mount" in r.stdout:
        pytest.skip("cannot make a private mount namespace here")
    return r.stdout


def any_misc_device() -> str:
    misc = sorted(os.listdir("/sys/class/misc")) if os.path.isdir("/sys/class/misc") else []
    if not misc:
        pytest.skip("no misc device in /sys to simulate an event on")
    return f"/sys/class/misc/{misc[0]}"


def test_udev_rules_parse():
    rules = (REPO / "udev/60-xpu.rules").read_text()
    out = udevadm_test({"60-xpu.rules": rules}, any_misc_device())
    assert "Reading rules file: /run/udev/rules.d/60-xpu.rules" in out, out
    problems = [ln for ln in out.splitlines()
                if ln.startswith("/run/udev/rules.d/60-xpu.rules:")]
    assert problems == []


def test_udev_parse_check_can_fail():
    out = udevadm_test({"61-bad.rules": 'KERNEL=="xpuctl", MODE="0600", NOSUCHKEY="1"\n'},
                       any_misc_device())
    assert re.search(r"^/run/udev/rules.d/61-bad.rules:1 .*NOSUCHKEY", out, re.MULTILINE), out


def test_udev_rules_contract():
    lines = [ln for ln in (REPO / "udev/60-xpu.rules").read_text().splitlines()
             if ln and not ln.startswith("#")]
    ctl = [ln for ln in lines if 'KERNEL=="xpuctl"' in ln]
    assert len(ctl) == 1
    assert 'MODE="0600"' in ctl[0] and 'OWNER="root"' in ctl[0] and 'GROUP="root"' in ctl[0]
    assert 'TAG+="systemd"' in ctl[0]
    gpu = [ln for ln in lines if "SYSTEMD_WANTS" in ln]
    assert len(gpu) == 1 and 'DRIVER=="nvidia"' in gpu[0] and "xpud.service" in gpu[0]
    assert "xpu-cdi-refresh.service" in gpu[0]
