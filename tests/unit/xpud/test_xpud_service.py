# SPDX-License-Identifier: Apache-2.0
"""xpu/service.py: desired state, reconciling it into the kernel (here the
in-memory FakeBackend), and the ops of the API."""

import dataclasses
import json
import logging

import pytest
from xpu import config, inventory
from xpu.api import ApiError
from xpu.backend import NOT_YET, BackendError, NullBackend
from xpu.service import Service
from xpu.sizes import GIB, MIB
from xpu.state import StateStore
from xpud_fakes import (
    KINDS,
    MAX_DOORBELL_FILES,
    MAX_HANDLES,
    MAX_OS_EVENTS,
    MAX_RECORDS,
    UUID0,
    UUID1,
    FakeBackend,
)

CONFIG = """\
[[gpu]]
gpu = 1
mode = "exclusive"

[[slice]]
name = "train"
gpu = 1
memory = "8GiB"
compute = 50
"""


def state_doc(tmp_path):
    return json.loads((tmp_path / "state" / "state.json").read_text())


def test_start_creates_configured_slices_and_gpu_settings(make_service,
                                                          backend, tmp_path):
    svc = make_service(CONFIG)
    [k] = backend.slices.values()
    assert (k.spec.name, k.spec.gpu_uuid, k.spec.memory_limit_bytes,
            k.spec.compute_share) == ("train", UUID1, 8 * GIB, 500)
    assert k.nodes == ("/dev/xpu0", "/dev/xpu0-ctl")
    assert backend.settings[UUID1].mode == "exclusive"
    assert backend.settings[UUID0].mode == "shared"
    [s] = svc.op_list()
    assert s["state"] == "ready" and s["origin"] == "config"
    assert s["defined_in"] == f"{tmp_path}/xpud.toml:5"
    # Configuration slices are the file's: only bindings are saved.
    assert state_doc(tmp_path)["slices"] == []


def test_a_restart_leaves_the_kernel_alone(make_service, backend):
    svc = make_service(CONFIG)
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    before = dict(backend.slices)
    backend.calls.clear()
    make_service(CONFIG)  # xpud restarted: same state dir, same kernel
    assert backend.changes() == []
    assert backend.slices == before


def test_create_saves_then_applies(make_service, backend, tmp_path):
    svc = make_service()
    s = svc.op_create(name="a", gpu=UUID1, memory_limit_bytes=2 * GIB,
                      compute_share=12.5, weight=300, priority="low")
    assert s == {
        "name": "a", "origin": "api", "gpu_uuid": UUID1, "gpu_index": 1,
        "gpu_minor": 1, "memory_limit_bytes": 2 * GIB,
        "memory_used_bytes": 0, "host_memory_limit_bytes": 0,
        "host_memory_used_bytes": 0, "rm_handles": 0,
        "rm_handles_limit": MAX_HANDLES, "os_events": 0,
        "os_events_limit": MAX_OS_EVENTS,
        "records": dict.fromkeys(KINDS, 0), "records_limit": MAX_RECORDS,
        "doorbell_files": 0, "doorbell_files_limit": MAX_DOORBELL_FILES,
        "compute_share": 12.5, "weight": 300,
        "priority": "low", "cgroups": [], "transient_cgroups": [],
        "owner": None, "nodes": ["/dev/xpu0", "/dev/xpu0-ctl"],
        "id": None, "gpu_node": "/dev/xpu0", "ctl_node": "/dev/xpu0-ctl",
        "uvm_node": None, "processes": None, "denied_allocs": None, "compute_obtained": None,
        "state": "ready", "error": None, "defined_in": None}
    [saved] = state_doc(tmp_path)["slices"]
    assert saved["name"] == "a" and saved["compute_share"] == 125
    assert [c[0] for c in backend.changes()] == ["set_gpu", "set_gpu",
                                                 "create_slice", "make_nodes"]


def test_a_refused_create_is_undone(make_service, backend, tmp_path):
    svc = make_service()
    backend.fail["make_nodes"] = BackendError("mknod /dev/xpu0: read-only")
    with pytest.raises(ApiError) as e:
        svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    assert (e.value.code, e.value.message) == ("backend",
                                               "mknod /dev/xpu0: read-only")
    assert backend.slices == {}  # the half-made slice went
    assert svc.op_list() == []
    assert state_doc(tmp_path)["slices"] == []


@pytest.mark.parametrize("args, code, message", [
    ({"name": "a/b", "gpu": 0, "memory_limit_bytes": GIB}, "invalid",
     ("name: 'a/b' is not a valid slice name: use 1 to 31 letters, digits, "
      "'_', '.' and '-', not starting with '.' or '-'")),
    ({"name": "a", "gpu": "GPU-1", "memory_limit_bytes": GIB}, "invalid",
     "gpu: 'GPU-1' is not a GPU"),
    ({"name": "a", "gpu": 7, "memory_limit_bytes": GIB}, "not_found",
     "no GPU 7: this node has GPUs 0 to 1 (xpuctl gpus lists them)"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": 512}, "invalid",
     "memory_limit_bytes: 512B is below the smallest limit, 1MiB"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB, "compute_share": 0.05},
     "invalid", "compute_share: 0.05% is finer than the 0.1 % steps"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB, "weight": 0}, "invalid",
     "weight: 0 is not between 1 and 10000"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB, "priority": "max"},
     "invalid", "priority: 'max' is not one of low, normal, high"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB,
      "host_memory_limit_bytes": -1}, "invalid",
     ("host_memory_limit_bytes: -1 is negative: give a number of bytes, or 0 "
      "for no bound")),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB,
      "host_memory_limit_bytes": 512}, "invalid",
     ("host_memory_limit_bytes: 512B is below the smallest bound, 1MiB (0 is "
      "no bound")),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB,
      "host_memory_limit_bytes": 1.5 * GIB}, "invalid",
     "host_memory_limit_bytes: 1610612736.0 is not a number of bytes"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": GIB,
      "host_memory_limit_bytes": True}, "invalid",
     "host_memory_limit_bytes: True is not a number of bytes"),
    ({"name": "a", "gpu": 0, "memory_limit_bytes": 81 * GIB}, "conflict",
     (f"GPU 0 ({UUID0}) has 80GiB of 80GiB not given to slices; 'a' asks "
      "for 81GiB")),
])
def test_create_checks(make_service, backend, args, code, message):
    svc = make_service()
    with pytest.raises(ApiError) as e:
        svc.op_create(**args)
    assert e.value.code == code
    assert e.value.message.startswith(message), e.value.message
    assert backend.slices == {}


def test_gpus_are_not_over_committed(make_service):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=60 * GIB,
                  compute_share=70)
    with pytest.raises(ApiError) as e:
        svc.op_create(name="b", gpu=0, memory_limit_bytes=30 * GIB)
    assert e.value.message == (f"GPU 0 ({UUID0}) has 20GiB of 80GiB not "
                               "given to slices; 'b' asks for 30GiB")
    with pytest.raises(ApiError) as e:
        svc.op_create(name="b", gpu=0, memory_limit_bytes=GIB,
                      compute_share=30.1)
    assert e.value.message == (f"compute shares on GPU 0 ({UUID0}) would "
                               "add up to 100.1%; 30% is left")
    svc.op_create(name="b", gpu=0, memory_limit_bytes=20 * GIB,
                  compute_share=30)
    svc.op_create(name="c", gpu=1, memory_limit_bytes=80 * GIB,
                  compute_share=100)
    with pytest.raises(ApiError, match="would add up to 100.1%"):
        svc.op_set(name="a", compute_share=70.1)
    svc.op_set(name="a", memory_limit_bytes=59 * GIB)


def test_exists(make_service):
    svc = make_service(CONFIG)
    with pytest.raises(ApiError) as e:
        svc.op_create(name="train", gpu=0, memory_limit_bytes=GIB)
    assert (e.value.code, e.value.message) == (
        "exists", "slice 'train' exists already (xpuctl show train)")


def test_set_changes_in_place(make_service, backend, tmp_path):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    backend.calls.clear()
    s = svc.op_set(name="a", memory_limit_bytes=2 * GIB, priority="high")
    assert (s["memory_limit_bytes"], s["priority"]) == (2 * GIB, "high")
    assert [c[0] for c in backend.changes()] == ["update_slice"]
    assert state_doc(tmp_path)["slices"][0]["memory_limit_bytes"] == 2 * GIB
    with pytest.raises(ApiError, match="^set: nothing to change"):
        svc.op_set(name="a")


def test_rm_handles_and_their_bound(make_service, backend):
    svc = make_service()
    s = svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    assert (s["rm_handles"], s["rm_handles_limit"]) == (0, MAX_HANDLES)
    # What the kernel counts is shown, by show and list, and by top.
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              rm_handles=57)
    assert (svc.op_show("a")["rm_handles"],
            svc.op_show("a")["rm_handles_limit"]) == (57, MAX_HANDLES)
    assert [v["rm_handles"] for v in svc.op_list()] == [57]
    [t] = svc.op_top()["slices"]
    assert (t["rm_handles"], t["rm_handles_limit"]) == (57, MAX_HANDLES)
    # The bound cannot be read (an xpu.ko without max_handles): null.
    backend.max_handles = None
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              rm_handles_limit=None)
    assert svc.op_show("a")["rm_handles_limit"] is None
    [t] = svc.op_top()["slices"]
    assert (t["rm_handles"], t["rm_handles_limit"]) == (57, None)


def test_records_and_doorbell_files_and_their_bounds(make_service, backend):
    """show, list and top give the records by kind and the doorbell files
    the kernel counts, with xpu.ko's bounds; null where not known."""
    svc = make_service()
    s = svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    assert (s["records"], s["records_limit"]) == (dict.fromkeys(KINDS, 0),
                                                  MAX_RECORDS)
    counts = dict(zip(KINDS, range(1, 7)))
    backend.slices["a"] = dataclasses.replace(
        backend.slices["a"], records=counts, doorbell_files=7)
    got = svc.op_show("a")
    assert (got["records"], got["doorbell_files"],
            got["doorbell_files_limit"]) == (counts, 7, MAX_DOORBELL_FILES)
    assert [v["records"] for v in svc.op_list()] == [counts]
    [t] = svc.op_top()["slices"]
    assert (t["records"], t["records_limit"], t["doorbell_files"],
            t["doorbell_files_limit"]) == (counts, MAX_RECORDS, 7,
                                           MAX_DOORBELL_FILES)
    # an xpu.ko that does not count them, and bounds that cannot be read
    backend.max_records = backend.max_doorbell_files = None
    backend.slices["a"] = dataclasses.replace(
        backend.slices["a"], records=None, doorbell_files=None,
        records_limit=None, doorbell_files_limit=None)
    got = svc.op_show("a")
    assert [got[k] for k in ("records", "records_limit", "doorbell_files",
                             "doorbell_files_limit")] == [None] * 4
    [t] = svc.op_top()["slices"]
    assert [t[k] for k in ("records", "records_limit", "doorbell_files",
                           "doorbell_files_limit")] == [None] * 4


def test_os_events_and_their_bound(make_service, backend):
    svc = make_service()
    s = svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    assert (s["os_events"], s["os_events_limit"]) == (0, MAX_OS_EVENTS)
    # What the kernel counts is shown, by show and list, and by top.
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              os_events=9)
    assert (svc.op_show("a")["os_events"],
            svc.op_show("a")["os_events_limit"]) == (9, MAX_OS_EVENTS)
    assert [v["os_events"] for v in svc.op_list()] == [9]
    [t] = svc.op_top()["slices"]
    assert (t["os_events"], t["os_events_limit"]) == (9, MAX_OS_EVENTS)
    # The bound cannot be read (an xpu.ko without max_os_events): null;
    # the other bound is its own.
    backend.max_os_events = None
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              os_events_limit=None)
    assert svc.op_show("a")["os_events_limit"] is None
    assert svc.op_show("a")["rm_handles_limit"] == MAX_HANDLES
    [t] = svc.op_top()["slices"]
    assert (t["os_events"], t["os_events_limit"]) == (9, None)
    assert t["rm_handles_limit"] == MAX_HANDLES


def test_a_pending_slice_has_no_rm_handles(make_service, backend):
    svc = make_service(CONFIG.replace("gpu = 1\nmemory", "gpu = 5\nmemory"))
    [s] = svc.op_list()
    assert s["state"] == "pending"
    assert (s["rm_handles"], s["rm_handles_limit"]) == (None, None)
    assert (s["os_events"], s["os_events_limit"]) == (None, None)


def test_host_memory_limit(make_service, backend, tmp_path):
    svc = make_service()
    s = svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB,
                      host_memory_limit_bytes=4 * GIB)
    assert (s["host_memory_limit_bytes"], s["host_memory_used_bytes"]) == (
        4 * GIB, 0)
    assert backend.slices["a"].spec.host_memory_limit_bytes == 4 * GIB
    [saved] = state_doc(tmp_path)["slices"]
    assert saved["host_memory_limit_bytes"] == 4 * GIB
    # What the kernel says the slice holds is shown.
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              host_memory_used_bytes=3 * MIB)
    assert svc.op_show("a")["host_memory_used_bytes"] == 3 * MIB
    # A change of the bound alone is a change in place.
    backend.calls.clear()
    s = svc.op_set(name="a", host_memory_limit_bytes=2 * GIB)
    assert s["host_memory_limit_bytes"] == 2 * GIB
    assert s["memory_limit_bytes"] == GIB
    assert [c[0] for c in backend.changes()] == ["update_slice"]
    assert backend.slices["a"].spec.host_memory_limit_bytes == 2 * GIB
    assert state_doc(tmp_path)["slices"][0]["host_memory_limit_bytes"] == \
        2 * GIB
    # Below what the slice holds: busy, and nothing changed anywhere.
    with pytest.raises(ApiError) as e:
        svc.op_set(name="a", host_memory_limit_bytes=2 * MIB)
    assert e.value.code == "busy"
    assert "host-memory bound" in e.value.message
    assert svc.op_show("a")["host_memory_limit_bytes"] == 2 * GIB
    assert backend.slices["a"].spec.host_memory_limit_bytes == 2 * GIB
    assert state_doc(tmp_path)["slices"][0]["host_memory_limit_bytes"] == \
        2 * GIB
    with pytest.raises(ApiError) as e:
        svc.op_set(name="a", host_memory_limit_bytes=-5)
    assert (e.value.code, e.value.message) == (
        "invalid", ("host_memory_limit_bytes: -5 is negative: give a number "
                    "of bytes, or 0 for no bound"))
    # 0 takes the bound away; the state file then has no such key.
    svc.op_set(name="a", host_memory_limit_bytes=0)
    assert backend.slices["a"].spec.host_memory_limit_bytes == 0
    assert "host_memory_limit_bytes" not in state_doc(tmp_path)["slices"][0]
    # A restart brings the bound back, and changes nothing in the kernel.
    svc.op_set(name="a", host_memory_limit_bytes=GIB)
    backend.calls.clear()
    svc = make_service()
    assert backend.changes() == []
    assert svc.op_show("a")["host_memory_limit_bytes"] == GIB


def test_host_memory_limit_of_the_configuration(make_service, backend,
                                                tmp_path):
    svc = make_service(CONFIG + 'host_memory = "16GiB"\n')
    assert backend.slices["train"].spec.host_memory_limit_bytes == 16 * GIB
    [s] = svc.op_list()
    assert s["host_memory_limit_bytes"] == 16 * GIB
    backend.calls.clear()
    svc.reload(config.parse(CONFIG, str(tmp_path / "xpud.toml")))
    assert [c[0] for c in backend.changes()] == ["update_slice"]
    assert backend.slices["train"].spec.host_memory_limit_bytes == 0


def test_kernel_slices_are_adopted_with_their_host_memory_limit(
        make_service, backend, tmp_path):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB,
                  host_memory_limit_bytes=3 * GIB)
    (tmp_path / "state" / "state.json").unlink()
    backend.calls.clear()
    svc = make_service()
    assert backend.changes() == []
    assert svc.op_show("a")["host_memory_limit_bytes"] == 3 * GIB
    assert state_doc(tmp_path)["slices"][0]["host_memory_limit_bytes"] == \
        3 * GIB


def test_configuration_slices_are_changed_in_the_file(make_service, tmp_path):
    svc = make_service(CONFIG)
    for call in (lambda: svc.op_set(name="train", weight=5),
                 lambda: svc.op_destroy(name="train")):
        with pytest.raises(ApiError) as e:
            call()
        assert e.value.code == "conflict"
        assert e.value.message.startswith(
            f"slice 'train' is defined in the configuration ({tmp_path}/"
            "xpud.toml:5): ")
        assert e.value.message.endswith(", then reload xpud (systemctl "
                                        "reload xpud)")


def test_destroy_a_busy_slice(make_service, backend, tmp_path):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    backend.busy.add("a")
    with pytest.raises(ApiError) as e:
        svc.op_destroy(name="a")
    assert (e.value.code, e.value.message) == (
        "busy", "slice 'a' has processes: stop them or use --force")
    assert [s["name"] for s in svc.op_list()] == ["a"]
    assert [s["name"] for s in state_doc(tmp_path)["slices"]] == ["a"]
    assert svc.op_destroy(name="a", force=True) == {"name": "a"}
    assert backend.slices == {} and svc.op_list() == []
    assert state_doc(tmp_path)["slices"] == []
    with pytest.raises(ApiError) as e:
        svc.op_destroy(name="a")
    assert (e.value.code, e.value.message) == (
        "not_found", "no slice 'a' (xpuctl list shows the slices)")


def test_an_intent_saved_before_a_crash_is_applied_at_start(make_service,
                                                            backend):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    backend.slices.clear()  # xpud died between the save and the kernel
    backend.minors.clear()
    make_service()
    assert list(backend.slices) == ["a"]


def test_without_saved_state_kernel_slices_are_adopted(make_service, backend,
                                                       tmp_path, caplog):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    (tmp_path / "state" / "state.json").write_text("{corrupt")
    backend.calls.clear()
    with caplog.at_level(logging.INFO, logger="xpu"):
        svc = make_service(CONFIG)
    assert backend.changes()[-2:] == [("create_slice", backend.slices[
        "train"].spec), ("make_nodes", "train")]
    assert "destroy_slice" not in [c[0] for c in backend.changes()]
    assert [(s["name"], s["origin"]) for s in svc.op_list()] == [
        ("a", "api"), ("train", "config")]
    assert [s["name"] for s in state_doc(tmp_path)["slices"]] == ["a"]
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("state file ") and "is corrupt" in m
               for m in msgs)
    assert "adopted slice 'a' from xpu.ko (no saved state named it)" in msgs


def test_with_saved_state_unwanted_kernel_slices_go(make_service, backend,
                                                    caplog):
    make_service(CONFIG)
    backend.busy.add("train")
    with caplog.at_level(logging.WARNING, logger="xpu"):
        svc = make_service("")  # train left the configuration
    [s] = svc.op_list()
    assert (s["name"], s["origin"], s["state"]) == ("train", "kernel",
                                                    "removing")
    assert s["error"] == "slice 'train' has processes: stop them or use " \
                         "--force"
    assert [r.getMessage() for r in caplog.records] == [
        ("slice 'train' is no longer wanted but stays: slice 'train' has "
         "processes: stop them or use --force")]
    svc.reconcile()
    assert len(caplog.records) == 1  # said once, not at every reconcile
    backend.busy.clear()
    svc.reconcile()
    assert svc.op_list() == [] and backend.slices == {}


def test_reload(make_service, backend, tmp_path, caplog):
    svc = make_service(CONFIG)
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    new = config.parse(CONFIG.replace('"8GiB"', '"4GiB"')
                       + '\n[[slice]]\nname = "a"\ngpu = 0\nmemory = "1GiB"\n'
                       + '\n[[slice]]\nname = "b"\ngpu = 0\nmemory = "1GiB"\n',
                       str(tmp_path / "xpud.toml"))
    with caplog.at_level(logging.WARNING, logger="xpu"):
        summary = svc.reload(new)
    assert summary == "3 slices ready, 2 GPUs"
    assert backend.slices["train"].spec.memory_limit_bytes == 4 * GIB
    assert "b" in backend.slices
    assert [(s["name"], s["origin"]) for s in svc.op_list()] == [
        ("a", "api"), ("b", "config"), ("train", "config")]
    assert [r.getMessage() for r in caplog.records] == [
        (f"{tmp_path}/xpud.toml:11: slice[1]: the name 'a' is taken by a "
         "slice made with xpuctl create; this entry is ignored (destroy that "
         "slice, or rename the entry)")]
    svc.reload(config.parse(""))
    assert list(backend.slices) == ["a"]


def test_a_missing_gpu_leaves_a_slice_pending(make_service, backend):
    svc = make_service(CONFIG.replace("gpu = 1\nmemory", "gpu = 5\nmemory"))
    [s] = svc.op_list()
    assert (s["state"], s["gpu_index"], s["gpu_uuid"]) == ("pending", 5, None)
    assert s["error"] == ("no GPU 5: this node has GPUs 0 to 1 (xpuctl gpus "
                          "lists them)")
    assert backend.slices == {}


def test_gpus_view(make_service, backend):
    backend.orphaned[1] = 32 * MIB     # a destroyed slice's, kept outside
    svc = make_service(CONFIG)
    g0, g1 = svc.op_gpus()
    assert g1 == {
        "index": 1, "gpu_uuid": UUID1, "gpu_minor": 1, "name": "NVIDIA H200",
        "bus_id": "0000:19:00.0", "memory_total_bytes": 80 * GIB,
        "mode": "exclusive", "policy": "weighted", "period_ms": 20,
        "slices": 1, "memory_assigned_bytes": 8 * GIB,
        "compute_assigned": 50, "state": "ready", "error": None,
        "memory_used_bytes": None, "memory_used_outside_slices_bytes": None,
        "memory_orphaned_bytes": 32 * MIB, "channel_ids": None}
    assert (g0["slices"], g0["mode"], g0["memory_orphaned_bytes"]) == (
        0, "shared", 0)


def test_gpus_view_channel_ids(make_service, backend):
    """The channel ids xpu.ko shares out on a GPU, as the kernel says."""
    backend.channel_ids = {UUID1: 2048}
    svc = make_service(CONFIG)
    g0, g1 = svc.op_gpus()
    assert (g0["channel_ids"], g1["channel_ids"]) == (None, 2048)


def test_gpus_view_memory_used_outside_slices(make_service, backend):
    # NVML counts what every process holds; what the slices hold is theirs.
    import dataclasses
    backend.gpus[0] = dataclasses.replace(backend.gpus[0],
                                          memory_used_bytes=5 * GIB)
    svc = make_service()
    svc.op_create("a", 0, 4 * GIB)
    backend.slices["a"] = dataclasses.replace(backend.slices["a"],
                                              memory_used_bytes=3 * GIB)
    g0, g1 = svc.op_gpus()
    assert (g0["memory_used_bytes"],
            g0["memory_used_outside_slices_bytes"]) == (5 * GIB, 2 * GIB)
    assert g1["memory_used_outside_slices_bytes"] is None



def test_bind_and_unbind(make_service, backend, cgroup_root, tmp_path):
    svc = make_service(CONFIG)
    s = svc.op_bind(name="train", cgroup=f"{cgroup_root}/jobs/a")
    assert s["cgroups"] == ["/jobs/a"]
    svc.op_bind(name="train", cgroup="/jobs/b")
    svc.op_bind(name="train", cgroup="/jobs/b")  # already: nothing to do
    assert backend.slices["train"].cgroups == ("/jobs/a", "/jobs/b")
    assert state_doc(tmp_path)["config_bindings"] == {
        "train": ["/jobs/a", "/jobs/b"]}
    with pytest.raises(ApiError) as e:
        svc.op_bind(name="train", cgroup="/jobs/c")
    assert (e.value.code, e.value.message) == (
        "not_found", (f"cgroup /jobs/c does not exist (no directory "
        f"{cgroup_root}/jobs/c)"))
    for bad in ("jobs/a", "/jobs/../a", "/", str(cgroup_root)):
        with pytest.raises(ApiError) as e:
            svc.op_bind(name="train", cgroup=bad)
        assert e.value.code == "invalid"
    svc.op_create(name="other", gpu=0, memory_limit_bytes=GIB)
    with pytest.raises(ApiError) as e:
        svc.op_bind(name="other", cgroup="/jobs/a")
    assert (e.value.code, e.value.message) == (
        "conflict", ("cgroup /jobs/a is bound to slice 'train'; a cgroup "
        "belongs to one slice at most (xpuctl unbind train --cgroup /jobs/a)"))
    svc.op_unbind(name="train", cgroup="/jobs/a")
    assert backend.slices["train"].cgroups == ("/jobs/b",)
    with pytest.raises(ApiError, match="is not bound to cgroup /jobs/a"):
        svc.op_unbind(name="train", cgroup="/jobs/a")
    # Bindings survive a restart, and the kernel is not touched again.
    backend.calls.clear()
    svc = make_service(CONFIG)
    assert svc.op_show(name="train")["cgroups"] == ["/jobs/b"]
    assert backend.changes() == []


def test_version(make_service):
    svc = make_service()
    assert svc.op_version() == {
        "xpud": __import__("xpu").__version__, "api": 1, "kernel": "0.1.0",
        "kernel_api": 1, "kernel_error": None, "uvm_interposed": None,
        "uvm_retentions_seen": None, "uvm_retains_unwatched": None,
        "call_pages_guarded": None}
    svc.backend.uvm_retains_unwatched = lambda: 7
    assert svc.op_version()["uvm_retains_unwatched"] == 7
    svc.backend.call_pages_guarded = lambda: False
    assert svc.op_version()["call_pages_guarded"] is False
    svc.backend.uvm_interposed = lambda: False
    assert svc.op_version()["uvm_interposed"] is False
    svc.backend.uvm_retentions_seen = lambda: True
    assert svc.op_version()["uvm_retentions_seen"] is True
    # not asked of a kernel that cannot say its version
    svc.backend.fail["kernel_version"] = BackendError("no xpu.ko")
    v = svc.op_version()
    assert (v["kernel"], v["uvm_retentions_seen"]) == (None, None)


def test_with_the_null_backend(tmp_path, caplog):
    gpus = FakeBackend().gpus
    inv = inventory.Inventory([type("S", (), {
        "name": "test", "unavailable": "", "list": lambda self: gpus})()])
    backend = NullBackend(inv, device=str(tmp_path / "xpuctl"))
    cfg = config.parse(CONFIG, "xpud.toml")
    svc = Service(backend, StateStore(str(tmp_path / "state")), cfg)
    with caplog.at_level(logging.WARNING, logger="xpu"):
        assert svc.start() == "0 slices ready, 1 pending, 2 GPUs"
    [s] = svc.op_list()
    assert (s["state"], s["error"]) == ("pending", NOT_YET)
    assert [g["gpu_uuid"] for g in svc.op_gpus()] == [UUID0, UUID1]
    with pytest.raises(ApiError) as e:
        svc.op_create(name="a", gpu=0, memory_limit_bytes=512 * MIB)
    assert (e.value.code, e.value.message) == ("unsupported", NOT_YET)
    assert [x["name"] for x in svc.op_list()] == ["train"]
    v = svc.op_version()
    assert v["kernel"] is None
    assert v["kernel_error"] == (f"{tmp_path}/xpuctl does not exist: is "
                                 "xpu.ko loaded?")
    msgs = [r.getMessage() for r in caplog.records]
    assert f"slice 'train' is pending: {NOT_YET}" in msgs
