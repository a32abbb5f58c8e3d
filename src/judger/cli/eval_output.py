"""Whose ``judger eval -o`` file is it: a sidecar that says which run wrote it.

``judger eval -o scored.jsonl`` resumes from what an earlier, interrupted run appended there, and
rewrites the file to its complete groups. That is right only when the earlier run is this run: the
same input file, model, sampling parameters and ``n``. ``scored.jsonl.meta.json`` records them when
the run starts; a rerun resumes only when they match. A file without a sidecar (not written by
``judger eval``) or with another run's is refused, naming what differs, unless ``--overwrite``
(which deletes it and starts over).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from judger.core.errors import ConfigError

SIDECAR_SUFFIX = ".meta.json"
_FORMAT = 1


class OutputConflict(ConfigError):
    """``-o`` names a file this run must not resume from or overwrite."""


def sidecar_path(output: Path) -> Path:
    return output.with_name(output.name + SIDECAR_SUFFIX)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_identity(
    input_path: str | Path, model: str | None, sampling: dict[str, Any], n: int, endpoint: str
) -> dict[str, Any]:
    """What decides the samples a run generates (``model`` None: whatever the server serves,
    checked once it is known: :func:`check_served_model`)."""
    return {
        "input_sha256": file_sha256(Path(input_path)),
        "model": model,
        "sampling": dict(sorted(sampling.items())),
        "n": n,
        "endpoint": endpoint,
    }


def _write(side: Path, record: dict[str, Any]) -> None:
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, side)


def _differences(recorded: dict[str, Any], identity: dict[str, Any]) -> list[str]:
    out = []
    for key, now in identity.items():
        before = recorded.get(key)
        if key == "model" and now is None:
            continue  # not asked for: compared with the served model once it is known
        if before != now:
            shown = "a different file" if key == "input_sha256" else f"{before!r}, this run {now!r}"
            if key == "input_sha256":
                out.append(f"the input was {shown}")
            else:
                out.append(f"{key} was {shown}")
    return out


def claim_output(output: Path, appended: Path, identity: dict[str, Any], overwrite: bool) -> bool:
    """Make ``output`` (and ``appended``, where groups are appended as they finish) this run's.

    Returns True when an earlier run of the same identity may be resumed from ``appended``.
    Raises :class:`OutputConflict` for a file of another run, or one without a sidecar.
    """
    side = sidecar_path(output)
    present = [p for p in dict.fromkeys([output, appended]) if p.exists()]
    if overwrite:
        for path in present:
            path.unlink()
        _write(side, {"judger_eval": _FORMAT, **identity})
        return False
    if side.exists():
        try:
            recorded = json.loads(side.read_text(encoding="utf-8"))
            if not isinstance(recorded, dict) or recorded.get("judger_eval") != _FORMAT:
                raise ValueError("not a judger eval sidecar")
        except (OSError, ValueError) as exc:
            raise OutputConflict(
                f"-o {output}: its sidecar {side} is unreadable ({exc}); use --overwrite"
            ) from None
        differences = _differences(recorded, identity)
        if differences:
            raise OutputConflict(
                f"-o {output} holds another run's samples: {'; '.join(differences)}. Give another -o, "
                "or --overwrite to delete them and start over"
            )
        if identity.get("model") is not None and recorded.get("served_model") not in (
            None,
            identity["model"],
        ):
            raise OutputConflict(
                f"-o {output} holds samples of model {recorded['served_model']!r}, this run asks "
                f"{identity['model']!r}; give another -o, or --overwrite"
            )
        return bool(present)
    if present:
        raise OutputConflict(
            f"-o {present[0]} exists and was not written by judger eval (no {side.name} beside it); "
            "give another -o, or --overwrite to replace it"
        )
    _write(side, {"judger_eval": _FORMAT, **identity})
    return False


def check_served_model(output: Path, served: str | None) -> None:
    """Record the model the servers serve; refuse to add its samples to another model's."""
    side = sidecar_path(output)
    try:
        recorded = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # claimed at start: a sidecar gone since is not this run's to judge
    before = recorded.get("served_model")
    if before is not None and before != served:
        raise OutputConflict(
            f"-o {output} holds samples of model {before!r}, the servers now serve {served!r}; "
            "give another -o, or --overwrite"
        )
    if before is None:
        _write(side, {**recorded, "served_model": served})
