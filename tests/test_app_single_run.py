"""The single-run pages (Ratios, Lengths, Groups, Sequences) and the Runs table, on runs whose
steps alternate policy lag 0 / 1: every caption's number is recomputed here from the Parquet
tables for the subset of steps on screen; all-wrong groups are drawn; /runs routes; the Runs
table says which ε the loss uses, where a run came from and what is unknown.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from app_runs import REPO, run_ids
from streamlit.testing.v1 import AppTest
from test_app_pages import TIMEOUT, _arr, _open

from app import aggregate, charts
from app.pages import MAIN
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, TOKENS_DIR, Seq, Step, Tok

P, G, T, STEPS = 3, 4, 8, 8
REWARDS = [[1.0] * G, [0.0] * G, [1.0, 0.0, 1.0, 0.0]]  # all right, all wrong, mixed
GSPO_BAND = (math.log(1 - 3e-4), math.log(1 + 4e-4))  # the recorder's GSPO_EPS


def record_lagged(root, name: str, algorithm: str, *, spread: float, seed: int) -> Path:
    """Steps 0, 2, 4, 6 on-policy (logprobs == old_logprobs, policy_lag 0); steps 1, 3, 5, 7
    reuse the batch one optimizer step later (logprobs moved by ``spread``, policy_lag 1)."""
    import torch

    from training_hooks import RunRecorder

    gen = torch.Generator().manual_seed(seed)
    B = P * G
    with RunRecorder(
        root=root,
        name=name,
        algorithm=algorithm,
        mlflow=False,
        group_size=G,
        token_samples=2,
        flush_interval_s=0.5,
    ) as rec:
        for step in range(STEPS):
            lag = step % 2
            old = -torch.rand(B, T, generator=gen) * 3 - 2  # log-probs <= 0 with the noise
            logp = old + spread * torch.randn(B, T, generator=gen) if lag else old.clone()
            mask = torch.ones(B, T, dtype=torch.bool)
            mask[: B // 2, T - 2 - step % 2 :] = False  # lengths 5/6 and 8
            rec.log_step(
                step,
                rewards=torch.tensor(REWARDS),
                logprobs=logp,
                old_logprobs=old,
                mask=mask,
                truncated=torch.arange(B) % (3 + lag) == 0,  # a different share per lag
                rollout=step // 2,
                policy_lag=lag,
                completions=[f"answer {b}" for b in range(B)],
            )
        return Path(rec.run_dir)


@pytest.fixture(scope="session")
def lagged_root(tmp_path_factory) -> Path:
    """A GSPO run (off-policy log s near GSPO's band) and a GRPO run (far outside it)."""
    root = tmp_path_factory.mktemp("lagged")
    record_lagged(root, "lag-gspo", "gspo", spread=4e-4, seed=0)
    record_lagged(root, "lag-grpo", "grpo", spread=0.3, seed=1)
    return root


def _table(run_dir: Path, folder: str) -> pd.DataFrame:
    parts = sorted((run_dir / folder).glob("*.parquet"))
    return pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)


def _sequences(root: Path, name: str, lag: int | None) -> pd.DataFrame:
    """The run's sequences on the steps of policy lag ``lag`` (all steps for None)."""
    run_dir = root / run_ids(root)[name]
    seqs = _table(run_dir, SEQUENCES_DIR)
    if lag is None:
        return seqs
    steps = _table(run_dir, STEPS_DIR)
    return seqs[seqs[Seq.STEP].isin(steps.loc[steps[Step.POLICY_LAG] == lag, Step.STEP])]


def _clean(page: str, state: dict | None = None) -> AppTest:
    """The page opened with ``state``; no exception and no error drawn."""
    at = _open(page, state)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def _fig(at: AppTest, key: str) -> dict:
    """The Plotly JSON of the chart drawn with ``key`` (matched on the element's id)."""
    for el in at.get("plotly_chart"):
        if key in el.proto.id:
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart {key!r}")


# --------------------------------------------------------------------------------------------
# Ratios
# --------------------------------------------------------------------------------------------


def test_ratios_default_to_off_policy_and_count_only_those(lagged_root, app_env):
    """GSPO run with both kinds of steps: the page opens on the off-policy steps; the share
    inside the band, the sequence count and the heatmap's columns are those of steps 1, 3, 5, 7;
    switching to all / on-policy recounts (on-policy: every log s exactly 0, all inside)."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("ratios", {"run": ids["lag-gspo"]})
    assert at.button_group(key="steps").value == "off-policy"
    off = _sequences(lagged_root, "lag-gspo", 1)
    lr = off[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)
    inside = ((lr >= GSPO_BAND[0]) & (lr <= GSPO_BAND[1])).mean()
    assert 0 < inside < 1  # the run was made so: some in, some out
    text = _captions(at)
    assert f"{len(off)} sequences on 4 off-policy steps" in text
    assert f"{inside:.1%} of these sequences lie inside it" in text
    assert "Off-policy steps only: 4 shown" in text
    heat = _fig(at, "ratio_heatmap")["data"][0]
    np.testing.assert_array_equal(_arr(heat["x"]), [1, 3, 5, 7])  # no empty on-policy columns
    np.testing.assert_allclose(_arr(heat["z"]).sum(0), 1.0)

    at.button_group(key="steps").set_value("all").run()
    every = _sequences(lagged_root, "lag-gspo", None)[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)
    inside_all = ((every >= GSPO_BAND[0]) & (every <= GSPO_BAND[1])).mean()
    assert inside_all > inside  # the on-policy half (log s = 0) dilutes it
    assert f"{inside_all:.1%} of these sequences lie inside it" in _captions(at)
    assert f"{len(every)} sequences on 8 steps" in _captions(at)

    at.button_group(key="steps").set_value("on-policy").run()
    text = _captions(at)
    assert "100.0% of these sequences lie inside it" in text and "exactly 0" in text


def test_ratios_band_named_by_the_runs_loss_unit(lagged_root, app_env):
    """GRPO run: the band (the legend's title) is the measured sequence band with its ε, never
    "GSPO range", and no sequence is called clipped (the loss clips tokens: a sequence clip would
    bind); GSPO run: GSPO's range, the loss's unit, and out of range is not clipped: the clip
    binds or not by the advantage's sign. The clip-by-length legend names both units' ε and
    roles."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("ratios", {"run": ids["lag-grpo"]})
    fig = _fig(at, "tok_vs_seq")
    names = [t["name"] for t in fig["data"]]
    title = fig["layout"]["legend"]["title"]["text"]
    assert title == "sequence band (ε 3e-4/4e-4, measured: this loss clips tokens):"
    # spread 0.3: every off-policy sequence lies far outside a 3e-4/4e-4 band, none inside
    assert names == ["out of range, a sequence clip would bind", "out of range, would not bind"]
    assert not any("GSPO" in n or "clipped" in n for n in names)
    bars = [t["name"] for t in _fig(at, "clip_by_length")["data"]]
    assert bars == [
        "share of sequences outside the sequence band, ε 3e-4/4e-4 (measured)",
        "share of tokens outside the token band, ε 0.2/0.2 (the loss's unit)",
    ]
    at = _clean("ratios", {"run": ids["lag-gspo"]})
    fig = _fig(at, "tok_vs_seq")
    title = fig["layout"]["legend"]["title"]["text"]
    assert title == "GSPO's range (ε 3e-4/4e-4, the loss clips here):"
    names = [t["name"] for t in fig["data"]]
    legend = [name for _, name, _ in charts.clip_state_legend("seq")]
    assert legend[:2] == [
        "out of range, clip binds (gradient removed)",
        "out of range, not binding (A's sign keeps the gradient)",
    ]
    assert set(names) <= set(legend) and "inside" in names and legend[1] in names
    assert not any("clipped" in n for n in names)


def test_ratios_arrow_points_at_a_drawn_sequence(lagged_root, app_env):
    """The worked-example arrow sits on a drawn dot: the sequence inside the band with the widest
    token spread (by hand from the table); the on-policy steps have no such dot and no arrow."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("ratios", {"run": ids["lag-gspo"]})
    fig = _fig(at, "tok_vs_seq")
    (arrow,) = fig["layout"]["annotations"]
    off = _sequences(lagged_root, "lag-gspo", 1)
    x = off[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)
    y = (off[Seq.TOKEN_LOG_RATIO_MAX] - off[Seq.TOKEN_LOG_RATIO_MIN]).to_numpy(np.float64)
    ok = (x >= GSPO_BAND[0]) & (x <= GSPO_BAND[1])
    i = np.flatnonzero(ok)[np.argmax(y[ok])]
    assert arrow["x"] == pytest.approx(x[i]) and arrow["y"] == pytest.approx(y[i])
    drawn = [(a, b) for t in fig["data"] for a, b in zip(_arr(t["x"]), _arr(t["y"]), strict=True)]
    assert any(a == pytest.approx(x[i]) and b == pytest.approx(y[i]) for a, b in drawn)
    assert f"span {y[i]:.3g} nats" in _captions(at)
    at.button_group(key="steps").set_value("on-policy").run()
    assert not _fig(at, "tok_vs_seq")["layout"].get("annotations")
    assert "none marked" in _captions(at)


def test_clip_by_length_caption_says_what_the_bars_show(lagged_root, app_env):
    """The length caption's direction and end values are those of the drawn bars."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("ratios", {"run": ids["lag-grpo"]})
    bars = _fig(at, "clip_by_length")["data"]
    tokens = _arr(bars[1]["y"]).astype(np.float64)
    labels = list(_arr(bars[1]["x"]))
    off = _sequences(lagged_root, "lag-grpo", 1)
    by_len = off.groupby(Seq.LENGTH)[Seq.TOKEN_CLIP_FRACTION].mean()  # lengths 5 and 8 here
    np.testing.assert_allclose(tokens, by_len.to_numpy())
    word = "rises" if tokens[-1] > tokens[0] else "falls"
    assert (
        f"mean share of tokens outside the token band {word} with length ({tokens[0]:.1%} at "
        f"length {labels[0]}, {tokens[-1]:.1%} at length {labels[-1]})"
    ) in _captions(at)
    assert "move less per token" not in _captions(at)


def test_shape_sentence_by_hand():
    """Two buckets rising: the sentence names the direction and quotes both ends."""
    from app import curve_words as cw

    assert cw.shape_sentence(["5", "8"], [0.1, 0.3], "share", ".0%") == (
        "The share rises with length (10% at length 5, 30% at length 8)."
    )


def test_step_histogram_columns_are_the_steps_present():
    """Steps 1, 3, 5 only: three columns centred on them (no empty column for 2 or 4); beyond
    ``step_bins`` consecutive present steps share a column centred on their mean."""
    df = pd.DataFrame({Seq.STEP: [1, 1, 3, 5], Seq.SEQ_LOG_RATIO: [0.0, 1.0, 1.0, 0.0]})
    h = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, value_bins=2, value_range=(0, 1))
    np.testing.assert_array_equal(h.step_centers, [1, 3, 5])
    np.testing.assert_allclose(h.z, [[0.5, 0.0, 1.0], [0.5, 1.0, 0.0]])
    h2 = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, step_bins=2, value_range=(0, 1))
    np.testing.assert_allclose(h2.step_centers, [2, 5])  # {1, 3} and {5}: column = i * 2 // 3


def test_symlog_axis_round_trip_and_ticks():
    """y = sign(x) log10(1 + |x|/s): 9s -> 1, -99s -> -2; ticks from the scale's decade up."""
    ax = aggregate.SymLog(1e-3)
    np.testing.assert_allclose(ax.forward([9e-3, -99e-3, 0.0]), [1.0, -2.0, 0.0])
    x = np.array([-0.5, -1e-4, 0.0, 3e-4, 2.0])
    np.testing.assert_allclose(ax.inverse(ax.forward(x)), x)
    vals, text = charts.symlog_ticks(ax, float(ax.forward(-0.1)), float(ax.forward(0.1)))
    assert text == ["-0.1", "-0.01", "-1e-3", "0", "1e-3", "0.01", "0.1"]
    np.testing.assert_allclose(ax.inverse(vals), [-0.1, -0.01, -1e-3, 0, 1e-3, 0.01, 0.1])


# --------------------------------------------------------------------------------------------
# Lengths and Groups
# --------------------------------------------------------------------------------------------


def test_lengths_captions_count_the_subset_shown(lagged_root, app_env):
    """Lengths opens on all steps (its subject is length); off-policy recounts truncation and the
    length/reward correlation on steps 1, 3, 5, 7 only."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("lengths", {"run": ids["lag-gspo"]})
    assert at.button_group(key="steps").value == "all"
    every = _sequences(lagged_root, "lag-gspo", None)
    assert f"{every[Seq.TRUNCATED].mean():.2%} of the {len(every)} completions" in _captions(at)
    at.button_group(key="steps").set_value("off-policy").run()
    off = _sequences(lagged_root, "lag-gspo", 1)
    text = _captions(at)
    assert off[Seq.TRUNCATED].mean() != every[Seq.TRUNCATED].mean()
    assert f"{off[Seq.TRUNCATED].mean():.2%} of the {len(off)} completions" in text
    corr = off[[Seq.LENGTH, Seq.REWARD]].astype(float).corr().iloc[0, 1]
    assert f"Pearson correlation of length and reward: {corr:.2f}" in text
    heat = _fig(at, "length_heatmap")
    assert list(_arr(heat["data"][0]["x"])) == [1, 3, 5, 7]
    mean_line = next(t for t in heat["data"] if t.get("name") == "mean")
    np.testing.assert_array_equal(_arr(mean_line["x"]), [1, 3, 5, 7])


def test_group_rewards_marks_all_wrong_groups():
    """A group whose rewards are all 0 has a zero-height bar: it gets a grey marker at 0, as the
    all-right group gets one at 1; the mixed group gets none."""
    df = pd.DataFrame({Seq.GROUP: np.repeat([0, 1, 2], G), Seq.REWARD: np.concatenate(REWARDS)})
    fig = charts.group_rewards_figure(df)
    bars, marks = fig.data[0], fig.data[1]
    assert list(bars.y) == [1.0, 0.0, 0.5]
    assert list(bars.marker.color) == ["#bbbbbb", "#bbbbbb", "#1f77b4"]
    assert marks.name == "no signal (all rewards equal)"
    assert list(marks.x) == ["0", "1"] and list(marks.y) == [1.0, 0.0]


def test_groups_page_shares_by_hand(lagged_root, app_env):
    """Every step has one all-right, one all-wrong and one mixed group: 1/3 each, 2 of 3 flat."""
    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("groups", {"run": ids["lag-gspo"]})
    text = _captions(at)
    assert "66.7% of groups carry no signal (33.3% all at the run's top reward, 33.3%" in text
    assert "2 of 3 groups have every reward equal" in text
    marks = _fig(at, "group_rewards")["data"][1]
    assert list(_arr(marks["y"])) == [1.0, 0.0]


# --------------------------------------------------------------------------------------------
# Sequences
# --------------------------------------------------------------------------------------------


def _add_reasons(run_dir: Path) -> None:
    """Rewrite the token table to two kept sequences per step with known reasons: the first a
    baseline, the second the step's largest |log s| (the recorder's own reasons depend on which
    sequence wins a tie among the on-policy step's zero log-ratios)."""
    for part in (run_dir / TOKENS_DIR).glob("*.parquet"):
        t = pq.read_table(part)
        if Tok.REASON in t.column_names:
            t = t.drop_columns([Tok.REASON])
        steps = t.column(Tok.STEP).to_pylist()
        rank = [steps[:i].count(s) for i, s in enumerate(steps)]
        t = t.filter(pa.array([r < 2 for r in rank]))
        reasons = ["baseline" if r == 0 else "max_abs_log_s" for r in rank if r < 2]
        pq.write_table(t.append_column(Tok.REASON, pa.array(reasons, pa.string())), part)


def test_sequences_opens_the_linked_step_culprits_first(lagged_root, app_env, tmp_path):
    """A Health link (?run=<key>&step=4, an on-policy step): the page shows that run and step 4
    (the steps control falls back to all), the culprit sequence first and selected, its reason
    shown, its completion as plain text."""
    root = tmp_path / "root"
    shutil.copytree(lagged_root, root)
    ids = run_ids(root)
    run_dir = root / ids["lag-gspo"]
    _add_reasons(run_dir)
    app_env(root)
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT).run()
    at.switch_page("app_pages/sequences.py")
    at.query_params["run"] = ids["lag-gspo"]  # the run's key, as Health builds the link
    at.query_params["step"] = "4"
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="run").value == ids["lag-gspo"]
    assert at.button_group(key="steps").value == "all"
    assert at.number_input(key="step").value == 4
    table = at.dataframe[0].value
    assert len(table) == P * G
    assert list(table["token record"][:2]) == [
        "largest |log s| of the step",
        "random (baseline)",
    ]
    assert (table["token record"][2:] == "").all()
    tokens = _table(run_dir, TOKENS_DIR)
    culprit = tokens[(tokens[Tok.STEP] == 4)].iloc[1]
    assert (table["group"][0], table["sample"][0]) == (culprit[Tok.GROUP], culprit[Tok.SAMPLE])
    text = _captions(at)
    assert "at step 4 (an on-policy step); 2 with token records, 1 kept because" in text
    assert "Token record: largest \\|log s\\| of the step" in text
    assert [c.value for c in at.code] == [f"answer {culprit[Tok.GROUP] * G + culprit[Tok.SAMPLE]}"]


def test_sequences_without_the_token_eps_draw_no_default_band(lagged_root, app_env, tmp_path):
    """run.json without the token ε: no band (never GRPO's 0.2 as a default), and it says so."""
    root = tmp_path / "root"
    shutil.copytree(lagged_root, root)
    ids = run_ids(root)
    info_path = root / ids["lag-grpo"] / "run.json"
    info = json.loads(info_path.read_text())
    info["token_eps_low"] = info["token_eps_high"] = None
    info_path.write_text(json.dumps(info))
    app_env(root)
    at = _clean("sequences", {"run": ids["lag-grpo"]})
    fig = _fig(at, "token_bars")
    assert "token ε unknown" in fig["layout"]["title"]["text"]
    assert [sh["type"] for sh in fig["layout"]["shapes"]] == ["line"]  # log s; no band rect
    assert "token ε is unknown" in _captions(at)


# --------------------------------------------------------------------------------------------
# Runs page
# --------------------------------------------------------------------------------------------


def test_runs_url_opens_the_runs_page(lagged_root, app_env):
    """/runs is a registered URL of the Runs page (the root serves it too): no "Page not found"."""
    app_env(lagged_root)
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT).run()
    pages = {
        i.get("url_pathname"): Path(str(i.get("script_path"))).name
        for i in at._registered_pages.values()
    }
    assert pages["runs"] == "runs.py" and pages[""] == "runs.py"
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception and at.title[0].value == "Runs"
    assert len(at.dataframe[0].value) == 2


def _verl_log(folder: Path, *, config: bool) -> Path:
    """A verl file-logger log: steps 1-3, a malformed line 3, step 3 logged twice, a truncated
    last line; with ``config`` the resolved config beside it (GRPO, clip 0.2/0.28, n = 4)."""
    folder.mkdir(parents=True)
    rows = [
        {"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/pg_clipfrac": 0.01 * s}}
        for s in (1, 2, 3)
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "{not json")
    lines.append(json.dumps({"step": 3, "data": {"critic/score/mean": 0.9 if config else 0.8}}))
    log = folder / "exp.jsonl"  # (two logs: one import each, not the same log twice)
    log.write_text("\n".join(lines) + '\n{"step": 4, "data": {"critic/sc')
    if config:
        actor = {
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "loss_agg_mode": "token-mean",
            "policy_loss": {"loss_mode": "vanilla"},
        }
        cfg = {
            "actor_rollout_ref": {"actor": actor, "rollout": {"n": 4}},
            "algorithm": {"adv_estimator": "grpo"},
        }
        (folder / "exp.config.json").write_text(json.dumps(cfg))
    return log


def test_runs_table_roles_sources_and_unknowns(lagged_root, app_env, tmp_path):
    """Recorded GRPO/GSPO: the loss's ε pair marked (loss), the other (measured), each marked
    "default" (the recorder's: these runs state no ε), source "recorded". A verl import with its config: token 0.2 / 0.28 (loss), sequence unknown, source
    verl, "imported at ...", its malformed line (with its number), truncated last line and
    duplicate step in the problems, and no "no sequences table" problem. Without a config: every
    setting unknown. The per-sequence pages say the import has no per-sequence data."""
    from training_hooks.importers import import_run

    root = tmp_path / "root"
    shutil.copytree(lagged_root, root)
    import_run("verl", str(_verl_log(tmp_path / "a", config=True)), root=str(root), name="verl-cfg")
    import_run(
        "verl", str(_verl_log(tmp_path / "b", config=False)), root=str(root), name="verl-bare"
    )
    app_env(root)
    at = _clean("runs")
    df = at.dataframe[0].value.set_index("name")
    grpo, gspo = df.loc["lag-grpo"], df.loc["lag-gspo"]
    assert (grpo["token ε (low / high)"], grpo["seq ε (low / high)"]) == (
        "0.2 / 0.2 default (loss)",
        "3e-4 / 4e-4 default (measured)",
    )
    assert (gspo["token ε (low / high)"], gspo["seq ε (low / high)"]) == (
        "0.2 / 0.2 default (measured)",
        "3e-4 / 4e-4 default (loss)",
    )
    assert (grpo["loss clips"], gspo["loss clips"]) == ("token (GRPO)", "sequence (GSPO)")
    assert grpo["source"] == "recorded" and grpo["last update"].endswith("ago")
    assert grpo["reduction"] == "sum default"  # not stated: the recorder's default, said so
    cfg, bare = df.loc["verl-cfg"], df.loc["verl-bare"]
    assert cfg["source"] == "verl" and cfg["last update"].startswith("imported at ")
    assert (cfg["token ε (low / high)"], cfg["seq ε (low / high)"]) == (
        "0.2 / 0.28 (loss)",
        "unknown",
    )
    assert (cfg["loss clips"], cfg["group size"], cfg["reduction"]) == (
        "token (GRPO)",
        "4",
        "token_mean",
    )
    for column in (
        "algorithm",
        "loss clips",
        "seq ε (low / high)",
        "token ε (low / high)",
        "reduction",
        "group size",
    ):
        assert bare[column] == "unknown", column
    problems = cfg["problems"]
    assert "1 malformed line(s) of the log skipped: line 3 (not JSON" in problems
    assert "the log's last line (line 6) is truncated" in problems
    assert "1 step(s) logged more than once (the last value of each metric kept): 3" in problems
    assert "no sequences table" not in problems
    expander = " ".join(m.value for m in at.markdown)
    assert "line 3" in expander and "line 6" in expander

    at = _clean("ratios", {"runs": [run_ids(root)["verl-cfg"]]})
    assert "this run has no per-sequence data (imported from verl)" in _captions(at)


def _real_logs() -> Path | None:
    for p in (
        os.environ.get("GSPO_DASH_REAL_LOGS"),
        REPO.parent / "shared" / "real_logs",
        Path("/work/shared/real_logs"),
    ):
        if p and Path(p).is_dir():
            return Path(p)
    return None


def test_runs_table_on_the_real_logs(app_env, tmp_path, real_logs):
    """The real logs imported (a file of several runs as one row per run): each row's source is its tool, "last update" is the import
    time (no log here has a clock of its own at its end), no per-sequence problem, and the verl
    log's torn last line (302) is listed."""
    logs = _real_logs()
    if logs is None:
        pytest.skip("../shared/real_logs is absent (a plain clone)")
    from training_hooks.importers import SeveralRuns, import_run

    sources = {
        "trl": [logs / "trl" / d for d in ("gemma3-rl-abdo-ashraf", "minesweeper-aaipl-srinath")]
        + [logs / "trl" / "agent-memory-redteam" / "trainer_state.json"],
        "tinker": sorted((logs / "tinker").glob("*/*.jsonl")),
        "verl": sorted((logs / "verl").glob("*/*.jsonl")),
    }
    root = tmp_path / "real"
    imported: list[str] = []
    for tool, paths in sources.items():
        for path in paths:
            if tool != "trl" and (done := real_logs.segments(tool, path)):  # imported already
                real_logs.copy_to(root, done)  # (the TRL folders are imported here, as folders)
                imported += [tool] * len(done)
                continue
            try:
                import_run(tool, str(path), root=str(root))
                imported.append(tool)
            except SeveralRuns as e:  # a file of several runs: each imported as its own
                for k in range(1, len(e.segments) + 1):
                    import_run(tool, str(path), root=str(root), segment=k)
                    imported.append(tool)
    assert imported.count("trl") == 3 and imported.count("tinker") > len(sources["tinker"])
    app_env(root)
    at = _clean("runs")
    df = at.dataframe[0].value
    assert sorted(df["source"]) == sorted(imported)
    assert df["last update"].str.startswith("imported at ").all()
    assert not df["problems"].str.contains("sequences table").any()
    assert df["problems"].str.contains(r"last line \(line 302\) is truncated").sum() == 1
    # status: "stopped early" where the source says it stopped before its end (global_step 100
    # of max_steps 200, progress/done_frac 0.15 and ~0.0005, step 100 of max_steps 200), never
    # "finished"; "unknown" where nothing says its planned end (a recipe's own loop: no
    # done_frac, no config); the rest reached their end
    unknown = {"cookbook-cog-rl-exp8"}
    stopped = {
        "agent-memory-redteam",
        "rlvr-gptoss20b-v3b-joanvelja",
        "code-rl-shaider10-run1",
        *(f"bash-codeforces-astowolfo-run{k}" for k in range(1, 6)),
    }
    status = dict(zip(df["name"], df["status"], strict=True))
    assert {n for n, v in status.items() if v == "stopped early"} == stopped
    assert {n for n, v in status.items() if v == "unknown"} == unknown
    assert {v for n, v in status.items() if n not in stopped | unknown} == {"finished"}
    # health: a green "ok" only where most checks ran; elsewhere how much was checked
    for cell in df["health"]:
        m = re.search(r"(\d+) of (\d+) checked", cell)
        if m:  # said only when most checks could not run
            assert int(m.group(1)) * 2 < int(m.group(2)), cell
        else:  # most checks ran: ok, or the findings' counts
            assert cell == "ok" or re.fullmatch(r"(\d+ err · )?\d+ warn", cell), cell
    health = dict(zip(df["name"], df["health"], strict=True))
    # frac_reward_zero_std 1.0 and reward 0.0 on most of its last rows: all-wrong groups
    # and its reward falls 0.022 -> 0.003 (no_reward_progress)
    assert health["agent-memory-redteam"].startswith("1 err · 1 warn")
    # the two healthy verl runs, whose configs say much (the sigfrac run's length fall is
    # overlong answers ending as the reward rises: a note, overlong_cured, not a warning)
    oks = sorted(df.loc[df["health"] == "ok", "name"])
    assert oks == [
        "deepseek1.5b_sync_8gpu_clip_low0.2_high0.28_seed0",
        "deepseek1.5b_sync_8gpu_sigfrac_cfixed_lr1.25e-5_alpharlim0.05",
    ]
    # the Tinker runs with nothing to report, each saying how little could be checked
    quiet = set(df.loc[df["health"].str.startswith("nothing found, "), "name"])
    assert quiet == {
        "rlvr-gptoss20b-v3b-joanvelja",
        "cookbook-cog-rl-exp8",
        *(f"bash-codeforces-astowolfo-run{i}" for i in range(1, 6)),
    }


# --------------------------------------------------------------------------------------------
# Sequences: token texts, prompt apart, readable headers
# --------------------------------------------------------------------------------------------


def _record_texts(root, name: str, *, texts: bool) -> str:
    """One step, P = 2 groups of G = 2, T = 4 (row 0 masks its last token), every sequence's
    tokens kept; with ``texts`` the prompts, completions and token texts (HTML and a space in
    them). Returns the run id."""
    import torch

    from training_hooks import RunRecorder

    B, T_ = 4, 4
    old = -torch.ones(B, T_)  # (log-probs <= 0)
    logp = old + torch.tensor([0.1, -0.2, 0.3, 0.0]).repeat(B, 1)
    mask = torch.ones(B, T_, dtype=torch.bool)
    mask[0, 3] = False
    kw = {}
    if texts:
        kw = {
            "prompts": ["sort <b>cab</b> =", "rev ab ="],
            "completions": [f"abc{b}<eos>" for b in range(B)],
            "token_texts": [[" a", "<b>", "c", "<pad>"]] * B,
        }
    with RunRecorder(root=root, name=name, algorithm="grpo", mlflow=False, token_samples=B) as rec:
        rec.log_step(
            0, rewards=torch.tensor([[1.0, 0.0], [0.0, 1.0]]), logprobs=logp,
            old_logprobs=old, mask=mask, **kw,
        )  # fmt: skip
    return rec.run_id


@pytest.mark.slow
def test_sequences_tokens_prompt_and_headers(tmp_path, app_env):
    """Sequences: the bars' x axis carries each token's text where the run recorded it (masked
    positions only, a leading space shown as ␣, HTML as text), whole-number positions otherwise;
    the prompt sits in its own labelled box apart from the completion; headers are words with
    the declared meaning as help."""
    root = tmp_path / "root"
    with_texts = _record_texts(root, "texts", texts=True)
    without = _record_texts(root, "plain", texts=False)
    app_env(root)
    at = _clean("sequences", {"run": with_texts})
    xaxis = _fig(at, "token_bars")["layout"]["xaxis"]
    row = at.dataframe[0].value.iloc[0]
    n = int(row["length"])  # the selected row's masked tokens
    assert xaxis["ticktext"] == ["␣a", "&lt;b&gt;", "c", "&lt;pad&gt;"][:n]
    assert xaxis["tickvals"] == list(range(n)) and xaxis["title"]["text"].startswith("token (")
    boxes = [c.value for c in at.code]
    group = int(row["group"])
    assert boxes == [
        ["sort <b>cab</b> =", "rev ab ="][group],
        f"abc{2 * group + int(row['sample'])}<eos>",
    ]
    labels = [m.value for m in at.markdown if m.value.startswith("**")]
    assert labels[-2:] == [
        "**Prompt** (the group's prompt, shown as plain text)",
        "**Completion** (the model's output, shown as plain text)",
    ]
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns[Seq.TOKEN_LOG_RATIO_MIN]["label"] == "token log r min"
    assert columns[Seq.KL_OLD]["label"] == "KL old→new"
    assert columns[Seq.LENGTH]["help"] == "masked tokens |M_b|"

    at = _clean("sequences", {"run": without})
    xaxis = _fig(at, "token_bars")["layout"]["xaxis"]
    assert (xaxis["tickmode"], xaxis["dtick"], xaxis["tickformat"]) == ("linear", 1, "d")
    assert "ticktext" not in xaxis and xaxis["title"]["text"] == "token position"
    assert not at.code
    text = _captions(at)
    assert "No prompt text recorded" in text and "No completion text recorded" in text


def test_curve_words_agree_with_the_curve():
    """The shapes by hand: the demo's reward by length (0 at 1, 0.89 at 2, down to 0.17) rises
    then falls; a fall from 0.88 to 0.17 with a wobble falls (Spearman ρ quoted); a wave with an
    inner peak and an inner dip moves up and down; two buckets quote no ρ."""
    from app import curve_words as cw

    demo = cw.curve_shape(["1", "2", "3", "4", "5-6"], [0.0, 0.89, 0.6, 0.3, 0.17])
    assert demo.words == cw.PEAK and demo.values == (0.0, 0.89, 0.17)
    # ranks 1 5 4 3 2 against 1..5: d = 0 3 1 -1 -3, sum d^2 = 20, rho = 1 - 6*20/120 = 0
    assert demo.rho == pytest.approx(0.0)
    text = cw.shape_sentence(["1", "2", "3", "4", "5-6"], [0.0, 0.89, 0.6, 0.3, 0.17], "r", ".2f")
    assert text == (
        "The r rises then falls with length (0.00 at length 1, peak 0.89 at length 2, 0.17 at "
        "length 5-6). Spearman ρ of bucket order and r over 5 buckets: 0.00."
    )
    falls = cw.curve_shape(list("abcd"), [0.88, 0.5, 0.6, 0.17])
    # ranks 4 2 3 1: d = 3 0 0 -3, sum d^2 = 18, rho = 1 - 6*18/60 = -0.8
    assert falls.words == cw.FALLS and falls.rho == pytest.approx(-0.8)
    assert cw.curve_shape(list("abcd"), [0.5, 0.7, 0.4, 0.55]).words == cw.UP_AND_DOWN
    assert cw.curve_shape(list("ab"), [1.0, 1.0]).words == cw.FLAT
    assert cw.shape_sentence(["5", "8"], [0.1, 0.3], "share", ".0%") == (
        "The share rises with length (10% at length 5, 30% at length 8)."
    )
    uneven = cw.shape_sentence(list("abcde"), [0.9, 0.95, 0.3, 0.93, 0.2], "x", ".2f")
    assert uneven.startswith("The x falls with length, unevenly (0.90 at length a, 0.20")


def test_lengths_caption_names_the_statistic_and_the_drawn_shape(lagged_root, app_env):
    """The reward-by-length caption: Pearson r over the completions, then the shape and Spearman ρ
    of the drawn bucket means (two routes: the figure's y values through curve_words)."""
    from app import curve_words as cw

    app_env(lagged_root)
    ids = run_ids(lagged_root)
    at = _clean("lengths", {"run": ids["lag-gspo"]})
    fig = _fig(at, "reward_vs_length")
    y = _arr(fig["data"][0]["y"]).astype(np.float64)
    shape = cw.curve_shape([str(i) for i in range(len(y))], y)
    text = _captions(at)
    assert f"The mean reward {shape.words} with length" in text
    if len(y) > 2:
        assert f"over {len(y)} buckets: {cw.spearman(y):.2f}" in text
    assert "no steady trend" not in text
