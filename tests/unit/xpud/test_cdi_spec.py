# SPDX-License-Identifier: Apache-2.0
"""xpu/cdi: the spec of the slices (a pure function), its cdiVersion, the
schema, the YAML subset, the atomic writer and xpud's refresher.

The schema is the CDI project's own (tests/tools/cdischema.py says where
it is looked for); without it the schema tests skip and say why."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from pathlib import Path

import pytest
from xpu.api import ApiError
from xpu.cdi import device_name, kind, simpleyaml, spec
from xpu.cdi.refresh import Refresher, check_nvidia_edits, find_nvidia_spec
from xpu.cdi.writer import SpecWriter
from xpu.config import CdiConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import cdischema

OPTS = spec.SpecOptions(vendor="xpu.dev", hook="/opt/xpu/bin/xpu-cdi-hook",
                        socket="/run/xpu/xpud.sock")


def slice_view(name="train", minor=0, id=3, state="ready", **kw):
    """A Slice as the API's `list` gives it (the fields the spec reads)."""
    s = {"name": name, "state": state, "gpu_minor": minor, "id": id,
         "gpu_node": f"/dev/xpu{id}", "ctl_node": f"/dev/xpu{id}-ctl",
         "memory_limit_bytes": 1 << 30, "error": None}
    s.update(kw)
    return s


NVIDIA = {
    "cdiVersion": "0.5.0",
    "kind": "nvidia.com/gpu",
    "devices": [{"name": "0", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia0"}]}}],
    "containerEdits": {
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "deviceNodes": [{"path": "/dev/nvidiactl"},
                        {"path": "/dev/nvidia-uvm"}],
        "mounts": [{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1",
                    "containerPath":
                        "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1",
                    "options": ["ro", "nosuid", "nodev", "bind"]}],
        "hooks": [{"hookName": "createContainer",
                   "path": "/usr/bin/nvidia-cdi-hook",
                   "args": ["nvidia-cdi-hook", "update-ldcache", "--folder",
                            "/usr/lib/x86_64-linux-gnu"]}],
    },
}


# -- the spec ------------------------------------------------------------------

def test_one_device_per_ready_slice_named_after_it():
    doc = spec.build_spec([slice_view("b", minor=1, id=4), slice_view("a"),
                           slice_view("p", state="pending", gpu_node=None,
                                      ctl_node=None, id=None)], OPTS)
    assert doc["kind"] == kind("xpu.dev") == "xpu.dev/slice"
    assert [d["name"] for d in doc["devices"]] == ["a", "b"]
    assert device_name(doc["kind"], "a") == "xpu.dev/slice=a"
    a = doc["devices"][0]["containerEdits"]
    assert a["env"] == ["XPU_SLICE=a"]
    assert a["deviceNodes"] == [
        {"path": "/dev/nvidiactl", "hostPath": "/dev/xpu3-ctl", "type": "c",
         "major": 195, "minor": 255, "permissions": "rw"},
        {"path": "/dev/nvidia0", "hostPath": "/dev/xpu3", "type": "c",
         "major": 195, "minor": 0, "permissions": "rw"}]
    assert a["hooks"] == [{"hookName": "createRuntime",
                           "path": "/opt/xpu/bin/xpu-cdi-hook",
                           "args": ["xpu-cdi-hook", "--socket",
                                    "/run/xpu/xpud.sock", "bind", "a"]}]
    # The GPU's own minor: a slice of GPU 1 is /dev/nvidia1 inside.
    b = doc["devices"][1]["containerEdits"]["deviceNodes"][1]
    assert (b["path"], b["hostPath"], b["minor"]) == ("/dev/nvidia1",
                                                      "/dev/xpu4", 1)
    assert "containerEdits" not in doc   # no UVM nodes, no NVIDIA spec


def test_slices_that_cannot_be_devices_are_skipped_with_a_reason():
    views = [slice_view("ok"), slice_view("x-", id=5),
             slice_view("_x", id=6), slice_view("p", state="pending"),
             slice_view("n", gpu_node=None)]
    assert [d["name"] for d in spec.build_spec(views, OPTS)["devices"]] == \
        ["ok"]
    why = dict(spec.skipped(views))
    assert set(why) == {"x-", "_x", "p", "n"}
    assert "start and end with a letter or a digit" in why["x-"]
    assert why["p"] == "it is pending"
    assert "not made yet" in why["n"]


def test_the_lowest_cdi_version_the_fields_allow():
    assert spec.build_spec([slice_view()], OPTS)["cdiVersion"] == "0.5.0"
    # The CDI project's table: what each version added.
    base = {"kind": "xpu.dev/slice", "devices": [
        {"name": "a", "containerEdits": {"env": ["A=1"]}}]}
    assert spec.minimum_version(base) == "0.3.0"

    def with_edits(**edits):
        return dict(base, containerEdits=edits)

    assert spec.minimum_version(with_edits(mounts=[
        {"hostPath": "/a", "containerPath": "/a", "type": "bind"}])) == "0.4.0"
    assert spec.minimum_version(with_edits(deviceNodes=[
        {"path": "/dev/a", "hostPath": "/dev/b"}])) == "0.5.0"
    assert spec.minimum_version(dict(base, devices=[
        {"name": "0", "containerEdits": {}}])) == "0.5.0"
    assert spec.minimum_version(dict(base, annotations={"a": "b"})) == "0.6.0"
    assert spec.minimum_version(with_edits(additionalGids=[5])) == "0.7.0"
    assert spec.minimum_version(with_edits(netDevices=[
        {"hostInterfaceName": "a", "name": "b"}])) == "1.1.0"
    # Podman 4.3.1 reads up to 0.5.0: nothing later is ever used.
    full = spec.build_spec([slice_view()], spec.SpecOptions(
        extra_nodes=({"path": "/dev/nvidia-uvm", "type": "c", "major": 511,
                      "minor": 0, "permissions": "rw"},)), NVIDIA)
    assert full["cdiVersion"] == "0.5.0"


def test_a_container_s_uvm_node_is_xpu_s_where_the_host_has_it():
    """/dev/nvidia-uvm in the container is xpu.ko's UVM node (its numbers,
    hostPath for runtimes that bind-mount) where the host has both: the UVM
    files a slice's container opens are held for the slice (class 39).
    The tools node stays the driver's; without xpu-uvm, the driver's UVM
    node is given."""
    nodes = {"/dev/nvidia-uvm": (stat.S_IFCHR, 511, 0),
             "/dev/nvidia-uvm-tools": (stat.S_IFCHR, 511, 1),
             "/dev/xpu-uvm": (stat.S_IFCHR, 10, 121)}
    got = spec.host_nodes(lstat=fake_lstat(nodes))
    assert got == ({"path": "/dev/nvidia-uvm", "type": "c", "major": 10,
                    "minor": 121, "permissions": "rw",
                    "hostPath": "/dev/xpu-uvm"},
                   {"path": "/dev/nvidia-uvm-tools", "type": "c",
                    "major": 511, "minor": 1, "permissions": "rw"})
    # no UVM on the host: none in the container, xpu-uvm or not
    only = {k: v for k, v in nodes.items() if k != "/dev/nvidia-uvm"}
    assert [n["path"] for n in spec.host_nodes(lstat=fake_lstat(only))] == \
        ["/dev/nvidia-uvm-tools"]
    del nodes["/dev/xpu-uvm"]
    assert spec.host_nodes(lstat=fake_lstat(nodes))[0] == {
        "path": "/dev/nvidia-uvm", "type": "c", "major": 511, "minor": 0,
        "permissions": "rw"}
    # the spec carries it as it is, at a version that knows hostPath
    doc = spec.build_spec([slice_view()], spec.SpecOptions(
        extra_nodes=got), NVIDIA)
    assert doc["containerEdits"]["deviceNodes"][0]["hostPath"] == \
        "/dev/xpu-uvm"
    assert doc["cdiVersion"] == "0.5.0"


def test_nvidia_lends_its_mounts_and_hooks_not_its_nodes():
    uvm = spec.host_nodes(["/dev/nvidia-uvm", "/dev/missing", "/dev/file"],
                          lstat=fake_lstat({
                              "/dev/nvidia-uvm": (stat.S_IFCHR, 511, 0),
                              "/dev/file": (stat.S_IFREG, 0, 0)}))
    assert uvm == ({"path": "/dev/nvidia-uvm", "type": "c", "major": 511,
                    "minor": 0, "permissions": "rw"},)
    doc = spec.build_spec([slice_view()], spec.SpecOptions(extra_nodes=uvm),
                          NVIDIA)
    common = doc["containerEdits"]
    assert common == {"deviceNodes": list(uvm),
                      "mounts": NVIDIA["containerEdits"]["mounts"],
                      "hooks": NVIDIA["containerEdits"]["hooks"]}
    # NVIDIA's own device nodes and environment stay NVIDIA's.
    text = json.dumps(doc)
    assert "NVIDIA_VISIBLE_DEVICES" not in text
    assert {n["path"] for d in doc["devices"]
            for n in d["containerEdits"]["deviceNodes"]} == \
        {"/dev/nvidiactl", "/dev/nvidia0"}
    # A copy: editing xpu's spec leaves NVIDIA's alone.
    common["mounts"][0]["options"].append("x")
    assert NVIDIA["containerEdits"]["mounts"][0]["options"][-1] == "bind"


def fake_lstat(table):
    def lstat(path):
        if path not in table:
            raise FileNotFoundError(path)
        kind, major, minor = table[path]
        return os.stat_result((kind | 0o666, 0, 0, 1, 0, 0, 0, 0, 0, 0))\
            if kind == stat.S_IFREG else _dev(kind, major, minor)
    return lstat


def _dev(kind, major, minor):
    class St:
        st_mode = kind | 0o666
        st_rdev = os.makedev(major, minor)
    return St()


# -- the schema ------------------------------------------------------------------

@pytest.fixture(scope="module")
def validator():
    pytest.importorskip("jsonschema")
    v = cdischema.validator()
    if v is None:
        pytest.skip(cdischema.missing_reason())
    return v


def test_the_spec_validates_against_the_cdi_schema(validator):
    for doc in (spec.build_spec([slice_view(), slice_view("b", 1, 4)], OPTS),
                spec.build_spec([slice_view()], OPTS, NVIDIA),
                spec.build_spec([], OPTS)):
        assert cdischema.errors(validator, doc) == []
    # ... and the validator is not one that accepts anything.
    bad = spec.build_spec([slice_view()], OPTS)
    del bad["devices"][0]["containerEdits"]["hooks"][0]["path"]
    bad["devices"][0]["containerEdits"]["deviceNodes"][0]["minor"] = "255"
    assert cdischema.errors(validator, bad) == [
        ("devices/0/containerEdits/deviceNodes/0/minor: '255' is not of type "
        "'integer'"),
        "devices/0/containerEdits/hooks/0: 'path' is a required property"]


# -- YAML ------------------------------------------------------------------------

def test_yaml_round_trip_of_a_spec():
    doc = spec.build_spec([slice_view(), slice_view("0b", 1, 4)], OPTS,
                          NVIDIA)
    text = simpleyaml.dump(doc)
    assert simpleyaml.load(text) == doc
    assert text.startswith('---\ncdiVersion: "0.5.0"\nkind: xpu.dev/slice\n')
    assert '- name: "0b"\n' in text     # a name a reader could take for
    assert "  - \"--socket\"\n" in text  # a number, or a dash for an item


@pytest.mark.parametrize("value", [
    "0.5.0", "1", "-1", "1e3", "0x1f", "yes", "No", "on", "OFF", "y", "n",
    "true", "False", "null", "~", "", " a", "a ", "a: b", "a #b", "#a",
    "-a", "- a", "[a]", "{a}", "*a", "&a", "!a", "|", ">", "@a", "`a",
    "%a", "'a'", '"a"', "a\nb", "tab\there", "é", "nan", ".inf", "=",
    "libcuda.so.1::/usr/lib/libcuda.so", "2001-12-14", "1:20"])
def test_yaml_strings_come_back_as_the_same_strings(value):
    doc = {"k": value, "l": [value, {"v": value}]}
    assert simpleyaml.load(simpleyaml.dump(doc)) == doc


GO_YAML = """\
---
cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - path: /dev/nvidia-uvm
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  hooks:
  - args:
    - nvidia-cdi-hook
    - create-symlinks
    - --link
    - libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so
    hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook   # a comment
  mounts:
  - containerPath: /usr/bin/nvidia-smi
    hostPath: /usr/bin/nvidia-smi
    options:
      - ro
      - nosuid
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: "0"
- containerEdits: {}
  name: 'it''s'
kind: nvidia.com/gpu
"""


def test_yaml_as_nvidia_ctk_writes_it():
    doc = simpleyaml.load(GO_YAML)
    assert doc["cdiVersion"] == "0.5.0"          # plain, yet a string
    assert doc["devices"][0] == {"containerEdits": {"deviceNodes": [
        {"path": "/dev/nvidia0"}]}, "name": "0"}
    assert doc["devices"][1] == {"containerEdits": {}, "name": "it's"}
    hook = doc["containerEdits"]["hooks"][0]
    assert hook["args"][2:] == [
        "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"]
    assert hook["path"] == "/usr/bin/nvidia-cdi-hook"
    assert doc["containerEdits"]["mounts"][0]["options"] == ["ro", "nosuid"]


@pytest.mark.parametrize("text, line, what", [
    ("a: &x 1\nb: *x\n", 1, "anchors"),
    ("a: !!str 1\n", 1, "tags"),
    ("a: |\n  x\n", 1, "block scalars"),
    ("a: [1, 2]\n", 1, "flow collections"),
    ("a: 1\n---\nb: 2\n", 2, "more than one document"),
    ("a:\n\t- 1\n", 2, "tab"),
    ('a: "x\n  y"\n', 1, "unterminated"),
    ("a: 1\n  b: 2\n", 2, "unexpected indentation"),
    ("a: 1\na: 2\n", 2, "twice"),
    ('a: "\\x41"\n', 1, "escape"),
    ("- a\nb: 1\n", 2, "unexpected text"),
])
def test_yaml_outside_the_subset_is_refused_with_its_line(text, line, what):
    with pytest.raises(simpleyaml.YamlError) as e:
        simpleyaml.load(text)
    assert str(e.value).startswith(f"line {line}: ")
    assert what in str(e.value)


# -- writing ---------------------------------------------------------------------

def test_the_writer_replaces_atomically_and_removes(tmp_path):
    w = SpecWriter(str(tmp_path / "cdi"))
    doc = spec.build_spec([slice_view()], OPTS)
    w.write(doc)
    st = os.stat(w.path)
    assert json.loads(w.path.read_text()) == doc
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "cdi").st_mode) == 0o755
    w.write(doc)
    # A new file renamed over the old one: a reader holding the old one
    # reads it whole.
    assert os.stat(w.path).st_ino != st.st_ino
    assert sorted(os.listdir(tmp_path / "cdi")) == ["xpu.json"]
    (tmp_path / "cdi" / ".xpu.json.abc.tmp").write_text("{")
    w.remove_stale_temporaries()
    assert sorted(os.listdir(tmp_path / "cdi")) == ["xpu.json"]
    assert w.remove() is True
    assert w.remove() is False
    assert os.listdir(tmp_path / "cdi") == []


# -- xpud's refresher -------------------------------------------------------------

@pytest.fixture
def refresher(tmp_path):
    slices = [slice_view()]
    hook = tmp_path / "bin" / "xpu-cdi-hook"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\n")
    settings = CdiConfig(spec_dir=str(tmp_path / "cdi"), hook=str(hook),
                         nvidia_spec="none")
    r = Refresher(settings, "/run/xpu/xpud.sock", lambda: list(slices))
    r.slices = slices
    return r


def test_the_refresher_writes_when_the_spec_changes(refresher, tmp_path):
    path = tmp_path / "cdi" / "xpu.json"
    refresher.update(refresher.slices)
    first = os.stat(path).st_ino
    refresher.update(refresher.slices)            # a pass, nothing new
    assert os.stat(path).st_ino == first
    refresher.update(refresher.slices, force=True)   # a change of the API
    assert os.stat(path).st_ino != first
    refresher.slices.append(slice_view("b", 1, 4))
    refresher.update(refresher.slices)
    assert [d["name"] for d in json.loads(path.read_text())["devices"]] == \
        ["b", "train"]
    # Edited behind xpud's back: written again at the next pass.
    path.write_text("{}")
    refresher.update(refresher.slices)
    assert json.loads(path.read_text())["kind"] == "xpu.dev/slice"
    # No device: no file (CDI 1.0 refuses a spec without devices).
    refresher.update([])
    assert not path.exists()
    refresher.update(refresher.slices)
    assert path.exists()
    refresher.remove()
    assert not path.exists()


def test_the_refresher_moves_with_its_settings(refresher, tmp_path):
    refresher.update(refresher.slices)
    assert (tmp_path / "cdi" / "xpu.json").exists()
    refresher.configure(CdiConfig(vendor="example.com", spec_dir=str(
        tmp_path / "cdi2"), hook=refresher.hook, nvidia_spec="none"))
    assert not (tmp_path / "cdi" / "xpu.json").exists()
    refresher.update(refresher.slices)
    doc = json.loads((tmp_path / "cdi2" / "xpu.json").read_text())
    assert doc["kind"] == "example.com/slice"
    refresher.configure(CdiConfig(spec_dir="", hook=refresher.hook))
    assert not (tmp_path / "cdi2" / "xpu.json").exists()
    refresher.update(refresher.slices)
    assert refresher.writer is None


def test_the_refresher_reads_nvidia_yaml_and_json(refresher, tmp_path):
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "nvidia.yaml").write_text(GO_YAML)
    assert find_nvidia_spec("", str(d)) == str(d / "nvidia.yaml")
    assert find_nvidia_spec("none", str(d)) is None
    refresher.configure(CdiConfig(spec_dir=str(d), hook=refresher.hook))
    refresher.update(refresher.slices)
    doc = json.loads((d / "xpu.json").read_text())
    assert doc["containerEdits"]["mounts"][0]["hostPath"] == \
        "/usr/bin/nvidia-smi"
    assert doc["containerEdits"]["hooks"][0]["path"] == \
        "/usr/bin/nvidia-cdi-hook"
    # Changed on disk: read again.
    (d / "nvidia.yaml").unlink()
    (d / "nvidia.json").write_text(json.dumps(NVIDIA))
    refresher.update(refresher.slices)
    doc = json.loads((d / "xpu.json").read_text())
    assert doc["containerEdits"]["hooks"] == NVIDIA["containerEdits"]["hooks"]


def test_a_bad_nvidia_spec_is_left_out_with_one_warning(refresher, tmp_path,
                                                        caplog):
    bad = tmp_path / "nvidia.yaml"
    bad.write_text("kind: nvidia.com/gpu\ncontainerEdits:\n  mounts:\n"
                   "  - hostPath: /a\n")
    refresher.configure(CdiConfig(spec_dir=str(tmp_path / "cdi"),
                                  hook=refresher.hook,
                                  nvidia_spec=str(bad)))
    with caplog.at_level(logging.INFO, logger="xpu.cdi"):
        refresher.update(refresher.slices)
        refresher.update(refresher.slices, force=True)
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert warnings == [(f"CDI: NVIDIA's spec {bad} is not used: mounts[0] "
                        "has no hostPath or containerPath")]
    doc = json.loads((tmp_path / "cdi" / "xpu.json").read_text())
    assert "containerEdits" not in doc and len(doc["devices"]) == 1
    assert check_nvidia_edits({"hooks": [{"hookName": "prestart",
                                          "path": "/x", "timeout": "1"}]}) \
        == "hooks[0].timeout is not a whole number"


def test_the_api_ops(refresher):
    assert refresher.op_cdi_spec() == spec.build_spec(
        refresher.slices, refresher.options())
    # One slice, even one whose name CDI refuses (the runtime's case).
    refresher.slices.append(slice_view("odd-", 1, 4))
    one = refresher.op_cdi_spec(slice="odd-")
    assert [d["name"] for d in one["devices"]] == ["odd-"]
    refresher.slices.append(slice_view("p", state="pending",
                                       error="GPU 7 is missing"))
    with pytest.raises(ApiError) as e:
        refresher.op_cdi_spec(slice="p")
    assert e.value.code == "conflict"
    assert "slice 'p' is pending: GPU 7 is missing" in e.value.message
    with pytest.raises(ApiError) as e:
        refresher.op_cdi_spec(slice="nope")
    assert e.value.code == "not_found"
    r = refresher.op_cdi_refresh()   # "odd-" and "p" are no devices
    assert r == {"path": str(refresher.writer.path), "devices": 1,
                 "nvidia_spec": None}


def test_a_missing_hook_is_said_once(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="xpu.cdi"):
        Refresher(CdiConfig(spec_dir=str(tmp_path), hook="/nonexistent/h"),
                  "/s", list)
    assert [r.getMessage() for r in caplog.records] == [
        ("CDI: the hook /nonexistent/h does not exist: containers given a "
        "slice will fail to start (install it, or set hook in [cdi])")]


# -- the configuration --------------------------------------------------------------

def test_the_cdi_and_runtime_tables():
    from xpu import config
    c = config.parse("")
    assert c.cdi == CdiConfig("xpu.dev", "/var/run/cdi", "", "")
    assert (c.container_runtime.oci_runtime, c.container_runtime.socket) == \
        ("", "/run/xpu/xpud.sock")
    c = config.parse('[cdi]\nvendor = "example.com"\nspec_dir = "/etc/cdi"\n'
                     'hook = "/opt/h"\nnvidia_spec = "none"\n'
                     '[container_runtime]\noci_runtime = "runc"\n'
                     'socket = "/run/x.sock"\n')
    assert c.cdi == CdiConfig("example.com", "/etc/cdi", "/opt/h", "none")
    assert c.container_runtime == config.RuntimeConfig("runc", "/run/x.sock")
    assert c.container_runtime.host_memory_limit_bytes == 0  # none
    c = config.parse('[container_runtime]\nhost_memory = "16GiB"\n')
    assert c.container_runtime.host_memory_limit_bytes == 16 << 30
    c = config.parse('[container_runtime]\nhost_memory = 0\n')
    assert c.container_runtime.host_memory_limit_bytes == 0
    assert c.container_runtime.kubernetes is False
    c = config.parse('[container_runtime]\nkubernetes = true\n')
    assert c.container_runtime.kubernetes is True
    # kubelet's pod resources socket, by default where kubelet makes it
    assert c.container_runtime.pod_resources == \
        "/var/lib/kubelet/pod-resources/kubelet.sock"
    c = config.parse('[container_runtime]\npod_resources = "/run/k.sock"\n')
    assert c.container_runtime.pod_resources == "/run/k.sock"


@pytest.mark.parametrize("text, message", [
    ('[cdi]\nvendor = "-x"\n', ("/etc/xpu/xpud.toml:2: cdi.vendor: '-x' is "
     "not a CDI vendor name")),
    ('[cdi]\nvendor = "xpu.dev/"\n',
     "/etc/xpu/xpud.toml:2: cdi.vendor: 'xpu.dev/' is not"),
    ('[cdi]\n\nspec_dir = "cdi"\n', ("/etc/xpu/xpud.toml:3: cdi.spec_dir: "
     "'cdi' is not an absolute path")),
    ('[cdi]\nnvidia_spec = 1\n',
     "/etc/xpu/xpud.toml:2: cdi.nvidia_spec: 1 is not a string"),
    ('[cdi]\nvendr = "x"\n', ("/etc/xpu/xpud.toml:2: cdi.vendr: unknown key "
     "(known: vendor, spec_dir, hook, nvidia_spec)")),
    ('[container_runtime]\noci_runtime = "crun --x"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.oci_runtime: 'crun --x' "
     "is neither a program's "
     "name nor an absolute path")),
    ('[container_runtime]\nsocket = ""\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.socket: '' is not an "
     "absolute path")),
    ('[container_runtime]\nhost_memory = "16GB"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.host_memory: '16GB' is "
     "ambiguous")),
    ('[container_runtime]\nhost_memory = "512KiB"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.host_memory: 512KiB is below "
     "the smallest bound, 1MiB")),
    ('[container_runtime]\nhost_memory = -1\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.host_memory: -1 bytes is out "
     "of range")),
    ('[container_runtime]\nhost_memory = 1.5\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.host_memory: 1.5 is not a "
     "size")),
    ('[container_runtime]\nhost_mem = "1GiB"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.host_mem: unknown key "
     "(known: oci_runtime, socket, host_memory, kubernetes, "
     "pod_resources)")),
    ('[container_runtime]\nkubernetes = "yes"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.kubernetes: 'yes' is not "
      "true or false")),
    ('[container_runtime]\nkubernetes = 1\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.kubernetes: 1 is not true "
      "or false")),
    ('[container_runtime]\nkubernetes = "auto"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.kubernetes: 'auto' is not "
      "true or false")),
    ('[container_runtime]\npod_resources = "kubelet.sock"\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.pod_resources: "
      "'kubelet.sock' is not an absolute path")),
    ('[container_runtime]\npod_resources = ""\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.pod_resources: '' is not an "
      "absolute path")),
    ('[container_runtime]\npod_resources = 1\n',
     ("/etc/xpu/xpud.toml:2: container_runtime.pod_resources: 1 is not a "
      "string: write it in quotes")),
    (f'[container_runtime]\npod_resources = "/{"k" * 107}"\n',
     (f"/etc/xpu/xpud.toml:2: container_runtime.pod_resources: "
      f"'/{'k' * 107}' is 108 bytes long, longer than a UNIX socket's path "
      "may be (107)")),
])
def test_bad_cdi_and_runtime_settings(text, message):
    from xpu import config
    from xpu.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        config.parse(text)
    assert str(e.value).startswith(message), str(e.value)
