"""The Compare page's panel registry: one ``Panel`` per built-in chart (its column, unit, caption,
band, clip unit), and which panels the shown runs have data for.

A panel no shown run logged is not drawn as an empty frame: ``split_by_data`` sets it apart, and
the page names it on one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from training_hooks.findings.core import pct
from training_hooks.findings.thresholds import ATTENUATION, GRPO_CLIP, GSPO_CLIP, MISMATCH
from training_hooks.metric_map import GRAD_NORM, Derived
from training_hooks.schema import Step

#: a band's fill opacity; the log s band (min..max of a step's sequences) is wide on a GRPO run and
#: would cover the panel at the default, so it is fainter
BAND_OPACITY = 0.10
FAINT_BAND_OPACITY = 0.04


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    column: str
    unit: str
    caption: str = ""
    band: tuple[str, str] | None = None  # (lower, upper) columns, or ("±", std column)
    second: str | None = None  # a second column drawn thinner (e.g. p90)
    second_label: str = ""
    #: the title where only ``column`` is drawn (Compare's grouped view: no ``second``); empty:
    #: ``title``
    column_title: str = ""
    clip_unit: str | None = None  # "seq" or "token": title carries that unit's eps
    off_policy_default: bool = False  # the "steps" control's auto: off-policy steps of mixed runs
    nonnegative: bool = False  # values >= 0: the y axis starts at 0 (a flat 0 reads as 0)
    band_opacity: float = BAND_OPACITY  # the band's fill
    #: values below this in size are float noise, not signal (the panel says so and draws them
    #: flat at 0: ``traces.panel_view``); None: no such floor
    noise_floor: float | None = None


#: the sampler/trainer k3 below which a mismatch is float noise (Health's floor), and the per-token
#: |Δ log p| whose k3 (Δ²/2 to second order) sits at that floor: sqrt(2 x 1e-5) = 0.0045 nats
K3_FLOOR = MISMATCH.k3_floor.value
LOGP_DIFF_FLOOR = math.sqrt(2 * K3_FLOOR)


PANELS: tuple[Panel, ...] = (
    Panel(
        "reward",
        "Reward",
        Step.REWARD_MEAN,
        "reward per sequence",
        "Mean reward of the step's sequences; band = ± one std over the step.",
        band=("±", Step.REWARD_STD),
    ),
    Panel(
        "loss",
        "Loss",
        Step.LOSS,
        "loss",
        "The policy loss as the trainer reduced it (its reduction is in the runs table); "
        "compare trends, not levels, across reductions.",
    ),
    Panel(
        "seq_log_ratio",
        "Sequence log-ratio log s",
        Step.SEQ_LOG_RATIO_MEAN,
        "log s (nats)",
        "log s = mean over a sequence's tokens of log π/π_old (GSPO's ratio, in log space). "
        "Mean over sequences; band = min..max. Dotted lines: GSPO's clip range "
        "[log(1-ε_low), log(1+ε_high)]. GRPO never clips on s, so its spread is wider.",
        band=(Step.SEQ_LOG_RATIO_MIN, Step.SEQ_LOG_RATIO_MAX),
        band_opacity=FAINT_BAND_OPACITY,
        clip_unit="seq",
    ),
    Panel(
        "seq_clip",
        "Sequence-unit clip fraction",
        Step.SEQ_CLIP_FRACTION,
        "fraction of sequences",
        "Share of sequences whose s lies outside [1-ε_low, 1+ε_high] with GSPO's ε "
        f"(Tinker's clipped fraction). The GSPO paper reports about 15%; Health's usual band is "
        f"{pct(GSPO_CLIP.usual_low.value)}-{pct(GSPO_CLIP.usual_high.value)}, a warning above "
        f"{pct(GSPO_CLIP.warn_high.value)}. On a GRPO run it shows how often GSPO would have "
        "clipped.",
        clip_unit="seq",
        off_policy_default=True,
        nonnegative=True,
    ),
    Panel(
        "seq_clip_binding",
        "Sequence clip binding (low + high)",
        Derived.SEQ_CLIP_BINDING,
        "fraction of sequences",
        "Where GSPO's sequence clip zeroes the gradient: s < 1-ε_low with A<0, or "
        "s > 1+ε_high with A>0 (TRL's clip_ratio/* under importance_sampling_level="
        "'sequence'). Out of range but not binding = the min keeps the corrective signal.",
        clip_unit="seq",
        off_policy_default=True,
        nonnegative=True,
    ),
    Panel(
        "token_clip",
        "Token-unit clip fraction",
        Step.TOKEN_CLIP_FRACTION,
        "fraction of tokens",
        "Share of tokens whose own ratio r_t lies outside [1-ε_low, 1+ε_high] with GRPO's ε, "
        "whatever the advantage's sign. Health's usual band for GRPO is "
        f"{pct(GRPO_CLIP.usual_low.value)}-{pct(GRPO_CLIP.usual_high.value)}, a warning above "
        f"{pct(GRPO_CLIP.warn_high.value)}.",
        clip_unit="token",
        off_policy_default=True,
        nonnegative=True,
    ),
    Panel(
        "token_clip_binding",
        "Token clip binding (low + high)",
        Derived.TOKEN_CLIP_BINDING,
        "fraction of tokens",
        "Tokens where the token clip zeroes the gradient: r_t < 1-ε_low with A<0, or "
        "r_t > 1+ε_high with A>0 (TRL's clip_ratio/region_mean, verl's pg_clipfrac).",
        clip_unit="token",
        off_policy_default=True,
        nonnegative=True,
    ),
    Panel(
        "attenuation",
        "Attenuation (every loss, one scale)",
        Step.ATTENUATION_MEAN,
        "share of the plain gradient",
        "The share of the plain importance-weighted policy gradient Σ_t |ρ_t A_t| the loss's "
        "trust region removed, mean over the step's sequences: a hard clip's binding tokens "
        "(GRPO, DAPO, GSPO), CISPO's cap, SAPO's gate, in one unit, so runs of different losses "
        "compare on one scale. 0: nothing removed; below 0: a loss that adds weight (CISPO's "
        "lower bound, GMPO). Recorded from the loss (TRL, verl, or a LossOutput given to "
        f"log_step); Health warns above {pct(ATTENUATION.warn_high.value)}.",
        off_policy_default=True,
    ),
    Panel(
        "attenuation_pos",
        "Attenuation, A > 0",
        Step.ATTENUATION_POS_MEAN,
        "share of the plain gradient",
        "The attenuation of the sequences with a positive advantage (the ones the update "
        "reinforces), mean over them: what the trust region held back of the push up.",
        off_policy_default=True,
    ),
    Panel(
        "attenuation_neg",
        "Attenuation, A < 0",
        Step.ATTENUATION_NEG_MEAN,
        "share of the plain gradient",
        "The attenuation of the sequences with a negative advantage, mean over them: what the "
        "trust region held back of the push down. Far from the A > 0 panel: it acts on one side.",
        off_policy_default=True,
    ),
    Panel(
        "zero_var",
        "Zero-variance groups",
        Step.ZERO_VARIANCE_FRACTION,
        "fraction of groups",
        "Groups whose completions all got the same reward: their advantages are 0 and they "
        "teach nothing, in GRPO and GSPO alike. Near 1 = no learning signal.",
        nonnegative=True,
    ),
    Panel(
        "length",
        "Completion length: mean (line), p90 (open triangles)",
        Step.LENGTH_MEAN,
        "tokens",
        "Mean masked length (the line, smoothed like the others, in the run's line style) and its "
        "90th percentile over the step's sequences (open triangles, raw: never a line, so no "
        "line style reads as it). GSPO's s is length-normalised; GRPO's token-sum "
        "losses weight long completions more.",
        second=Step.LENGTH_P90,
        second_label="p90 length",
        column_title="Completion length: mean",
        nonnegative=True,
    ),
    Panel(
        "truncation",
        "Truncated completions",
        Step.TRUNCATED_FRACTION,
        "fraction of sequences",
        "Completions cut at the generation limit; rising truncation usually precedes "
        "length blow-up.",
        nonnegative=True,
    ),
    Panel(
        "kl_ref",
        "KL to reference",
        Step.KL_REF_MEAN,
        "nats / token",
        "k3 estimate of KL(π_θ || π_ref), token-weighted: how far training has moved.",
    ),
    Panel(
        "kl_old",
        "KL old → new",
        Step.KL_OLD_MEAN,
        "nats / token",
        "k3 estimate of KL(π_old || π_θ) within the step: the size of this update. 0 means the "
        "update is fully on-policy (ratios identically 1).",
        off_policy_default=True,
    ),
    Panel(
        "sampler_kl",
        "Mismatch: KL(sampler ‖ trainer)",
        Step.SAMPLER_KL_MEAN,
        "nats / token",
        "The sampler/trainer mismatch at equal weights: k3 of the trainer's over the inference "
        "engine's probability of each sampled token, token-weighted. It grows with numerical "
        "differences between the two (precision, kernels); imports read verl's "
        "rollout_corr/k3_kl, Tinker's optim/kl_sample_train_v2, TRL's sampling/*. Below "
        f"{K3_FLOOR:g} (Health's floor) it is float noise: a panel whose values all lie below "
        "says so and draws them at 0.",
        noise_floor=K3_FLOOR,
    ),
    Panel(
        "sampler_logp_diff",
        "Mismatch: max |log p sampler − log p trainer|",
        Step.SAMPLER_LOGP_ABS_DIFF_MAX,
        "nats",
        "The largest gap between the sampler's and the trainer's log-probability of one token in "
        "the step: one token far off can dominate an importance-weighted update. Below "
        f"{LOGP_DIFF_FLOOR:.2g} nats (a token whose k3 ≈ Δ²/2 sits at Health's floor "
        f"{K3_FLOOR:g}) it is float noise, said and drawn at 0.",
        nonnegative=True,
        noise_floor=LOGP_DIFF_FLOOR,
    ),
    Panel(
        "entropy",
        "Entropy",
        Step.ENTROPY_MEAN,
        "nats / token",
        "Token-weighted policy entropy; a collapse to ~0 means the policy stopped exploring.",
    ),
    Panel(
        "grad_norm",
        "Gradient norm",
        GRAD_NORM,
        "as logged (L2)",
        "The gradient's L2 norm as the trainer logged it (ours: before clipping, as "
        "torch.nn.utils.clip_grad_norm_ returns it; TRL's and verl's grad_norm). Shown when a run "
        "logged a column named grad_norm.",
        nonnegative=True,
    ),
)
PANELS_BY_KEY = {p.key: p for p in PANELS}
#: the step columns the built-in panels draw (line and second column)
PANEL_COLUMNS = frozenset(c for p in PANELS for c in (p.column, p.second) if c)


def extra_panel(column: str, note: str = "") -> Panel:
    """A panel for a metric the run logged beyond the schema (grad norm, learning rate, TRL...)."""
    return Panel(f"extra:{column}", column, column, "as logged", note or "Logged by the run.")


def has_data(df, column: str, x: str | None = None) -> bool:
    """True when ``df`` has a finite value of ``column`` (a run that logged it), on a row with a
    finite value of the x column ``x`` too when given."""
    if column not in df.columns or (x is not None and x not in df.columns):
        return False
    ok = np.isfinite(df[column].to_numpy(np.float64, na_value=np.nan))
    if x is not None:
        ok &= np.isfinite(df[x].to_numpy(np.float64, na_value=np.nan))
    return bool(ok.any())


@dataclass(frozen=True)
class PanelSplit:
    """The chosen panels by what the shown runs have for them on the chosen x axis."""

    drawn: list[Panel]  # some run has a value on a row with an x value
    unlogged: list[Panel]  # no run logged the column
    off_axis: list[Panel]  # logged, but only by runs without a value of the x axis


def split_by_data(frames: Sequence, panels: Sequence[Panel], x: str) -> PanelSplit:
    """``panels`` sorted by the shown runs' step tables ``frames`` on the x column ``x``: a panel
    no table has a finite value of is unlogged; one whose values all sit on rows without an x
    value (a run without token counts on x = tokens) is off the axis; the rest are drawn."""
    out = PanelSplit([], [], [])
    for p in panels:
        if any(has_data(df, p.column, x) for df in frames):
            out.drawn.append(p)
        elif any(has_data(df, p.column) for df in frames):
            out.off_axis.append(p)
        else:
            out.unlogged.append(p)
    return out


def not_logged_line(empty: Sequence[Panel], why: str = "Not logged by the shown runs") -> str:
    """The one line that replaces empty frames: "Not logged by the shown runs: A, B." ("" for
    none). Titles are the registry's (or a metric name from disk for an extra panel): plain text,
    to be escaped by the caller for Markdown."""
    if not empty:
        return ""
    return f"{why}: " + ", ".join(p.title for p in empty) + "."
