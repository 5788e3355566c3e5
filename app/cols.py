"""The on-disk schema, re-exported for the app: one module (``training_hooks.schema``) is shared by
writer and reader. ``training_hooks/__init__`` imports its torch-using parts lazily, so importing the
schema through the package loads no torch (``tests/test_app_*`` checks it in a subprocess).
"""

from __future__ import annotations

from training_hooks import schema

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
