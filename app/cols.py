"""The on-disk schema (``training_hooks/schema.py``), imported without running the hooks package.

``training_hooks/__init__.py`` may import torch (the recorder needs it); the dashboard must not. So
when ``training_hooks`` is not imported yet, ``schema.py`` is loaded straight from the package's
folder and registered as ``training_hooks.schema``; a later ``import training_hooks`` (a test that
records a run) then reuses that same module object, so the constants are never duplicated.
"""

from __future__ import annotations

import importlib.util
import sys


def _load_schema():
    name = "training_hooks.schema"
    if name in sys.modules:
        return sys.modules[name]
    if "training_hooks" in sys.modules:  # the package is already imported: nothing to avoid
        return importlib.import_module(name)
    spec = importlib.util.find_spec("training_hooks")  # locates the package, runs nothing
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("training_hooks is not installed: run `pip install -e .` in the repo")
    for folder in spec.submodule_search_locations:
        path = f"{folder}/schema.py"
        sub = importlib.util.spec_from_file_location(name, path)
        if sub is not None and sub.loader is not None:
            module = importlib.util.module_from_spec(sub)
            sys.modules[name] = module
            try:
                sub.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
    raise ImportError(f"training_hooks/schema.py not found in {spec.submodule_search_locations}")


schema = _load_schema()

Step = schema.Step
Seq = schema.Seq
Tok = schema.Tok
RunInfo = schema.RunInfo
read_run_info = schema.read_run_info
SCHEMA_VERSION = schema.SCHEMA_VERSION
METADATA_KEY = schema.METADATA_KEY
RUN_JSON = schema.RUN_JSON
STEPS_DIR = schema.STEPS_DIR
SEQUENCES_DIR = schema.SEQUENCES_DIR
TOKENS_DIR = schema.TOKENS_DIR
STATUS_RUNNING = schema.STATUS_RUNNING
STATUS_FINISHED = schema.STATUS_FINISHED
STATUS_FAILED = schema.STATUS_FAILED
STATUS_CRASHED = schema.STATUS_CRASHED
STEP_COLUMN_NAMES = schema.STEP_COLUMN_NAMES
SEQUENCE_COLUMN_NAMES = schema.SEQUENCE_COLUMN_NAMES
TOKEN_COLUMN_NAMES = schema.TOKEN_COLUMN_NAMES
STEP_KEY_COLUMNS = schema.STEP_KEY_COLUMNS
STEP_METRIC_COLUMNS = schema.STEP_METRIC_COLUMNS
MLFLOW_PREFIX = schema.MLFLOW_PREFIX
is_data_file = schema.is_data_file
