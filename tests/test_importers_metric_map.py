"""metric_map: one table of foreign names, resolved per tool version and settings.

Hand-made cases per TRL generation (the definitions read from TRL's grpo_trainer.py at each tag),
the MLflow path with params, settings parsing, and the table's own consistency.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from training_hooks import importers, schema
from training_hooks.metric_map import (
    MAPPINGS,
    Context,
    Derived,
    SourceFormat,
    detect_format,
    detect_source,
    is_known_column,
    map_metric_name,
    map_metric_names,
    parse_version,
    resolve,
)
from training_hooks.schema import Step
from training_hooks.tool_settings import read_settings


def _trl(since=None, until=None, **settings) -> Context:
    return Context(SourceFormat("trl", "t", since, until), settings)


@pytest.mark.parametrize(
    ("since", "until", "settings", "stored"),
    [
        (None, (0, 16), {}, "trl/reward_std"),  # <= 0.15: mean of per-group stds
        ((0, 17), (0, 27), {}, "trl/reward_std"),  # still the per-group mean by default
        ((0, 22), (0, 27), {"scale_rewards": "batch"}, Step.REWARD_STD),  # then a batch std
        ((0, 27), None, {}, Step.REWARD_STD),  # >= 0.27: batch std (Bessel)
        ((0, 26), None, {}, "trl/reward_std"),  # 0.26 or later: spans the change
    ],
)
def test_trl_reward_std_per_generation(since, until, settings, stored):
    """reward_std fills ours only where TRL logs a batch std; otherwise trl/reward_std."""
    assert resolve("reward_std", _trl(since, until, **settings)).stored == stored


@pytest.mark.parametrize(
    ("since", "until", "settings", "stored"),
    [
        (None, (0, 16), {}, "trl/kl"),  # sequence-weighted
        ((0, 16), (0, 26), {}, Step.KL_REF_MEAN),  # token-mean k3, as ours
        ((0, 26), None, {}, "trl/kl"),  # use_bias_correction_kl unknown
        ((0, 26), None, {"use_bias_correction_kl": True}, "trl/kl"),  # k3 x ratio
        ((0, 26), None, {"use_bias_correction_kl": False}, Step.KL_REF_MEAN),
        ((0, 20), None, {"beta": 0.0}, None),  # no KL at all: not stored
    ],
)
def test_trl_kl_per_generation(since, until, settings, stored):
    """TRL's kl is ours only as a token-mean plain k3; with beta = 0 it is unknown (None)."""
    assert resolve("kl", _trl(since, until, **settings)).stored == stored


def test_trl_clip_unit_is_never_guessed():
    """< 0.20 token ratios only; >= 0.20 the unit comes from importance_sampling_level or the
    metric keeps trl/ (with the reason)."""
    old = resolve("clip_ratio/low_mean", _trl((0, 17), (0, 20)))
    assert old.column == Step.TOKEN_CLIP_LOW_FRACTION
    unknown = resolve("clip_ratio/low_mean", _trl((0, 20), None))
    assert (
        unknown.stored == "trl/clip_ratio/low_mean"
        and "importance_sampling_level" in unknown.reason
    )
    seq = _trl((0, 20), None, importance_sampling_level="sequence")
    assert resolve("clip_ratio/region_mean", seq).column == Derived.SEQ_CLIP_BINDING
    straddle = resolve(
        "clip_ratio/low_mean", _trl((0, 17), None, importance_sampling_level="token")
    )
    assert straddle.column == Step.TOKEN_CLIP_LOW_FRACTION  # token in every version of the range


def test_assumed_defaults_are_reported_and_contradicted_ones_refused():
    """A tool default a mapping relies on is listed; a setting that contradicts it unmaps."""
    res = resolve("reward", _trl((0, 27), None))
    assert res.column == Step.REWARD_MEAN
    assert res.assumed == ("multi_objective_aggregation = 'sum_then_normalize' (tool default)",)
    off = resolve("reward", _trl((0, 27), None, multi_objective_aggregation="normalize_then_sum"))
    assert off.stored == "trl/reward" and "changes its meaning" in off.reason


def test_names_that_are_ours_are_never_shadowed():
    """A foreign name equal to one of our columns but not mapped is stored as <tool>/<name>."""
    ctx = Context(SourceFormat("verl", "v"), {})
    assert resolve("num_tokens", ctx).stored == "verl/num_tokens"
    assert resolve("gspo_dash/loss", ctx).stored == Step.LOSS


def test_every_mapping_resolves_to_its_column_where_it_holds():
    """Self-consistency of the table: inside each mapping's versions, with its settings met, the
    strict resolution gives its column (an earlier mapping of the same name may not shadow it)."""
    for m in MAPPINGS:
        settings = {s: v[0] for s, v in m.requires + m.assumes}
        lo = m.since
        hi = m.until if m.until else ((m.since[0], m.since[1] + 1) if m.since else None)
        res = resolve(m.name, Context(SourceFormat(m.source, "", lo, hi), settings))
        want = m.column or f"{m.source}/{m.name}"
        assert res.stored == want, (m, res)
        assert not m.column or is_known_column(m.column), m


def test_format_detection_from_names_and_a_stated_version():
    """Names narrow TRL's version; a stated version pins it; tools are told apart by names."""
    old = detect_format("trl", {"completion_length", "reward"})
    assert (old.since, old.until, old.label) == (None, (0, 16), "TRL <=0.15 / Unsloth (<0.16)")
    v016 = detect_format("trl", {"completion_length", "num_tokens"})
    assert (v016.since, v016.until) == ((0, 16), (0, 17))
    new = detect_format("trl", {"completions/mean_length", "entropy", "step_time"})
    assert new.since == (0, 26) and new.until is None and len(new.evidence) == 3
    exact = detect_format("trl", {"entropy"}, "0.23.0")
    assert (exact.since, exact.until) == ((0, 23, 0), (0, 23, 1)) and "0.16-0.2x" in exact.label
    assert parse_version("v1.16.0.dev0") == (1, 16, 0) and parse_version("main") is None
    assert detect_source(["actor/pg_loss", "val-core/x"]) == "verl"
    assert detect_source(["env/all/reward/total"]) == "tinker"
    assert detect_source(["reward", "completions/mean_length"]) == "trl"
    assert detect_source(["my/metric"]) is None


def test_completion_length_beside_newer_keys_is_the_unsloth_dialect():
    """completion_length (TRL <= 0.16) beside num_tokens (>= 0.16) and frac_reward_zero_std
    (>= 0.18): no TRL version logs them all, Unsloth's compute_loss logs completion_length (and
    kl) in every version: the Unsloth dialect, dated by TRL's other names (>= 0.18), whose
    completion_length and kl keep Unsloth's meanings."""
    mixed = detect_format("trl", {"completion_length", "num_tokens", "frac_reward_zero_std"})
    assert (mixed.since, mixed.until, mixed.dialect) == ((0, 18), None, "unsloth")
    assert mixed.label == "Unsloth GRPOTrainer log (TRL >=0.18)"
    assert any(e.startswith("Unsloth: completion_length beside") for e in mixed.evidence)
    ctx = Context(mixed, {})
    assert resolve("frac_reward_zero_std", ctx).column == Step.ZERO_VARIANCE_FRACTION
    assert resolve("completion_length", ctx).column == Step.LENGTH_MEAN
    assert resolve("completion_length", ctx).yields  # TRL's completions/mean_length goes first
    kl = resolve("kl", ctx)
    assert kl.stored == "trl/kl" and "sequence-weighted" in kl.reason
    # TRL proper at a stated 0.19.1 does not log completion_length: another trainer's key
    plain = Context(detect_format("trl", {"frac_reward_zero_std"}, "0.19.1"), {})
    other = resolve("completion_length", plain)
    assert other.stored == "trl/completion_length" and "does not log" in other.reason
    # a model card tagged unsloth makes even an old-looking log the dialect
    card = detect_format("trl", {"completion_length"}, dialect_evidence=("tagged unsloth",))
    assert card.dialect == "unsloth" and (card.since, card.until) == (None, None)
    assert resolve("kl", Context(card, {})).stored == "trl/kl"


def test_a_version_floor_is_not_doubt():
    """A name's earliest version says when it appeared: a log that holds it is at least that
    version, so an undated log (any version) still maps completions/mean_length (>= 0.17) and
    frac_reward_zero_std (>= 0.18); a meaning that changes later still withholds (reward_std)."""
    anyv = Context(SourceFormat("trl", "t"), {})
    assert resolve("completions/mean_length", anyv).column == Step.LENGTH_MEAN
    assert resolve("completions/clipped_ratio", anyv).column == Step.TRUNCATED_FRACTION
    assert resolve("frac_reward_zero_std", anyv).column == Step.ZERO_VARIANCE_FRACTION
    assert resolve("reward_std", anyv).stored == "trl/reward_std"
    assert "any version" in resolve("reward_std", anyv).reason  # never "(None)"


@pytest.mark.parametrize(
    ("since", "until", "stored", "assumed"),
    [
        ((0, 26, 2), (0, 26, 3), Step.KL_REF_MEAN, "use_bias_correction_kl = false"),
        ((1, 9), (1, 10), Step.KL_REF_MEAN, "use_bias_correction_kl = false"),
        ((1, 12), (1, 13), "trl/kl", None),  # between the read versions: no default known
        ((1, 16), None, "trl/kl", None),  # default true: k3 times the ratio, not ours
        ((0, 26), None, "trl/kl", None),  # spans the change
    ],
)
def test_kl_maps_where_a_default_decides_the_bias_correction(since, until, stored, assumed):
    """use_bias_correction_kl (TRL >= 0.26) not stated: its default decides kl's meaning where one
    default holds over the log's versions (false, read at 1.9), and the mapping says it assumed
    it; where the default is true or unknown, or the range spans the change, kl is withheld."""
    res = resolve("kl", _trl(since, until))
    assert res.stored == stored
    if assumed:
        assert any(a.startswith(assumed) and "default" in a for a in res.assumed), res.assumed
    else:
        assert "use_bias_correction_kl" in res.reason and "None" not in res.reason


def test_assumed_defaults_of_an_import_record():
    """num_iterations and use_bias_correction_kl, stated by no file, are assumed defaults with
    why (a setting TRL did not have yet behaves as its later default); a stated one is not."""
    from training_hooks.tool_versions import assumed_defaults

    old = assumed_defaults(SourceFormat("trl", "t", None, (0, 16)), {})
    assert (
        old["num_iterations"]["value"] == 1 and "no such setting" in old["num_iterations"]["from"]
    )
    assert old["use_bias_correction_kl"]["value"] is False
    new = assumed_defaults(SourceFormat("trl", "t", (0, 26), None), {"num_iterations": 2})
    assert "num_iterations" not in new and "use_bias_correction_kl" not in new  # spans the change
    assert assumed_defaults(SourceFormat("verl", "v"), {}) == {}


def test_read_settings_nested_flat_and_mlflow_strings():
    """Nested configs, dotted or slashed flat keys, MLflow's string values parsed as literals."""
    nested = {
        "actor_rollout_ref": {"actor": {"use_kl_loss": False, "policy_loss": {"loss_mode": "gspo"}}}
    }
    got = read_settings("verl", nested, "c.json")
    assert got["use_kl_loss"].value is False and got["loss_mode"].value == "gspo"
    assert got["loss_mode"].origin == "c.json: actor_rollout_ref.actor.policy_loss.loss_mode"
    flat = {"actor_rollout_ref/rollout/n": "8", "actor_rollout_ref.actor.clip_ratio_high": "0.28"}
    got = read_settings("verl", flat, "params")
    assert got["group_size"].value == 8 and got["clip_ratio_high"].value == 0.28
    trl = read_settings(
        "trl", {"use_bias_correction_kl": "True", "beta": "0.0", "epsilon": "x"}, "p"
    )
    assert trl["use_bias_correction_kl"].value is True and trl["beta"].value == 0.0
    assert trl["epsilon"].value == "x" and "adam_epsilon" not in read_settings(
        "trl", {"adam_epsilon": 1e-8}, "p"
    )


def test_mlflow_names_with_params_resolve_like_an_import():
    """The dashboard's MLflow path: with the run's params, TRL names resolve per version and
    settings (clip unit from importance_sampling_level, kl only without bias correction); by name
    alone (no params) the lenient lookup keeps today's mapping."""
    keys = [
        "reward",
        "kl",
        "clip_ratio/region_mean",
        "completions/mean_length",
        "entropy",
        "step_time",
    ]
    params = {"importance_sampling_level": "sequence", "use_bias_correction_kl": "False"}
    strict = map_metric_names(keys, settings=params)
    assert strict["kl"] == Step.KL_REF_MEAN
    assert strict["clip_ratio/region_mean"] == Derived.SEQ_CLIP_BINDING
    unknown = map_metric_names(keys, settings={})
    assert (
        unknown["kl"] == "trl/kl"
        and unknown["clip_ratio/region_mean"] == "trl/clip_ratio/region_mean"
    )
    assert map_metric_names(keys, sequence_level=True)["kl"] == Step.KL_REF_MEAN  # lenient
    assert map_metric_name("optim/kl_sample_train_v2") == Step.SAMPLER_KL_MEAN
    assert map_metric_name("optim/kl_sample_train_v1") == "optim/kl_sample_train_v1"


def test_trl_model_card_beside_pins_the_version(tmp_path):
    """An output folder's README.md model card ("- TRL: 0.23.0") states the version: reward_std
    is then known to be the per-group mean (trl/), and the record says the version."""
    out = tmp_path / "out"
    ckpt = out / "checkpoint-2"
    ckpt.mkdir(parents=True)
    entry = {"reward": 0.5, "reward_std": 0.25, "entropy": 1.0, "completions/mean_length": 9.0}
    state = {
        "log_history": [{**entry, "step": 2}],
        "global_step": 2,
        "max_steps": 2,
        "logging_steps": 2,
    }
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    (out / "README.md").write_text(
        "# model\n\n### Framework versions\n\n- TRL: 0.23.0\n- Transformers: 4.56.2\n"
    )
    res = importers.import_run("trl", out, root=tmp_path / "r")
    info = schema.read_run_info(res["run_dir"])
    assert info.imported.version == "0.23.0" and info.versions["trl"] == "0.23.0"
    assert "within-group std" in info.imported.notes["reward_std"]
    df = pd.read_parquet(next((tmp_path / "r").rglob("*.parquet"))).set_index(Step.STEP)
    assert df.loc[2, "trl/reward_std"] == 0.25 and df.loc[2, Step.ENTROPY_MEAN] == 1.0
    assert importers.describe(res["run_dir"]).label == "TRL 0.16-0.2x, version 0.23.0"


@pytest.mark.parametrize(
    ("since", "until", "settings", "stored"),
    [
        # the Liger loss path (TRL 0.17-1.13) logs one clip key: the token share where the clip
        # binds, TRL's clip_ratio/region_mean (token ratios only before 1.0)
        ((0, 17), (0, 18), {}, Derived.TOKEN_CLIP_BINDING),
        ((0, 20), (0, 24), {}, Derived.TOKEN_CLIP_BINDING),
        ((1, 5), (1, 6), {"importance_sampling_level": "token"}, Derived.TOKEN_CLIP_BINDING),
        # 1.x at the sequence level: each sequence weighed by its tokens (ours counts sequences)
        ((1, 5), (1, 6), {"importance_sampling_level": "sequence"}, "trl/clip_ratio"),
        ((1, 5), (1, 6), {}, "trl/clip_ratio"),  # 1.x, level unknown
        ((0, 27), (0, 28), {"loss_type": "cispo"}, "trl/clip_ratio"),  # CISPO's cap share
        ((0, 27), (0, 28), {"loss_type": "sapo"}, "trl/clip_ratio"),  # Liger logs 0
        ((0, 16), (0, 17), {}, "trl/clip_ratio"),  # 0.16's own clip_ratio: not the binding share
    ],
)
def test_trl_liger_clip_ratio(since, until, settings, stored):
    """TRL's Liger-loss ``clip_ratio`` is the binding share where its definition is ours."""
    res = resolve("clip_ratio", _trl(since, until, **settings))
    assert res.stored == stored
    assert res.reason and "another trainer's key" not in res.reason


def test_trl_liger_clip_ratio_reasons():
    """The unmapped cases say why, in words the keys table shows."""
    seq = resolve("clip_ratio", _trl((1, 5), (1, 6), importance_sampling_level="sequence"))
    assert "weighed by its length" in seq.reason and "Liger" in seq.reason
    unknown = resolve("clip_ratio", _trl((1, 5), (1, 6)))
    assert unknown.reason == "importance_sampling_level not given (its meaning depends on it)"
    gone = resolve("clip_ratio", _trl((1, 14), (1, 15)))  # TRL 1.14 dropped the Liger loss
    assert gone.stored == "trl/clip_ratio" and "another trainer's key" in gone.reason


#: Every metric TRL 1.16's GRPOTrainer logs (``_metrics[mode]["..."]`` in grpo_trainer.py) on one
#: of its loss paths, and the column of ours that holds its meaning ("" none: kept by its name).
TRL_1_16_KEYS = {
    "aux_loss": "",
    "cispo_clip_ratio": "",
    "clip_ratio/high_max": "",
    "clip_ratio/high_mean": Step.TOKEN_CLIP_HIGH_FRACTION,
    "clip_ratio/low_mean": Step.TOKEN_CLIP_LOW_FRACTION,
    "clip_ratio/low_min": "",
    "clip_ratio/region_mean": Derived.TOKEN_CLIP_BINDING,
    "completions/clipped_ratio": Step.TRUNCATED_FRACTION,
    "completions/max_length": Step.LENGTH_MAX,
    "completions/max_terminated_length": "",
    "completions/mean_length": Step.LENGTH_MEAN,
    "completions/mean_terminated_length": "",
    "completions/min_length": Step.LENGTH_MIN,
    "completions/min_terminated_length": "",
    "entropy": Step.ENTROPY_MEAN,
    "entropy_coef": "",
    "frac_reward_zero_std": Step.ZERO_VARIANCE_FRACTION,
    "kl": Step.KL_REF_MEAN,
    "num_tokens": "trl/num_tokens",  # cumulative: its meaning is said, not ours
    "policy_loss": "",
    "reward": Step.REWARD_MEAN,
    "reward_std": Step.REWARD_STD,
    "sampling/importance_sampling_ratio/max": "",
    "sampling/importance_sampling_ratio/mean": "",
    "sampling/importance_sampling_ratio/min": "",
    "sampling/sampling_logp_difference/max": Step.SAMPLER_LOGP_ABS_DIFF_MAX,
    "sampling/sampling_logp_difference/mean": "",
    "step_time": "",
    "tools/call_frequency": "",
    "tools/failure_frequency": "",
    "vespo/phi_seq_mean": "",
}


def _trl_source_keys() -> set[str] | None:
    """The metric names the installed TRL's grpo_trainer.py logs; None without TRL 1.16."""
    import importlib.util
    import re
    from pathlib import Path

    spec = importlib.util.find_spec("trl")
    if spec is None or spec.origin is None:
        return None
    import trl

    if not str(trl.__version__).startswith("1.16"):
        return None
    src = (Path(spec.origin).parent / "trainer" / "grpo_trainer.py").read_text(encoding="utf-8")
    return set(re.findall(r'_metrics\[(?:mode|"train")\]\["([^"]+)"\]', src))


@pytest.mark.parametrize(
    "loss", ["dapo", "grpo", "bnpo", "dr_grpo", "luspo", "cispo", "sapo", "vespo"]
)
def test_every_key_trl_1_16_logs_is_known_on_each_loss_path(loss):
    """Each name TRL 1.16 logs (read from its source) on each loss path resolves to our column
    where one holds its meaning, else keeps its own name: never "another trainer's key"."""
    keys = _trl_source_keys()
    if keys is None:
        pytest.skip("TRL 1.16 is not installed")
    assert keys == set(TRL_1_16_KEYS)  # TRL logs a name this table does not know: add it
    settings = {
        "importance_sampling_level": "token",
        "loss_type": loss,
        "beta": 0.04,
        "use_bias_correction_kl": False,
        "logging_steps": 1,
    }
    ctx = Context(detect_format("trl", keys, "1.16.0", version_from="test"), settings)
    for name, column in TRL_1_16_KEYS.items():
        res = resolve(name, ctx)
        assert res.stored == (column or name), (name, res)
        assert "another trainer's key" not in res.reason


# ----------------------------------------------------------------------------- one module a trainer


def test_each_trainer_module_holds_only_its_own_facts_and_names_its_importer():
    """TOOLS is TRAINERS' importers, in the same order; a trainer's rules, off-when rules and
    defaults all name that trainer (a rule copied from another module would apply to the wrong
    tool); its one display name is what the CLI's spec, the reports and the checks' words say."""
    from training_hooks.importers._pick import TOOLS
    from training_hooks.tool_settings import TOOL_NAMES
    from training_hooks.trainers import TRAINERS

    assert list(TOOLS) == list(TRAINERS) == list(importers.SOURCES)
    assert len(TRAINERS) == 9
    for name, t in TRAINERS.items():
        assert TOOLS[name].name == name and TOOLS[name].display_name == t.display_name
        assert TOOL_NAMES[name] == t.display_name
        assert {m.source for m in t.mappings} <= {name}
        assert {o.source for o in t.off_when} | {d.source for d in t.defaults} <= {name}
        assert set(t.reported_defaults) <= {d.setting for d in t.defaults}
    assert TRAINERS["tinker"].display_name == "Tinker cookbook"  # one name (was also "Tinker")
    assert [n for n, spec in TOOLS.items() if spec.takes_key_map] == [
        "jsonl",
        "csv",
        "roll",
        "text",
    ]
