"""`python -m judger` runs the CLI, as the ``judger`` console script does."""

from judger.cli.main import entry

entry()
