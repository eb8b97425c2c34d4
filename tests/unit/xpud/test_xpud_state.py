# SPDX-License-Identifier: Apache-2.0
"""xpu/state.py: the desired state on disk, written atomically; a corrupt
file is set aside and xpud starts from the configuration."""

import json
import logging
import os
from pathlib import Path

import pytest
from xpu import model, state
from xpu.errors import StateError
from xpu.sizes import GIB
from xpu.state import SliceRecord, State, StateStore
from xpud_fakes import UUID0

CLOCK = 1700000000.0  # 2023-11-14T22:13:20Z
STAMP = "20231114T221320Z"


def a_state():
    return State(
        slices=[SliceRecord(model.SliceSpec("a", UUID0, 8 * GIB, 250, 100,
                                            "high"), ("/jobs/a",))],
        config_bindings={"train": ("/jobs/b",)})


def test_round_trip(tmp_path):
    store = StateStore(str(tmp_path / "lib"))
    assert store.load() is None  # nothing saved yet
    store.save(a_state())
    assert store.load() == a_state()
    assert sorted(os.listdir(tmp_path / "lib")) == ["state.json"]
    doc = json.loads((tmp_path / "lib" / "state.json").read_text())
    assert doc["schema"] == state.SCHEMA
    assert doc["slices"][0]["memory_limit_bytes"] == 8 * GIB
    assert (tmp_path / "lib" / "state.json").stat().st_mode & 0o777 == 0o644


def test_host_memory_limit_round_trip(tmp_path):
    store = StateStore(str(tmp_path))
    bounded = State(slices=[
        SliceRecord(model.SliceSpec("a", UUID0, 8 * GIB, 250, 100, "high",
                                    host_memory_limit_bytes=16 * GIB)),
        SliceRecord(model.SliceSpec("b", UUID0, GIB))])
    store.save(bounded)
    assert store.load() == bounded
    a, b = json.loads((tmp_path / "state.json").read_text())["slices"]
    assert a["host_memory_limit_bytes"] == 16 * GIB
    assert "host_memory_limit_bytes" not in b  # no bound: as before


def test_a_file_without_host_memory_limits_loads():
    # As an xpud before host-memory bounds wrote it.
    text = json.dumps({"schema": 1, "slices": [
        {"name": "a", "gpu_uuid": UUID0, "memory_limit_bytes": GIB,
         "compute_share": 0, "weight": 100, "priority": "normal",
         "cgroups": []}]})
    [r] = state.decode(text).slices
    assert r.spec.host_memory_limit_bytes == 0


def test_save_is_write_fsync_rename_fsync_dir(tmp_path, monkeypatch):
    store = StateStore(str(tmp_path))
    store.save(State())
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        events.append(("fsync", os.path.basename(path)))
        real_fsync(fd)

    def replace(src, dst):
        # The new file is complete before it takes the old one's place.
        assert json.loads(Path(src).read_text()) == json.loads(state.encode(
            a_state()))
        events.append(("replace", os.path.basename(src)[:12],
                       os.path.basename(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(state.os, "fsync", fsync)
    monkeypatch.setattr(state.os, "replace", replace)
    store.save(a_state())
    assert events[0][0] == "fsync" and events[0][1].startswith(
        ".state.json.")
    assert events[1] == ("replace", ".state.json.", "state.json")
    assert events[2] == ("fsync", tmp_path.name)
    assert len(events) == 3


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    store = StateStore(str(tmp_path))
    store.save(a_state())
    before = (tmp_path / "state.json").read_bytes()

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state.os, "fsync", no_space)
    with pytest.raises(StateError) as e:
        store.save(State())
    assert str(e.value) == (f"cannot write {tmp_path}/state.json: No space "
                            "left on device")
    assert (tmp_path / "state.json").read_bytes() == before
    assert os.listdir(tmp_path) == ["state.json"]


def test_temporaries_of_a_crash_are_removed(tmp_path):
    (tmp_path / ".state.json.abc123.tmp").write_text("{")
    store = StateStore(str(tmp_path))
    assert store.load() is None
    assert os.listdir(tmp_path) == []


def _slice_with(**fields) -> bytes:
    """A state file of one valid slice with FIELDS added or replaced."""
    s = {"name": "a", "gpu_uuid": UUID0, "memory_limit_bytes": GIB,
         "compute_share": 0, "weight": 100, "priority": "normal",
         "cgroups": []}
    s.update(fields)
    return json.dumps({"schema": 1, "slices": [s]}).encode()


@pytest.mark.parametrize("content, why", [
    (b"{", "not JSON"),
    (b"", "not JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[]", "not a JSON object"),
    (b'{"slices": []}', "no schema number"),
    (b'{"schema": 1, "slices": {}}', "slices is not a list"),
    (b'{"schema": 1, "slices": [{"name": ".a"}]}',
     "slices[0]: '.a' is not a valid slice name"),
    (b'{"schema": 1, "slices": [{"name": "a", "gpu_uuid": 0}]}',
     "slices[0]: gpu_uuid is not a UUID"),
    (b'{"schema": 1, "config_bindings": {"a": "/x"}}',
     "config_bindings.a: cgroups must be a list"),
    (_slice_with(host_memory_limit_bytes=-1),
     "slices[0]: -1 is negative: give a number of bytes, or 0 for no bound"),
    (_slice_with(host_memory_limit_bytes="1GiB"),
     "slices[0]: '1GiB' is not a number of bytes"),
    (_slice_with(host_memory_limit_bytes=None),
     "slices[0]: None is not a number of bytes"),
])
def test_a_corrupt_file_is_set_aside_with_one_line(tmp_path, caplog,
                                                   content, why):
    (tmp_path / "state.json").write_bytes(content)
    store = StateStore(str(tmp_path), clock=lambda: CLOCK)
    with caplog.at_level(logging.WARNING, logger="xpu"):
        assert store.load() is None
    aside = tmp_path / f"state.json.corrupt-{STAMP}"
    assert aside.read_bytes() == content
    assert not (tmp_path / "state.json").exists()
    [record] = caplog.records
    msg = record.getMessage()
    assert msg.startswith(f"state file {tmp_path}/state.json is corrupt (")
    assert why in msg
    assert msg.endswith(f"moved it to state.json.corrupt-{STAMP}; starting "
                        "from the configuration")
    assert "\n" not in msg


def test_corrupt_files_do_not_overwrite_each_other(tmp_path):
    store = StateStore(str(tmp_path), clock=lambda: CLOCK)
    for _ in range(2):
        (tmp_path / "state.json").write_text("garbage")
        assert store.load() is None
    assert sorted(os.listdir(tmp_path)) == [
        f"state.json.corrupt-{STAMP}", f"state.json.corrupt-{STAMP}.2"]


def test_a_newer_schema_is_not_overwritten(tmp_path):
    (tmp_path / "state.json").write_text('{"schema": 2, "slices": []}')
    with pytest.raises(StateError) as e:
        StateStore(str(tmp_path)).load()
    assert str(e.value).startswith(f"{tmp_path}/state.json: schema 2 is "
                                   "newer than this xpud understands (1)")
    assert os.listdir(tmp_path) == ["state.json"]
