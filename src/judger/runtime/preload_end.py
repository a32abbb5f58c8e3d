"""Imported last by multiprocessing's process-wide fork server when judger's pool sets its preload
(see :func:`judger.runtime.procpool.forkserver.server_preload`): SIGINT's handler as it was before
:mod:`judger.runtime.preload_begin` ignored it, which the server hands on to the processes it forks
(another program's among them).
"""

from __future__ import annotations

import signal

from judger.runtime.preload_begin import HANDLER

if HANDLER is not None:  # None: a handler set outside Python, which this cannot hand back
    signal.signal(signal.SIGINT, HANDLER)
