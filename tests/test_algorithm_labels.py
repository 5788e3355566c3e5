"""A run's ``algorithm``: the loss that ran, named by ``gspo_metrics.spec`` for every tool."""

from __future__ import annotations

import pytest

from gspo_metrics import LOSSES, loss_for
from gspo_metrics.spec import (
    AGGREGATIONS,
    LOSS_INFO,
    LOSS_NAMES,
    TRL_LOSS_TYPES,
    VERL_LOSS_MODES,
    algorithm_label,
    algorithm_words,
    parse_algorithm,
    ratio_name,
    tool_algorithm,
)
from training_hooks.recorder_settings import RecorderSettings


def test_every_registered_loss_is_declared_and_its_label_reads_back():
    """LOSS_INFO declares exactly the registered losses; every label parses back to its loss and
    level; GRPO's clip at the sequence level is "gspo" (TRL's GSPO)."""
    assert set(LOSS_INFO) == set(LOSSES)
    for loss, info in LOSS_INFO.items():
        levels = ("token", "sequence") if info.level == "either" else (info.level,)
        for level in levels:
            label = algorithm_label(loss, level)
            parsed = parse_algorithm(label)
            assert parsed is not None, label
            assert (parsed.loss, parsed.level) == (
                ("gspo", "sequence") if label == "gspo" else (loss, level)
            )
    assert algorithm_label("grpo", "sequence") == "gspo"
    assert algorithm_label("cispo", "sequence") == "cispo-seq"
    for label in ("unknown", "?", "", "grpo-seq", "gspo-seq", "ppo", None):
        assert parse_algorithm(label) is None, label
    with pytest.raises(ValueError, match="unknown loss 'ppo'"):
        algorithm_label("ppo")
    with pytest.raises(ValueError, match="runs at the sequence level only"):
        algorithm_label("gspo", "token")


def test_the_ratio_level_names_the_run_and_the_loss_qualifies_it():
    """The ratio level comes first: TRL's GSPO recipe (loss_type "grpo" at the sequence level),
    its default loss_type "dapo" at the sequence level and CISPO on s are all "GSPO ...", their
    token-level runs "GRPO ..."; the aggregation (DAPO, BNPO, Dr. GRPO, LUSPO) or the loss
    qualifies it; a label no known loss has is None, never a level."""
    cases = {
        ("grpo", "sequence"): "GSPO",
        ("grpo", "token"): "GRPO",
        ("dapo", "sequence"): "GSPO (DAPO aggregation)",
        ("dapo", "token"): "GRPO (DAPO aggregation)",
        ("bnpo", "sequence"): "GSPO (BNPO aggregation)",
        ("dr_grpo", "token"): "GRPO (Dr. GRPO aggregation)",
        ("luspo", "sequence"): "GSPO (LUSPO aggregation)",
        ("cispo", "sequence"): "GSPO (CISPO loss)",
        ("cispo", "token"): "GRPO (CISPO loss)",
        ("sapo", "token"): "GRPO (SAPO loss)",
        ("vespo", "token"): "GRPO (VESPO loss)",
    }
    for (loss_type, level), words in cases.items():
        label = tool_algorithm("trl", loss_type, level)
        assert algorithm_words(label) == words, (loss_type, level)
        assert ratio_name(label) == ("GSPO" if level == "sequence" else "GRPO")
    assert algorithm_words("gspo") == "GSPO" and algorithm_words("GMPO") == "GSPO (GMPO loss)"
    assert algorithm_words("geo_mean") is None  # verl's name, not a label
    for label in ("unknown", "?", "", "ppo", None, "grpo-seq"):
        assert algorithm_words(label) is None and ratio_name(label) is None, label
    # every registered loss is named: GRPO's / GSPO's clip, an aggregation, or a loss of its own
    assert set(LOSS_INFO) == {"grpo", "gspo"} | set(AGGREGATIONS) | set(LOSS_NAMES)
    assert not set(AGGREGATIONS) & set(LOSS_NAMES)


def test_clip_units_follow_the_hard_clip():
    """The clip unit: the sequence for GSPO and the -seq labels of PPO's clip, the token for the
    rest of PPO's family and GMPO (its clip is per token), none for CISPO, SAPO, ..."""
    units = {a: parse_algorithm(a).clip_unit for a in ("gspo", "grpo", "dapo-seq", "gmpo")}
    assert units == {"gspo": "seq", "grpo": "token", "dapo-seq": "seq", "gmpo": "token"}
    for a in ("cispo", "cispo-seq", "sapo", "sapo-seq", "vespo", "gpg", "dppo_tv", "dro"):
        assert parse_algorithm(a).clip_unit is None, a


def test_tool_names_map_to_the_loss_loss_for_computes():
    """tool_algorithm (torch-free, for the importers and the app) gives the same label as
    loss_for(...).algorithm for every TRL loss_type at both levels and every verl loss_mode; a
    name no one declared, or TRL's level unstated, is "unknown"."""
    for loss_type in TRL_LOSS_TYPES:
        for level in ("token", "sequence"):
            settings = {"loss_type": loss_type, "importance_sampling_level": level}
            if loss_type == "dr_grpo":
                settings["max_completion_length"] = 8
            assert tool_algorithm("trl", loss_type, level) == loss_for("trl", settings).algorithm
    for mode in VERL_LOSS_MODES:
        settings = {"loss_mode": mode, "dro_beta": 0.5}
        assert tool_algorithm("verl", mode) == loss_for("verl", settings).algorithm
    assert tool_algorithm("trl", "cispo", "token") == "cispo"
    assert tool_algorithm("trl", "grpo", "sequence") == "gspo"
    assert tool_algorithm("verl", "geo_mean") == "gmpo"
    assert tool_algorithm("trl", "dapo", None) == "unknown"  # level unstated
    assert tool_algorithm("trl", None, "token") == "unknown"
    assert tool_algorithm("verl", "clip_cov") == "unknown"


def test_a_recorder_told_no_algorithm_says_unknown(tmp_path):
    """Not told: "unknown" (never "gspo" or "grpo"); resuming a run that states its loss without
    saying one keeps the run's; saying another is refused."""
    import torch

    from training_hooks import RunRecorder
    from training_hooks.schema import read_run_info

    assert RecorderSettings().algorithm == "unknown"
    x = -torch.rand(4, 5)
    step = dict(
        rewards=torch.tensor([[1.0, 0.0, 1.0, 0.0]]), logprobs=x, old_logprobs=x, mask=x < 0
    )
    with RunRecorder(root=tmp_path, name="plain") as rec:
        rec.log_step(0, **step)
    assert read_run_info(rec.run_dir).algorithm == "unknown"
    with RunRecorder(root=tmp_path, name="c", algorithm="cispo") as first:
        first.log_step(0, **step)
    with RunRecorder(root=tmp_path, run_id=first.run_id) as again:
        again.log_step(1, **step)
    assert again.algorithm == read_run_info(first.run_dir).algorithm == "cispo"
    with pytest.raises(ValueError, match="recorded with algorithm 'cispo'"):
        RunRecorder(root=tmp_path, run_id=first.run_id, algorithm="sapo")
