"""Imported first by every fork server judger starts (see
:func:`judger.runtime.procpool.forkserver.server_preload`); nothing else imports it. Light on
purpose: the server is not yet deaf to Ctrl-C while it imports this.

multiprocessing's fork server ignores SIGINT only once its preload is imported, and judger's preload
takes a while (Math-Verify's warm-up): Ctrl-C in that window killed the server with a traceback
under the command's one-line message (see :mod:`judger.runtime.interrupts`). Its owner decides when
it stops (it kills it, or closes its alive pipe).
"""

from __future__ import annotations

import signal

from judger.runtime.interrupts import ignore_interrupts

HANDLER = signal.getsignal(signal.SIGINT)
"""The server's SIGINT handler before this (Python's own, or ignored where its parent ignored it),
for :mod:`judger.runtime.preload_end` to hand back."""

ignore_interrupts()
