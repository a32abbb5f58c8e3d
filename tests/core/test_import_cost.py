"""Issue 12: `import judger` loads only what it needs (httpx pulled in rich's console, ~65 ms)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def test_import_judger_loads_no_httpx_rich_or_numpy() -> None:
    code = "import sys, judger; print(sorted(m for m in ('httpx', 'rich', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
