"""Hand-computed cases, one or more per loss family: the loss, its gradient and its attenuation,
with the arithmetic in comments (old log-probs 0, so log pi = log r and pi_old = 1 unless said)."""

from __future__ import annotations

import math

import pytest
import torch

from gspo_metrics import get_loss, grpo_loss, gspo_loss

F64 = torch.float64


def _row(ratios, adv, old=None):
    """One sequence per row of ``ratios``: logprobs = log r + old, with grad; mask all ones."""
    r = torch.tensor(ratios, dtype=F64)
    old_t = torch.zeros_like(r) if old is None else torch.tensor(old, dtype=F64)
    logp = (torch.log(r) + old_t).requires_grad_()
    return logp, old_t, torch.tensor(adv, dtype=F64), torch.ones_like(r, dtype=torch.bool)


def _run(name, ratios, adv, old=None, **params):
    logp, old_t, a, mask = _row(ratios, adv, old)
    out = get_loss(name)(logp, old_t, a, mask, reduction="sum", **params)
    (grad,) = torch.autograd.grad(out.loss, logp)
    return out, grad


def test_grpo_attenuation_is_the_share_on_binding_tokens():
    """r = [1.5, 1, 0.5], eps 0.2: A = +1 binds on 1.5 only, A = -1 on 0.5 only."""
    out, grad = _run("grpo", [[1.5, 1.0, 0.5], [1.5, 1.0, 0.5]], [1.0, -1.0])
    # A = +1: r = 1.5 > 1.2 binds (gradient 0); 1 and 0.5 keep -r A = -1, -0.5
    #   sum |grad| = 1.5, sum r |A| = 3  -> attenuation 1 - 1.5 / 3 = 0.5
    # A = -1: 0.5 < 0.8 binds; 1.5 and 1 keep +1.5, +1: 1 - 2.5 / 3 = 1/6
    torch.testing.assert_close(grad, torch.tensor([[0, -1, -0.5], [1.5, 1, 0]], dtype=F64))
    torch.testing.assert_close(
        out.per_sequence["attenuation"], torch.tensor([0.5, 1 / 6], dtype=F64)
    )


def test_verl_dual_clip_floors_negative_advantages():
    """verl's vanilla, c = 3: A = -1 at r = 4 is floored at -c A = 3 (no gradient)."""
    out, grad = _run("grpo", [[4.0, 1.0]], [-1.0], dual_clip=3.0)
    # token 1: max(-A r, -A clip(r)) = max(4, 1.2) = 4, then min(-A c, 4) = 3: constant
    # token 2: r = 1 inside the range: loss 1, gradient -r A = 1
    assert out.loss.item() == pytest.approx(3 + 1, abs=1e-14)
    torch.testing.assert_close(grad, torch.tensor([[0.0, 1.0]], dtype=F64))
    # sum |grad| = 1, sum r |A| = 4 + 1 = 5 -> 1 - 1/5 = 0.8 (without the dual clip: 1 - 5/5 = 0)
    assert out.per_sequence["attenuation"].item() == pytest.approx(0.8, abs=1e-14)
    plain, _ = _run("grpo", [[4.0, 1.0]], [-1.0])
    assert plain.per_sequence["attenuation"].item() == pytest.approx(0.0, abs=1e-14)


def test_trl_delta_caps_the_unclipped_ratio():
    """TRL's delta = 1.5 at r = 2: A = -1 loses its gradient (the cap binds), A = +1 is clipped."""
    out, grad = _run("grpo", [[2.0], [2.0]], [-1.0, 1.0], delta=1.5)
    # A = -1: -min(min(2, 1.5) * -1, clip(2) * -1) = -min(-1.5, -1.2) = 1.5, constant in r
    # A = +1: -min(1.5, 1.2) = -1.2, constant: the clip binds
    assert out.loss.item() == pytest.approx(1.5 - 1.2, abs=1e-14)
    torch.testing.assert_close(grad, torch.zeros(2, 1, dtype=F64))
    torch.testing.assert_close(out.per_sequence["attenuation"], torch.ones(2, dtype=F64))


def test_sequence_level_against_gspo_token_with_per_token_advantages():
    """log r = [0.1, -0.1] (s = 1), A = [1, -1]: TRL's sequence level cancels in d s, GSPO-token not."""
    logp = torch.tensor([[0.1, -0.1]], dtype=F64, requires_grad=True)
    old, adv, mask = torch.zeros(1, 2, dtype=F64), torch.tensor([[1.0, -1.0]], dtype=F64), None
    mask = torch.ones(1, 2, dtype=torch.bool)
    seq = grpo_loss(logp, old, adv, mask, level="sequence")
    (g_seq,) = torch.autograd.grad(seq.loss, logp)
    tok = gspo_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2)
    (g_tok,) = torch.autograd.grad(tok.loss, logp)
    # sequence level: l_t = -s A_t, d s / d log pi_j = s / 2, so every token gets
    #   -(s/2)(1 - 1) = 0: the loss moves nothing -> attenuation 1 - 0 / (|1| + |-1|) = 1
    torch.testing.assert_close(g_seq, torch.zeros(1, 2, dtype=F64))
    assert seq.per_sequence["attenuation"].item() == pytest.approx(1.0, abs=1e-14)
    # GSPO-token: each token -s A_t = [-1, 1], nothing removed
    torch.testing.assert_close(g_tok, torch.tensor([[-1.0, 1.0]], dtype=F64))
    assert tok.per_sequence["attenuation"].item() == pytest.approx(0.0, abs=1e-14)


def test_gspo_attenuation_whole_sequence():
    """s = e^0.01 > 1 + 4e-4: A = +1 binds on every token (attenuation 1), A = -1 on none (0)."""
    logp = torch.full((2, 3), 0.01, dtype=F64)
    out = gspo_loss(
        logp, torch.zeros(2, 3, dtype=F64), torch.tensor([1.0, -1.0], dtype=F64), torch.ones(2, 3)
    )
    torch.testing.assert_close(out.per_sequence["attenuation"], torch.tensor([1.0, 0.0], dtype=F64))


def test_verl_gspo_clamp_at_log_ratio_10():
    """verl clamps log s_t at 10: at log s = 11 with A = -1 the loss is e^10 per token, no gradient."""
    logp = torch.full((1, 2), 11.0, dtype=F64, requires_grad=True)
    out = gspo_loss(
        logp, torch.zeros(1, 2, dtype=F64), torch.tensor([-1.0], dtype=F64), torch.ones(1, 2),
        eps_low=0.2, eps_high=0.2, log_ratio_clamp=(-math.inf, 10.0),
    )  # fmt: skip
    (grad,) = torch.autograd.grad(out.loss, logp)
    # -min(s A, clip(s) A) = -min(-e^10, -1.2) = e^10 on each of 2 tokens; clamp: gradient 0
    assert out.loss.item() == pytest.approx(2 * math.exp(10), rel=1e-14)
    torch.testing.assert_close(grad, torch.zeros(1, 2, dtype=F64))
    assert out.per_sequence["attenuation"].item() == 1.0  # all of |s A| = e^11 removed


def test_gmpo_amplifies_where_a_negative_token_is_clipped():
    """log r = [-5, 0], eps 0.2: A = +1 clips nothing that matters (0); A = -1 lifts R (-4.51)."""
    out, grad = _run(
        "gmpo", [[math.exp(-5), 1.0], [math.exp(-5), 1.0]], [1.0, -1.0], eps_low=0.2, eps_high=0.2
    )
    # A = +1: x' = min(x, clamp x) = [-5, 0], R = e^-2.5 = s; each token -A R = -e^-2.5 ... sum
    #   reduction counts L_b = -R on both tokens: loss 2 * -e^-2.5, gradient per token -A R u_t
    #   with u = [1, 1]: attenuation 1 - 2 R / (2 s) = 0
    # A = -1: x' = max(x, clamp x) = [-0.2, 0], R = e^-0.1, L = +R; u = [0, 1]:
    #   gradient [0, R]; attenuation 1 - R / (2 s) = 1 - e^(2.4) / 2 = -4.5116...
    s = math.exp(-2.5)
    assert out.loss.item() == pytest.approx(-2 * s + 2 * math.exp(-0.1), rel=1e-13)
    torch.testing.assert_close(grad, torch.tensor([[-s, -s], [0.0, math.exp(-0.1)]], dtype=F64))
    att = out.per_sequence["attenuation"]
    assert att[0].item() == pytest.approx(0.0, abs=1e-13)
    assert att[1].item() == pytest.approx(1 - math.exp(2.4) / 2, rel=1e-13)  # -4.5116
    assert out.per_sequence["clip_low"].tolist() == [0.0, 0.5]  # x = -5 < -0.2 with A < 0


def test_cispo_both_conventions():
    """r = [3, 1, 0.5], A = +1: TRL's cap at 2 and verl's clamp to [0.8, 1.28] remove different
    shares; verl's floor at 0.8 raises the 0.5 token's weight (amplification at r = 0.5 alone)."""
    trl, g_trl = _run("cispo", [[3.0, 1.0, 0.5]], [1.0], weight_max=2.0)
    # w = min(r, 2) = [2, 1, 0.5]; loss -sum w A log r = -(2 log 3 + 0 + 0.5 log 0.5)
    assert trl.loss.item() == pytest.approx(-(2 * math.log(3) + 0.5 * math.log(0.5)), rel=1e-14)
    torch.testing.assert_close(g_trl, torch.tensor([[-2.0, -1.0, -0.5]], dtype=F64))
    # sum w |A| = 3.5, sum r |A| = 4.5 -> 1 - 3.5 / 4.5 = 2/9
    assert trl.per_sequence["attenuation"].item() == pytest.approx(2 / 9, abs=1e-14)
    assert trl.per_sequence["capped"].item() == pytest.approx(1 / 3, abs=1e-14)
    verl, g_verl = _run("cispo", [[3.0, 1.0, 0.5]], [1.0], weight_min=0.8, weight_max=1.28)
    # w = clamp(r, 0.8, 1.28) = [1.28, 1, 0.8]: 1 - 3.08 / 4.5 = 0.31556
    torch.testing.assert_close(g_verl, torch.tensor([[-1.28, -1.0, -0.8]], dtype=F64))
    assert verl.per_sequence["attenuation"].item() == pytest.approx(1 - 3.08 / 4.5, abs=1e-14)
    low, _ = _run("cispo", [[0.5]], [1.0], weight_min=0.8, weight_max=1.28)
    assert low.per_sequence["attenuation"].item() == pytest.approx(1 - 0.8 / 0.5, abs=1e-14)  # -0.6


def test_sapo_gate():
    """At r = 1 the gate's slope is plain IS (attenuation 0); at r = e, tau = 1, it keeps 4 s (1-s)."""
    out, grad = _run("sapo", [[1.0], [math.e], [math.e]], [1.0, 1.0, -1.0])
    # r = 1: sigma(0) = 1/2, 4 * 1/2 * 1/2 = 1: gradient -r A = -1, nothing removed
    # r = e, A = +1, tau_pos = 1: s = sigmoid(e - 1) = 0.84791, 4 s (1 - s) = 0.51584
    s_pos = 1 / (1 + math.exp(-(math.e - 1)))
    # A = -1 uses tau_neg = 1.05: s = sigmoid(1.05 (e - 1))
    s_neg = 1 / (1 + math.exp(-1.05 * (math.e - 1)))
    keep = [1.0, 4 * s_pos * (1 - s_pos), 4 * s_neg * (1 - s_neg)]
    torch.testing.assert_close(
        grad, torch.tensor([[-1.0], [-keep[1] * math.e], [keep[2] * math.e]], dtype=F64)
    )
    torch.testing.assert_close(out.per_sequence["attenuation"], 1 - torch.tensor(keep, dtype=F64))
    # loss: -A sigmoid(tau (r - 1)) 4 / tau, summed: -2 - 4 s_pos + 4 s_neg / 1.05
    assert out.loss.item() == pytest.approx(-2 - 4 * s_pos + 4 * s_neg / 1.05, rel=1e-14)


def test_vespo_weight_below_and_above_plain_importance_sampling():
    """log r = [0.1, 0.2]: phi(e^0.3) = 0.6379 < r (attenuation 0.4516); log r = [-0.3, 0]:
    phi(e^-0.3) = 1.1943 > r, so VESPO adds weight (attenuation -0.3721)."""
    out, grad = _run("vespo", [[math.exp(0.1), math.exp(0.2)], [math.exp(-0.3), 1.0]], [1.0, 1.0])
    # k = 2, lambda = 3 (A >= 0): log phi = 3 + 2 log w - 3 w
    phi1 = math.exp(3 + 2 * 0.3 - 3 * math.exp(0.3))  # log w = 0.3: 0.637898
    phi2 = math.exp(3 - 2 * 0.3 - 3 * math.exp(-0.3))  # log w = -0.3: 1.194282
    torch.testing.assert_close(grad, -torch.tensor([[phi1, phi1], [phi2, phi2]], dtype=F64))
    # attenuation 1 - 2 phi / sum r: 1 - 1.275797 / 2.326574 and 1 - 2.388564 / 1.740818
    expected = [1 - 2 * phi1 / (math.exp(0.1) + math.exp(0.2)), 1 - 2 * phi2 / (math.exp(-0.3) + 1)]
    torch.testing.assert_close(out.per_sequence["attenuation"], torch.tensor(expected, dtype=F64))
    assert expected[0] == pytest.approx(0.451641, abs=1e-6) and expected[1] == pytest.approx(
        -0.372093, abs=1e-6
    )


def test_dppo_tv_mask_and_truncation():
    """pi_old = 0.5 -> pi = 0.8 with A > 0 moves 0.3 > 0.2: masked; pi_old = 0.2 -> 0.8 with A < 0
    is kept but its weight r = 4 truncated at 3."""
    half, fifth = math.log(0.5), math.log(0.2)
    out, grad = _run(
        "dppo_tv", [[1.6, 1.0], [4.0, 1.0]], [1.0, -1.0], old=[[half, half], [fifth, half]],
        truncation=3.0,
    )  # fmt: skip
    # row 0: token 1 masked (gradient 0), token 2 kept with w = 1: 1 - 1 / (1.6 + 1) = 0.61538
    # row 1: token 1 w = min(4, 3) = 3, token 2 w = 1: gradient [3, 1]; 1 - 4 / 5 = 0.2
    torch.testing.assert_close(grad, torch.tensor([[0.0, -1.0], [3.0, 1.0]], dtype=F64))
    torch.testing.assert_close(
        out.per_sequence["attenuation"], torch.tensor([1 - 1 / 2.6, 1 - 4 / 5], dtype=F64)
    )
    assert out.per_sequence["masked"].tolist() == [0.5, 0.0]
    # truncation=None (the signature's "no truncation"): row 1's token 1 keeps its weight 4
    _, grad = _run(
        "dppo_tv", [[1.6, 1.0], [4.0, 1.0]], [1.0, -1.0], old=[[half, half], [fifth, half]],
        truncation=None,
    )  # fmt: skip
    torch.testing.assert_close(grad, torch.tensor([[0.0, -1.0], [4.0, 1.0]], dtype=F64))


def test_gpg_and_dro_can_add_weight():
    """GPG keeps |A| whatever r: r = [2, 0.5] gives 1 - 2 / 2.5 = 0.2, r = 0.5 alone 1 - 1/0.5 = -1.
    DRO, beta 0.5: gradient -A + beta log r; at log r = -2, A = +1: |-2| vs e^-2, attenuation -13.78."""
    gpg, g = _run("gpg", [[2.0, 0.5], [0.5, 0.5]], [1.0, 1.0])
    torch.testing.assert_close(g, -torch.ones(2, 2, dtype=F64))
    torch.testing.assert_close(
        gpg.per_sequence["attenuation"], torch.tensor([0.2, -1.0], dtype=F64)
    )
    dro, g = _run("dro", [[math.exp(0.4)], [math.exp(-2.0)]], [1.0, 1.0], beta=0.5)
    # gradient -1 + 0.5 * 0.4 = -0.8 and -1 + 0.5 * -2 = -2
    torch.testing.assert_close(g, torch.tensor([[-0.8], [-2.0]], dtype=F64))
    expected = [1 - 0.8 / math.exp(0.4), 1 - 2 / math.exp(-2.0)]  # 0.46374, -13.778
    torch.testing.assert_close(dro.per_sequence["attenuation"], torch.tensor(expected, dtype=F64))
    # loss -(A log pi - beta/2 (log r)^2) with log pi = log r: -(0.4 - 0.04) - (-2 - 1)
    assert dro.loss.item() == pytest.approx(-(0.4 - 0.25 * 0.16) - (-2 - 0.25 * 4), rel=1e-14)


def test_kl_cov_penalises_the_top_covariance_token():
    """A = [2, 1, -1, -2], log pi = [-0.2, -1.5, -0.5, -1.6], log r = 0.1 each, ratio 0.25 -> 1
    token: covariances (A - 0)(log pi + 0.95) = [1.5, -0.55, -0.45, 1.3], so token 0 is chosen."""
    lp = torch.tensor([[-0.2, -1.5, -0.5, -1.6]], dtype=F64, requires_grad=True)
    adv = torch.tensor([[2.0, 1.0, -1.0, -2.0]], dtype=F64)
    out = get_loss("kl_cov")(
        lp,
        lp.detach() - 0.1,
        adv,
        torch.ones(1, 4),
        kl_cov_ratio=0.25,
        ppo_kl_coef=0.1,
        reduction="sum",
    )
    (grad,) = torch.autograd.grad(out.loss, lp)
    r = math.exp(0.1)
    # token 0: -A r + 0.1 |0.1| (loss), -A r + 0.1 sign(0.1) (gradient); the others -A r
    assert out.loss.item() == pytest.approx(-2 * r + 0.01 - r + r + 2 * r, rel=1e-14)
    torch.testing.assert_close(grad, torch.tensor([[-2 * r + 0.1, -r, r, 2 * r]], dtype=F64))
    # sum |grad| = 6 r - 0.1, sum r |A| = 6 r: attenuation 0.1 / (6 r) = 0.015081
    assert out.per_sequence["attenuation"].item() == pytest.approx(0.1 / (6 * r), rel=1e-12)
    assert out.per_sequence["penalised"].item() == 0.25


@pytest.mark.parametrize(
    ("name", "reduction", "expected"),
    [
        # per-token loss -A at r = 1 on rows of 1 and 3 tokens, A = [2, -1]: seq0 [-2], seq1 [1, 1, 1]
        ("luspo", "seq_mean_token_sum", (-2 + 3) / 2),  # mean_b of token sums
        ("dr_grpo", "seq_mean_token_sum_norm", (-2 + 3) / (2 * 4)),  # / (B * L), L = 4
        ("dapo", "token_mean", (-2 + 3) / 4),
        ("bnpo", "token_mean", (-2 + 3) / 4),
    ],
)
def test_recipe_normalisers_hand_computed(name, reduction, expected):
    """Two sequences of 1 and 3 tokens at ratio 1: each recipe's normaliser by hand."""
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    params = {"norm_length": 4.0} if name == "dr_grpo" else {}
    out = get_loss(name)(
        logp, torch.zeros(2, 3, dtype=F64), torch.tensor([2.0, -1.0], dtype=F64), mask, **params
    )
    assert out.loss.item() == pytest.approx(expected, abs=1e-14)
    assert get_loss(name).__kwdefaults__["reduction"] == reduction
