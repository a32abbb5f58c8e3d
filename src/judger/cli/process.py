"""Whether this interpreter is the ``judger`` command's own process.

Set by :func:`judger.cli.main.entry` (the console script, and ``python -m judger``), never by
:func:`judger.cli.main.main` (what tests and embedding programs call): process-wide shortcuts such
as freezing the garbage collector's view of the heap are taken only in a process the command owns.
"""

from __future__ import annotations

owned = False
