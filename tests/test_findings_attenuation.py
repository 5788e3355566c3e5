"""Health by loss: the clip checks only for a loss with a hard clip, in its unit and ε; the
attenuation checks (too high, too low, one-sided) for every loss, on hand-made step tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from training_hooks.findings import (
    ATTENUATION_HIGH,
    ATTENUATION_LOW,
    ATTENUATION_ONE_SIDED,
    CLIP_HIGH,
    RunFacts,
    run_health,
)
from training_hooks.findings.attenuation import HIGH, LOW, ONE_SIDED
from training_hooks.findings.clip import HIGH as CLIP_HIGH_CHECK
from training_hooks.findings.core import NOT_LOGGED
from training_hooks.findings.run import CODES
from training_hooks.findings.thresholds import ATTENUATION, THRESHOLDS
from training_hooks.schema import Step

N = 60  # off-policy steps (every row lag 1), above min_basis and clip_min_steps


def _steps(**cols) -> pd.DataFrame:
    return pd.DataFrame({Step.STEP: np.arange(N), Step.POLICY_LAG: np.ones(N, int), **cols})


def _codes(report) -> dict:
    return {f.code: f for f in report.findings}


def test_the_attenuation_codes_are_stable_codes():
    assert {ATTENUATION_HIGH, ATTENUATION_LOW, ATTENUATION_ONE_SIDED} <= set(CODES)
    for name in ("attenuation_warn_high", "attenuation_warn_low", "attenuation_side_min"):
        assert THRESHOLDS[name] is getattr(ATTENUATION, name.removeprefix("attenuation_"))
        assert THRESHOLDS[name].value > 0


def test_cispo_is_never_judged_on_a_clip_share():
    """A CISPO run whose token clip column reads 40% (the recorder computes it for every run):
    no clip finding, the clip checks under Not checked saying CISPO has no hard clip."""
    df = _steps(**{Step.TOKEN_CLIP_FRACTION: np.full(N, 0.4)})
    report = run_health(df, RunFacts("cispo", token_eps=(0.2, 0.2), seq_eps=(3e-4, 4e-4)))
    assert CLIP_HIGH not in _codes(report)
    assert "CISPO has no hard clip" in report.not_checked[CLIP_HIGH_CHECK]


def test_dapo_is_judged_in_the_token_unit_and_dapo_seq_in_the_sequence_unit():
    """DAPO (token level) reads the token column with GRPO's band: 40% of tokens is above its 5%
    warning, named "GRPO (DAPO aggregation)"; at the sequence level (dapo-seq) the sequence column
    with GSPO's band: 20% of sequences is inside 10-30%, no finding, though the token column reads
    40%; at 60% a warning named "GSPO (DAPO aggregation)" whose advice does not ask to check an ε
    that is GSPO's 3e-4/4e-4 already, and does ask where it is not."""
    tok = _steps(**{Step.TOKEN_CLIP_FRACTION: np.full(N, 0.4)})
    found = _codes(run_health(tok, RunFacts("dapo", token_eps=(0.2, 0.28))))[CLIP_HIGH]
    assert found.evidence.startswith("GRPO (DAPO aggregation) clips 40% of tokens")
    assert "ε 0.2/0.28" in found.evidence
    seq = _steps(
        **{Step.TOKEN_CLIP_FRACTION: np.full(N, 0.4), Step.SEQ_CLIP_FRACTION: np.full(N, 0.2)}
    )
    report = run_health(seq, RunFacts("dapo-seq", seq_eps=(3e-4, 4e-4), token_eps=(0.2, 0.2)))
    assert CLIP_HIGH not in _codes(report) and CLIP_HIGH_CHECK in report.checked
    high = _steps(**{Step.SEQ_CLIP_FRACTION: np.full(N, 0.6)})
    f = _codes(run_health(high, RunFacts("dapo-seq", seq_eps=(3e-4, 4e-4))))[CLIP_HIGH]
    assert f.title == "GSPO (DAPO aggregation) clips far more than usual (sequence unit)"
    assert f.evidence.startswith("GSPO (DAPO aggregation) clips 60% of sequences")
    assert "check ε" not in f.advice and "(ε is GSPO's 3e-4/4e-4 already)" in f.advice
    f = _codes(run_health(high, RunFacts("gspo", seq_eps=(2e-3, 2e-3))))[CLIP_HIGH]
    assert "check ε: 2e-3/2e-3 here, GSPO's sequence-unit ε is 3e-4/4e-4" in f.advice


def test_attenuation_too_high_for_any_loss():
    """SAPO removing 70% of the gradient on every off-policy step: above 50%, a warning that
    names SAPO (on the token ratio: "GRPO (SAPO loss)") and the mean (70%) over the 60 steps."""
    df = _steps(
        **{
            Step.ATTENUATION_MEAN: np.full(N, 0.7),
            Step.ATTENUATION_POS_MEAN: np.full(N, 0.7),
            Step.ATTENUATION_NEG_MEAN: np.full(N, 0.7),
        }
    )
    f = _codes(run_health(df, RunFacts("sapo")))[ATTENUATION_HIGH]
    assert f.severity == "warning" and f.basis == N
    assert f.evidence.startswith(
        "GRPO (SAPO loss) removes 70% of the plain importance-weighted gradient"
    )


def test_attenuation_too_low_and_one_sided():
    """A GRPO run at 1e-5 (below 3e-5): the trust region does not act (a note). A CISPO run
    removing 4% of the A > 0 gradient and 0.1% of the A < 0 one (40x): one-sided, on A > 0."""
    low = _steps(**{Step.ATTENUATION_MEAN: np.full(N, 1e-5)})
    report = run_health(low, RunFacts("grpo", token_eps=(0.2, 0.2)))
    assert _codes(report)[ATTENUATION_LOW].severity == "info"
    assert report.not_checked[ONE_SIDED] == NOT_LOGGED
    side = _steps(
        **{
            Step.ATTENUATION_MEAN: np.full(N, 0.02),
            Step.ATTENUATION_POS_MEAN: np.full(N, 0.04),
            Step.ATTENUATION_NEG_MEAN: np.full(N, 0.001),
        }
    )
    codes = _codes(run_health(side, RunFacts("cispo")))
    f = codes[ATTENUATION_ONE_SIDED]
    assert "acts on A > 0 only" in f.title and "4% of the plain gradient" in f.evidence
    assert ATTENUATION_HIGH not in codes and ATTENUATION_LOW not in codes


def test_no_attenuation_column_is_not_checked():
    """An import (no tool logs the attenuation): the three checks listed as not logged."""
    report = run_health(_steps(**{Step.REWARD_MEAN: np.linspace(0, 1, N)}), RunFacts("grpo"))
    for name in (HIGH, LOW, ONE_SIDED):
        assert report.not_checked[name] == NOT_LOGGED
