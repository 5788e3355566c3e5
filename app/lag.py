"""Policy lag per step: ``training_hooks.findings.lag``, under the name the app's pages use.

The recorder's live findings and the Health page split steps by lag with one implementation, so
this module *is* that one (the same module object: ``app.lag is training_hooks.findings.lag``).
"""

import sys

from training_hooks.findings import lag as _lag

sys.modules[__name__] = _lag
