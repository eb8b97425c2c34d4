# SPDX-License-Identifier: Apache-2.0
"""Containers' state in xpu/service.py: transient bindings (a container's
cgroup, bound by its hook, dropped once it has no process left), ephemeral
slices (made by xpu-container-runtime with an owner tag, destroyed on
release, when their containers have ended, or when the runtime died before
binding one) and the listeners the CDI spec is written from.

cgroups are directories under a temporary root whose cgroup.events this
test writes, as the kernel would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from xpu.api import ApiError
from xpu.sizes import GIB

OWNER = "c0ffee" * 10


def populated(cgroup_root, rel, value):
    d = cgroup_root / rel.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.events").write_text(f"populated {int(value)}\nfrozen 0\n")


def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def state_doc(tmp_path):
    return json.loads((tmp_path / "state" / "state.json").read_text())


def test_an_ephemeral_slice_is_saved_with_its_owner(make_service, tmp_path):
    svc = make_service()
    s = svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB,
                      owner=OWNER, owner_pid=os.getpid())
    assert s["owner"] == OWNER and s["origin"] == "api"
    [saved] = state_doc(tmp_path)["slices"]
    assert saved["owner"]["tag"] == OWNER
    assert saved["owner"]["pid"] == os.getpid()
    assert saved["owner"]["bound"] is False
    # A slice without owner is saved as before containers.
    svc.op_create(name="plain", gpu=1, memory_limit_bytes=GIB)
    plain = next(r for r in state_doc(tmp_path)["slices"]
             if r["name"] == "plain")
    assert "owner" not in plain and "transient_cgroups" not in plain


@pytest.mark.parametrize("args, message", [
    ({"owner_pid": 1}, "owner_pid: give it with owner"),
    ({"owner": ""}, "owner: owner tag '' must be 1 to 256 printable"),
    ({"owner": "a\nb"}, "owner: owner tag 'a\\nb' must be"),
    ({"owner": OWNER, "owner_pid": 0}, "owner_pid: no process 0"),
])
def test_bad_owners_are_invalid(make_service, backend, args, message):
    svc = make_service()
    with pytest.raises(ApiError) as e:
        svc.op_create(name="x", gpu=0, memory_limit_bytes=GIB, **args)
    assert e.value.code == "invalid"
    assert e.value.message.startswith(message)
    assert backend.slices == {}


def test_a_dead_owner_pid_is_invalid(make_service):
    svc = make_service()
    pid = dead_pid()
    with pytest.raises(ApiError) as e:
        svc.op_create(name="x", gpu=0, memory_limit_bytes=GIB, owner=OWNER,
                      owner_pid=pid)
    assert e.value.message == f"owner_pid: no process {pid}"


def test_release_destroys_the_owners_slices_only(make_service, backend):
    svc = make_service()
    svc.op_create(name="e1", gpu=0, memory_limit_bytes=GIB, owner=OWNER)
    svc.op_create(name="e2", gpu=1, memory_limit_bytes=GIB, owner=OWNER)
    svc.op_create(name="other", gpu=0, memory_limit_bytes=GIB, owner="x")
    svc.op_create(name="plain", gpu=0, memory_limit_bytes=GIB)
    assert svc.op_release(owner=OWNER) == {"released": ["e1", "e2"],
                                           "pending": []}
    assert set(backend.slices) == {"other", "plain"}
    assert svc.op_release(owner=OWNER) == {"released": [], "pending": []}
    # A slice in use stays, released, until it is not.
    backend.busy.add("other")
    assert svc.op_release(owner="x") == {"released": [],
                                         "pending": ["other"]}
    assert "other" in backend.slices
    assert [s["name"] for s in svc.op_list()] == ["other", "plain"]
    backend.busy.clear()
    assert svc.reap() is True
    assert set(backend.slices) == {"plain"}


def test_a_transient_binding_goes_with_its_processes(make_service, backend,
                                                     cgroup_root):
    svc = make_service()
    svc.op_create(name="train", gpu=0, memory_limit_bytes=GIB)
    populated(cgroup_root, "/ctr/a", True)
    s = svc.op_bind(name="train", cgroup="/ctr/a", transient=True)
    assert (s["cgroups"], s["transient_cgroups"]) == ([], ["/ctr/a"])
    assert backend.slices["train"].cgroups == ("/ctr/a",)
    assert svc.reap_due() and svc.reap() is False
    # The container ended: its cgroup is empty (kept, or removed).
    populated(cgroup_root, "/ctr/a", False)
    assert svc.reap() is True
    assert svc.op_show(name="train")["transient_cgroups"] == []
    assert backend.slices["train"].cgroups == ()   # unbound in the kernel
    assert "train" in backend.slices               # not an ephemeral one
    assert not svc.reap_due()


def test_transient_bindings_conflict_as_others_do(make_service, cgroup_root):
    svc = make_service()
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    svc.op_create(name="b", gpu=1, memory_limit_bytes=GIB)
    populated(cgroup_root, "/ctr/a", True)
    svc.op_bind(name="a", cgroup="/ctr/a", transient=True)
    with pytest.raises(ApiError) as e:
        svc.op_bind(name="b", cgroup="/ctr/a", transient=True)
    assert e.value.code == "conflict"
    with pytest.raises(ApiError) as e:
        svc.op_bind(name="b", cgroup="/ctr/a")
    assert e.value.code == "conflict"
    # unbind takes either kind.
    svc.op_unbind(name="a", cgroup="/ctr/a")
    assert svc.op_show(name="a")["transient_cgroups"] == []


def test_an_ephemeral_slice_goes_when_its_container_ends(make_service,
                                                         backend,
                                                         cgroup_root,
                                                         tmp_path):
    svc = make_service()
    svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB, owner=OWNER,
                  owner_pid=os.getpid())
    populated(cgroup_root, "/ctr/1", True)
    svc.op_bind(name="ctr-1", cgroup="/ctr/1", transient=True)
    assert state_doc(tmp_path)["slices"][0]["owner"]["bound"] is True
    assert svc.reap() is False
    # A restart of xpud meanwhile changes nothing.
    svc = make_service()
    assert svc.op_show(name="ctr-1")["transient_cgroups"] == ["/ctr/1"]
    (cgroup_root / "ctr" / "1" / "cgroup.events").unlink()
    (cgroup_root / "ctr" / "1").rmdir()
    assert svc.reap() is True
    assert backend.slices == {} and svc.op_list() == []
    assert state_doc(tmp_path)["slices"] == []


def test_an_ephemeral_slice_goes_when_the_runtime_dies_first(make_service,
                                                            backend,
                                                            monkeypatch):
    svc = make_service()
    svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB, owner=OWNER,
                  owner_pid=os.getpid())
    assert svc.reap() is False                 # the runtime lives
    # The same pid, another process (its start time differs): gone.
    d = svc._desired["ctr-1"]
    monkeypatch.setitem(svc._desired, "ctr-1", d.__class__(
        **{**d.__dict__, "owner": d.owner.__class__(
            OWNER, os.getpid(), d.owner.pid_start + 1)}))
    assert svc.reap() is True
    assert backend.slices == {}


def test_an_ephemeral_slice_without_pid_waits_for_release(make_service,
                                                         backend):
    svc = make_service()
    svc.op_create(name="pod", gpu=0, memory_limit_bytes=GIB, owner=OWNER)
    assert svc.reap() is False and "pod" in backend.slices


def test_ephemeral_slices_left_by_a_stopped_xpud_are_reaped_at_start(
        make_service, backend, cgroup_root):
    svc = make_service()
    populated(cgroup_root, "/ctr/1", True)
    svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB, owner=OWNER)
    svc.op_bind(name="ctr-1", cgroup="/ctr/1", transient=True)
    populated(cgroup_root, "/ctr/1", False)    # ended while xpud was down
    svc = make_service()
    assert svc.op_list() == [] and backend.slices == {}


def test_a_busy_ephemeral_slice_is_said_once_and_retried(make_service,
                                                        backend, caplog,
                                                        cgroup_root):
    svc = make_service()
    populated(cgroup_root, "/ctr/1", True)
    svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB, owner=OWNER)
    svc.op_bind(name="ctr-1", cgroup="/ctr/1", transient=True)
    populated(cgroup_root, "/ctr/1", False)
    backend.busy.add("ctr-1")
    svc.reap()
    svc.reap()
    said = [r.getMessage() for r in caplog.records
            if "stays while it is in use" in r.getMessage()]
    assert len(said) == 1
    backend.busy.clear()
    assert svc.reap() is True and backend.slices == {}


def test_listeners_hear_every_change(make_service, cgroup_root):
    svc = make_service()
    heard = []
    svc.add_listener(lambda views, force: heard.append(
        ([v["name"] for v in views], force)))
    svc.op_create(name="a", gpu=0, memory_limit_bytes=GIB)
    svc.op_set(name="a", memory_limit_bytes=2 * GIB)
    svc.reconcile()
    svc.op_destroy(name="a")
    assert heard == [(["a"], True), (["a"], True), (["a"], False),
                     ([], True)]
    # A failing listener does not fail the change.
    svc.add_listener(lambda views, force: 1 / 0)
    svc.op_create(name="b", gpu=0, memory_limit_bytes=GIB)
    assert heard[-1] == (["b"], True)


def test_the_state_file_keeps_owners_and_transient_bindings(tmp_path):
    from xpu import model, state
    rec = state.SliceRecord(
        model.SliceSpec("ctr-1", "GPU-00000000-1111-2222-3333-444444444444",
                        GIB),
        transient=("/ctr/1",), owner=model.Owner(OWNER, 12, 345, True))
    doc = state.State(slices=[rec], transient_bindings={"train": ("/c/2",)})
    back = state.decode(state.encode(doc))
    assert back.slices == [rec]
    assert back.transient_bindings == {"train": ("/c/2",)}
    # A malformed owner makes the file corrupt (set aside at start).
    bad = json.loads(state.encode(doc))
    bad["slices"][0]["owner"]["tag"] = 5
    with pytest.raises(state._Corrupt):
        state.decode(json.dumps(bad))
    bad["slices"][0]["owner"] = {"tag": "x", "bound": "yes"}
    with pytest.raises(state._Corrupt):
        state.decode(json.dumps(bad))
