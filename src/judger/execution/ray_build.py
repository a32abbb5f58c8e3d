"""Building Ray-backed judgers from a JudgerConfig with ``cpu_resources``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judger.base import Judger
    from judger.config import JudgerConfig


def build_remote(cfg: JudgerConfig) -> Judger:
    raise NotImplementedError(
        f"JudgerConfig(judger_name={cfg.judger_name!r}) asks for cpu_resources (Ray actors), which this "
        "build does not support yet; drop cpu_resources to judge in-process"
    )
