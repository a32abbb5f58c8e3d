"""`python -m judger` runs the CLI."""

import sys

from judger.cli.main import main

sys.exit(main())
