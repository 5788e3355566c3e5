"""sequence_log_ratio: the seeds' worked examples, log-space stability, padding invariance."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gspo_metrics import sequence_log_ratio

F64 = torch.float64


def _from_ratios(ratios, dtype=F64):
    logp = torch.log(torch.tensor([ratios], dtype=dtype))
    return logp, torch.zeros_like(logp), torch.ones_like(logp, dtype=torch.bool)


def test_explainer_example_geometric_mean_is_one():
    """Token ratios [4, .5, .5, 1]: s = (4*.5*.5*1)^(1/4) = 1, while the arithmetic mean is 1.5."""
    logp, old, mask = _from_ratios([4.0, 0.5, 0.5, 1.0])
    s = sequence_log_ratio(logp, old, mask).exp()
    torch.testing.assert_close(s, torch.tensor([1.0], dtype=F64), rtol=0, atol=1e-15)
    assert torch.exp(logp).mean().item() == pytest.approx(1.5)


def test_explainer_example_two_two_two_two():
    """Token ratios [2,2,2,2]: the product is 16, the length-normalised ratio is 2."""
    logp, old, mask = _from_ratios([2.0, 2.0, 2.0, 2.0])
    assert torch.exp(logp.sum()).item() == pytest.approx(16.0)
    torch.testing.assert_close(
        sequence_log_ratio(logp, old, mask).exp(), torch.tensor([2.0], dtype=F64)
    )


@pytest.mark.parametrize("length", [1, 5, 2000])
def test_lesson_example_e_to_the_point_one_at_any_length(length):
    """A mean token log-ratio of 0.1 gives s = e^0.1 ~ 1.105 for a 5- or a 2000-token answer."""
    logp = torch.full((1, length), -1.0, dtype=F64)
    old = logp - 0.1
    s = sequence_log_ratio(logp, old, torch.ones(1, length)).exp()
    torch.testing.assert_close(s, torch.tensor([math.exp(0.1)], dtype=F64), rtol=1e-12, atol=0)


def test_style_example_with_garbage_under_padding():
    """Token log-ratios [0.1, 0.3] with mask [1,1,0] give s = e^0.2, whatever sits at the pad."""
    for garbage in (0.0, 5.0, float("nan"), float("inf"), -float("inf")):
        logp = torch.tensor([[0.1, 0.3, garbage]], dtype=F64, requires_grad=True)
        old = torch.tensor([[0.0, 0.0, -garbage]], dtype=F64)
        mask = torch.tensor([[1, 1, 0]])
        log_s = sequence_log_ratio(logp, old, mask)
        torch.testing.assert_close(log_s.exp(), torch.tensor([math.exp(0.2)], dtype=F64))
        log_s.sum().backward()
        # d log s / d logp_t = 1/|M| on real tokens, exactly 0 at the pad (no 0 * inf = nan)
        assert logp.grad.tolist() == [[0.5, 0.5, 0.0]]


def test_long_sequence_stays_finite_in_float32():
    """32,768 tokens with log-ratio 0.01 each: s = e^0.01 in float32, not exp(327.68) = inf."""
    logp = torch.full((2, 32768), -2.0, dtype=torch.float32)
    old = logp - 0.01
    s = sequence_log_ratio(logp, old, torch.ones(2, 32768)).exp()
    assert torch.isfinite(s).all()
    torch.testing.assert_close(s, torch.full((2,), math.exp(0.01)), rtol=1e-5, atol=0)


@settings(max_examples=60, deadline=None)
@given(
    b=st.integers(1, 5),
    t=st.integers(1, 12),
    extra=st.integers(0, 6),
    seed=st.integers(0, 10_000),
    garbage=st.sampled_from([0.0, 1e30, float("nan"), float("inf")]),
)
def test_padding_invariance_and_loop_agreement(b, t, extra, seed, garbage):
    """Extra padded columns holding garbage change nothing; the result equals a per-row loop."""
    gen = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, t, generator=gen, dtype=F64) * 3
    old = -torch.rand(b, t, generator=gen, dtype=F64) * 3
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    base = sequence_log_ratio(logp, old, mask)
    loop = torch.tensor(
        [
            sum((logp[i, j] - old[i, j]).item() for j in range(t) if mask[i, j])
            / int(mask[i].sum())
            for i in range(b)
        ],
        dtype=F64,
    )
    torch.testing.assert_close(base, loop, rtol=1e-12, atol=1e-12)
    pad = torch.full((b, extra), garbage, dtype=F64)
    padded = sequence_log_ratio(
        torch.cat([logp, pad], 1),
        torch.cat([old, -pad], 1),
        torch.cat([mask, torch.zeros(b, extra, dtype=torch.bool)], 1),
    )
    # equal up to summation order (the reduction tree depends on the padded width)
    torch.testing.assert_close(padded, base, rtol=1e-13, atol=1e-15)


def test_float_mask_nonzero_marks_tokens():
    """A float mask counts nonzero entries (Tinker's rule), so 0.5 marks a token like 1.0 does."""
    logp = torch.tensor([[0.2, 0.4, 9.0]], dtype=F64)
    old = torch.zeros_like(logp)
    got = sequence_log_ratio(logp, old, torch.tensor([[0.5, 1.0, 0.0]]))
    torch.testing.assert_close(got, torch.tensor([0.3], dtype=F64))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            (torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3)),
            r"old_logprobs has shape \(2, 4\) but logprobs has shape \(2, 3\)",
        ),
        (
            (torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(3, 3)),
            r"mask has shape \(3, 3\) but logprobs has shape \(2, 3\)",
        ),
        (
            (torch.zeros(3), torch.zeros(3), torch.ones(3)),
            r"logprobs must have shape \(B, T\) \(2-D\), got \(3,\)",
        ),
        (
            (torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([[1, 1, 0], [0, 0, 0]])),
            r"mask of shape \(2, 3\) marks no token in row\(s\) \[1\]",
        ),
        ((torch.zeros(2, 0), torch.zeros(2, 0), torch.ones(2, 0)), "marks no token"),
        (
            (torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3), torch.ones(2, 3)),
            "logprobs must be a floating-point",
        ),
    ],
)
def test_bad_input_names_argument_and_shape(args, match):
    """Mismatched shapes, wrong rank or an empty mask row raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=match):
        sequence_log_ratio(*args)
