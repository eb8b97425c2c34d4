# SPDX-License-Identifier: Apache-2.0
"""xpuctl: its command lines, its output (table and json) and its errors,
against a real server in this process on the in-memory FakeBackend."""

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import xpu
from xpu import cli
from xpu.api import OPS
from xpu.auth import Authorizer, PeerCred
from xpu.sizes import GIB
from xpud_fakes import UUID0, UUID1

TOP = Path(__file__).resolve().parents[3]
COMPLETION = TOP / "xpud" / "completion" / "xpuctl.bash"

CONFIG = """\
[[slice]]
name = "train"
gpu = 1
memory = "8GiB"
compute = 50
"""


def xpuctl_at(path, capsys, *argv):
    try:
        status = cli.main(["--socket", path, *argv])
    except SystemExit as e:  # argparse's usage errors
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def xpuctl(served, capsys):
    """xpuctl(*argv) -> (exit status, stdout, stderr), on the served
    socket."""
    path, _ = served

    def run(*argv):
        return xpuctl_at(path, capsys, *argv)

    return run


@pytest.fixture
def with_config(make_service, serve, capsys):
    svc = make_service(CONFIG)
    path = serve(svc)

    def run(*argv):
        return xpuctl_at(path, capsys, *argv)

    return run


def one_line(err):
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err[:-1]


# -- usage errors: exit status 2, before xpud is asked ---------------------

@pytest.mark.parametrize("argv, message", [
    ([], "no command given"),
    (["fly"], "argument COMMAND: invalid choice: 'fly'"),
    (["create", "a", "--gpu", "0"],
     "the following arguments are required: --memory"),
    (["create", "a", "--memory", "1GiB"],
     "the following arguments are required: --gpu"),
    (["create", "a", "--gpu", "0", "--memory", "8GB"],
     "argument --memory: '8GB' is ambiguous"),
    (["create", "a", "--gpu", "0", "--memory", "512"],
     "argument --memory: 512B is below the smallest limit, 1MiB"),
    (["create", "a", "--gpu", "first", "--memory", "1GiB"],
     "argument --gpu: 'first' is not a GPU"),
    (["create", "a", "--gpu", "0", "--memory", "1GiB", "--compute", "12.55"],
     "argument --compute: '12.55' is finer than the 0.1 % steps"),
    (["create", "a", "--gpu", "0", "--memory", "1GiB", "--weight", "0"],
     "argument --weight: 0 is not between 1 and 10000"),
    (["create", "a", "--gpu", "0", "--memory", "1GiB", "--priority", "max"],
     "argument --priority: invalid choice: 'max'"),
    (["set", "a"], ("set: nothing to change: give --memory, --compute, "
                    "--weight, --priority or --host-memory")),
    (["create", "a", "--gpu", "0", "--memory", "1GiB", "--host-memory",
      "512"],
     ("argument --host-memory: 512B is below the smallest bound, 1MiB (0 is "
      "no bound")),
    (["set", "a", "--host-memory", "-1"],
     "argument --host-memory: '-1' is not a size"),
    (["set", "a", "--host-memory", "8GB"],
     "argument --host-memory: '8GB' is ambiguous"),
    (["list", "-o", "yaml"], "argument -o/--output: invalid choice: 'yaml'"),
    (["run", "a"], "run: no command: write xpuctl run NAME -- COMMAND"),
    (["run", "a", "--"], "run: no command"),
])
def test_usage_errors(xpuctl, argv, message):
    status, out, err = xpuctl(*argv)
    assert status == 2
    line = one_line(err)
    assert line.startswith("xpuctl") and ": error: " in line
    assert message in line, line
    assert out == ""


def test_usage_errors_exit_2_from_argparse(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["create", "a"])
    assert e.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert line.endswith("(see xpuctl create --help)")


def test_run_parses_the_command(monkeypatch, xpuctl):
    seen = {}

    def fake_run(args, c, out):
        seen.update(name=args.name, cmd=args.cmd)
        return 0

    monkeypatch.setattr(cli, "cmd_run", fake_run)
    assert xpuctl("run", "train", "--", "ls", "-l", "--color")[0] == 0
    assert seen == {"name": "train", "cmd": ["ls", "-l", "--color"]}


def test_run_enters_the_slice_then_execs(with_config, monkeypatch):
    seen = []
    monkeypatch.setattr(cli.run, "check", lambda binds: seen.append(
        ("check", [(b.source, b.target) for b in binds])))
    monkeypatch.setattr(cli.run, "enter", lambda binds: seen.append(
        ("enter", len(binds))))
    monkeypatch.setattr(cli.run.os, "listdir",
                        lambda d: ["nvidia0", "nvidia1", "nvidiactl",
                                   "nvidia-uvm", "xpu0"])

    def execvp(file, argv):
        seen.append(("exec", file, argv))
        raise FileNotFoundError(2, "nope")

    monkeypatch.setattr(cli.run.os, "execvp", execvp)
    status, _, err = with_config("run", "train", "--", "nvcmd", "-x")
    assert seen == [
        ("check", [("/dev/xpu0-ctl", "/dev/nvidiactl"),
                   ("/dev/xpu0", "/dev/nvidia1"),
                   ("/dev/null", "/dev/nvidia0")]),
        ("enter", 3),
        ("exec", "nvcmd", ["nvcmd", "-x"])]
    assert status == 127   # as a shell: command not found
    assert one_line(err) == "xpuctl: error: nvcmd: command not found"


def test_run_of_a_missing_slice(xpuctl):
    status, _, err = xpuctl("run", "nope", "--", "true")
    assert status == 5
    assert "no slice 'nope'" in one_line(err)


# -- reads -------------------------------------------------------------------

def test_gpus(with_config):
    status, out, err = with_config("gpus")
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        ("INDEX  UUID                                      NAME         "
         "MEMORY  MINOR  MODE    POLICY    PERIOD  SLICES  STATE"),
        (f"0      {UUID0}  NVIDIA H200  80GiB   0      shared  weighted  "
         "20ms    0       ready"),
        (f"1      {UUID1}  NVIDIA H200  80GiB   1      shared  weighted  "
         "20ms    1       ready")]
    status, out, _ = with_config("gpus", "-o", "json")
    gpus = json.loads(out)
    assert [g["gpu_uuid"] for g in gpus] == [UUID0, UUID1]
    assert gpus[1]["memory_assigned_bytes"] == 8 * GIB


def test_list_and_show(with_config):
    assert with_config("create", "infer", "--gpu", UUID0, "--memory",
                       "1.5GiB", "--compute", "12.5%", "--weight", "300",
                       "--priority", "high", "--host-memory", "2GiB")[0] == 0
    status, out, err = with_config("list")
    assert (status, err) == (0, "")
    # HOST: what the driver allocated, /the bound when there is one.
    assert out.splitlines() == [
        "NAME   GPU  MEMORY  USED  HOST     COMPUTE  WEIGHT  PRIORITY  STATE",
        "infer  0    1.5GiB  0B    0B/2GiB  12.5%    300     high      ready",
        "train  1    8GiB    0B    0B       50%      100     normal    ready"]
    status, out, _ = with_config("list", "-o", "json")
    slices = json.loads(out)
    assert [s["name"] for s in slices] == ["infer", "train"]
    assert slices[0]["memory_limit_bytes"] == 1536 * 2**20
    assert slices[0]["compute_share"] == 12.5
    status, out, _ = with_config("show", "train")
    assert out.splitlines()[:5] == [
        "name:        train",
        "origin:      config",
        f"gpu:         1 ({UUID1}, minor 1)",
        "memory:      8GiB limit, 0B used",
        "host memory: no limit, 0B used"]
    assert "nodes:       /dev/xpu0, /dev/xpu0-ctl" in out.splitlines()
    assert out.splitlines()[-1].startswith("defined in: ")
    status, out, _ = with_config("show", "train", "-o", "json")
    assert json.loads(out)["gpu_uuid"] == UUID1


def test_list_shows_the_host_memory_held_and_its_bound():
    base = {"gpu_index": 0, "memory_limit_bytes": GIB,
            "memory_used_bytes": 0, "compute_share": 0, "weight": 100,
            "priority": "normal", "state": "ready"}
    out = io.StringIO()
    cli.print_slices(out, [
        dict(base, name="a", host_memory_used_bytes=300 * 2**20,
             host_memory_limit_bytes=2 * GIB),
        dict(base, name="b", host_memory_used_bytes=300 * 2**20,
             host_memory_limit_bytes=0),
        # Not in the kernel (pending): nothing held to show, its bound is.
        dict(base, name="c", memory_used_bytes=None, state="pending",
             host_memory_used_bytes=None, host_memory_limit_bytes=GIB)])
    assert [line.split()[4] for line in out.getvalue().splitlines()] == [
        "HOST", "300MiB/2GiB", "300MiB", "-/1GiB"]


def test_show_shows_the_rm_handles_and_their_bound(xpuctl, served):
    _, svc = served
    xpuctl("create", "a", "--gpu", "0", "--memory", "1GiB")
    k = svc.backend.slices["a"]
    svc.backend.slices["a"] = dataclasses.replace(k, rm_handles=57)
    _, out, _ = xpuctl("show", "a")
    lines = out.splitlines()
    # After the host memory, in the same column.
    assert lines[lines.index("host memory: no limit, 0B used") + 1] == \
        "RM handles:  57 / 131072"
    got = json.loads(xpuctl("show", "a", "-o", "json")[1])
    assert (got["rm_handles"], got["rm_handles_limit"]) == (57, 131072)
    [t] = json.loads(xpuctl("top", "--once", "-o", "json")[1])["slices"]
    assert (t["rm_handles"], t["rm_handles_limit"]) == (57, 131072)


def test_show_shows_the_os_events_and_their_bound(xpuctl, served):
    _, svc = served
    xpuctl("create", "a", "--gpu", "0", "--memory", "1GiB")
    k = svc.backend.slices["a"]
    svc.backend.slices["a"] = dataclasses.replace(k, rm_handles=57,
                                                  os_events=9)
    _, out, _ = xpuctl("show", "a")
    lines = out.splitlines()
    # After the RM handles, in the same column.
    assert lines[lines.index("RM handles:  57 / 131072") + 1] == \
        "OS events:   9 / 1024"
    got = json.loads(xpuctl("show", "a", "-o", "json")[1])
    assert (got["os_events"], got["os_events_limit"]) == (9, 1024)
    [t] = json.loads(xpuctl("top", "--once", "-o", "json")[1])["slices"]
    assert (t["os_events"], t["os_events_limit"]) == (9, 1024)


def test_show_shows_the_records_and_doorbells_and_their_bounds(xpuctl,
                                                               served):
    _, svc = served
    xpuctl("create", "a", "--gpu", "0", "--memory", "1GiB")
    k = svc.backend.slices["a"]
    svc.backend.slices["a"] = dataclasses.replace(
        k, os_events=9, doorbell_files=3,
        records={"devices": 1, "va_spaces": 2, "virtual_allocations": 0,
                 "tsgs": 4, "channels": 5, "usermode_objects": 6})
    _, out, _ = xpuctl("show", "a")
    lines = out.splitlines()
    # After the OS events, in the same column.
    i = lines.index("OS events:   9 / 1024")
    assert lines[i + 1:i + 3] == [
        ("records:     devices 1, VA spaces 2, virtual allocations 0, "
         "TSGs 4, channels 5, usermode objects 6 (each at most 1024)"),
        "doorbells:   3 files / 1024"]
    got = json.loads(xpuctl("show", "a", "-o", "json")[1])
    assert (got["records"]["tsgs"], got["doorbell_files"]) == (4, 3)
    # not known (an xpu.ko before session 46): dashes
    svc.backend.slices["a"] = dataclasses.replace(
        k, records=None, doorbell_files=None, records_limit=None)
    lines = xpuctl("show", "a")[1].splitlines()
    assert "records:     -" in lines and "doorbells:   - files / 1024" in lines


@pytest.mark.parametrize("field,label", [("rm_handles", "RM handles:  "),
                                         ("os_events", "OS events:   ")])
def test_show_without_rm_figures(field, label):
    """RM handles and OS events: each count over xpu.ko's bound on it."""
    base = {"name": "a", "origin": "api", "gpu_index": 0,
            "gpu_uuid": UUID0, "gpu_minor": 0, "memory_limit_bytes": GIB,
            "memory_used_bytes": 0, "host_memory_limit_bytes": 0,
            "host_memory_used_bytes": 0, "compute_share": 0, "weight": 100,
            "priority": "normal", "cgroups": [], "nodes": [],
            "state": "ready"}

    def line(**kw):
        out = io.StringIO()
        cli.print_slice(out, dict(base, **kw))
        return next(x for x in out.getvalue().splitlines()
                    if x.startswith(label.strip()))

    # The parameter bounding it cannot be read: the count alone.
    assert line(**{field: 3, field + "_limit": None}) == label + "3 / -"
    # Not in the kernel (pending), or an older xpud: nothing to show.
    assert line(**{field: None, field + "_limit": None}) == label + "- / -"
    assert line() == label + "- / -"


def test_json_fields_are_the_documented_ones(with_config):
    text = (TOP / "docs" / "api.md").read_text()
    _, out, _ = with_config("show", "train", "-o", "json")
    for field in json.loads(out):
        assert re.search(rf"^\| `{field}` \|", text, re.MULTILINE), field
    _, out, _ = with_config("gpus", "-o", "json")
    for field in json.loads(out)[0]:
        assert re.search(rf"^\| `{field}` \|", text, re.MULTILINE), field


def test_an_empty_list(xpuctl):
    assert xpuctl("list") == (0, ("NAME  GPU  MEMORY  USED  HOST  COMPUTE  "
                                  "WEIGHT  PRIORITY  STATE\n"), "")
    assert xpuctl("list", "-o", "json") == (0, "[]\n", "")


def test_version(xpuctl):
    status, out, err = xpuctl("version")
    assert (status, err) == (0, "")
    assert out == (f"xpuctl {xpu.__version__}\nxpud {xpu.__version__} "
                   "(api 1)\nxpu.ko 0.1.0 (api 1)\n")
    status, out, err = xpuctl("version", "-o", "json")
    assert json.loads(out) == {
        "xpuctl": xpu.__version__, "xpud": xpu.__version__, "api": 1,
        "kernel": "0.1.0", "kernel_api": 1, "kernel_error": None,
        "uvm_interposed": None, "uvm_retentions_seen": None,
        "uvm_retains_unwatched": None, "call_pages_guarded": None}


def test_version_says_when_uvm_is_not_interposed(xpuctl, served):
    _, svc = served
    svc.backend.uvm_interposed = lambda: False
    status, out, err = xpuctl("version")
    assert (status, err) == (0, "")
    assert out.splitlines()[2:] == [
        "xpu.ko 0.1.0 (api 1)",
        ("xpu.ko does not interpose on UVM's node: a bound cgroup's tasks' "
         "/dev/nvidia-uvm files are no slice's (is nvidia-uvm loaded and "
         "/dev/nvidia-uvm made? docs/security.md, class 39)")]


@pytest.mark.parametrize("check,warning", [
    ("uvm_retentions_seen",
     ("xpu.ko does not see UVM's retention of channels: a channel a slice "
      "frees stays charged while a UVM file of the slice is open, and one "
      "registered through a UVM file passed in is not (docs/security.md, "
      "class 39)")),
    ("call_pages_guarded",
     ("vm.mmap_min_addr is below 65536: unless SELinux refuses low "
      "mappings, a tenant may map where xpu.ko puts the pages of its "
      "calls, and on kernels before 6.10 swap one under the driver "
      "(xpu.ko's call_pages_exposed counts them; docs/security.md, "
      "class 41)"))])
def test_version_says_when_a_kernel_guard_is_missing(xpuctl, served, check,
                                                     warning):
    _, svc = served
    setattr(svc.backend, check, lambda: False)
    status, out, err = xpuctl("version")
    assert (status, err) == (0, "")
    assert out.splitlines()[2:] == ["xpu.ko 0.1.0 (api 1)", warning]
    setattr(svc.backend, check, lambda: True)
    status, out, err = xpuctl("version")
    assert out.splitlines()[2:] == ["xpu.ko 0.1.0 (api 1)"]


def test_version_says_when_retains_went_unwatched(xpuctl, served):
    _, svc = served
    svc.backend.uvm_retains_unwatched = lambda: 3
    status, out, err = xpuctl("version")
    assert (status, err) == (0, "")
    assert out.splitlines()[2:] == [
        "xpu.ko 0.1.0 (api 1)",
        ("xpu.ko could not watch 3 of the driver's retains of a channel to "
         "their return: what they pinned stays charged to their slices "
         "until UVM lets go of the VA space they named (raise its "
         "uvm_probe_maxactive; "
         "docs/security.md, class 44)")]
    svc.backend.uvm_retains_unwatched = lambda: 0
    status, out, err = xpuctl("version")
    assert out.splitlines()[2:] == ["xpu.ko 0.1.0 (api 1)"]


def test_top(xpuctl, served):
    _, svc = served
    assert xpuctl("create", "a", "--gpu", "0", "--memory", "1GiB",
                  "--compute", "25")[0] == 0
    status, out, err = xpuctl("top", "--count", "2", "--interval", "0.1",
                              "-o", "json")
    assert (status, err) == (0, "")
    frames = [json.loads(line) for line in out.splitlines()]
    assert len(frames) == 2
    assert frames[0]["time"] == svc.backend.read_time
    # The API's result as it is: the `top` op's, one kernel read each.
    assert frames[1] == svc.op_top()
    assert [s["name"] for s in frames[1]["slices"]] == ["a"]
    assert [c[0] for c in svc.backend.calls].count("read_usage") == 3
    status, out, err = xpuctl("top", "--once")
    assert (status, err) == (0, "")
    assert out.splitlines()[0].split() == [
        "NAME", "GPU", "USED", "PEAK", "LIMIT", "USE", "HOST", "COMPUTE",
        "GOT", "GATED", "PROCS", "DENIED"]
    assert out.splitlines()[1].split() == ["a", "0", "0B", "0B", "1GiB",
                                           "0%", "0B", "25%", "0%", "-",
                                           "0", "0"]
    # What the kernel says shows at the next refresh.
    k = svc.backend.slices["a"]
    svc.backend.slices["a"] = dataclasses.replace(
        k, memory_used_bytes=256 * 2**20, processes=2, denied_allocs=3,
        share_obtained=248)
    svc.backend.usage["a"] = {"memory_peak": 512 * 2**20,
                              "gated_ns": 3 * 10**9,
                              "runnable_ns": 4 * 10**9}
    status, out, err = xpuctl("top", "--count", "1")
    assert out.splitlines()[1].split() == ["a", "0", "256MiB", "512MiB",
                                           "1GiB", "25%", "0B", "25%",
                                           "24.8%", "75%", "2", "3"]
    assert len(out.splitlines()) == 2


def test_top_without_xpu_ko(make_service, serve, capsys):
    from xpu.backend import NullBackend
    from xpu.inventory import Inventory
    svc = make_service(start=False)
    svc.backend = NullBackend(Inventory(), "/nonexistent",
                              "xpu.ko is not loaded: load it")
    status, out, err = xpuctl_at(serve(svc), capsys, "top", "--once")
    assert (status, out) == (1, "")
    assert one_line(err) == "xpuctl: error: xpu.ko is not loaded: load it"


@pytest.mark.parametrize("argv, message", [
    (["top", "--count", "-1"], "argument --count: -1 is negative"),
    (["top", "--count", "x"], "argument --count: 'x' is not a whole number"),
    (["top", "--interval", "0"], "argument --interval: 0 is not between"),
])
def test_top_usage_errors(xpuctl, argv, message):
    status, out, err = xpuctl(*argv)
    assert status == 2 and out == ""
    assert message in one_line(err)


# -- changes -----------------------------------------------------------------

def test_create_set_destroy(xpuctl, served):
    _, svc = served
    status, out, err = xpuctl("create", "a", "--gpu", "1", "--memory",
                              "512MiB", "--compute", "25")
    assert (status, err) == (0, "")
    assert out == ("created slice 'a' on GPU 1: memory 512MiB, compute 25%, "
                   "weight 100, priority normal\n")
    status, out, err = xpuctl("set", "a", "--memory", "1GiB", "--priority",
                              "low")
    assert out == ("updated slice 'a': memory 1GiB, compute 25%, weight 100, "
                   "priority low\n")
    assert svc.backend.slices["a"].spec.memory_limit_bytes == GIB
    status, out, err = xpuctl("create", "a", "--gpu", "1", "--memory",
                              "512MiB")
    assert status == 1
    assert one_line(err) == ("xpuctl: error: slice 'a' exists already "
                             "(xpuctl show a)")
    svc.backend.busy.add("a")
    status, out, err = xpuctl("destroy", "a")
    assert status == 1
    assert one_line(err) == ("xpuctl: error: slice 'a' has processes: stop "
                             "them or use --force")
    assert xpuctl("destroy", "a", "--force") == (
        0, "destroyed slice 'a'\n", "")


def test_host_memory(xpuctl, served):
    _, svc = served
    status, out, err = xpuctl("create", "a", "--gpu", "0", "--memory",
                              "1GiB", "--host-memory", "2GiB")
    assert (status, err) == (0, "")
    assert out == ("created slice 'a' on GPU 0: memory 1GiB, compute 0%, "
                   "weight 100, priority normal, host memory 2GiB\n")
    assert svc.backend.slices["a"].spec.host_memory_limit_bytes == 2 * GIB
    k = svc.backend.slices["a"]
    svc.backend.slices["a"] = dataclasses.replace(
        k, host_memory_used_bytes=5 * 2**20)
    _, out, _ = xpuctl("show", "a")
    assert "host memory: 2GiB limit, 5MiB used" in out.splitlines()
    _, out, _ = xpuctl("show", "a", "-o", "json")
    got = json.loads(out)
    assert (got["host_memory_limit_bytes"], got["host_memory_used_bytes"]) \
        == (2 * GIB, 5 * 2**20)
    _, out, _ = xpuctl("top", "--once")
    header, row = out.splitlines()
    assert row.split()[header.split().index("HOST")] == "5MiB/2GiB"
    _, out, _ = xpuctl("top", "--once", "-o", "json")
    [t] = json.loads(out)["slices"]
    assert (t["host_memory_used_bytes"], t["host_memory_limit_bytes"]) == (
        5 * 2**20, 2 * GIB)
    # Only the bound: the rest stays.
    status, out, err = xpuctl("set", "a", "--host-memory", "512MiB")
    assert (status, err) == (0, "")
    assert out.endswith(", host memory 512MiB\n")
    assert svc.backend.slices["a"].spec == dataclasses.replace(
        k.spec, host_memory_limit_bytes=512 * 2**20)
    # Below what the slice holds: refused, as a memory limit would be.
    status, out, err = xpuctl("set", "a", "--host-memory", "4MiB")
    assert (status, out) == (1, "")
    assert "more system memory than the new host-memory bound" in \
        one_line(err)
    assert svc.backend.slices["a"].spec.host_memory_limit_bytes == \
        512 * 2**20
    # 0: no bound, said so.
    status, out, err = xpuctl("set", "a", "--host-memory", "0")
    assert (status, err) == (0, "")
    assert out == ("updated slice 'a': memory 1GiB, compute 0%, weight 100, "
                   "priority normal, host memory unbounded\n")
    assert svc.backend.slices["a"].spec.host_memory_limit_bytes == 0
    _, out, _ = xpuctl("show", "a")
    assert "host memory: no limit, 5MiB used" in out.splitlines()
    _, out, _ = xpuctl("top", "--once")
    header, row = out.splitlines()
    assert row.split()[header.split().index("HOST")] == "5MiB"


def test_bind_unbind(xpuctl, cgroup_root):
    xpuctl("create", "a", "--gpu", "0", "--memory", "1GiB")
    assert xpuctl("bind", "a", "--cgroup", f"{cgroup_root}/jobs/a") == (
        0, f"bound cgroup {cgroup_root}/jobs/a to slice 'a'\n", "")
    _, out, _ = xpuctl("show", "a", "-o", "json")
    assert json.loads(out)["cgroups"] == ["/jobs/a"]
    assert xpuctl("unbind", "a", "--cgroup", "/jobs/a")[0] == 0
    status, _, err = xpuctl("bind", "a", "--cgroup", "/jobs/none")
    assert status == 5
    assert one_line(err) == (f"xpuctl: error: cgroup /jobs/none does not "
                             f"exist (no directory {cgroup_root}/jobs/none)")


# -- errors and their exit statuses ------------------------------------------

def test_not_found_is_5(xpuctl):
    status, out, err = xpuctl("show", "nope")
    assert (status, out) == (5, "")
    assert one_line(err) == ("xpuctl: error: no slice 'nope' (xpuctl list "
                             "shows the slices)")
    assert xpuctl("create", "a", "--gpu", "9", "--memory", "1GiB")[0] == 5


def test_daemon_refusals_are_1(with_config):
    status, _, err = with_config("destroy", "train")
    assert status == 1
    assert one_line(err).startswith("xpuctl: error: slice 'train' is defined "
                                    "in the configuration (")
    status, _, err = with_config("create", "big", "--gpu", "1", "--memory",
                                 "80GiB")
    assert status == 1
    assert "has 72GiB of 80GiB not given to slices" in one_line(err)


def _publish_when_listened(hub, evs):
    """Publish EVS once a new listener has subscribed (in a thread)."""
    before = set(hub._subs)  # an earlier xpuctl's, until xpud sees it left

    def run():
        deadline = time.monotonic() + 30
        while not hub._subs - before and time.monotonic() < deadline:
            time.sleep(0.01)
        for ev in evs:
            hub.publish(ev)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


EVENTS = [
    {"time": 1700000000.5, "event": "slice_created", "slice_id": 3,
     "name": "a", "gpu_minor": 0, "memory_limit_bytes": GIB},
    {"time": 1700000001.0, "event": "alloc_denied", "slice_id": 3,
     "name": "a", "gpu_minor": 0, "memory_limit_bytes": GIB, "pid": 42,
     "size_bytes": 2 * GIB, "memory_used_bytes": 0},
]


def test_events(xpuctl, served):
    _, svc = served
    svc.events.unavailable = None
    t = _publish_when_listened(svc.events, EVENTS)
    status, out, err = xpuctl("events", "--count", "2", "-o", "json")
    t.join()
    assert (status, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == EVENTS
    t = _publish_when_listened(svc.events, EVENTS)
    status, out, err = xpuctl("events", "--count", "2")
    t.join()
    lines = out.splitlines()
    assert lines[0].endswith("  slice_created    slice 3 'a' created on "
                             f"GPU 0, limit {GIB} bytes")
    assert lines[1].endswith(f"  alloc_denied     slice 3 'a': {2 * GIB} "
                             "bytes asked by pid 42 denied (0 of "
                             f"{GIB} used)")
    assert svc.events.counters()["alloc_denied"] == 2


def test_events_without_a_source(xpuctl, served):
    _, svc = served
    svc.events.unavailable = "xpu.ko sends no events (older)"
    status, _, err = xpuctl("events")
    assert status == 1
    assert one_line(err).startswith("xpuctl: error: no events: xpu.ko "
                                    "sends no events (older)")


def test_unreachable_is_3(capsys, sockdir):
    path = str(sockdir / "none.sock")
    assert cli.main(["--socket", path, "list"]) == 3
    assert one_line(capsys.readouterr().err) == (
        f"xpuctl: error: cannot reach xpud at {path}: no such socket; is "
        "xpud running? (systemctl status xpud)")
    # Options may follow the command too.
    assert cli.main(["list", "--socket", path]) == 3


class AsUser(Authorizer):
    """Checks every request as if uid 1000, outside group xpu, sent it."""

    def check(self, op, peer):
        super().check(op, PeerCred(peer.pid, 1000, 1000, ()))


def test_permission_denied_is_4(make_service, serve, capsys):
    path = serve(make_service(), AsUser(group="no-such-group-xpu"))
    for argv in (["list"], ["destroy", "a"]):
        assert cli.main(["--socket", path, *argv]) == 4
        line = one_line(capsys.readouterr().err)
        assert line.startswith("xpuctl: error: permission denied: ")
    # And the socket file's own permission, before xpud is asked.
    os.chmod(path, 0)
    if os.getuid() != 0:  # root passes file permissions
        assert cli.main(["--socket", path, "list"]) == 4


def test_debug_shows_the_traceback(capsys, sockdir):
    path = str(sockdir / "none.sock")
    assert cli.main(["--socket", path, "--debug", "list"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.splitlines()[-1].startswith("xpuctl: error: cannot reach xpud")


# -- help and completion -----------------------------------------------------

def test_every_command_of_the_issue_is_there():
    sub = next(a for a in cli.build_parser()._actions
               if a.dest == "command")
    assert list(sub.choices) == ["gpus", "list", "show", "create", "set",
                                 "destroy", "bind", "unbind", "release",
                                 "run", "top", "events", "version", "cdi"]
    # Every op of the API has a command (bind/unbind, create/set/...);
    # cdi_spec and cdi_refresh are `cdi spec` and `cdi refresh`.
    cdi = next(a for a in sub.choices["cdi"]._actions
               if a.dest == "cdi_command")
    assert list(cdi.choices) == ["spec", "refresh"]
    commands = set(sub.choices) | {f"cdi_{c}" for c in cdi.choices}
    assert set(OPS) <= commands


def completion_words():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    words = {}
    for name, p in sub.choices.items():
        words[name] = {s for a in p._actions for s in a.option_strings}
    return words


def test_the_bash_completion_knows_every_command_and_option():
    text = COMPLETION.read_text()
    for command, options in completion_words().items():
        assert re.search(rf"\b{command}\b", text), command
        m = re.search(rf"^\s*{command}\)\s*opts=\"([^\"]*)\"", text,
                      re.MULTILINE)
        assert m, f"no opts for {command}"
        assert set(m.group(1).split()) == options, command


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_bash_completion_completes():
    script = (f"source {COMPLETION}\n"
              "COMP_WORDS=(xpuctl cr); COMP_CWORD=1; _xpuctl\n"
              "echo \"${COMPREPLY[@]}\"\n"
              "COMP_WORDS=(xpuctl create a --pri); COMP_CWORD=3; _xpuctl\n"
              "echo \"${COMPREPLY[@]}\"\n"
              "COMP_WORDS=(xpuctl create a --priority ''); COMP_CWORD=4; "
              "_xpuctl\necho \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "-c", script], capture_output=True,
                       text=True, check=True)
    assert r.stdout.splitlines() == ["create", "--priority",
                                     "low normal high"]
