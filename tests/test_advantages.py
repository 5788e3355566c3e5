"""group_advantages and zero_variance_groups against the lesson seed and hand arithmetic."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gspo_metrics import group_advantages, zero_variance_groups

F64 = torch.float64


def test_lesson_example_population_std():
    """R = [1,0,1,0]: mean 0.5, population std 0.5, so A = +-0.5/0.5001 = +-0.99980 (the lesson)."""
    adv = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=F64))
    a = 0.5 / (0.5 + 1e-4)
    torch.testing.assert_close(adv, torch.tensor([[a, -a, a, -a]], dtype=F64), rtol=0, atol=1e-12)
    assert round(a, 5) == 0.99980


def test_lesson_example_unbiased_std():
    """With Bessel's std (TRL, verl) the same group gives +-0.5/(sqrt(1/3)+1e-4) = +-0.86588."""
    adv = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=F64), std="unbiased")
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    torch.testing.assert_close(adv, torch.tensor([[a, -a, a, -a]], dtype=F64), rtol=0, atol=1e-12)
    assert round(a, 5) == 0.86588


def test_identical_rewards_give_exact_zeros():
    """A zero-variance group gets exactly 0, even where the float mean is not exact (0.1 x 3)."""
    rewards = torch.tensor([[0.1, 0.1, 0.1], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float32)
    for scale in ("group", "batch", "none"):
        adv = group_advantages(rewards, scale=scale)
        assert torch.equal(adv[:2], torch.zeros(2, 3))
        assert not torch.isnan(adv).any()
    assert zero_variance_groups(rewards).tolist() == [True, True, False]


def test_batch_scale_hand_computed():
    """scale='batch': group mean removed, divided by the std of all P*G rewards + eps."""
    rewards = torch.tensor([[1.0, 0.0], [3.0, 3.0]], dtype=F64)
    # all rewards [1,0,3,3]: mean 1.75, population var = (0.5625+3.0625+1.5625*2)/4 = 1.6875
    batch_std = math.sqrt(1.6875)
    adv = group_advantages(rewards, scale="batch")
    expected = torch.tensor([[0.5, -0.5], [0.0, 0.0]], dtype=F64) / (batch_std + 1e-4)
    torch.testing.assert_close(adv, expected, rtol=0, atol=1e-12)


def test_scale_none_only_centres():
    """scale='none' (Dr. GRPO) is r - group mean, with no division."""
    adv = group_advantages(torch.tensor([[2.0, 0.0, 1.0]], dtype=F64), scale="none")
    torch.testing.assert_close(adv, torch.tensor([[1.0, -1.0, 0.0]], dtype=F64))


def _loop_advantages(rewards, scale, std, eps):
    out = torch.zeros_like(rewards)
    flat = rewards.flatten().tolist()
    n_all = len(flat)
    mean_all = sum(flat) / n_all
    ss_all = sum((x - mean_all) ** 2 for x in flat)
    batch_std = math.sqrt(ss_all / (n_all if std == "population" else max(n_all - 1, 1)))
    for p in range(rewards.shape[0]):
        row = rewards[p].tolist()
        g = len(row)
        m = sum(row) / g
        if all(x == row[0] for x in row):
            continue
        s = math.sqrt(sum((x - m) ** 2 for x in row) / (g if std == "population" else g - 1))
        for i, x in enumerate(row):
            denom = {"group": s + eps, "batch": batch_std + eps, "none": 1.0}[scale]
            out[p, i] = (x - m) / denom
    return out


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(1, 6),
    g=st.integers(2, 8),
    seed=st.integers(0, 10_000),
    binary=st.booleans(),
    scale=st.sampled_from(["group", "batch", "none"]),
    std=st.sampled_from(["population", "unbiased"]),
)
def test_vectorised_matches_loop_and_sums_to_zero(p, g, seed, binary, scale, std):
    """Vectorised advantages equal a per-group Python loop, and sum to zero within each group."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.rand(p, g, generator=gen, dtype=F64)
    if binary:
        rewards = (rewards > 0.5).to(F64)
    adv = group_advantages(rewards, scale=scale, std=std)
    torch.testing.assert_close(
        adv, _loop_advantages(rewards, scale, std, 1e-4), rtol=1e-10, atol=1e-10
    )
    torch.testing.assert_close(adv.sum(-1), torch.zeros(p, dtype=F64), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("rewards", "kwargs", "match"),
    [
        (torch.zeros(4), {}, r"rewards must have shape \(P, G\) \(2-D\), got \(4,\)"),
        (torch.zeros(2, 3, 4), {}, r"rewards .*got \(2, 3, 4\)"),
        (torch.zeros(2, 3, dtype=torch.long), {}, "rewards must be a floating-point"),
        (
            torch.zeros(2, 3),
            {"scale": "token"},
            "unknown scale 'token'; valid: 'group', 'batch', 'none'",
        ),
        (
            torch.zeros(2, 3),
            {"std": "sample"},
            "unknown std 'sample'; valid: 'population', 'unbiased'",
        ),
        (torch.zeros(2, 3), {"eps": -1.0}, "eps must be a number >= 0"),
        (torch.zeros(2, 0), {}, "a group needs G >= 1"),
        ([[1.0, 0.0]], {}, "rewards must be a torch.Tensor"),
    ],
)
def test_bad_input_names_the_argument(rewards, kwargs, match):
    """Bad rewards or options raise ValueError naming the argument and its shape or the valid values."""
    with pytest.raises(ValueError, match=match):
        group_advantages(rewards, **kwargs)
