"""``CHECKS_VERSION``: the declared version of what the Health checks conclude.

A run's summary (``training_hooks.run_summary``, run.json's ``summary`` or one the dashboard kept)
records the version of the checks that made its findings, and is set aside when it differs. Bump
it whenever a check, a threshold (``thresholds.THRESHOLDS``) or the step-table reader
(``training_hooks.tables``) can change the findings a run gets (a code, a severity); a change of
wording, a docstring or a refactor that gives the same findings needs no bump.
``tests/test_checks_version.py`` holds the findings of a fixed set of runs against
``tests/checks_findings.json`` and fails when they change while this number does not.
"""

CHECKS_VERSION = 2  # 2: attenuation checks; clip checks only for hard-clip losses (issue 32)
