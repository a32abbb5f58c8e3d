"""The viewer: rollouts and their rewards as a web page (``judger view``) and as one HTML file
(``judger score --html``).

A package of its own inside the CLI: ``judger view``'s command (:mod:`judger.cli.view`) and the
report (:mod:`judger.cli.html_report`) import it; it imports only the run summary
(:mod:`judger.cli.tally`, :mod:`judger.cli.report`) and how ``judger score`` judges
(:mod:`judger.cli.judging`), so a page looks at a file with the figures ``judger score`` gives it.

- :mod:`judger.cli.viewer.index`: a file's rows as columns the page filters, sorts and pages;
  :mod:`judger.cli.viewer.columns` builds them chunk by chunk.
- :mod:`judger.cli.viewer.live`: the page served from the first rows while the whole file is indexed.
- :mod:`judger.cli.viewer.cache` / :mod:`judger.cli.viewer.identity`: indexes kept, keyed on the file's
  resolved path, inode and content, and whether the file still holds what was indexed.
- :mod:`judger.cli.viewer.worker`: the process that scores and indexes a whole file.
- :mod:`judger.cli.viewer.app`: the JSON endpoints and the page on 127.0.0.1; ``assets/``: the page.
"""

from pathlib import Path

ASSETS = Path(__file__).parent / "assets"
"""The page's files (HTML, JS, CSS, KaTeX), served by the app and inlined in the HTML report."""
