"""sequence_diagnostics: both clip units agree with the losses' own statistics, plus hand cases;
the product's one form of each diagnostic agrees with its equation (``diagnostics_oracle``)."""

import decimal
import math

import pytest
import torch
from diagnostics_oracle import oracle_diagnostics
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
#: The product's form ("torch", ``sequence_diagnostics``) and the tests' equations ("oracle",
#: ``diagnostics_oracle``); every hand case runs on each.
BACKENDS = ["torch", "oracle"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def diagnose(*args, backend: str, **kw) -> dict[str, torch.Tensor]:
    """``sequence_diagnostics`` (backend "torch") or the oracle's answer ("oracle")."""
    if backend == "oracle":
        return oracle_diagnostics(*args, **kw)
    return sequence_diagnostics(*args, backend=backend, **kw)


def test_explainer_case_sequence_ratio_one_hides_token_moves(backend):
    """[4,.5,.5,1]: s = 1 (no sequence clip) while 3 of 4 tokens are outside GRPO's 0.8..1.2."""
    logp = torch.log(torch.tensor([[4.0, 0.5, 0.5, 1.0]], dtype=F64))
    d = diagnose(
        logp, torch.zeros_like(logp), torch.ones(1, 4), torch.ones(1, dtype=F64), backend=backend
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
    backend=st.sampled_from(BACKENDS),
)
def test_both_units_agree_with_the_losses(b, t, seed, per_token_adv, spread, backend):
    """Sequence-unit stats equal gspo_loss's, token-unit stats equal grpo_loss's (on both)."""
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
    d = diagnose(logp, old, mask, adv, seq_eps=(3e-4, 4e-4), token_eps=(0.2, 0.28), backend=backend)
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


def test_nonfinite_counted_inside_mask_only(backend):
    """NaN/inf at masked positions are counted per sequence; the same values under padding are not."""
    logp = torch.tensor([[0.0, float("nan"), 0.0], [float("inf"), 0.0, float("nan")]], dtype=F64)
    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])
    ent = torch.tensor([[float("inf"), 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=F64)
    d = diagnose(
        logp, torch.zeros_like(logp), mask, torch.ones(2, dtype=F64), entropy=ent, backend=backend
    )
    # row 0: nan logp at t=1 and inf entropy at t=0 -> 2 positions; row 1: nan at t=2 (inf at t=0 is padding)
    assert d["nonfinite_count"].tolist() == [2, 1]


def test_kl_ref_and_entropy_masked_means(backend):
    """kl_ref is the k3 masked mean against ref_logprobs; entropy the masked mean, pads ignored."""
    logp = torch.tensor([[-1.0, -2.0, 7.0]], dtype=F64)
    ref = torch.tensor([[-1.5, -2.0, float("nan")]], dtype=F64)
    ent = torch.tensor([[0.5, 1.5, float("inf")]], dtype=F64)
    mask = torch.tensor([[1, 1, 0]])
    d = diagnose(
        logp, logp, mask, torch.zeros(1, dtype=F64), ref_logprobs=ref, entropy=ent, backend=backend
    )
    assert d["kl_ref"].item() == pytest.approx((math.exp(-0.5) + 0.5 - 1) / 2)
    assert d["entropy"].item() == pytest.approx(1.0)
    assert d["nonfinite_count"].item() == 0


def test_sampler_mismatch_by_hand(backend):
    """sampler_kl is the masked mean of k3(u) = e^u - 1 - u with u = log pi_old - log
    pi_sampler (the trainer's log-prob of the sampling policy against the sampler's), and
    sampler_logp_abs_diff_max the masked max |u|; log pi_theta plays no part. Float64.

    old [-1, -2, -.5], sampler [-1.2, -1.5, 9 (padding)], mask [1, 1, 0]: u = [.2, -.5]
    k3(.2)  = e^.2 - 1.2   = 1.2214027581601699 - 1.2 = .0214027581601699
    k3(-.5) = e^-.5 - .5   = .6065306597126334 - .5   = .1065306597126334
    mean = .0639667089364017; max |u| = .5."""
    old = torch.tensor([[-1.0, -2.0, -0.5]], dtype=F64)
    smp = torch.tensor([[-1.2, -1.5, 9.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0]])
    d = diagnose(
        old + 0.1, old, mask, torch.ones(1, dtype=F64), sampler_logprobs=smp, backend=backend
    )
    u = [-1.0 - -1.2, -2.0 - -1.5]  # the float64 differences both see
    want = sum(math.expm1(x) - x for x in u) / 2
    assert want == pytest.approx(0.0639667089364017, rel=1e-14)
    assert d["sampler_kl"].item() == pytest.approx(want, rel=1e-14)
    assert d["sampler_logp_abs_diff_max"].item() == 0.5
    assert d["kl_old"].item() == pytest.approx(math.expm1(0.1) - 0.1, rel=1e-12)
    assert d["nonfinite_count"].item() == 0
    without = diagnose(old + 0.1, old, mask, torch.ones(1, dtype=F64), backend=backend)
    assert math.isnan(without["sampler_kl"].item())  # not given: unknown, not 0
    assert math.isnan(without["sampler_logp_abs_diff_max"].item())


def test_sampler_nonfinite_inside_mask_counted_padding_ignored(backend):
    """A NaN sampler log-prob inside the mask is counted and makes the row's sampler values NaN;
    NaN and inf under the padding change nothing; an inf difference is an inf max."""
    nan, inf = float("nan"), float("inf")
    old = torch.tensor([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]], dtype=F64)
    smp = torch.tensor([[-1.0, nan, -1.0], [-1.5, -1.0, inf], [-1.0, -inf, -1.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1]])
    d = diagnose(old, old, mask, torch.ones(3, dtype=F64), sampler_logprobs=smp, backend=backend)
    assert d["nonfinite_count"].tolist() == [1, 0, 1]
    assert math.isnan(d["sampler_kl"][0].item())
    assert math.isnan(d["sampler_logp_abs_diff_max"][0].item())
    # row 1: u = [.5, 0] -> k3 mean (e^.5 - 1.5) / 2, max .5
    assert d["sampler_kl"][1].item() == pytest.approx((math.exp(0.5) - 1.5) / 2, rel=1e-13)
    assert d["sampler_logp_abs_diff_max"][1].item() == 0.5
    assert d["sampler_logp_abs_diff_max"][2].item() == inf  # u = -1 - (-inf) = inf


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
    with pytest.raises(ValueError, match=r"sampler_logprobs has shape \(2, 2\)"):
        sequence_diagnostics(
            x, x, torch.ones(1, 2), torch.ones(1), sampler_logprobs=torch.zeros(2, 2)
        )


@pytest.mark.parametrize("size", [(5, 7), (96, 800)])  # both reduction layouts (B*T < and >= 2^16)
@pytest.mark.parametrize("per_token_adv", [False, True])
def test_mask_of_any_dtype_and_the_padding_garbage_give_the_same_numbers(
    size, per_token_adv, backend
):
    """Nonzero marks a token whatever the mask's dtype (bool, int64, float with 3.0 for "yes"),
    and large finite garbage under the padding changes nothing: every diagnostic is the same
    tensor, bit for bit, as the bool mask on clean inputs."""
    B, T = size
    g = torch.Generator().manual_seed(B)
    old = -torch.rand(B, T, generator=g) * 3
    logp = old + 0.05 * torch.randn(B, T, generator=g)
    ref = old + 0.05 * torch.randn(B, T, generator=g)
    ent = torch.rand(B, T, generator=g)
    smp = old + 0.05 * torch.randn(B, T, generator=g)
    mask = torch.rand(B, T, generator=g) < 0.6
    mask[:, 0] = True
    adv = torch.randn(B, T, generator=g) if per_token_adv else torch.randn(B, generator=g)

    def run(m, fill=None):
        xs = [t.clone() for t in (logp, old, ref, ent, smp)]
        if fill is not None:  # a different large finite value under each input's padding
            for i, x in enumerate(xs):
                x[~mask] = fill * (i + 1) * (-1) ** i
        lp, o, r, e, u = xs
        kw = dict(ref_logprobs=r, entropy=e, sampler_logprobs=u)
        return diagnose(lp, o, m, adv, backend=backend, **kw)

    want = run(mask)
    for got in (run(mask.long()), run(mask.float() * 3), run(mask, fill=1e30)):
        for k in SEQUENCE_DIAGNOSTICS:
            assert torch.equal(got[k], want[k]), k


def _random_step(g, B, T, dtype, per_token_adv, spread=0.05, fill=0.6):
    """(logp, old, ref, ent, mask, adv, sampler): the optional inputs are ``ref``, ``ent`` and
    ``sampler`` (log pi_sampler, off ``old`` by about ``spread``)."""
    old = -torch.rand(B, T, generator=g, dtype=F64) * 4
    logp = old + spread * torch.randn(B, T, generator=g, dtype=F64)
    ref = logp + spread * torch.randn(B, T, generator=g, dtype=F64)
    ent = torch.rand(B, T, generator=g, dtype=F64) * 3
    mask = torch.rand(B, T, generator=g) < fill
    mask[torch.arange(B), torch.randint(0, T, (B,), generator=g)] = True  # no empty row
    adv = torch.randn(B, T, generator=g) if per_token_adv else torch.randn(B, generator=g)
    sampler = old + spread * torch.randn(B, T, generator=g, dtype=F64)
    # finite garbage under the padding: a form that reads it gives other numbers
    for x in (logp, ref, ent, sampler):
        x[~mask] = -1e4
    cast = [x.to(dtype) for x in (logp, old, ref, ent)]
    return (*cast, mask, adv.to(dtype), sampler.to(dtype))


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 9),
    T=st.integers(1, 40),
    seed=st.integers(0, 10_000),
    per_token_adv=st.booleans(),
    dtype=st.sampled_from([torch.float32, F64]),
    spread=st.sampled_from([1e-5, 1e-2, 0.5, 3.0]),
    with_ref=st.booleans(),
)
def test_the_form_agrees_with_the_oracle(B, T, seed, per_token_adv, dtype, spread, with_ref):
    """The product's form gives the oracle's diagnostics, every one declared in
    ``SEQUENCE_DIAGNOSTICS``: to float64 rounding for float64 inputs, and within float32
    rounding of the float64 answer for float32 inputs (the form sums in float32)."""
    g = torch.Generator().manual_seed(seed)
    logp, old, ref, ent, mask, adv, smp = _random_step(g, B, T, dtype, per_token_adv, spread)
    kw = dict(ref_logprobs=ref, entropy=ent, sampler_logprobs=smp) if with_ref else {}
    routes = {b: diagnose(logp, old, mask, adv, backend=b, **kw) for b in BACKENDS}
    eager, oracle = routes["torch"], routes["oracle"]
    exact = diagnose(  # float64 oracle: the answer for float32 inputs
        logp.double(),
        old.double(),
        mask,
        adv.double(),
        backend="oracle",
        **{k: v.double() for k, v in kw.items()},
    )
    for route in routes.values():
        assert list(route) == list(SEQUENCE_DIAGNOSTICS)
    for k in SEQUENCE_DIAGNOSTICS:
        assert eager[k].dtype == oracle[k].dtype, k
        if dtype == F64:
            torch.testing.assert_close(
                eager[k], oracle[k], rtol=1e-10, atol=1e-12, equal_nan=True, msg=k
            )
        elif k in ("seq_clipped", "seq_clip_low", "seq_clip_high"):
            # log s within float32 rounding of a bound may fall either side of it: compare only
            # rows clear of the bounds
            ls = exact["seq_log_ratio"]
            clear = ((ls - math.log1p(-3e-4)).abs() > 1e-5) & ((ls - math.log1p(4e-4)).abs() > 1e-5)
            torch.testing.assert_close(eager[k][clear], exact[k][clear].float())
        elif k.startswith("token_clip"):
            pass  # the same counts up to tokens within rounding of a bound: checked below
        else:
            # float32 sums of at most 40 terms: within a few float32 ulps of the float64 answer
            want = exact[k].float() if k not in ("length", "nonfinite_count") else exact[k]
            torch.testing.assert_close(eager[k], want, rtol=2e-5, atol=1e-5, equal_nan=True)
    if dtype == torch.float32:  # token counts: off by at most the tokens near a bound
        d = (logp.double() - old.double())[mask]
        near = (((d - math.log1p(-0.2)).abs() < 1e-6) | ((d - math.log1p(0.2)).abs() < 1e-6)).sum()
        diff = (eager["token_clip_fraction"] - exact["token_clip_fraction"].float()).abs()
        assert (diff * eager["length"]).sum() <= near + 1e-3


@pytest.mark.parametrize(
    "d", [0.0, 1e-7, -1e-7, 1e-4, -3e-3, 0.0624, 0.124, -0.126, 0.25, 1.0, -2.5, 7.0, -40.0]
)
def test_k3_keeps_full_precision_for_small_log_ratios(d, backend):
    """kl_old of one token with log r = d is k3 = e^d - 1 - d, about d^2/2 near 0, where
    exp(d) - 1 - d loses every digit. Both take expm1(d) - d, whose only loss is the
    subtraction's rounding (about ulp(d) / (d^2 / 2) = 4.4e-16 / |d| relative): it must match the
    value computed with 50 decimal digits within that, from tiny to large |d|."""
    old = torch.tensor([[-1.0]], dtype=F64)
    logp = old + d
    out = diagnose(
        logp, old, torch.ones(1, 1), torch.ones(1, dtype=F64), ref_logprobs=old, backend=backend
    )

    def k3(x: float) -> float:
        with decimal.localcontext(prec=50):
            x = decimal.Decimal(x)  # the float64 value, exactly
            return float(x.exp() - 1 - x)

    d_exact = (logp - old).item()  # the float64 log r both see
    rel = 1e-14 + (1e-15 / abs(d_exact) if d_exact else 0.0)
    assert out["kl_old"].item() == pytest.approx(k3(d_exact), rel=rel, abs=1e-300)
    assert out["kl_ref"].item() == pytest.approx(k3(-d_exact), rel=rel, abs=1e-300)


def test_nonfinite_inputs_propagate_into_their_rows(backend):
    """NaN and inf at masked positions: counted per row, and the row's sums and extremes carry
    them; per-token advantages too. (The form computes such a step again, ``_nonfinite_step``.)"""
    nan, inf = float("nan"), float("inf")
    logp = torch.tensor([[0.1, nan, 0.0], [inf, 0.2, 0.0], [0.0, 0.1, 0.3], [0.1, 0.2, 0.3]])
    old = torch.zeros(4, 3)
    ref = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-inf, 0.0, 0.0], [0.0, 0.0, 0.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, nan, 1.0]])
    mask = torch.tensor([[1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]])
    smp = torch.tensor([[0.0, 0.0, 0.0], [nan, 0.1, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, inf]])
    kw = dict(ref_logprobs=ref, sampler_logprobs=smp)
    out = diagnose(logp, old, mask, adv, backend=backend, **kw)
    # row 3: NaN advantage at t = 1 and inf sampler log-prob at t = 2; row 1: NaN under padding
    assert out["nonfinite_count"].tolist() == [1, 0, 1, 2]
    # row 0's NaN log r reaches its log s, KL and extremes; row 1's padded NaN reaches nothing
    for k in ("seq_log_ratio", "kl_old", "token_log_ratio_min", "token_log_ratio_max"):
        assert out[k].isnan().tolist() == [True, False, False, False], k
    # row 2: e = log pi_ref - log pi_theta = -inf at t = 0, k3 = e^e - 1 - e = +inf; row 3:
    # u = log pi_old - log pi_sampler = -inf at t = 2, k3 = +inf and |u| = inf
    assert out["kl_ref"].isinf().tolist() == [False, False, True, False]
    assert out["sampler_kl"].isinf().tolist() == [False, False, False, True]
    assert out["sampler_logp_abs_diff_max"][3].item() == inf
    # row 3's NaN advantage sits on a token above the range (d = .2 > log 1.2): where the clip
    # binds there is unknown; GRPO's low side and GSPO's low side bind nowhere, whatever A is
    assert math.isnan(out["token_clip_high_fraction"][3].item())
    assert math.isnan(out["seq_clip_high"][3].item())
    assert out["token_clip_low_fraction"][3].item() == 0.0 and out["seq_clip_low"][3].item() == 0.0
    assert out["token_clip_fraction"][3].item() == pytest.approx(2 / 3)  # known: d = .2, .3


def test_strided_and_half_precision_inputs_give_the_oracles_numbers():
    """Non-contiguous views and bf16 inputs: the form gives the oracle's numbers
    (half precision reduced in float32)."""
    g = torch.Generator().manual_seed(3)
    logp, old, ref, ent, mask, adv, smp = _random_step(g, 6, 20, torch.float32, True)
    wide = torch.zeros(6, 40)
    wide[:, ::2] = logp
    strided = wide[:, ::2]
    assert not strided.is_contiguous()
    kw = dict(sampler_logprobs=smp)
    a = diagnose(strided, old, mask.t().contiguous().t(), adv, backend="torch", **kw)
    b = diagnose(logp, old, mask, adv, backend="oracle", **kw)
    for k in SEQUENCE_DIAGNOSTICS:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, equal_nan=True, msg=k)
    kw = dict(sampler_logprobs=smp.bfloat16())
    h = diagnose(logp.bfloat16(), old.bfloat16(), mask, adv, backend="torch", **kw)
    e = diagnose(logp.bfloat16(), old.bfloat16(), mask, adv, backend="oracle", **kw)
    assert h["seq_log_ratio"].dtype == torch.float32
    for k in SEQUENCE_DIAGNOSTICS:
        torch.testing.assert_close(h[k], e[k], rtol=1e-5, atol=1e-6, equal_nan=True, msg=k)


def test_empty_row_and_bad_backend_are_named(backend):
    x = torch.zeros(2, 3)
    mask = torch.tensor([[1, 0, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"mask.*row.*1"):
        diagnose(x, x, mask, torch.ones(2), backend=backend)
    with pytest.raises(ValueError, match="unknown backend 'numba'"):
        sequence_diagnostics(x, x, torch.ones(2, 3), torch.ones(2), backend="numba")


_ODD_VALUES = [0.0, -0.0, 5e-324, -5e-324, 1e-300, 0.49, -0.51, 7.0, -40.0, 1e300, -1e300]


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 6),
    T=st.integers(1, 70),
    seed=st.integers(0, 10_000),
    odd=st.lists(st.sampled_from(_ODD_VALUES + [float("inf"), float("nan")]), max_size=6),
    dtype=st.sampled_from([torch.float32, F64]),
)
def test_sampler_extremes_equal_the_oracle_bit_for_bit(B, T, seed, odd, dtype):
    """The largest |log pi_old - log pi_sampler| of the form (max(amax u, -amin u)) is
    exactly the oracle's masked max: signed zeros, subnormals, huge values, inf and
    NaN, inside and outside the mask."""
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(B, T, generator=g, dtype=F64)
    smp = old + 0.1 * torch.randn(B, T, generator=g, dtype=F64)
    mask = torch.rand(B, T, generator=g) < 0.7
    mask[:, 0] = True
    flat = smp.view(-1)
    where = torch.randint(0, B * T, (len(odd),), generator=g)
    for i, v in zip(where.tolist(), odd, strict=True):
        flat[i] = old.view(-1)[i] - v  # u = old - smp = v there
    old, smp = old.to(dtype), smp.to(dtype)
    adv = torch.ones(B, dtype=dtype)
    kw = dict(sampler_logprobs=smp, backend="torch")
    eager = sequence_diagnostics(old, old, mask, adv, **kw)["sampler_logp_abs_diff_max"]
    u = old.double() - smp.double()
    want = torch.where(mask, u.abs(), 0.0).amax(dim=1).to(dtype)  # (NaN wins amax)
    torch.testing.assert_close(eager, want, rtol=0, atol=0, equal_nan=True)
    ref = diagnose(old, old, mask, adv, sampler_logprobs=smp, backend="oracle")
    torch.testing.assert_close(
        eager, ref["sampler_logp_abs_diff_max"], rtol=0, atol=0, equal_nan=True
    )


def test_all_nan_logprobs_give_nan_diagnostics_never_zero(backend):
    """A step whose log-probs are all NaN: every diagnostic read from log r is NaN (unknown),
    the clip fractions included (a comparison with NaN is false: counted as "inside", they would
    read 0); the counts and the advantages, which do not read log r, are known."""
    nan = float("nan")
    logp = torch.full((2, 3), nan, dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    d = diagnose(logp, torch.zeros_like(logp), mask, adv, backend=backend)
    assert d["length"].tolist() == [2, 3]
    assert d["nonfinite_count"].tolist() == [2, 3]  # every masked position, none of the padding
    assert d["advantage"].tolist() == [1.0, -1.0]
    for k in SEQUENCE_DIAGNOSTICS:
        if k not in ("length", "nonfinite_count", "advantage"):
            assert d[k].isnan().all(), k  # kl_ref, sampler, entropy: not given; the rest unknown


def test_a_nan_sequence_among_finite_ones_is_nan_alone(backend):
    """Three sequences, the second all NaN; the others keep their numbers, by hand.

    token eps 0.2/0.2 (log-space bounds log .8 = -.2231, log 1.2 = .1823), seq eps 3e-4/4e-4.
    Row 0: r = [1.5, 1], A = +1: d = [.405465, 0], log s = .202733 (s = 1.2247, above): clipped,
      binds high; tokens: 1.5 above -> 1/2 out of range, 1/2 binding high; min 0, max .405465,
      std .202733 (|d - mean| = .202733 each); kl_old = (1.5 - 1 - .405465 + 0) / 2 = .047267.
    Row 1: NaN log-probs on both tokens: every log-ratio value NaN, 2 non-finite positions.
    Row 2: r = [.5] (second token padding), A = -1: d = -.693147 = log s (s = .5, below):
      clipped, binds low; the token is below: 1/1 out of range and binding low; std 0;
      kl_old = .5 - 1 + .693147 = .193147.
    """
    nan, l15, l05 = float("nan"), math.log(1.5), math.log(0.5)
    logp = torch.tensor([[l15, 0.0], [nan, nan], [l05, 7.0]], dtype=F64)
    mask = torch.tensor([[1, 1], [1, 1], [1, 0]])
    adv = torch.tensor([1.0, 1.0, -1.0], dtype=F64)
    d = diagnose(logp, torch.zeros_like(logp), mask, adv, backend=backend)
    want = {
        "length": [2, 2, 1],
        "advantage": [1.0, 1.0, -1.0],
        "seq_log_ratio": [l15 / 2, nan, l05],
        "seq_clipped": [1.0, nan, 1.0],
        "seq_clip_low": [0.0, nan, 1.0],
        "seq_clip_high": [1.0, nan, 0.0],
        "token_log_ratio_min": [0.0, nan, l05],
        "token_log_ratio_max": [l15, nan, l05],
        "token_log_ratio_std": [l15 / 2, nan, 0.0],
        "token_clip_fraction": [0.5, nan, 1.0],
        "token_clip_low_fraction": [0.0, nan, 1.0],
        "token_clip_high_fraction": [0.5, nan, 0.0],
        "kl_ref": [nan, nan, nan],
        "kl_old": [(0.5 - l15) / 2, nan, -0.5 - l05],
        "sampler_kl": [nan, nan, nan],
        "sampler_logp_abs_diff_max": [nan, nan, nan],
        "entropy": [nan, nan, nan],
        "nonfinite_count": [0, 2, 0],
    }
    assert set(want) == set(SEQUENCE_DIAGNOSTICS)
    for k, values in want.items():
        expect = torch.tensor(values, dtype=d[k].dtype)
        torch.testing.assert_close(d[k], expect, rtol=1e-12, atol=1e-15, equal_nan=True, msg=k)


def test_a_declared_diagnostic_without_its_form_fails_the_import_check():
    """``check_every_diagnostic_has_a_form`` (run when ``gspo_metrics.diagnostics`` is imported):
    a diagnostic declared but not computed, and one computed but not declared, are an
    ImportError naming each; the real declaration passes."""
    from gspo_metrics.diagnostics import check_every_diagnostic_has_a_form

    check_every_diagnostic_has_a_form()
    with pytest.raises(ImportError, match=r"no form: \['new_metric'\]"):
        check_every_diagnostic_has_a_form((*SEQUENCE_DIAGNOSTICS, "new_metric"))
    with pytest.raises(ImportError, match=r"no declaration: \['kl_old'\]"):
        check_every_diagnostic_has_a_form(tuple(n for n in SEQUENCE_DIAGNOSTICS if n != "kl_old"))


_NONFINITE = [math.nan, math.inf, -math.inf]


@settings(max_examples=80, deadline=None)
@given(
    B=st.integers(1, 6),
    T=st.integers(1, 12),
    seed=st.integers(0, 10_000),
    per_token_adv=st.booleans(),
    dtype=st.sampled_from([torch.float32, F64]),
    odd=st.lists(
        st.tuples(
            st.sampled_from(["logp", "old", "ref", "ent", "smp", "adv"]),
            st.integers(0, 10_000),
            st.sampled_from(_NONFINITE),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_a_step_holding_nan_or_inf_gets_the_oracles_numbers(B, T, seed, per_token_adv, dtype, odd):
    """NaN and +-inf anywhere (any input, the advantages too, inside or
    outside the mask): the form's second pass (``_nonfinite_step``) gives the oracle's numbers,
    NaN for NaN, every diagnostic (float64: to rounding; float32: within float32 rounding)."""
    g = torch.Generator().manual_seed(seed)
    logp, old, ref, ent, mask, adv, smp = _random_step(g, B, T, dtype, per_token_adv, 0.3)
    tensors = {"logp": logp, "old": old, "ref": ref, "ent": ent, "smp": smp, "adv": adv}
    for name, at, value in odd:
        flat = tensors[name].view(-1)
        flat[at % flat.numel()] = value
    kw = dict(ref_logprobs=ref, entropy=ent, sampler_logprobs=smp)
    got = diagnose(logp, old, mask, adv, backend="torch", **kw)
    want = diagnose(logp, old, mask, adv, backend="oracle", **kw)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == F64 else dict(rtol=2e-6, atol=1e-6)
    for k in SEQUENCE_DIAGNOSTICS:
        torch.testing.assert_close(got[k], want[k], equal_nan=True, msg=k, **tol)
