"""What the recorder is told and what it records (issue 30): steps only grow within one recorder
and a resumed run's steps logged again replace the earlier rows; log-probs above 0 are refused;
ε and the reduction not given are recorded as defaults, and said so; ``mlflow=True`` says where
its store is; the token view has rows with the default settings."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

from gspo_metrics.checks import logprob_tolerance
from training_hooks import RunRecorder, schema, tables
from training_hooks.findings import RunFacts, run_health
from training_hooks.findings.clip import DEFAULT_EPS, DEFAULT_EPS_WHY
from training_hooks.findings.run import facts_of
from training_hooks.schema import Seq, Step, read_run_info
from training_hooks.sinks import mlflow as mlflow_sink
from training_hooks.supersede import overlapping, superseded_rows


def _steps_on_disk(run_dir) -> pd.DataFrame:
    return tables.read_table(run_dir, schema.STEPS_DIR)


def _app_read(run_dir, table: str) -> pd.DataFrame:
    """The table as the dashboard reads it (``tables.read_listed``, no caching)."""
    t = tables.read_listed(str(run_dir), table, None, None)
    assert t is not None and not t.problems, t and t.problems
    return t.df


# ----------------------------------------------------------------------------------- steps


def test_a_repeated_or_backwards_step_is_refused_naming_both(tmp_path, make_batch):
    """Steps 0-3, then 3 again and 0: each a ValueError naming the step and the last one
    logged (``strict=True``: raised; by default: the step dropped, its reason in run.json's
    faults), before anything is recorded. The run holds steps 0-3 once each (B = 16 sequences
    per step), run.json's last_step is 3, and the findings sink (run every step) closes
    without a fault (it used to fail with pandas' InvalidIndexError on the repeat)."""
    for strict in (True, False):
        root = tmp_path / str(strict)
        rec = RunRecorder(
            root=root, name="order", findings_every=1, steps_per_file=2, strict=strict
        )
        for s in range(4):
            rec.log_step(s, **make_batch(seed=s))
        for bad in (3, 0):
            why = f"step {bad} is at or below the last step logged, 3"
            if strict:
                with pytest.raises(ValueError, match=why):
                    rec.log_step(bad, **make_batch(seed=9))
            else:
                with pytest.warns(RuntimeWarning, match=why):
                    rec.log_step(bad, **make_batch(seed=9))
        assert rec.last_step == 3
        rec.log_step(4, **make_batch(seed=4))  # the recorder goes on after a refused step
        rec.close()
        info = read_run_info(rec.run_dir)
        dropped = [f["error"] for f in info.faults if f["sink"] == "log_step"]
        assert len(dropped) == (0 if strict else 2)
        assert [f for f in info.faults if f["sink"] != "log_step"] == []
        assert info.last_step == 4 and info.status == "finished"
        assert _steps_on_disk(rec.run_dir)[Step.STEP].tolist() == [0, 1, 2, 3, 4]
        seqs = tables.read_table(rec.run_dir, schema.SEQUENCES_DIR)
        assert seqs.groupby(Seq.STEP).size().tolist() == [16] * 5


def _two_sessions(tmp_path, make_batch, *, compact_first: bool):
    """Session 1: steps 0-5 of B = 16 (P=4, G=4), two steps per part. Session 2 resumes the run
    id and logs steps 3 and 4 again with B = 8 (P=2): another batch, from a checkpoint."""
    rec = RunRecorder(root=tmp_path, name="res", steps_per_file=2, findings_every=0)
    first = {}
    for s in range(6):
        b = make_batch(4, 4, 10, seed=s)
        rec.log_step(s, **b)
        first[s] = b
    if not compact_first:  # as after a crash: the parts stay, nothing compacted
        assert rec.flush(timeout=30)
        rec.parquet.compact = False
    rec.close()
    rec2 = RunRecorder(root=tmp_path, run_id=rec.run_id, steps_per_file=1, findings_every=0)
    again = {s: make_batch(2, 4, 10, seed=100 + s) for s in (3, 4)}
    for s, b in again.items():
        rec2.log_step(s, **b)
    assert rec2.flush(timeout=30)
    return rec2, first, again


def _check_superseded(run_dir, again) -> None:
    """Steps 0-5 once each; steps 3 and 4 hold session 2's batch only (8 sequences, its own
    sequence log-ratios), the others session 1's 16; read by the app's reader and by
    ``tables.read_table`` alike."""
    for steps, seqs in (
        (
            _app_read(run_dir, schema.STEPS_DIR),
            _app_read(run_dir, schema.SEQUENCES_DIR),
        ),
        (_steps_on_disk(run_dir), tables.read_table(run_dir, schema.SEQUENCES_DIR)),
    ):
        steps = steps.sort_values(Step.STEP)
        assert steps[Step.STEP].tolist() == [0, 1, 2, 3, 4, 5]
        assert steps[Step.NUM_SEQUENCES].tolist() == [16, 16, 16, 8, 8, 16]
        sizes = seqs.groupby(Seq.STEP).size()
        assert sizes.to_dict() == {0: 16, 1: 16, 2: 16, 3: 8, 4: 8, 5: 16}
        for s, b in again.items():
            rows = seqs[seqs[Seq.STEP] == s].sort_values([Seq.GROUP, Seq.SAMPLE])
            m = b["mask"].double()
            expected = ((b["logprobs"] - b["old_logprobs"]).double() * m).sum(1) / m.sum(1)
            np.testing.assert_allclose(rows[Seq.SEQ_LOG_RATIO], expected.numpy(), atol=1e-6)
        tokens = tables.read_table(run_dir, schema.TOKENS_DIR)
        assert tokens[tokens[schema.Tok.STEP] == 3][schema.Tok.SAMPLE].max() < 4  # G = 4, P = 2
        assert tokens[tokens[schema.Tok.STEP] == 3][schema.Tok.GROUP].max() <= 1


@pytest.mark.parametrize("compact_first", [True, False])
def test_a_resumed_run_logging_steps_again_replaces_their_rows(tmp_path, make_batch, compact_first):
    """After a resume, steps 3 and 4 logged again (another batch size) replace session 1's rows
    of those steps in every table: while session 2 runs (over session 1's compacted file, or
    over its parts left by a crash, whose names sort the old step 4 after the new one) and in
    the one compacted file per table session 2's close leaves; last_step is the largest, 5."""
    rec2, _, again = _two_sessions(tmp_path, make_batch, compact_first=compact_first)
    run_dir = rec2.run_dir
    _check_superseded(run_dir, again)
    assert read_run_info(run_dir).last_step == 5 and rec2.last_step == 5
    rec2.close()
    _check_superseded(run_dir, again)
    for table in schema.TABLE_DIRS:  # one write per step on disk: a plain read agrees
        (name,) = os.listdir(os.path.join(run_dir, table))
        assert name.startswith("compacted-")
    raw = pd.read_parquet(os.path.join(run_dir, schema.SEQUENCES_DIR))
    assert raw.groupby(Seq.STEP).size().to_dict() == {0: 16, 1: 16, 2: 16, 3: 8, 4: 8, 5: 16}
    info = read_run_info(run_dir)
    assert info.last_step == 5 and info.faults == [] and info.summary is not None
    assert info.summary.steps == 6


def test_superseded_rows_by_write_order_per_rank():
    """The newest write (the name's counter, not its step range) keeps a step; ranks apart;
    a name that does not parse neither supersedes nor is superseded; a compacted file (counter
    9) is the newest write of every step it holds."""
    part = schema.part_name
    files = [
        (part(0, 5, 0, 0), [0, 1, 2, 3, 4, 5]),
        (part(3, 4, 0, 2), [3, 4]),  # the newest of rank 0
        (part(4, 7, 0, 1), [4, 5, 6, 7]),
        (part(0, 5, 1, 3), [0, 1, 2, 3, 4, 5]),  # rank 1: alone
        ("foreign.parquet", [3, 4]),
    ]
    got = {
        k: v.tolist() for k, v in superseded_rows([n for n, _ in files], dict(files).get).items()
    }
    assert got == {part(4, 7, 0, 1): [4], part(0, 5, 0, 0): [3, 4, 5]}
    compacted = schema.compacted_name(0, 7, 0, 9)
    with_compacted = dict([*files, (compacted, list(range(8)))])
    got = superseded_rows(list(with_compacted), with_compacted.get)
    assert {k: v.tolist() for k, v in got.items()} == {
        part(0, 5, 0, 0): [0, 1, 2, 3, 4, 5],
        part(3, 4, 0, 2): [3, 4],
        part(4, 7, 0, 1): [4, 5, 6, 7],
    }
    asked = []
    apart = [part(0, 4, 0, 0), part(5, 9, 0, 1)]
    assert superseded_rows(apart, lambda n: asked.append(n)) == {} and asked == []  # not read
    assert overlapping(n for n, _ in files)
    assert not overlapping([part(0, 4, 0, 0), part(5, 9, 0, 1), part(0, 9, 1, 2)])


# ----------------------------------------------------------------------------- plausibility


def test_probabilities_passed_as_log_probs_are_refused(tmp_path, make_batch):
    """``torch.rand`` as logprobs: a ValueError naming logprobs and counting the values above 0
    inside the mask (the padding's are not counted); the same for old_logprobs, ref_logprobs and
    sampler_logprobs. Nothing is recorded: the run has no step."""
    b = make_batch(4, 4, 10, seed=3)
    rand = torch.rand(16, 10, generator=torch.Generator().manual_seed(0))
    n = int(((rand > 1e-3) & b["mask"]).sum())  # float32: the tolerance is 1e-3
    assert 0 < n < int((rand > 1e-3).sum())  # (some positives sit under the padding)
    with RunRecorder(root=tmp_path, name="rand", findings_every=0) as rec:
        with pytest.raises(ValueError, match=rf"^logprobs of shape \(16, 10\) has {n} value"):
            rec.log_step(0, **{**b, "logprobs": rand})
        for name in ("old_logprobs", "ref_logprobs", "sampler_logprobs"):
            with pytest.raises(ValueError, match=rf"^{name} of shape .* above 0 inside the mask"):
                rec.log_step(0, **{**b, name: rand})
    assert read_run_info(rec.run_dir).last_step is None
    assert len(_steps_on_disk(rec.run_dir)) == 0


def test_log_probs_within_rounding_or_under_the_padding_are_accepted(tmp_path, make_batch):
    """A log-prob of +5e-4 (float32 rounding) inside the mask is accepted, and so is any value
    under the padding: that step's numbers equal the same batch with 0 under the padding; +inf
    is a non-finite input (counted), not refused. 1e-3 above 0 is the float32 tolerance, 0.25
    bfloat16's (32 epsilons)."""
    assert logprob_tolerance(torch.float32) == 1e-3 == logprob_tolerance(torch.float64)
    assert logprob_tolerance(torch.bfloat16) == 0.25
    b = make_batch(4, 4, 10, seed=5)
    lp = b["logprobs"].clone()
    lp[0, 0] = 5e-4
    garbage = torch.where(b["mask"], lp, torch.full_like(lp, 7.0))
    clean = torch.where(b["mask"], lp, torch.zeros_like(lp))
    inf = clean.clone()
    inf[1, 0] = float("inf")
    with RunRecorder(root=tmp_path, name="ok", findings_every=0) as rec:
        rec.log_step(0, **{**b, "logprobs": garbage})
        rec.log_step(1, **{**b, "logprobs": clean})
        rec.log_step(2, **{**b, "logprobs": inf})
    steps = _steps_on_disk(rec.run_dir).set_index(Step.STEP)
    numbers = [c for c in steps.columns if steps[c].dtype.kind == "f" and c != Step.WALL_TIME]
    pd.testing.assert_series_equal(steps.loc[0, numbers], steps.loc[1, numbers], check_names=False)
    assert steps.loc[2, Step.NONFINITE_COUNT] == 1


# --------------------------------------------------------------------------- stated or not


def test_settings_not_given_are_recorded_as_defaults(tmp_path, make_batch):
    """No ε and no reduction: run.json holds the values used (3e-4/4e-4, 0.2/0.2, "sum") with
    setting_sources "default" for each; a stated token ε and reduction are "stated". Health's
    facts carry which, and the clip check says it judges at the default ε (its finding and its
    Checked line); a stated ε is not called a default."""
    with RunRecorder(root=tmp_path, name="bare", algorithm="grpo", findings_every=0) as rec:
        rec.log_step(0, **make_batch())
    data = json.loads(open(os.path.join(rec.run_dir, schema.RUN_JSON)).read())
    assert (data["seq_eps_low"], data["seq_eps_high"]) == (3e-4, 4e-4)
    assert (data["token_eps_low"], data["token_eps_high"], data["reduction"]) == (0.2, 0.2, "sum")
    assert data["setting_sources"] == {
        "seq_eps": "default",
        "token_eps": "default",
        "reduction": "default",
    }
    facts = facts_of(read_run_info(rec.run_dir))
    assert facts.defaults == ("reduction", "seq_eps", "token_eps") and facts.eps_is_default

    with RunRecorder(
        root=tmp_path,
        name="dapo",
        algorithm="grpo",
        token_eps=(0.2, 0.28),
        reduction="token_mean",
        findings_every=0,
    ) as rec2:
        rec2.log_step(0, **make_batch())
    sources = json.loads(open(os.path.join(rec2.run_dir, schema.RUN_JSON)).read())
    assert sources["setting_sources"] == {
        "seq_eps": "default",
        "token_eps": "stated",
        "reduction": "stated",
    }
    stated = facts_of(read_run_info(rec2.run_dir))
    assert stated.defaults == ("seq_eps",) and not stated.eps_is_default

    n = 60  # off-policy steps clipping 30% of tokens: clip_high
    df = pd.DataFrame(
        {
            Step.STEP: np.arange(n),
            Step.POLICY_LAG: np.ones(n, int),
            Step.TOKEN_CLIP_FRACTION: np.full(n, 0.3),
            Step.REWARD_MEAN: np.linspace(0.2, 0.6, n),
        }
    )
    for defaults, said in (((), False), (("token_eps",), True)):
        report = run_health(df, RunFacts("grpo", token_eps=(0.2, 0.2), defaults=defaults))
        clip = next(f for f in report.findings if f.code == "clip_high")
        assert (DEFAULT_EPS_WHY in clip.evidence) is said
        assert (DEFAULT_EPS in report.checked["clip share too high"]) is said
    assert "ε 0.2/0.2 in the token unit, " + DEFAULT_EPS_WHY in clip.evidence


def test_the_token_view_has_rows_with_the_default_settings(tmp_path, make_batch):
    """Without ``token_samples``, each step keeps the per-token log-ratios of 8 sequences spread
    over the batch (and the culprits), for the Sequences page's token view."""
    with RunRecorder(root=tmp_path, name="tok", findings_every=0) as rec:
        rec.log_step(0, **make_batch(8, 4, 10, seed=1))  # B = 32
    tokens = tables.read_table(rec.run_dir, schema.TOKENS_DIR)
    rows = set((tokens[schema.Tok.GROUP] * 4 + tokens[schema.Tok.SAMPLE]).tolist())
    spread = {round(i * 31 / 7) for i in range(8)}  # 0, 4, 9, 13, 18, 22, 27, 31
    assert spread <= rows and len(rows) <= 8 + 6  # + up to three culprits per reason


def test_mlflow_true_says_where_its_store_is_once(tmp_path, monkeypatch):
    """mlflow=True with no MLFLOW_TRACKING_URI: one line naming the SQLite file in the working
    folder and the mlruns folder beside it, printed once per store; a store the user named is
    not announced."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(mlflow_sink, "_ANNOUNCED", set())
    uri = mlflow_sink.resolve_tracking_uri(True)
    assert uri == f"sqlite:///{tmp_path}/mlflow.db"
    line = mlflow_sink.announce_store(True, uri)
    assert line == (
        f"gspo-dash: MLflow store {uri} (the default with mlflow=True); MLflow puts the artifacts "
        f"of an experiment it creates in {tmp_path}/mlruns; pass mlflow='<tracking URI>' to "
        "choose another"
    )
    assert mlflow_sink.announce_store(True, uri) is None  # once
    assert mlflow_sink.announce_store("sqlite:///x.db", "sqlite:////a/x.db") is None  # named
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    other = mlflow_sink.announce_store(True, "http://127.0.0.1:9")
    assert other is not None and "(from MLFLOW_TRACKING_URI)" in other and "mlruns" not in other


@pytest.mark.slow  # opens a SQLite MLflow store: a few seconds
def test_the_recorder_prints_the_mlflow_location(tmp_path, monkeypatch, make_batch, capsys):
    """A recorder with mlflow=True prints the store's line on stderr once, and the store is
    where it says (mlflow.db in the working folder)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(mlflow_sink, "_ANNOUNCED", set())
    for name in ("a", "b"):
        kw = {"mlflow": True, "mlflow_process": False, "findings_every": 0}
        with RunRecorder(root=tmp_path / "runs", name=name, **kw) as rec:
            rec.log_step(0, **make_batch())
    err = capsys.readouterr().err
    assert err.count("gspo-dash: MLflow store ") == 1
    assert f"sqlite:///{tmp_path}/mlflow.db" in err and (tmp_path / "mlflow.db").exists()
