"""sequence_diagnostics: both clip units agree with the losses' own statistics, plus hand cases."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gspo_metrics import (
    SEQUENCE_DIAGNOSTICS,
    grpo_loss,
    gspo_loss,
    kl_estimate,
    sequence_diagnostics,
)

F64 = torch.float64


def test_explainer_case_sequence_ratio_one_hides_token_moves():
    """[4,.5,.5,1]: s = 1 (no sequence clip) while 3 of 4 tokens are outside GRPO's 0.8..1.2."""
    logp = torch.log(torch.tensor([[4.0, 0.5, 0.5, 1.0]], dtype=F64))
    d = sequence_diagnostics(
        logp, torch.zeros_like(logp), torch.ones(1, 4), torch.ones(1, dtype=F64)
    )
    assert abs(d["seq_log_ratio"].item()) < 1e-15 and d["seq_clipped"].item() == 0.0
    assert d["token_clip_fraction"].item() == 0.75
    assert d["token_clip_high_fraction"].item() == 0.25  # only the 4x token pushes the clip (A > 0)
    assert d["token_clip_low_fraction"].item() == 0.0
    assert d["token_log_ratio_max"].item() == pytest.approx(math.log(4))
    assert d["token_log_ratio_min"].item() == pytest.approx(math.log(0.5))
    logs = [math.log(r) for r in (4, 0.5, 0.5, 1)]
    assert d["token_log_ratio_std"].item() == pytest.approx(math.sqrt(sum(x * x for x in logs) / 4))
    # KL(old || new) k3 = mean(r - 1 - log r) = ((3 - 1.386) + (-.5 + .693) * 2 + 0) / 4
    k3 = sum(r - 1 - math.log(r) for r in (4, 0.5, 0.5, 1)) / 4
    assert d["kl_old"].item() == pytest.approx(k3)
    assert math.isnan(d["kl_ref"].item()) and math.isnan(d["entropy"].item())
    assert set(d) == set(SEQUENCE_DIAGNOSTICS)


@settings(max_examples=50, deadline=None)
@given(
    b=st.integers(1, 6),
    t=st.integers(1, 10),
    seed=st.integers(0, 10_000),
    per_token_adv=st.booleans(),
    spread=st.sampled_from([1e-4, 1e-3, 0.3]),
)
def test_both_units_agree_with_the_losses(b, t, seed, per_token_adv, spread):
    """Sequence-unit stats equal gspo_loss's, token-unit stats equal grpo_loss's (two routes)."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=gen, dtype=F64) * 3
    logp = old + spread * torch.randn(b, t, generator=gen, dtype=F64)
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    adv = (
        torch.randn(b, t, generator=gen, dtype=F64)
        if per_token_adv
        else torch.randn(b, generator=gen, dtype=F64)
    )
    d = sequence_diagnostics(logp, old, mask, adv, seq_eps=(3e-4, 4e-4), token_eps=(0.2, 0.28))
    g = gspo_loss(logp, old, adv, mask).per_sequence
    r = grpo_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.28).per_sequence
    close = lambda a, e: torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)  # noqa: E731
    close(d["seq_log_ratio"], g["log_ratio"])
    close(d["seq_clipped"], g["out_of_range"])
    close(d["seq_clip_low"], g["clip_low"])
    close(d["seq_clip_high"], g["clip_high"])
    close(d["token_clip_fraction"], r["out_of_range"])
    close(d["token_clip_low_fraction"], r["clip_low"])
    close(d["token_clip_high_fraction"], r["clip_high"])
    close(d["kl_old"], kl_estimate(old, logp, mask))
    # token spread against a loop over the masked tokens
    for i in range(b):
        x = (logp[i] - old[i])[mask[i]]
        assert d["token_log_ratio_min"][i].item() == x.min().item()
        assert d["token_log_ratio_max"][i].item() == x.max().item()
        assert d["token_log_ratio_std"][i].item() == pytest.approx(
            x.std(unbiased=False).item(), abs=1e-12
        )
    assert d["length"].tolist() == mask.sum(-1).tolist()


def test_nonfinite_counted_inside_mask_only():
    """NaN/inf at masked positions are counted per sequence; the same values under padding are not."""
    logp = torch.tensor([[0.0, float("nan"), 0.0], [float("inf"), 0.0, float("nan")]], dtype=F64)
    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])
    ent = torch.tensor([[float("inf"), 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=F64)
    d = sequence_diagnostics(
        logp, torch.zeros_like(logp), mask, torch.ones(2, dtype=F64), entropy=ent
    )
    # row 0: nan logp at t=1 and inf entropy at t=0 -> 2 positions; row 1: nan at t=2 (inf at t=0 is padding)
    assert d["nonfinite_count"].tolist() == [2, 1]


def test_kl_ref_and_entropy_masked_means():
    """kl_ref is the k3 masked mean against ref_logprobs; entropy the masked mean, pads ignored."""
    logp = torch.tensor([[-1.0, -2.0, 7.0]], dtype=F64)
    ref = torch.tensor([[-1.5, -2.0, float("nan")]], dtype=F64)
    ent = torch.tensor([[0.5, 1.5, float("inf")]], dtype=F64)
    mask = torch.tensor([[1, 1, 0]])
    d = sequence_diagnostics(
        logp, logp, mask, torch.zeros(1, dtype=F64), ref_logprobs=ref, entropy=ent
    )
    assert d["kl_ref"].item() == pytest.approx((math.exp(-0.5) + 0.5 - 1) / 2)
    assert d["entropy"].item() == pytest.approx(1.0)
    assert d["nonfinite_count"].item() == 0


def test_bad_eps_pair_named():
    """A malformed or out-of-range eps pair names which unit it belongs to."""
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="token_eps: eps_low must be in"):
        sequence_diagnostics(x, x, torch.ones(1, 2), torch.ones(1), token_eps=(1.5, 0.2))
    with pytest.raises(ValueError, match="seq_eps must be a pair"):
        sequence_diagnostics(x, x, torch.ones(1, 2), torch.ones(1), seq_eps=0.1)
    with pytest.raises(
        ValueError, match=r"entropy has shape \(1, 3\) but logprobs has shape \(1, 2\)"
    ):
        sequence_diagnostics(x, x, torch.ones(1, 2), torch.ones(1), entropy=torch.zeros(1, 3))


@pytest.mark.parametrize("size", [(5, 7), (96, 800)])  # both reduction layouts (B*T < and >= 2^16)
@pytest.mark.parametrize("per_token_adv", [False, True])
def test_mask_of_any_dtype_and_the_padding_garbage_give_the_same_numbers(size, per_token_adv):
    """Nonzero marks a token whatever the mask's dtype (bool, int64, float with 3.0 for "yes"),
    and large finite garbage under the padding changes nothing: every diagnostic is the same
    tensor, bit for bit, as the bool mask on clean inputs."""
    B, T = size
    g = torch.Generator().manual_seed(B)
    old = -torch.rand(B, T, generator=g) * 3
    logp = old + 0.05 * torch.randn(B, T, generator=g)
    ref = old + 0.05 * torch.randn(B, T, generator=g)
    ent = torch.rand(B, T, generator=g)
    mask = torch.rand(B, T, generator=g) < 0.6
    mask[:, 0] = True
    adv = torch.randn(B, T, generator=g) if per_token_adv else torch.randn(B, generator=g)

    def run(m, fill=None):
        xs = [t.clone() for t in (logp, old, ref, ent)]
        if fill is not None:  # a different large finite value under each input's padding
            for i, x in enumerate(xs):
                x[~mask] = fill * (i + 1) * (-1) ** i
        lp, o, r, e = xs
        return sequence_diagnostics(lp, o, m, adv, ref_logprobs=r, entropy=e)

    want = run(mask)
    for got in (run(mask.long()), run(mask.float() * 3), run(mask, fill=1e30)):
        for k in SEQUENCE_DIAGNOSTICS:
            assert torch.equal(got[k], want[k]), k
