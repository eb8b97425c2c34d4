# SPDX-License-Identifier: Apache-2.0
"""Writing a CDI spec file atomically: a runtime that reads the directory
at any moment sees the old spec or the new one, never a part of one.

A temporary file in the same directory (a name the CDI libraries skip: it
does not end in .json or .yaml), written, fsync'ed, renamed over the spec,
then the directory fsync'ed so that the rename lasts.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..errors import XpuError
from . import SPEC_FILE


class SpecWriteError(XpuError):
    pass


def encode(spec: dict) -> bytes:
    return (json.dumps(spec, indent=2) + "\n").encode("utf-8")


class SpecWriter:
    """The spec file NAME in DIRECTORY (made if missing, mode 0755)."""

    def __init__(self, directory: str, name: str = SPEC_FILE):
        self.directory = Path(directory)
        self.path = self.directory / name
        self._prefix = f".{name}."

    def write(self, spec: dict) -> None:
        data = encode(spec)
        try:
            self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=self._prefix, suffix=".tmp",
                                       dir=self.directory)
        except OSError as e:
            raise SpecWriteError(f"cannot write in {self.directory}: "
                                 f"{e.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fchmod(f.fileno(), 0o644)
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise SpecWriteError(f"cannot write {self.path}: "
                                 f"{e.strerror}") from None
        self._sync_directory()

    def _sync_directory(self) -> None:
        try:
            dfd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            raise SpecWriteError(f"cannot sync {self.directory}: "
                                 f"{e.strerror}") from None

    def remove(self) -> bool:
        """Remove the spec file; False when there was none."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise SpecWriteError(f"cannot remove {self.path}: "
                                 f"{e.strerror}") from None
        self._sync_directory()
        return True

    def remove_stale_temporaries(self) -> None:
        """Temporaries left by a crash between writing and renaming."""
        try:
            for p in self.directory.glob(self._prefix + "*.tmp"):
                p.unlink()
        except OSError:
            pass

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:
            return None
