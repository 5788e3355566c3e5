"""verl plugin: what gspo-dash records from verl 0.9.1's own training path, and that it changes nothing.

A ``BaseEngine`` subclass over a bigram policy (a (V, V) logits table: token t's logits are the
row of token t-1) splits each optimizer step into micro-batches with verl's own
``prepare_micro_batches``, as verl's FSDP engine does, and calls verl's ``ppo_loss`` (the
``functools.partial`` verl's workers build) once per micro-batch. The loop is verl's own
``TrainingWorker.train_mini_batch`` and ``TrainingWorker.train_batch`` (called on a stand-in
worker): one batch of P=4 prompts x G=4 completions, mini-batches of 8 sequences (two groups),
two epochs, micro-batches of 4 (one group): 4 optimizer steps per batch, policy lags 0, 1, 2, 3.

Checked for ``loss_mode`` vanilla and gspo: the parameters and verl's metrics are those of the
same run without the plugin; per micro-batch, verl's ``actor/pg_clipfrac`` equals our binding
fraction in the loss's unit and verl's ``actor/ppo_kl`` our k1 (both token-weighted, verl's
weighting); our clip shares equal the ones recomputed here from the tensors verl trained on.

Skipped when verl is not importable (the default environment has none), except when
``GSPO_DASH_REQUIRE_VERL=1`` (CI's verl job), where a missing verl fails.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

if os.environ.get("GSPO_DASH_REQUIRE_VERL") == "1":
    import verl  # noqa: F401
else:
    pytest.importorskip("verl", reason="verl is not installed: pip install 'gspo-dash[verl]'")
    pytest.importorskip("peft", reason="verl's engine package imports peft")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from tensordict import NonTensorData, NonTensorStack, TensorDict  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402
from verl.workers.engine.base import BaseEngine  # noqa: E402
from verl.workers.engine.utils import postprocess_batch_func, prepare_micro_batches  # noqa: E402
from verl.workers.engine_workers import TrainingWorker  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

from training_hooks import schema, tables  # noqa: E402
from training_hooks import verl as plugin  # noqa: E402
from training_hooks.schema import Seq, Step  # noqa: E402

V, P, G, TP = 6, 4, 4, 2  # vocabulary, prompts, group size, prompt tokens
MINI, MICRO, EPOCHS = 8, 4, 2
STEPS_PER_BATCH = (P * G // MINI) * EPOCHS


class BigramEngine(BaseEngine):
    """A verl engine on the CPU: logits of token t = ``table[token t-1]``; micro-batches as
    verl's FSDP engine splits them; plain SGD; every micro-batch's metrics kept."""

    def __init__(self, lr: float):
        torch.manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(V, V) * 0.5)
        self.optimizer = torch.optim.SGD([self.table], lr=lr)
        self.micro_metrics: list[dict] = []
        self.seen: list[dict[str, torch.Tensor]] = []  # per micro-batch: l, o, a, m (B, T)

    is_param_offload_enabled = False
    is_optimizer_offload_enabled = False

    def train_mode(self, **kwargs):
        import contextlib

        return contextlib.nullcontext()

    def optimizer_zero_grad(self):
        self.optimizer.zero_grad()

    def optimizer_step(self):
        grad_norm = torch.nn.utils.clip_grad_norm_([self.table], 1e9)
        self.optimizer.step()
        return grad_norm

    def lr_scheduler_step(self):
        return self.optimizer.param_groups[0]["lr"]

    def get_data_parallel_size(self):
        return 1

    def get_data_parallel_rank(self):
        return 0

    def get_data_parallel_group(self):
        return None

    def is_mp_src_rank_with_outputs(self):
        return True

    def model_output(self, data: TensorDict) -> dict[str, torch.Tensor]:
        """Log-probs and entropies, unpadded and left-shifted as verl's models give them:
        position i holds the prediction of token i + 1 (the last position of a sequence: 0)."""
        tokens = torch.cat([data["prompts"], data["responses"]], dim=1)
        keep = data["attention_mask"].bool()
        logp, ent = [], []
        for b in range(tokens.shape[0]):
            seq = tokens[b][keep[b]]
            logits = torch.log_softmax(self.table[seq[:-1]], dim=-1)  # (L-1, V)
            lp = logits.gather(1, seq[1:, None]).squeeze(1)
            h = -(logits.exp() * logits).sum(-1)
            logp.append(torch.cat([lp, lp.new_zeros(1)]))
            ent.append(torch.cat([h, h.new_zeros(1)]))
        return {"log_probs": torch.cat(logp), "entropy": torch.cat(ent)}

    def padded(self, mb: TensorDict) -> dict[str, torch.Tensor]:
        """The micro-batch as verl's loss reads it: current log-probs (l), old (o), advantages
        (a), response mask (m), each (B, T)."""
        from verl.workers.utils.padding import no_padding_2_padding

        with torch.no_grad():
            logp = no_padding_2_padding(self.model_output(mb)["log_probs"], mb)
        return {
            "l": logp,
            "o": mb["old_log_probs"],
            "a": mb["advantages"],
            "m": mb["response_mask"],
        }

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        batch_num_tokens = data["response_mask"].sum()  # the FSDP engine's, without all_reduce
        tu.assign_non_tensor(data, batch_num_tokens=batch_num_tokens.item(), dp_size=1)
        micro_batches, indices = prepare_micro_batches(data=data, dp_group=None)
        outputs = []
        for mb in micro_batches:
            loss, metrics = loss_function(model_output=self.model_output(mb), data=mb)
            loss.backward()
            self.micro_metrics.append(metrics)
            self.seen.append(self.padded(mb))
            outputs.append({"loss": loss.detach(), "metrics": metrics})
        return postprocess_batch_func(output_lst=outputs, indices=indices, data=data)


def _worker(engine: BigramEngine, loss_fn) -> SimpleNamespace:
    """What verl's TrainingWorker.train_mini_batch / train_batch read of ``self``."""
    w = SimpleNamespace(
        engine=engine,
        loss_fn=loss_fn,
        engine_config=SimpleNamespace(
            forward_only=False,
            use_dynamic_bsz=False,
            max_token_len_per_gpu=4096,
            micro_batch_size_per_gpu=MICRO,
            use_fused_kernels=False,
        ),
        model_config={"use_remove_padding": True},
        device_name="cpu",
        flops_counter=None,
        profiler=SimpleNamespace(
            step=lambda: None, rank=0, check_enable=lambda: False, check_this_step=lambda: False
        ),
    )
    w.train_batch = functools.partial(TrainingWorker.train_batch, w)
    w._postprocess_output = functools.partial(TrainingWorker._postprocess_output, w)
    return w


def _batch(engine: BigramEngine, seed: int) -> TensorDict:
    """P*G sequences group by group: prompts of TP tokens, responses of 2-5 tokens sampled from
    the policy, 0/1 rewards on the last token, GRPO advantages, old log-probs of the policy now."""
    g = torch.Generator().manual_seed(seed)
    B, T = P * G, 5
    prompts = torch.randint(0, V, (P, TP), generator=g).repeat_interleave(G, 0)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    responses = torch.randint(0, V, (B, T), generator=g)
    mask = (torch.arange(T)[None] < lengths[:, None]).long()
    responses = responses * mask
    rewards = (responses[:, 0] % 2).float()  # (B,)
    r = rewards.reshape(P, G)
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).reshape(B)
    scores = torch.zeros(B, T)
    scores[torch.arange(B), lengths - 1] = rewards
    td = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": torch.cat([torch.ones(B, TP, dtype=torch.long), mask], 1),
            "response_mask": mask,
            "advantages": adv[:, None] * mask,
            "token_level_scores": scores,
        },
        batch_size=[B],
    )
    with torch.no_grad():
        from verl.workers.utils.padding import no_padding_2_padding

        old = no_padding_2_padding(engine.model_output(td)["log_probs"], td) * mask
    td["old_log_probs"] = old
    td["rollout_log_probs"] = old - 0.05 * mask
    td["uid"] = NonTensorStack.from_list([NonTensorData(f"u{seed}-{b // G}") for b in range(B)])
    tu.assign_non_tensor(
        td,
        mini_batch_size=MINI,
        epochs=EPOCHS,
        seed=0,
        dataloader_kwargs={"shuffle": False},
        global_batch_size=MINI,
    )
    return td


def _actor_config(loss_mode: str) -> ActorConfig:
    eps = (3e-4, 4e-4) if loss_mode == "gspo" else (0.2, 0.2)
    return ActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=MINI,
        ppo_micro_batch_size_per_gpu=MICRO,
        ppo_epochs=EPOCHS,
        clip_ratio_low=eps[0],
        clip_ratio_high=eps[1],
        loss_agg_mode="token-mean",
        rollout_n=G,
        policy_loss={"loss_mode": loss_mode},
        use_dynamic_bsz=False,
    )


def _train(loss_mode: str, batches: int = 2, lr: float | None = None):
    engine = BigramEngine(lr=lr if lr is not None else 3.0 if loss_mode == "vanilla" else 0.5)
    loss_fn = functools.partial(ppo_loss, config=_actor_config(loss_mode))
    worker = _worker(engine, loss_fn)
    metrics, trained = [], []
    for k in range(batches):
        data = _batch(engine, seed=k)
        trained.append(data.clone())
        out = TrainingWorker.train_mini_batch(worker, data)
        metrics.append(tu.get(out, "metrics"))
    return engine, metrics, trained


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    """The plugin on (GSPO_DASH_VERL = tmp_path), BaseEngine.train_batch wrapped; undone after."""
    monkeypatch.setenv(plugin.ENV_ROOT, str(tmp_path))
    monkeypatch.setenv(plugin.ENV_NAME, "toy")
    monkeypatch.setenv(plugin.ENV_OPTIONS, '{"findings_every": 10}')
    original = BaseEngine.__dict__["train_batch"]
    assert plugin.install()
    assert BaseEngine.__dict__["train_batch"] is not original
    yield tmp_path
    plugin.close()
    BaseEngine.train_batch = original


def _recorded(root) -> tuple[schema.RunInfo, pd.DataFrame, pd.DataFrame]:
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    info = schema.read_run_info(str(run_dir))
    steps = tables.read_table(str(run_dir), schema.STEPS_DIR).set_index(Step.STEP).sort_index()
    seqs = tables.read_table(str(run_dir), schema.SEQUENCES_DIR)
    return info, steps, seqs.sort_values([Seq.STEP, Seq.GROUP, Seq.SAMPLE])


def _metric(m) -> float:
    return float(m.values[0]) if hasattr(m, "values") else float(m)


@pytest.mark.slow
@pytest.mark.parametrize("loss_mode", ["vanilla", "gspo"])
def test_verl_steps_are_recorded_and_training_is_unchanged(hooked, loss_mode):
    """Each optimizer step is one row; verl trains the same parameters and logs the same metrics
    as without the plugin; run.json holds verl's settings; lags 0..3 per batch."""
    plain_engine, plain_metrics, _ = _train_plain(loss_mode)
    engine, metrics, trained = _train(loss_mode)
    plugin.close()
    assert torch.equal(engine.table, plain_engine.table)
    assert len(engine.micro_metrics) == len(plain_engine.micro_metrics) == 16
    for ours, theirs in zip(engine.micro_metrics, plain_engine.micro_metrics, strict=True):
        assert {k: _metric(v) for k, v in ours.items()} == {
            k: _metric(v) for k, v in theirs.items()
        }
    assert [m.keys() for m in metrics] == [m.keys() for m in plain_metrics]

    info, steps, seqs = _recorded(hooked)
    assert info.source == "verl" and info.name == "toy" and info.status == schema.STATUS_FINISHED
    assert info.algorithm == ("gspo" if loss_mode == "gspo" else "grpo")
    if loss_mode == "gspo":
        assert (info.seq_eps_low, info.seq_eps_high) == (3e-4, 4e-4)
    else:
        assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.2)
    assert info.reduction == "token-mean" and info.group_size == G
    cfg = info.config
    assert cfg["loss_mode"] == loss_mode and cfg["ppo_epochs"] == EPOCHS
    assert cfg["ppo_mini_batch_size"] == MINI and cfg["ppo_micro_batch_size_per_gpu"] == MICRO
    assert cfg["verl_version"] == "0.9.1" and cfg["loss_agg_mode"] == "token-mean"

    assert steps.index.tolist() == list(range(1, 2 * STEPS_PER_BATCH + 1))
    assert steps[Step.ROLLOUT].tolist() == [0] * 4 + [1] * 4
    assert steps[Step.POLICY_LAG].tolist() == [0, 1, 2, 3] * 2
    assert (steps[Step.NUM_SEQUENCES] == MINI).all() and (steps["verl/micro_batches"] == 2).all()
    assert (steps["verl/groups_known"] == 1).all()
    # rollout_log_probs = old - 0.05: sampler k3 = e^0.05 - 1 - 0.05 (float32 rounding aside)
    assert (steps[Step.SAMPLER_KL_MEAN] - (math.expm1(0.05) - 0.05)).abs().max() < 1e-5
    assert steps[Step.ENTROPY_MEAN].notna().all() and steps[Step.KL_REF_MEAN].isna().all()
    # step 1 (lag 0) trains on the policy that computed old_log_probs: ratio 1, nothing clipped
    assert abs(steps.loc[1, Step.SEQ_LOG_RATIO_MAX]) < 1e-6
    _check_rewards_and_groups(steps, seqs, trained)


def _train_plain(loss_mode: str):
    """The same run with BaseEngine.train_batch as verl ships it."""
    hooked_fn = BaseEngine.__dict__["train_batch"]
    BaseEngine.train_batch = hooked_fn.__wrapped__
    try:
        return _train(loss_mode)
    finally:
        BaseEngine.train_batch = hooked_fn


def _check_rewards_and_groups(steps, seqs, trained) -> None:
    """A sequence's reward is the sum of its token_level_scores; groups are verl's uids (4 rows
    each, in the batch's order); the step's reward mean is the mean of its mini-batch's rewards."""
    for k, data in enumerate(trained):
        rewards = data["token_level_scores"].sum(-1)  # (B,)
        for s in range(1, STEPS_PER_BATCH + 1):
            step = k * STEPS_PER_BATCH + s
            mini = (s - 1) % 2  # mini-batch 0 or 1 of the epoch: rows [8 m, 8 m + 8)
            want = rewards[MINI * mini : MINI * (mini + 1)]
            got = seqs[seqs[Seq.STEP] == step]
            assert got[Seq.REWARD].tolist() == want.tolist()
            assert got[Seq.GROUP].tolist() == [0] * G + [1] * G
            assert steps.loc[step, Step.REWARD_MEAN] == pytest.approx(float(want.mean()))


@pytest.mark.slow
@pytest.mark.parametrize("loss_mode", ["vanilla", "gspo"])
def test_clip_and_kl_match_verl_per_micro_batch(hooked, loss_mode):
    """Per micro-batch (one group here), verl's actor/pg_clipfrac is our binding fraction in the
    loss's unit and actor/ppo_kl our k1 = -(token-weighted mean of log s); both token-weighted,
    as verl's masked_mean. The clip shares equal the ones recomputed here from verl's tensors:
    with r_t = exp(logp - old) (vanilla) or s = exp(mean_t log r_t) (gspo), the clip binds low
    where A < 0 and ratio < 1 - eps_low, high where A > 0 and ratio > 1 + eps_high."""
    engine, _, trained = _train(loss_mode)
    plugin.close()
    _, steps, seqs = _recorded(hooked)
    unit_low, unit_high = (
        (Seq.SEQ_CLIP_LOW, Seq.SEQ_CLIP_HIGH)
        if loss_mode == "gspo"
        else (Seq.TOKEN_CLIP_LOW_FRACTION, Seq.TOKEN_CLIP_HIGH_FRACTION)
    )
    binding_seen = 0.0
    for i, verl_metrics in enumerate(engine.micro_metrics):
        step, group = i // 2 + 1, i % 2  # two micro-batches (groups) per step
        rows = seqs[(seqs[Seq.STEP] == step) & (seqs[Seq.GROUP] == group)]
        n = rows[Seq.LENGTH].to_numpy(np.float64)
        binding = rows[unit_low].to_numpy(np.float64) + rows[unit_high].to_numpy(np.float64)
        ours = float((n * binding).sum() / n.sum())
        clipfrac = _metric(verl_metrics["actor/pg_clipfrac"])
        assert ours == pytest.approx(clipfrac, abs=1e-6), (i, ours, clipfrac)
        k1 = -float((n * rows[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)).sum() / n.sum())
        assert k1 == pytest.approx(_metric(verl_metrics["actor/ppo_kl"]), abs=1e-6), i
        binding_seen += ours
    assert binding_seen > 0  # the clip did bind somewhere: the comparison is not vacuous
    _check_clip_shares_by_hand(engine, steps, loss_mode)


def _check_clip_shares_by_hand(engine, steps, loss_mode) -> None:
    """Each step's clip shares in both units, recomputed from the micro-batches verl's loss
    read (kept by the engine): log r_t = logp - old; token unit (eps 0.2/0.2 for vanilla,
    our GRPO default otherwise) token-weighted over the step; sequence unit (verl's eps for
    gspo, our GSPO default otherwise) log s = masked mean of log r_t, share of sequences."""
    from gspo_metrics.spec import GRPO_EPS, GSPO_EPS

    cfg = _actor_config(loss_mode)
    token_eps = (cfg.clip_ratio_low, cfg.clip_ratio_high) if loss_mode == "vanilla" else GRPO_EPS
    seq_eps = (cfg.clip_ratio_low, cfg.clip_ratio_high) if loss_mode == "gspo" else GSPO_EPS
    for step in steps.index:
        mbs = engine.seen[2 * (step - 1) : 2 * step]
        logp, old, adv, mask = (torch.cat([mb[k] for mb in mbs]).double() for k in "loam")
        m = mask.bool()
        log_r = torch.where(m, logp - old, 0.0)
        a = adv[:, 0]  # GRPO: one advantage per sequence
        r = log_r.exp()
        low_t = ((a[:, None] < 0) & (r < 1 - token_eps[0]) & m).sum() / m.sum()
        high_t = ((a[:, None] > 0) & (r > 1 + token_eps[1]) & m).sum() / m.sum()
        s = (log_r.sum(1) / m.sum(1)).exp()
        low_s = ((a < 0) & (s < 1 - seq_eps[0])).double().mean()
        high_s = ((a > 0) & (s > 1 + seq_eps[1])).double().mean()
        row = steps.loc[step]
        assert row[Step.TOKEN_CLIP_LOW_FRACTION] == pytest.approx(float(low_t), abs=1e-6)
        assert row[Step.TOKEN_CLIP_HIGH_FRACTION] == pytest.approx(float(high_t), abs=1e-6)
        assert row[Step.SEQ_CLIP_LOW_FRACTION] == pytest.approx(float(low_s), abs=1e-6)
        assert row[Step.SEQ_CLIP_HIGH_FRACTION] == pytest.approx(float(high_s), abs=1e-6)
        assert row[Step.SEQ_LOG_RATIO_MAX] == pytest.approx(float(s.log().max()), abs=1e-5)


def _without_groups(data: TensorDict) -> TensorDict:
    del data["uid"], data["token_level_scores"]
    return data


@pytest.mark.slow
def test_unknown_rewards_and_groups_are_nan_not_zero(hooked, monkeypatch):
    """A batch without uid and token_level_scores: rewards are unknown (NaN in the sequence and
    step tables, never 0), verl/groups_known is 0, the rest is recorded as usual."""
    monkeypatch.setattr(sys.modules[__name__], "_batch", _strip(_batch))
    _train("vanilla", batches=1)
    plugin.close()
    _, steps, seqs = _recorded(hooked)
    assert len(steps) == STEPS_PER_BATCH and (steps["verl/groups_known"] == 0).all()
    assert seqs[Seq.REWARD].isna().all() and steps[Step.REWARD_MEAN].isna().all()
    assert steps[Step.ZERO_VARIANCE_GROUPS].isna().all()  # unknown, not "no group"
    assert steps[Step.ZERO_VARIANCE_FRACTION].isna().all()
    assert steps[Step.POLICY_LAG].tolist() == [0, 1, 2, 3]
    assert steps[Step.TOKEN_CLIP_FRACTION].notna().all()


def _strip(make):
    return lambda engine, seed: _without_groups(make(engine, seed))


@pytest.mark.slow
def test_a_failing_recorder_never_stops_training(hooked, monkeypatch):
    """Options the recorder refuses (an unknown argument): one warning, no run, and the same
    parameters as without the plugin."""
    monkeypatch.setenv(plugin.ENV_OPTIONS, '{"no_such_setting": 1}')
    with pytest.warns(RuntimeWarning, match="cannot start the run"):
        engine, _, _ = _train("vanilla", batches=1)
    assert torch.equal(engine.table, _train_plain_one())
    assert not [p for p in hooked.iterdir() if p.is_dir()]


def _train_plain_one() -> torch.Tensor:
    hooked_fn = BaseEngine.__dict__["train_batch"]
    BaseEngine.train_batch = hooked_fn.__wrapped__
    try:
        return _train("vanilla", batches=1)[0].table
    finally:
        BaseEngine.train_batch = hooked_fn


_IMPORT_CHECK = (
    "import verl, verl.workers.engine.base as b, sys; "
    "print(getattr(b.BaseEngine.train_batch, '_gspo_dash_patched', False), "
    "'training_hooks.verl' in sys.modules)"
)


@pytest.mark.slow
def test_verl_loads_the_plugin_and_it_acts_only_with_the_variable(tmp_path):
    """`import verl` imports our entry point (group verl.plugins); BaseEngine.train_batch is
    wrapped only when GSPO_DASH_VERL is set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSPO_DASH_VERL")}
    env.pop("VERL_USE_EXTERNAL_PLUGINS", None)
    off = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK], env=env, capture_output=True, text=True
    )
    on = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK],
        env={**env, plugin.ENV_ROOT: str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert off.returncode == 0 and on.returncode == 0, off.stderr[-2000:] + on.stderr[-2000:]
    assert off.stdout.split() == ["False", "True"]
    assert on.stdout.split() == ["True", "True"]


def test_only_verls_ppo_loss_partial_is_recorded():
    """ppo_config finds the ActorConfig of functools.partial(ppo_loss, config=...) and nothing
    else (another loss, a bare ppo_loss, a partial without config)."""
    from verl.workers.utils.losses import value_loss

    cfg = _actor_config("gspo")
    assert plugin.ppo_config(functools.partial(ppo_loss, config=cfg)) is cfg
    assert plugin.ppo_config(functools.partial(value_loss, config=cfg)) is None
    assert plugin.ppo_config(ppo_loss) is None
    assert plugin.ppo_config(functools.partial(ppo_loss)) is None
    assert plugin.clip_range(cfg) == (3e-4, 4e-4)
    unset = SimpleNamespace(clip_ratio=0.25, clip_ratio_low=None, clip_ratio_high=0.28)
    assert plugin.clip_range(unset) == (0.25, 0.28)  # verl's fallback on clip_ratio
    settings = plugin.verl_settings(cfg)
    assert settings["loss_mode"] == "gspo" and settings["clip_ratio_high"] == 4e-4
    assert settings["rollout_n"] == G and settings["ppo_epochs"] == EPOCHS


def test_loss_settings_are_read_from_verls_own_policy_loss_config():
    """verl's launcher makes ``policy_loss`` a ``PolicyLossConfig`` (a Mapping whose ``in`` raises
    AttributeError for a field it lacks): its settings and the ActorConfig's are read as from a
    dict, and the run key is the same."""
    from verl.workers.config import PolicyLossConfig

    def config(policy_loss):
        return ActorConfig(
            strategy="fsdp",
            ppo_mini_batch_size=MINI,
            ppo_micro_batch_size_per_gpu=MICRO,
            clip_ratio_low=3e-4,
            clip_ratio_high=4e-4,
            rollout_n=G,
            policy_loss=policy_loss,
            use_dynamic_bsz=False,
        )

    policy = {"loss_mode": "kl_cov", "kl_cov_ratio": 0.01, "ppo_kl_coef": 0.5}
    as_config = config(PolicyLossConfig(**policy))
    got = plugin.verl_loss_settings(as_config)
    assert got == plugin.verl_loss_settings(config(policy)) | {"dro_beta": None}
    assert (got["loss_mode"], got["kl_cov_ratio"], got["ppo_kl_coef"]) == ("kl_cov", 0.01, 0.5)
    assert (got["clip_ratio_low"], got["clip_ratio_high"], got["tau_neg"]) == (3e-4, 4e-4, 1.05)
    assert plugin.clip_range(as_config) == (3e-4, 4e-4)


def test_the_experiment_name_comes_from_the_actor_workers_config(monkeypatch):
    """The wrapped ActorRolloutRefWorker.__init__ keeps rollout.trace.experiment_name (verl's
    config fills it from trainer.experiment_name); a config without it leaves the name unset."""

    class Worker:
        def __init__(self, config, role):
            self.config, self.role = config, role

    module = SimpleNamespace(ActorRolloutRefWorker=Worker)
    monkeypatch.setattr(plugin, "_SESSION", None)
    plugin._patch_workers(module)
    trace = SimpleNamespace(experiment_name="gsm8k-gspo")
    w = Worker(SimpleNamespace(rollout=SimpleNamespace(trace=trace)), role="actor")
    assert w.role == "actor" and plugin._session().experiment_name == "gsm8k-gspo"
    monkeypatch.setattr(plugin, "_SESSION", None)
    Worker(SimpleNamespace(), role="actor")
    assert plugin._session().experiment_name is None
    with pytest.raises(ValueError, match="algorithm comes from verl's loss_mode"):
        plugin.configure(algorithm="grpo")


def test_on_finding_is_named_as_module_and_function(monkeypatch, tmp_path):
    """GSPO_DASH_VERL_ON_FINDING names a callable as module:function: the plugin hands the
    string to RunRecorder, which loads it; anything else is refused naming the spec."""
    from training_hooks.findings.live import callback_from_spec
    from training_hooks.recorder_settings import RecorderSettings

    assert callback_from_spec("training_hooks.verl:configure") is plugin.configure
    for bad in ("training_hooks.verl", ":configure", "os:", "os:no_such_function"):
        with pytest.raises(ValueError, match="on_finding spec"):
            callback_from_spec(bad)
    settings = RecorderSettings(root=tmp_path, on_finding="training_hooks.verl:configure")
    assert settings.on_finding is plugin.configure


_DIST_SCRIPT = r"""
import os, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
import torch.distributed as dist
dist.init_process_group("gloo")
import test_verl as t
from training_hooks import verl as plugin
t.BigramEngine.get_data_parallel_size = lambda self: dist.get_world_size()
t.BigramEngine.get_data_parallel_rank = lambda self: dist.get_rank()
assert plugin.install()
t._train("gspo", batches=1)
plugin.close()
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_ranks_make_one_run(tmp_path):
    """torchrun, 2 CPU ranks (gloo): one run, every rank's sequences in it, each step counted
    over both ranks; the ranks agree on recording each step before the recorder's collectives."""
    script = tmp_path / "run.py"
    script.write_text(_DIST_SCRIPT)
    root = tmp_path / "runs"
    env = {**os.environ, plugin.ENV_ROOT: str(root), plugin.ENV_NAME: "two-ranks"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*cmd, str(script), os.path.dirname(__file__)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info, steps, seqs = _recorded(root)
    assert info.name == "two-ranks" and info.status == schema.STATUS_FINISHED
    assert sorted(seqs[Seq.RANK].unique()) == [0, 1]
    # verl's mini_batch_size is global: 8 sequences = 4 per rank, so each rank's 16 sequences
    # are 4 mini-batches x 2 epochs = 8 optimizer steps of one batch (lags 0..7)
    assert (steps[Step.NUM_RANKS] == 2).all() and (steps[Step.NUM_SEQUENCES] == MINI).all()
    assert steps[Step.POLICY_LAG].tolist() == list(range(8))
    assert (steps["verl/groups_known"] == 1).all() and steps[Step.REWARD_MEAN].notna().all()


def _runs(root) -> list[tuple[schema.RunInfo, pd.DataFrame]]:
    """Every run under ``root``: (run.json, step table by step), oldest first."""
    out = []
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        info = schema.read_run_info(str(run_dir))
        steps = tables.read_table(str(run_dir), schema.STEPS_DIR).set_index(Step.STEP)
        out.append((info, steps.sort_index()))
    return sorted(out, key=lambda r: r[0].created_at)


def _verl_attenuation(inputs: dict, config: ActorConfig) -> np.ndarray:
    """(B,) 1 - sum_t |grad| / sum_t |r A| by autograd of verl's loss (``loss_for("verl", ...)``
    under the sum reduction) on the tensors a step recorded."""
    from gspo_metrics import loss_for

    settings = plugin.verl_loss_settings(config)
    tool = loss_for("verl", {**settings, "reduction": "sum"})
    lp = inputs["logprobs"].double().requires_grad_(True)
    old, mask, adv = inputs["old_logprobs"].double(), inputs["mask"], inputs["advantages"].double()
    tool(lp, old, adv, mask).loss.backward()
    m = mask.bool()
    kept = torch.where(m, lp.grad, 0.0).abs().sum(-1)
    r = torch.exp(torch.where(m, lp.detach() - old, 0.0))
    plain = torch.where(m, r * adv.abs(), 0.0).sum(-1)
    return (1 - kept / plain).numpy()


def test_a_cispo_training_is_recorded_as_cispo_with_its_attenuation(hooked, monkeypatch):
    """loss_mode=cispo: algorithm "cispo", no clip eps of verl's (CISPO clips no gradient: the
    token unit keeps its default 0.2/0.2, the sequence unit GSPO's), and each sequence's
    attenuation equal to autograd's of verl's CISPO on the step's recorded tensors (1e-5,
    float32 storage); 0 on the on-policy first step, not 0 once the policy moved."""
    from training_hooks.recorder import RunRecorder

    kept: dict[int, dict] = {}
    log_step = RunRecorder.log_step

    def keep(self, step, **kw):
        kept[step] = {k: v.detach().clone() for k, v in kw.items() if torch.is_tensor(v)}
        return log_step(self, step, **kw)

    monkeypatch.setattr(RunRecorder, "log_step", keep)
    _train("cispo", batches=1, lr=3.0)  # (steps large enough to leave [0.8, 1.2])
    plugin.close()
    info, steps, seqs = _recorded(hooked)
    assert info.algorithm == "cispo" and info.config["loss_mode"] == "cispo"
    assert (info.token_eps_low, info.seq_eps_low) == (0.2, 3e-4)  # the defaults
    config = _actor_config("cispo")
    for step, inputs in kept.items():
        rows = seqs[seqs[Seq.STEP] == step]
        want = _verl_attenuation(inputs, config)
        got = rows[Seq.ATTENUATION].to_numpy(np.float64)
        np.testing.assert_allclose(got, want, atol=1e-5, equal_nan=True)
        assert steps.loc[step, Step.ATTENUATION_MEAN] == pytest.approx(np.nanmean(got), abs=1e-6)
    assert abs(steps.loc[1, Step.ATTENUATION_MEAN]) < 1e-6  # lag 0: every weight 1, in range
    assert steps.loc[STEPS_PER_BATCH, Step.ATTENUATION_MEAN] > 1e-4


def test_a_loss_without_a_hard_clip_opens_its_run_whatever_its_unread_clip_settings(
    tmp_path, monkeypatch
):
    """A CISPO run's clip_ratio_high of inf (a setting CISPO never reads as a clip) opens the run:
    the clip range is read, and checked, only for a loss that clips; a GSPO run with the same
    setting is refused (its range would be wrong), naming the setting."""
    config = SimpleNamespace(
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=float("inf"),
        loss_agg_mode="token-mean",
        rollout_n=4,
        ppo_epochs=1,
        policy_loss={"loss_mode": "cispo"},
    )
    monkeypatch.setenv(plugin.ENV_ROOT, str(tmp_path))
    rec = plugin._Run(engine=None, key=("k",), experiment_name="x")._open(config)
    assert rec.algorithm == "cispo"
    rec.close("finished")
    config.policy_loss = {"loss_mode": "gspo"}
    with pytest.raises(ValueError, match="clip_ratio_high"):
        plugin._Run(engine=None, key=("k2",), experiment_name="x")._open(config)


def test_each_engine_and_each_loss_mode_is_its_own_run(hooked):
    """Two trainings in one process are two runs, each from its step 1 under its own loss: a
    second engine (vanilla, then gspo), and one engine training again with another loss_mode."""
    _train("vanilla", batches=1)
    _train("gspo", batches=1)
    engine = BigramEngine(lr=0.5)
    for mode in ("vanilla", "cispo"):
        worker = _worker(engine, functools.partial(ppo_loss, config=_actor_config(mode)))
        TrainingWorker.train_mini_batch(worker, _batch(engine, seed=0))
    plugin.close()
    runs = _runs(hooked)
    assert [info.algorithm for info, _ in runs] == ["grpo", "gspo", "grpo", "cispo"]
    for info, steps in runs:
        assert steps.index.tolist() == list(range(1, STEPS_PER_BATCH + 1)), info.algorithm
        assert steps[Step.POLICY_LAG].tolist() == [0, 1, 2, 3]
        assert info.status == schema.STATUS_FINISHED
    gspo = runs[1][0]
    assert (gspo.seq_eps_low, gspo.seq_eps_high) == (3e-4, 4e-4)
