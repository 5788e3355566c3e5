"""loss_for("trl", settings) against TRL 1.16.0's own GRPOTrainer._compute_loss on the same tensors.

The trainer is ``object.__new__(GRPOTrainer)`` with the attributes ``_compute_loss`` reads set from a
real ``GRPOConfig`` the way ``GRPOTrainer.__init__`` sets them, and its
``_get_per_token_logps_and_entropies`` returning our log-prob leaf, so both losses are
differentiated with respect to the same tensor. One call is one accumulation window: one process,
gradient_accumulation_steps 1, ``num_items_in_batch`` the batch's token count (TRL's normaliser of
dapo, cispo and vespo). Every loss_type at both importance_sampling_levels, with TRL's defaults and
with stated settings (TRL's delta, CISPO's cap, SAPO's temperatures, VESPO's constants, Dr.
GRPO's length), per-sequence and per-token advantages: loss and gradient equal in float64 at rtol
1e-9 (they agree to the last few bits: the operations are the same).

Skipped without TRL, or with a TRL other than the version loss_for follows.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections import defaultdict
from types import SimpleNamespace

import pytest

trl = pytest.importorskip("trl", reason="trl is not installed: pip install 'gspo-dash[trl]'")

import torch  # noqa: E402
from loss_inputs import F64  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gspo_metrics import get_loss, loss_for  # noqa: E402
from gspo_metrics.tool_losses import TRL_DEFAULTS, TRL_LOSSES, VERSIONS  # noqa: E402

if trl.__version__ != VERSIONS["trl"]:
    pytest.skip(
        f"loss_for follows TRL {VERSIONS['trl']}; TRL {trl.__version__} is installed",
        allow_module_level=True,
    )

B, T = 6, 7
LENGTHS = (7, 5, 3, 1, 6, 4)


class _Accelerator:
    """One process: gather and reduce are the identity."""

    num_processes = 1

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def _config(settings: dict, tmp: str) -> GRPOConfig:
    return GRPOConfig(output_dir=tmp, report_to="none", use_cpu=True, **settings)


def trl_trainer(args: GRPOConfig) -> GRPOTrainer:
    """A GRPOTrainer without __init__: what _compute_loss reads, set from ``args`` as __init__ does."""
    t = object.__new__(GRPOTrainer)
    t.args = args
    t.loss_type = args.loss_type
    t.importance_sampling_level = args.importance_sampling_level
    t.epsilon_low = args.epsilon
    t.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    t.beta = args.beta
    t.max_completion_length = args.max_completion_length
    t.top_entropy_quantile = args.top_entropy_quantile
    t.off_policy_mask_threshold = args.off_policy_mask_threshold
    t.use_vllm = args.use_vllm
    t.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    t._entropy_bonus_enabled = args.entropy_coef != 0.0 or args.use_adaptive_entropy
    t.aux_loss_enabled = False
    t.current_gradient_accumulation_steps = 1
    t.model = SimpleNamespace(training=True)
    t.accelerator = _Accelerator()
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    return t


def _inputs(per_token: bool, seed: int = 0):
    """Ragged rows (7, 5, 3, 1, 6, 4 tokens), log-ratios ~ N(0, 0.35^2) plus one far token per
    row (so clips, caps and gates act), advantages of both signs."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=gen, dtype=F64) * 2 - 0.05
    log_r = 0.35 * torch.randn(B, T, generator=gen, dtype=F64)
    log_r[:, 0] += torch.tensor([1.2, -1.5, 0.9, -0.8, 2.0, -2.2], dtype=F64)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = True
    adv = torch.randn((B, T) if per_token else (B,), generator=gen, dtype=F64)
    return old + log_r, old, adv, mask


def trl_loss_and_grad(args: GRPOConfig, logp, old, adv, mask):
    """TRL's own _compute_loss on these tensors: (loss, d loss / d logprobs)."""
    trainer = trl_trainer(args)
    x = logp.clone().requires_grad_()
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (x, torch.zeros_like(x), None)
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": mask.long(),
        "advantages": adv.clone(),
        "old_per_token_logps": old,
        "num_items_in_batch": torch.tensor(float(mask.sum()), dtype=F64),
    }
    loss = trainer._compute_loss(None, inputs)
    (grad,) = torch.autograd.grad(loss, x)
    return loss.detach(), grad


def ours_loss_and_grad(settings: dict, logp, old, adv, mask):
    x = logp.clone().requires_grad_()
    out = loss_for("trl", settings)(x, old, adv, mask)
    (grad,) = torch.autograd.grad(out.loss, x)
    return out.loss.detach(), grad


#: Stated settings beyond loss_type and level, per loss_type ({} = TRL's defaults for the rest).
STATED = {
    "grpo": [{}, {"delta": 1.25}, {"delta": 1.1}, {"epsilon": 3e-4, "epsilon_high": 4e-4}],
    "bnpo": [{}],
    "dr_grpo": [{}, {"max_completion_length": T}],
    "dapo": [{}, {"epsilon_high": 0.28}],
    "luspo": [{}, {"epsilon": 3e-4, "epsilon_high": 4e-4}],
    "cispo": [{}, {"epsilon_high": 1.1}, {"epsilon_high": 5.0}],
    "sapo": [{}, {"sapo_temperature_pos": 1.3, "sapo_temperature_neg": 2.1}],
    "vespo": [
        {},
        {"vespo_k_pos": 2.1, "vespo_lambda_pos": 2.9, "vespo_k_neg": 3.3, "vespo_lambda_neg": 1.7},
    ],
}
CASES = [
    {"loss_type": lt, "importance_sampling_level": level, **extra}
    for lt in sorted(TRL_LOSSES)
    for level in ("token", "sequence")
    for extra in STATED[lt]
]


def test_every_trl_loss_type_is_covered():
    """The cases cover every loss_type TRL's _compute_loss branches on (read from its source:
    each ``self.loss_type == ...`` / ``in [...]``), so a loss TRL adds fails here first."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(GRPOTrainer._compute_loss)))
    handled = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and getattr(node.left, "attr", None) == "loss_type":
            for c in ast.walk(node.comparators[0]):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    handled.add(c.value)
    assert handled == set(TRL_LOSSES) == {c["loss_type"] for c in CASES}


@pytest.mark.parametrize("per_token", [False, True], ids=["adv_B", "adv_BT"])
@pytest.mark.parametrize("settings", CASES, ids=lambda s: "-".join(map(str, s.values())))
def test_loss_and_gradient_equal_trls(settings, per_token, tmp_path):
    """Our loss and gradient equal TRL's _compute_loss at float64, rtol 1e-9."""
    logp, old, adv, mask = _inputs(per_token)
    ref_loss, ref_grad = trl_loss_and_grad(_config(settings, str(tmp_path)), logp, old, adv, mask)
    loss, grad = ours_loss_and_grad(settings, logp, old, adv, mask)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-12)
    assert grad.abs().sum() > 0  # (a case where nothing trains would prove little)


def test_defaults_are_trls_own(tmp_path):
    """Every default loss_for takes is GRPOConfig()'s in this TRL."""
    config = _config({}, str(tmp_path))
    for key, value in TRL_DEFAULTS.items():
        assert getattr(config, key) == value, key


def test_sapo_temperatures_are_float32_in_trl(tmp_path):
    """TRL's SAPO temperatures go through float32 (torch.where on Python floats): with tau_neg =
    1.05 taken exactly, the loss misses TRL's by more than rounding; loss_for passes TRL's value."""
    logp, old, adv, mask = _inputs(per_token=False)
    settings = {"loss_type": "sapo"}
    ref_loss, _ = trl_loss_and_grad(_config(settings, str(tmp_path)), logp, old, adv, mask)
    exact = get_loss("sapo")(logp, old, adv, mask, tau_pos=1.0, tau_neg=1.05).loss
    assert abs(float(exact - ref_loss)) > 1e-9 * abs(float(ref_loss))
    assert float(ours_loss_and_grad(settings, logp, old, adv, mask)[0]) == pytest.approx(
        float(ref_loss), rel=1e-14
    )


def test_policy_only_leaves_out_exactly_the_kl_term(tmp_path):
    """With beta > 0, TRL's grpo loss is the policy term loss_for gives plus beta * k3 reduced the
    same way (no bias correction): what ToolLoss.left_out names is all that differs."""
    logp, old, adv, mask = _inputs(per_token=False)
    ref = old - 0.1
    settings = {"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": False}
    trainer = trl_trainer(_config(settings, str(tmp_path)))
    x = logp.clone().requires_grad_()
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (x, torch.zeros_like(x), None)
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": mask.long(),
        "advantages": adv.clone(),
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
    }
    trl_total = trainer._compute_loss(None, inputs).detach()
    tl = loss_for("trl", settings, policy_only=True)
    assert set(tl.left_out) == {"beta"}
    d = torch.where(mask, ref - logp, 0.0)
    k3 = (torch.exp(d) - d - 1).sum(-1) / mask.sum(-1)  # per sequence, TRL's grpo reduction
    expected = tl(logp, old, adv, mask).loss + 0.04 * k3.mean()
    torch.testing.assert_close(trl_total, expected, rtol=1e-12, atol=1e-14)
