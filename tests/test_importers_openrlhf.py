"""OpenRLHF's runs as it writes them: its console's ``Global step N: {...}`` lines, its
TensorBoard ``train/*`` / ``eval/*`` scalars and a W&B run folder; every value equal to its
source at its ``global_step``, keys mapped by their meaning in OpenRLHF 0.11's source, the
settings from W&B's config.yaml.

``CONSOLE`` is the first lines of a console written by OpenRLHF 0.11.2's own logger
(/work/fetched_logs/generated/openrlhf/README.md: its logging code fed status dicts whose loss
metrics come from its own PolicyLoss on a random batch; not a training run, which needs GPUs);
the event files there, when present, are compared with those console values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from training_hooks import importers, schema
from training_hooks.importers._cli import _parser
from training_hooks.schema import Step

CONSOLE = [
    "INFO 12-07 13:18:49 gen.py:42] ✨ Global step 1: {'policy_loss': -0.5545547604560852, 'actor_lr': 1e-06, 'actor_grad_norm': 0.6962141394615173, 'ppo_clip_ratio': 0.125, 'ppo_kl': 0.0149339959025383, 'reward': 0.25, 'response_length': 5.0, 'rollout/reward_mean': 0.25, 'rollout/reward_std': 0.4629100561141968, 'rollout/response_length_mean': 5.0, 'rollout/truncated_rate': 0.0, 'rollout/num_samples': 8.0, 'timing/step_total': 1.5}",
    "INFO 12-07 13:18:49 gen.py:42] ✨ Global step 2: {'policy_loss': -0.35879141092300415, 'actor_lr': 1e-06, 'actor_grad_norm': 0.8751140236854553, 'ppo_clip_ratio': 0.125, 'ppo_kl': 0.049121201038360596, 'reward': 0.375, 'response_length': 4.0, 'rollout/reward_mean': 0.375, 'rollout/reward_std': 0.5175491571426392, 'rollout/response_length_mean': 4.0, 'rollout/truncated_rate': 0.0, 'rollout/num_samples': 8.0, 'timing/step_total': 1.5}",
    "INFO 12-07 13:18:49 gen.py:47] ✨ Evaluation completed in 0:00:01, global_step 2, eval_metrics: {'eval_pass1': 0.5}",
]
GENERATED = Path("/work/fetched_logs/generated/openrlhf")
CONFIG = """_wandb:
  value:
    cli_version: 0.21.0
actor:
  value:
    policy_loss_type: gspo
    eps_clip_low_high: [0.0003, 0.0004]
rollout:
  value:
    n_samples_per_prompt: 8
algo:
  value:
    advantage:
      estimator: group_norm
"""


def _import(path: Path, root: Path, **kw):
    import pyarrow.parquet as pq

    res = importers.import_run("openrlhf", path, root=root, **kw)
    info = schema.read_run_info(res["run_dir"])
    df = pq.read_table(Path(res["run_dir"]) / schema.STEPS_DIR).to_pandas().set_index("step")
    return info, df


def _cell(df, step, column):
    v = df.loc[step, column]
    return None if v != v else float(v)


def _console(tmp_path: Path) -> Path:
    f = tmp_path / "train.log"
    f.write_text("Ray started\n" + "\n".join(CONSOLE) + "\n", encoding="utf-8")
    return f


def test_console_lines_give_each_value_at_its_global_step(tmp_path):
    info, df = _import(_console(tmp_path), tmp_path / "runs")
    assert list(df.index) == [1, 2]
    assert _cell(df, 1, Step.REWARD_MEAN) == 0.25 and _cell(df, 2, Step.REWARD_MEAN) == 0.375
    assert _cell(df, 2, Step.REWARD_STD) == 0.5175491571426392
    assert _cell(df, 1, Step.LENGTH_MEAN) == 5.0 and _cell(df, 2, Step.LENGTH_MEAN) == 4.0
    assert _cell(df, 1, Step.TRUNCATED_FRACTION) == 0.0
    assert _cell(df, 2, Step.KL_OLD_MEAN) == 0.049121201038360596  # ppo_kl: k1, noted
    assert _cell(df, 1, "grad_norm") == 0.6962141394615173
    assert _cell(df, 1, "openrlhf/policy_loss") == -0.5545547604560852  # not the total loss
    assert _cell(df, 2, "eval/eval_pass1") == 0.5  # the evaluation apart
    assert df[Step.LOSS].isna().all()
    # without the loss type the clip share's unit is unknown: kept, and said why
    assert info.imported.renamed["ppo_clip_ratio"] == "openrlhf/ppo_clip_ratio"
    assert "policy_loss_type not given" in info.imported.notes["ppo_clip_ratio"]
    assert info.algorithm == "unknown" and info.status == "unknown"
    assert "num_episodes" in info.imported.status_basis


def test_algorithm_stated_puts_the_clip_share_in_its_unit(tmp_path):
    _, df = _import(_console(tmp_path), tmp_path / "a", config={"policy_loss_type": "ppo"})
    assert _cell(df, 1, "token_clip_binding_fraction") == 0.125
    info, df = _import(_console(tmp_path), tmp_path / "b", algorithm="gspo", replace=True)
    assert info.algorithm == "gspo"
    assert _cell(df, 1, "openrlhf/ppo_clip_ratio") == 0.125  # token-weighted: not ours


def test_wandb_run_folder_settings_from_config_yaml(tmp_path):
    run = tmp_path / "wandb" / "run-20261207_131849-abcd1234"
    (run / "files").mkdir(parents=True)
    (run / "files" / "output.log").write_text("\n".join(CONSOLE) + "\n", encoding="utf-8")
    (run / "files" / "config.yaml").write_text(CONFIG)
    info, df = _import(run, tmp_path / "runs")
    assert info.algorithm == "gspo"
    assert (info.seq_eps_low, info.seq_eps_high) == (0.0003, 0.0004)
    assert info.group_size == 8
    assert (
        info.imported.settings["group_size"]["from"] == "config.yaml: rollout.n_samples_per_prompt"
    )
    assert _cell(df, 2, Step.REWARD_MEAN) == 0.375


def test_a_console_without_step_lines_is_refused(tmp_path):
    f = tmp_path / "x.log"
    f.write_text("nothing here\n")
    with pytest.raises(ValueError, match="Global step"):
        importers.import_run("openrlhf", f, root=tmp_path / "r")


def test_the_cli_lists_openrlhf():
    assert "openrlhf" in _parser().format_help()


@pytest.mark.skipif(not GENERATED.is_dir(), reason="the generated OpenRLHF logs are absent")
@pytest.mark.parametrize("kind", ["ppo", "gspo"])
def test_generated_event_files_hold_the_console_values(kind, tmp_path):
    pytest.importorskip("tensorboard")
    events = next((GENERATED / f"tb_{kind}").glob("*/events.out.tfevents.*"))
    _, tb = _import(events, tmp_path / "tb", algorithm={"ppo": "grpo", "gspo": "gspo"}[kind])
    _, con = _import(GENERATED / f"console_{kind}.log", tmp_path / "con")
    assert list(tb.index) == list(con.index) == [1, 2, 3, 4]
    for col in (Step.REWARD_MEAN, Step.REWARD_STD, Step.LENGTH_MEAN, Step.KL_OLD_MEAN, "grad_norm"):
        for s in tb.index:  # the event file holds float32
            assert _cell(tb, s, col) == pytest.approx(_cell(con, s, col), rel=1e-6), (col, s)
    assert _cell(tb, 4, "eval/eval_pass1") == 1.0
