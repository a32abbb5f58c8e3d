"""Imported last by multiprocessing's process-wide fork server when judger's pool sets its preload
(see :func:`judger.runtime.procpool.forkserver.server_preload`): SIGINT back to Python's own
handler, which the server hands on to the processes it forks (another program's among them), as it
did before :mod:`judger.runtime.preload_begin` ignored it.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.default_int_handler)
