"""gspo_loss and grpo_loss: worked examples, reductions, clip statistics, gradients, padding.

The parametrised checks run over the two losses they were written for (``ORIGINAL``, with their
eps arguments); tests/test_loss_registry.py runs the same kinds of check over every registered loss
with each one's own parameters."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gspo_metrics import REDUCTIONS, LossOutput, get_loss, grpo_loss, gspo_loss

F64 = torch.float64
#: The losses these checks were written for (both take eps_low / eps_high).
ORIGINAL = ["grpo", "gspo"]


def _explainer_inputs():
    # token ratios [4, .5, .5, 1] (s = 1), advantage 1, length 4
    logp = torch.log(torch.tensor([[4.0, 0.5, 0.5, 1.0]], dtype=F64)).requires_grad_()
    return logp, torch.zeros(1, 4, dtype=F64), torch.ones(1, dtype=F64), torch.ones(1, 4)


@pytest.mark.parametrize(
    ("reduction", "grad", "loss"),
    [
        # the paper's per-sequence length normalisation: d loss / d l_t = -s*A/|y| = -1/4
        ("seq_mean_token_mean", -0.25, -1.0),
        # Tinker's token sum: each token's objective is s*A, gradient -s*A = -1, loss -4
        ("sum", -1.0, -4.0),
        # one sequence: token mean = sequence mean here
        ("token_mean", -0.25, -1.0),
    ],
)
def test_explainer_per_token_gradient(reduction, grad, loss):
    """[4,.5,.5,1], A=1: s = 1 and each token's gradient is -0.25 (paper) or -1 (sum), not 0."""
    logp, old, adv, mask = _explainer_inputs()
    out = gspo_loss(logp, old, adv, mask, reduction=reduction)
    out.loss.backward()
    torch.testing.assert_close(out.loss, torch.tensor(loss, dtype=F64), rtol=0, atol=1e-14)
    torch.testing.assert_close(logp.grad, torch.full((1, 4), grad, dtype=F64), rtol=0, atol=1e-14)
    assert out.per_sequence["log_ratio"].abs().item() < 1e-15
    assert out.per_sequence["out_of_range"].item() == 0.0


def test_explainer_central_difference():
    """The explainer's numeric check: a central difference on l_1 of -s(l)/|y| gives -0.25."""
    logp, old, adv, mask = _explainer_inputs()
    h = 1e-6
    e = torch.zeros(1, 4, dtype=F64)
    e[0, 0] = h
    with torch.no_grad():
        f = lambda x: gspo_loss(x, old, adv, mask, reduction="seq_mean_token_mean").loss  # noqa: E731
        numeric = (f(logp + e) - f(logp - e)) / (2 * h)
    assert numeric.item() == pytest.approx(-0.25, abs=1e-8)


def test_reductions_hand_computed():
    """Two sequences of 1 and 3 tokens, all ratios 1: the reductions weight lengths differently."""
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([2.0, -1.0], dtype=F64)
    # per-token loss = -A: seq0 [-2], seq1 [1, 1, 1]
    expect = {"sum": -2 + 3, "token_mean": (-2 + 3) / 4, "seq_mean_token_mean": (-2 + 1) / 2}
    for name, value in expect.items():
        for fn in (gspo_loss, grpo_loss):
            out = fn(logp, torch.zeros(2, 3, dtype=F64), adv, mask, reduction=name)
            assert out.loss.item() == pytest.approx(value, abs=1e-14), (fn.__name__, name)


def test_grpo_token_clip_statistics_hand_computed():
    """Token ratios [1.5, 0.5, 1.0], eps 0.2: 2/3 out of range; binds high if A>0, low if A<0."""
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.0], [1.5, 0.5, 1.0]], dtype=F64))
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    out = grpo_loss(logp, torch.zeros_like(logp), adv, torch.ones(2, 3))
    ps = out.per_sequence
    torch.testing.assert_close(ps["out_of_range"], torch.tensor([2 / 3, 2 / 3], dtype=F64))
    torch.testing.assert_close(ps["clip_high"], torch.tensor([1 / 3, 0.0], dtype=F64))
    torch.testing.assert_close(ps["clip_low"], torch.tensor([0.0, 1 / 3], dtype=F64))
    # loss by hand: A=+1 -> -(min(1.5,1.2) + min(.5,.8) + 1) = -2.7
    #               A=-1 -> -(min(-1.5,-1.2) + min(-.5,-.8) - 1) = 3.3
    assert out.loss.item() == pytest.approx(-2.7 + 3.3, abs=1e-12)


def test_gspo_sequence_clip_statistics_and_flat_region():
    """s = e^0.01 is above 1+4e-4: out_of_range is 1; A>0 binds (zero gradient), A<0 keeps it."""
    logp = torch.full((2, 3), 0.01, dtype=F64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    out = gspo_loss(logp, torch.zeros(2, 3, dtype=F64), adv, torch.ones(2, 3))
    out.loss.backward()
    ps = out.per_sequence
    assert ps["out_of_range"].tolist() == [1.0, 1.0]
    assert ps["clip_high"].tolist() == [1.0, 0.0]
    assert ps["clip_low"].tolist() == [0.0, 0.0]
    s = math.exp(0.01)
    # A=+1: flat at 1+eps_high, gradient 0. A=-1: min keeps the unclipped -s, gradient +s per token
    torch.testing.assert_close(logp.grad[0], torch.zeros(3, dtype=F64))
    torch.testing.assert_close(logp.grad[1], torch.full((3,), s, dtype=F64))
    assert out.loss.item() == pytest.approx(-(3 * (1 + 4e-4)) + 3 * s, rel=1e-12)


def test_gspo_token_gradient_is_s_times_token_advantage():
    """GSPO-token with per-token advantages: d loss_sum / d l_t = -s * A_t (Tinker's sg form)."""
    torch.manual_seed(0)
    logp = (-torch.rand(3, 5, dtype=F64)).requires_grad_()
    old = logp.detach() + 1e-5 * torch.randn(3, 5, dtype=F64)  # s within the clip range
    adv = torch.randn(3, 5, dtype=F64)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0, 3:] = False
    out = gspo_loss(logp, old, adv, mask, eps_low=0.1, eps_high=0.1)
    out.loss.backward()
    s = out.per_sequence["log_ratio"].exp()
    expected = torch.where(mask, -s[:, None] * adv, torch.zeros((), dtype=F64))
    torch.testing.assert_close(logp.grad, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ORIGINAL)
def test_float64_gradcheck(name, reduction):
    """Analytic gradients equal finite differences (per-sequence advantages, away from the clip edge)."""
    torch.manual_seed(1)
    logp = (-torch.rand(4, 6, dtype=F64)).requires_grad_()
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1, 4:] = False
    mask[3, 1:] = False
    adv = torch.tensor([1.0, -0.5, 2.0, -1.5], dtype=F64)
    # GSPO: old = logp + small noise keeps s inside [1-0.3, 1+0.3]; GRPO likewise per token
    old = logp.detach() + 0.05 * torch.randn(4, 6, dtype=F64)

    def f(x):
        return get_loss(name)(
            x, old, adv, mask, eps_low=0.3, eps_high=0.3, reduction=reduction
        ).loss

    assert torch.autograd.gradcheck(f, (logp,), eps=1e-6, atol=1e-8, rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    b=st.integers(1, 5),
    t=st.integers(1, 8),
    seed=st.integers(0, 10_000),
    eps=st.floats(0.01, 0.5),
    reduction=st.sampled_from(REDUCTIONS),
    per_token_adv=st.booleans(),
)
def test_gspo_equals_grpo_when_token_log_ratios_are_equal(
    b, t, seed, eps, reduction, per_token_adv
):
    """If every token of a sequence has the same log-ratio and the eps match, GSPO == GRPO exactly."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=gen, dtype=F64) * 4
    shift_b = (torch.rand(b, generator=gen, dtype=F64) - 0.5) * 1.5  # some sequences clip
    logp = (old + shift_b[:, None]).requires_grad_()
    logp2 = logp.detach().clone().requires_grad_()
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    adv = (
        torch.randn(b, t, generator=gen, dtype=F64)
        if per_token_adv
        else torch.randn(b, generator=gen, dtype=F64)
    )
    a = gspo_loss(logp, old, adv, mask, eps_low=eps, eps_high=eps, reduction=reduction)
    g = grpo_loss(logp2, old, adv, mask, eps_low=eps, eps_high=eps, reduction=reduction)
    a.loss.backward()
    g.loss.backward()
    torch.testing.assert_close(a.loss, g.loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(logp.grad, logp2.grad, rtol=1e-12, atol=1e-12)
    for key in ("log_ratio", "out_of_range", "clip_low", "clip_high"):
        torch.testing.assert_close(a.per_sequence[key], g.per_sequence[key], rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 4),
    t=st.integers(1, 8),
    extra=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    garbage=st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30]),
    name=st.sampled_from(ORIGINAL),
    reduction=st.sampled_from(REDUCTIONS),
)
def test_padding_garbage_changes_no_value_or_gradient(b, t, extra, seed, garbage, name, reduction):
    """NaN/inf in padded positions (logprobs, old_logprobs, advantages) leave loss, grads and stats."""
    gen = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, t, generator=gen, dtype=F64)
    old = logp + 0.1 * torch.randn(b, t, generator=gen, dtype=F64)
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    adv = torch.randn(b, t, generator=gen, dtype=F64)
    fn = get_loss(name)

    x1 = logp.clone().requires_grad_()
    out1 = fn(
        x1, old, torch.where(mask, adv, 0.0), mask, eps_low=0.2, eps_high=0.2, reduction=reduction
    )
    out1.loss.backward()

    pad = torch.full((b, extra), garbage, dtype=F64)
    x2 = torch.cat([torch.where(mask, logp, garbage), pad], 1).requires_grad_()
    old2 = torch.cat([torch.where(mask, old, -garbage), -pad], 1)
    adv2 = torch.cat([torch.where(mask, adv, garbage), pad], 1)
    mask2 = torch.cat([mask, torch.zeros(b, extra, dtype=torch.bool)], 1)
    out2 = fn(x2, old2, adv2, mask2, eps_low=0.2, eps_high=0.2, reduction=reduction)
    out2.loss.backward()

    torch.testing.assert_close(out2.loss, out1.loss, rtol=1e-12, atol=1e-12)
    assert torch.isfinite(x2.grad).all()
    torch.testing.assert_close(x2.grad[:, :t], x1.grad, rtol=1e-12, atol=1e-12)
    assert (x2.grad[:, t:] == 0).all() and (x2.grad[:, :t][~mask] == 0).all()
    for key, v in out1.per_sequence.items():
        torch.testing.assert_close(out2.per_sequence[key], v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ORIGINAL)
def test_per_sequence_advantages_equal_broadcast_per_token(name):
    """(B,) advantages give the same loss and gradient as the same values broadcast to (B, T)."""
    torch.manual_seed(3)
    logp = (-torch.rand(3, 4, dtype=F64)).requires_grad_()
    old = logp.detach() + 0.02 * torch.randn(3, 4, dtype=F64)
    adv = torch.randn(3, dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    fn = get_loss(name)
    a = fn(logp, old, adv, mask, reduction="token_mean")
    (ga,) = torch.autograd.grad(a.loss, logp)
    b = fn(logp, old, adv[:, None].expand(3, 4).contiguous(), mask, reduction="token_mean")
    (gb,) = torch.autograd.grad(b.loss, logp)
    torch.testing.assert_close(a.loss, b.loss, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(ga, gb, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name", ORIGINAL)
def test_outputs_are_detached_tensors_and_loss_has_grad(name):
    """LossOutput: a scalar loss with grad; per_sequence holds detached (B,) tensors, no floats."""
    logp = torch.zeros(2, 3, requires_grad=True)
    out = get_loss(name)(logp, torch.zeros(2, 3), torch.ones(2), torch.ones(2, 3))
    assert isinstance(out, LossOutput) and out.loss.shape == () and out.loss.requires_grad
    for key in ("log_ratio", "out_of_range", "clip_low", "clip_high", "length"):
        v = out.per_sequence[key]
        assert isinstance(v, torch.Tensor) and v.shape == (2,) and not v.requires_grad


def test_gspo_defaults_are_the_papers_eps():
    """Default GSPO range is [1-3e-4, 1+4e-4]: s = e^3.5e-4 is inside, e^4.5e-4 is outside."""
    for log_s, out in ((3.5e-4, 0.0), (4.5e-4, 1.0), (-2.9e-4, 0.0), (-3.1e-4, 1.0)):
        logp = torch.full((1, 7), log_s, dtype=F64)
        got = gspo_loss(
            logp, torch.zeros(1, 7, dtype=F64), torch.ones(1, dtype=F64), torch.ones(1, 7)
        )
        assert got.per_sequence["out_of_range"].item() == out, log_s


def test_unknown_loss_lists_valid_names():
    """get_loss with an unknown name raises ValueError listing the registered losses."""
    with pytest.raises(ValueError, match="unknown loss 'ppo'; valid: .*'grpo', 'gspo'"):
        get_loss("ppo")


@pytest.mark.parametrize("name", ORIGINAL)
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"reduction": "mean"},
            "unknown reduction 'mean'; valid: 'sum', 'token_mean', 'seq_mean_token_mean'",
        ),
        ({"eps_low": 1.0}, r"eps_low must be in \[0, 1\)"),
        ({"eps_low": -0.1}, r"eps_low must be in \[0, 1\)"),
        ({"eps_high": -0.1}, "eps_high must be >= 0"),
        ({"eps_high": float("nan")}, "eps_high must be a finite number"),
        (
            {"advantages": torch.ones(3)},
            r"advantages has shape \(3,\) but logprobs has shape \(2, 4\)",
        ),
        (
            {"advantages": torch.ones(2, 5)},
            r"advantages has shape \(2, 5\) but logprobs has shape \(2, 4\)",
        ),
        ({"advantages": torch.ones(2, 4, 1)}, r"advantages must have shape \(B,\) or \(B, T\)"),
        ({"mask": torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])}, r"marks no token in row\(s\) \[1\]"),
        (
            {"old_logprobs": torch.zeros(2, 3)},
            r"old_logprobs has shape \(2, 3\) but logprobs has shape \(2, 4\)",
        ),
    ],
)
def test_bad_input_raises_clear_error(name, kwargs, match):
    """Every bad argument raises ValueError naming it (and its shape where shapes are the problem)."""
    args = {
        "logprobs": torch.zeros(2, 4),
        "old_logprobs": torch.zeros(2, 4),
        "advantages": torch.ones(2),
        "mask": torch.ones(2, 4),
    }
    options = ("reduction", "eps_low", "eps_high")
    eps = {k: v for k, v in kwargs.items() if k in options}
    args.update({k: v for k, v in kwargs.items() if k not in options})
    with pytest.raises(ValueError, match=match):
        get_loss(name)(**args, **eps)


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 5),
    t=st.integers(1, 9),
    seed=st.integers(0, 10_000),
    spread=st.sampled_from([1e-4, 5e-4, 1e-2]),
    per_token_adv=st.booleans(),
)
def test_gspo_matches_seed_code_row_by_row(b, t, seed, spread, per_token_adv):
    """gspo_loss(reduction='sum') equals the Tinker seed's code run on each sequence's real tokens."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=gen, dtype=F64) * 3
    logp = (old + spread * torch.randn(b, t, generator=gen, dtype=F64)).requires_grad_()
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    adv = (
        torch.randn(b, t, generator=gen, dtype=F64)
        if per_token_adv
        else torch.randn(b, generator=gen, dtype=F64)
    )
    out = gspo_loss(logp, old, adv, mask)
    out.loss.backward()

    x = logp.detach().clone().requires_grad_()
    total = x.new_zeros(())
    for i in range(b):
        m = mask[i]
        target, ref = x[i][m], old[i][m]
        a = adv[i][m] if per_token_adv else adv[i]
        log_ratio = (target.detach() - ref).mean()
        ratio = torch.exp(log_ratio + target - target.detach())
        clipped = torch.clamp(ratio, 1 - 3e-4, 1 + 4e-4)
        total = total - torch.minimum(ratio * a, clipped * a).sum()
    total.backward()
    torch.testing.assert_close(out.loss, total, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(logp.grad, x.grad, rtol=1e-12, atol=1e-12)
