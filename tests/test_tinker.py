"""gspo_metrics.tinker.gspo_loss_fn against the Tinker seed's reference code, datum by datum."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gspo_metrics.tinker import gspo_loss_fn

F64 = torch.float64


def _seed_reference(target_logprobs, ref_logprobs, advantages, sequence_ratio_mask, lo, hi):
    """The seed's code, verbatim in its steps, for one datum."""
    in_ratio = sequence_ratio_mask != 0
    log_ratio = (target_logprobs.detach() - ref_logprobs)[in_ratio].mean()
    ratio = torch.exp(log_ratio + target_logprobs - target_logprobs.detach())
    clipped_ratio = torch.clamp(ratio, lo, hi)
    gspo_objective = torch.minimum(ratio * advantages, clipped_ratio * advantages)
    return -gspo_objective.sum(), log_ratio


def _make_data(seed, lengths, kind):
    rng = np.random.default_rng(seed)
    data, logps = [], []
    for n in lengths:
        n_prompt = int(rng.integers(0, n))
        completion = np.arange(n) >= n_prompt
        q = -rng.random(n) * 2
        lp = torch.tensor(q + rng.normal(0, 5e-4, n), dtype=F64, requires_grad=True)
        adv = np.where(completion, rng.normal(), 0.0)
        inputs = {
            "target_tokens": np.arange(n, dtype=np.int64),
            "logprobs": q,
            "advantages": adv,
            "sequence_ratio_mask": completion.astype(np.float32),
        }
        if kind == "torch":
            inputs = {k: torch.as_tensor(v) for k, v in inputs.items()}
        elif kind == "list":
            inputs = {k: v.tolist() for k, v in inputs.items()}
        datum = (
            SimpleNamespace(loss_fn_inputs=inputs) if kind == "attr" else {"loss_fn_inputs": inputs}
        )
        data.append(datum)
        logps.append(lp)
    return data, logps


@pytest.mark.parametrize("kind", ["numpy", "torch", "list", "attr"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_seed_reference_with_ragged_lengths(kind, seed):
    """Loss, gradients and the three metrics equal the seed's per-datum code summed over datums."""
    lengths = [7, 3, 12, 1 + seed]
    data, logps = _make_data(seed, lengths, kind)
    loss, metrics = gspo_loss_fn(data, logps)
    loss.backward()
    grads = [lp.grad.clone() for lp in logps]

    lo, hi = 1 - 3e-4, 1 + 4e-4
    ref_total, log_ratios, clipped = 0.0, [], []
    for datum, lp in zip(data, logps, strict=True):
        x = lp.detach().clone().requires_grad_()
        inp = datum["loss_fn_inputs"] if isinstance(datum, dict) else datum.loss_fn_inputs
        as_t = lambda v: torch.as_tensor(np.asarray(v), dtype=F64)  # noqa: E731
        ref_loss, log_ratio = _seed_reference(
            x,
            as_t(inp["logprobs"]),
            as_t(inp["advantages"]),
            as_t(inp["sequence_ratio_mask"]),
            lo,
            hi,
        )
        ref_loss.backward()
        ref_total += ref_loss.item()
        torch.testing.assert_close(lp.grad, x.grad, rtol=1e-12, atol=1e-14)
        log_ratios.append(log_ratio.item())
        s = float(np.exp(log_ratio.item()))
        clipped.append(s < lo or s > hi)
    assert loss.item() == pytest.approx(ref_total, rel=1e-12, abs=1e-14)
    assert metrics["loss:sum"] == pytest.approx(ref_total, rel=1e-12, abs=1e-14)
    assert metrics["gspo_sequence_log_ratio:mean"] == pytest.approx(
        np.mean(log_ratios), rel=1e-12, abs=1e-15
    )
    assert metrics["gspo_clipped_fraction:mean"] == pytest.approx(np.mean(clipped))
    assert all(isinstance(v, float) for v in metrics.values())
    del grads


def test_tokens_outside_ratio_mask_still_enter_the_loss():
    """As in Tinker, the loss sums all N tokens; a prompt token with A != 0 contributes s*A."""
    lp = torch.zeros(3, dtype=F64, requires_grad=True)
    datum = {
        "loss_fn_inputs": {
            "target_tokens": [1, 2, 3],
            "logprobs": [0.0, 0.0, 0.0],
            "advantages": [2.0, 1.0, 1.0],
            "sequence_ratio_mask": [0, 1, 1],
        }
    }
    loss, _ = gspo_loss_fn([datum], [lp])
    assert loss.item() == pytest.approx(-4.0)


def test_custom_thresholds_and_clipped_fraction():
    """With thresholds 0.9/1.1, a datum at s = e^0.2 is clipped and one at s = 1 is not: fraction 0.5."""
    d1 = {
        "loss_fn_inputs": {
            "target_tokens": [0, 0],
            "logprobs": [0.0, 0.0],
            "advantages": [1.0, 1.0],
            "sequence_ratio_mask": [1, 1],
        }
    }
    lps = [
        torch.full((2,), 0.2, dtype=F64, requires_grad=True),
        torch.zeros(2, dtype=F64, requires_grad=True),
    ]
    loss, m = gspo_loss_fn([d1, d1], lps, clip_low_threshold=0.9, clip_high_threshold=1.1)
    assert m["gspo_clipped_fraction:mean"] == 0.5
    assert m["gspo_sequence_log_ratio:mean"] == pytest.approx(0.1)
    assert loss.item() == pytest.approx(-(2 * 1.1) - 2 * 1.0)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d, lp: (d, lp[:1]), "logprobs_list has 1 entries but data has 2 datums"),
        (
            lambda d, lp: (d, [lp[0], lp[1][:2]]),
            r"logprobs_list\[1\] has shape \(2,\) but target_tokens has \(3,\)",
        ),
        (
            lambda d, lp: (
                [
                    d[0],
                    {
                        "loss_fn_inputs": {
                            **d[1]["loss_fn_inputs"],
                            "sequence_ratio_mask": [0, 0, 0],
                        }
                    },
                ],
                lp,
            ),
            r"data\[1\] sequence_ratio_mask marks no token",
        ),
        (
            lambda d, lp: (
                [d[0], {"loss_fn_inputs": {**d[1]["loss_fn_inputs"], "advantages": [1.0]}}],
                lp,
            ),
            r"data\[1\] advantages has shape \(1,\) but target_tokens has \(3,\)",
        ),
        (
            lambda d, lp: ([d[0], {"loss_fn_inputs": {"target_tokens": [1, 2, 3]}}], lp),
            r"data\[1\].loss_fn_inputs lacks",
        ),
        (lambda d, lp: ([], []), "data is empty"),
    ],
)
def test_bad_input(mutate, match):
    """Mismatched lengths, an empty ratio mask or missing inputs raise ValueError naming the datum."""
    base = {
        "target_tokens": [1, 2, 3],
        "logprobs": [0.0, 0.0, 0.0],
        "advantages": [1.0, 1.0, 1.0],
        "sequence_ratio_mask": [0, 1, 1],
    }
    data = [{"loss_fn_inputs": dict(base)}, {"loss_fn_inputs": dict(base)}]
    lps = [torch.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)]
    d, lp = mutate(data, lps)
    with pytest.raises(ValueError, match=match):
        gspo_loss_fn(d, lp)


def test_bad_thresholds():
    """Thresholds must bracket 1."""
    d = [
        {
            "loss_fn_inputs": {
                "target_tokens": [1],
                "logprobs": [0.0],
                "advantages": [1.0],
                "sequence_ratio_mask": [1],
            }
        }
    ]
    with pytest.raises(ValueError, match="clip_low_threshold <= 1 <= clip_high_threshold"):
        gspo_loss_fn(d, [torch.zeros(1)], clip_low_threshold=1.1)
