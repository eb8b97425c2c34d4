# SPDX-License-Identifier: Apache-2.0
"""The CDI spec's JSON schema, for the tests that validate xpud's spec.

The schema (schema.json and defs.json, draft-07, from the
cncf-tags/container-device-interface repository) is reference data kept
outside this repository: ../shared/reference/cdi beside the repository's
root, or in a directory above it (a worktree), or where $XPU_CDI_SCHEMA_DIR
says.  validator() is None when it is not there; tests then skip, saying
where it was looked for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = "XPU_CDI_SCHEMA_DIR"


def candidates() -> list[Path]:
    out = []
    if os.environ.get(ENV):
        out.append(Path(os.environ[ENV]))
    out += [p / "shared" / "reference" / "cdi" for p in REPO.parents]
    return out


def schema_dir() -> Path | None:
    for d in candidates():
        if (d / "schema.json").is_file() and (d / "defs.json").is_file():
            return d
    return None


def missing_reason() -> str:
    return ("the CDI schema (schema.json, defs.json) is in none of "
            + ", ".join(str(c) for c in candidates()[:3])
            + f"; set {ENV} to its directory")


def validator():
    """A jsonschema validator of CDI specs, or None without the schema."""
    d = schema_dir()
    if d is None:
        return None
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    schema = json.loads((d / "schema.json").read_text())
    defs = json.loads((d / "defs.json").read_text())
    registry = Registry().with_resource(
        "defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    return jsonschema.Draft7Validator(schema, registry=registry)


def errors(v, spec: dict) -> list[str]:
    return [f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in v.iter_errors(spec)]
