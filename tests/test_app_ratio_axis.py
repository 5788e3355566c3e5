"""GRPO against GSPO by what ran: a run on the sequence ratio is GSPO's on every page (its line,
its legend, the Runs filters, its Health card), whatever its aggregation (TRL's default
``loss_type="dapo"`` at ``importance_sampling_level="sequence"`` is "GSPO (DAPO aggregation)")."""

from __future__ import annotations

import json

import pytest
from app_runs import record_run, run_ids
from test_app_pages import _assert_clean, _open


@pytest.fixture
def four_levels(root_copy):
    """The recorded root (grpo-small, gspo-small) plus a DAPO run at the sequence level (TRL's
    GSPO with its default loss_type) and one at the token level (TRL's default GRPO)."""
    record_run(root_copy, "dapo-seq-small", "dapo-seq", seed=3, spread=1e-3)
    record_run(root_copy, "dapo-small", "dapo", seed=4, spread=0.05)
    return root_copy


def test_runs_page_filters_by_ratio_level_and_offers_every_algorithm(four_levels, app_env):
    """The Algorithm filter offers the four algorithms present, the sequence ratio's first; the
    Ratio filter "sequence ratio (GSPO)" keeps GSPO and GSPO (DAPO aggregation), never a
    GRPO-style run; choosing "GRPO (DAPO aggregation)" keeps that run alone. The import form
    names each label it offers in the same words."""
    app_env(four_levels)
    at = _open("runs")
    _assert_clean(at)
    algos = at.multiselect(key="runs_algo")
    assert algos.options == [
        "GSPO",
        "GSPO (DAPO aggregation)",
        "GRPO",
        "GRPO (DAPO aggregation)",
    ]
    form = at.selectbox(key="import_algorithm").options
    assert form[:3] == ["guess from its config", "GSPO: gspo", "GRPO: grpo"]
    assert "GSPO (DAPO aggregation): dapo-seq" in form and "GRPO (CISPO loss): cispo" in form
    df = at.dataframe[0].value
    assert dict(zip(df["name"], df["algorithm"], strict=True)) == {
        "grpo-small": "GRPO",
        "gspo-small": "GSPO",
        "dapo-seq-small": "GSPO (DAPO aggregation)",
        "dapo-small": "GRPO (DAPO aggregation)",
    }
    at.button_group(key="runs_ratio").set_value(["sequence ratio (GSPO)"]).run()
    _assert_clean(at)
    assert sorted(at.dataframe[0].value["name"]) == ["dapo-seq-small", "gspo-small"]
    at.button_group(key="runs_ratio").set_value([]).run()
    at.multiselect(key="runs_algo").set_value(["GRPO (DAPO aggregation)"]).run()
    _assert_clean(at)
    assert list(at.dataframe[0].value["name"]) == ["dapo-small"]


def test_compare_legend_and_health_name_the_ratio_level_first(four_levels, app_env):
    """Compare groups the four runs (two seeds per ratio level) into GSPO and GRPO by default,
    the GSPO group holding the DAPO run at the sequence level; ungrouped, its legend draws the
    sequence-ratio runs solid and names them GSPO (the DAPO one "GSPO (DAPO aggregation)"), the
    token-ratio runs dashed; the Health summary and card heads use the same words."""
    app_env(four_levels)
    ids = run_ids(four_levels)
    at = _open("compare", {"runs": list(ids.values())})
    _assert_clean(at)
    assert at.selectbox(key="group_by").value == "ratio_level"
    (grouped,) = [e for e in at.get("echarts_chart") if e.proto.id.endswith("-grouped")]
    assert json.loads(grouped.proto.spec)["legend"]["data"] == ["GRPO", "GSPO"]
    gspo_row = next(m.value for m in at.markdown if m.value.startswith("| ")).splitlines()[3]
    assert gspo_row.startswith("| GSPO | 2 |"), gspo_row
    at.selectbox(key="group_by").set_value("none").run()
    _assert_clean(at)
    legend = json.loads(at.get("echarts_chart")[0].proto.spec)["legend"]["data"]
    styles = {d["name"]: d["lineStyle"]["type"] for d in legend}
    assert styles == {
        "gspo-small · GSPO": "solid",
        "dapo-seq-small · GSPO (DAPO aggregation)": "solid",
        "grpo-small · GRPO": "dashed",
        "dapo-small · GRPO (DAPO aggregation)": "dashed",
    }
    at = _open("health", {"runs": list(ids.values())})
    _assert_clean(at)
    summary = at.dataframe[0].value
    assert dict(zip(summary["run"], summary["algorithm"], strict=True)) == {
        "grpo-small": "GRPO",
        "gspo-small": "GSPO",
        "dapo-seq-small": "GSPO (DAPO aggregation)",
        "dapo-small": "GRPO (DAPO aggregation)",
    }
    heads = [e.label for e in at.expander]
    assert any(
        h.startswith("dapo\\-seq\\-small · GSPO \\(DAPO aggregation\\) · ") for h in heads
    ), heads
