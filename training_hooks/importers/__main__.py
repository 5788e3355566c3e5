"""``python -m training_hooks.importers``: see ``training_hooks.importers``."""

import sys

from training_hooks.importers._cli import main

sys.exit(main())
