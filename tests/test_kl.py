"""kl_estimate: hand-computed estimators, padding, and Monte Carlo unbiasedness of k1/k3."""

import math

import pytest
import torch

from gspo_metrics import kl_estimate

F64 = torch.float64


def test_estimators_hand_computed():
    """d = logp - ref = [0.1, -0.2] (third token padded): k1, k2, k3 by hand."""
    logp = torch.tensor([[-1.0, -2.0, float("nan")]], dtype=F64)
    ref = torch.tensor([[-1.1, -1.8, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0]])
    d = [0.1, -0.2]
    k1 = sum(d) / 2
    k2 = sum(0.5 * x * x for x in d) / 2
    k3 = sum(math.exp(-x) + x - 1 for x in d) / 2
    for name, want in (("k1", k1), ("k2", k2), ("k3", k3)):
        got = kl_estimate(logp, ref, mask, estimator=name)
        torch.testing.assert_close(got, torch.tensor([want], dtype=F64), rtol=1e-12, atol=1e-15)


def test_k3_is_nonnegative_and_zero_at_equality():
    """k3 >= 0 for any d, and exactly 0 when the policies agree on every token."""
    torch.manual_seed(0)
    logp = torch.randn(8, 16, dtype=F64)
    ref = torch.randn(8, 16, dtype=F64)
    mask = torch.ones(8, 16)
    assert (kl_estimate(logp, ref, mask) >= 0).all()
    assert (kl_estimate(logp, logp, mask) == 0).all()


def test_monte_carlo_unbiased_for_true_kl():
    """Tokens sampled from p: mean k1 and mean k3 of log p - log q converge to KL(p || q) exactly."""
    gen = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=F64)
    q = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=F64)
    true_kl = float((p * (p / q).log()).sum())
    x = torch.multinomial(p, 400_000, replacement=True, generator=gen).reshape(400, 1000)
    logp, logq = p.log()[x], q.log()[x]
    mask = torch.ones_like(logp)
    for name, tol in (("k1", 0.01), ("k3", 0.01)):
        est = kl_estimate(logp, logq, mask, estimator=name).mean().item()
        assert est == pytest.approx(true_kl, abs=tol), name


def test_bad_input():
    """Unknown estimator lists the valid ones; mismatched shapes name ref_logprobs."""
    with pytest.raises(ValueError, match="unknown estimator 'k4'; valid: 'k1', 'k2', 'k3'"):
        kl_estimate(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), estimator="k4")
    with pytest.raises(
        ValueError, match=r"ref_logprobs has shape \(1, 3\) but logprobs has shape \(1, 2\)"
    ):
        kl_estimate(torch.zeros(1, 2), torch.zeros(1, 3), torch.ones(1, 2))
    with pytest.raises(ValueError, match="marks no token"):
        kl_estimate(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2))
