"""``python -m training_hooks.demo``: the command line (``training_hooks.demo.cli``)."""

import sys

from .cli import main

sys.exit(main())
