"""TRL's GRPOTrainer with the README's recipes, as a new user runs them: what the dashboard calls
each run, how it draws it, and what Health says of it.

    python bench/bench_trl_recipes.py [--steps 8] [--root DIR] [--keep]

A tiny random Llama and a WordLevel tokenizer (built here, nothing downloaded) train on CPU under
``attach(trainer, root=...)`` with no run name, seven ways:

- ``grpo``: GRPO as TRL runs it by default (token ratio, ``loss_type="dapo"``, ε 0.2);
- ``gspo``: the README's GSPO (``importance_sampling_level="sequence"``, ``loss_type="grpo"``,
  ε 3e-4/4e-4, β 0, ``num_iterations=2``);
- ``gspo-dapo``: ``importance_sampling_level="sequence"`` alone (TRL's default ``loss_type``, ε, β)
  with ``num_iterations=2``;
- ``none-reward``: the README's GSPO with a second reward function that returns None for about
  30% of the completions (TRL sums the others: an abstaining judge counts as 0);
- ``constant-reward``: every completion gets 1.0 (no signal);
- ``accumulation``: GRPO with ``gradient_accumulation_steps=2`` and β 0.04;
- ``bf16``: the README's GSPO with the model in bfloat16. TRL 1.16 hands ``attach`` float32
  log-probs (it upcasts the logits), so the recorded dtype is float32 and
  ``ratio_resolution_coarse``, which judges the dtype the log-probs arrive in, does not fire; the
  bench prints the recorded dtype (a bfloat16 own loop gets the finding: tests/test_findings_resolution.py).

For each run it prints the label every page uses (``app.line_style.algorithm_text``), the line
style (``dash_for``), the status and every Health finding (code, severity, title), read as the
Health page reads them, so that what a page would say can be checked against what ran. It times
nothing: a recipe check, not a speed benchmark. Exit status 0 when every expectation at the end
holds (GSPO recipes are called GSPO and drawn solid, GRPO dashed; the departing recipe, the
unscored reward and the constant reward each get their finding; the
README's GSPO gets no ``gspo_recipe_departs``), else 1.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from test_trl import PROMPTS, tiny_llama  # noqa: E402  (the tests' tiny model and prompts)
from transformers import (  # noqa: E402
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    PrinterCallback,
)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from app import line_style  # noqa: E402
from training_hooks import findings, schema, tables  # noqa: E402
from training_hooks.trl import attach  # noqa: E402

README_GSPO = dict(
    importance_sampling_level="sequence",
    loss_type="grpo",
    epsilon=3e-4,
    epsilon_high=4e-4,
    beta=0.0,
    num_iterations=2,
)
#: name -> (GRPOConfig settings, reward functions, model dtype)
RECIPES = {
    "grpo": ({}, "a", torch.float32),
    "gspo": (README_GSPO, "a", torch.float32),
    "gspo-dapo": (dict(importance_sampling_level="sequence", num_iterations=2), "a", torch.float32),
    "none-reward": (README_GSPO, "a+judge", torch.float32),
    "constant-reward": (README_GSPO, "const", torch.float32),
    "accumulation": (dict(gradient_accumulation_steps=2, beta=0.04), "a", torch.float32),
    "bf16": (README_GSPO, "a", torch.bfloat16),
}
#: name -> (label, line style, codes it must get, codes it must not get)
EXPECT = {
    "grpo": ("GRPO (DAPO aggregation)", "dash", (), ("gspo_recipe_departs",)),
    "gspo": ("GSPO", "solid", (), ("gspo_recipe_departs",)),
    "gspo-dapo": ("GSPO (DAPO aggregation)", "solid", ("gspo_recipe_departs",), ()),
    "none-reward": ("GSPO", "solid", ("reward_unscored",), ("gspo_recipe_departs",)),
    "constant-reward": ("GSPO", "solid", ("zero_variance",), ()),
    "accumulation": ("GRPO (DAPO aggregation)", "dash", (), ()),
    "bf16": ("GSPO", "solid", (), ("gspo_recipe_departs",)),
}


def reward_a(completions, **kwargs):
    """Share of the completion's words that are "a"."""
    return [c.split().count("a") / len(c.split()) if c.split() else 0.0 for c in completions]


def judge(completions, **kwargs):
    """A judge that abstains (None) on about 30% of the completions, else scores like reward_a."""
    rng = random.Random(len(completions) + sum(len(c) for c in completions))
    return [None if rng.random() < 0.3 else s for s in reward_a(completions)]


def constant(completions, **kwargs):
    return [1.0 for _ in completions]


REWARDS = {"a": [reward_a], "a+judge": [reward_a, judge], "const": [constant]}


def train(name: str, model_dir: Path, root: Path, steps: int) -> None:
    settings, rewards, dtype = RECIPES[name]
    args = GRPOConfig(
        output_dir=str(root / "out" / name),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=20,
        max_steps=steps,
        learning_rate=0.05,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
        bf16=dtype is torch.bfloat16,
        **settings,
    )
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=dtype)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=REWARDS[rewards],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS * 4}),
        processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
    )
    attach(trainer, root=str(root / "runs"))  # no name: the default name is part of the check
    trainer.remove_callback(PrinterCallback)
    trainer.train()


def judged(run_dir: Path) -> tuple[schema.RunInfo, findings.HealthReport]:
    df, _ = tables.step_frame(str(run_dir))
    info = schema.read_run_info(str(run_dir))
    return info, findings.run_health(df, findings.facts_of(info))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--root", default=None, help="where the runs go (default: a temp folder)")
    p.add_argument("--only", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    args = p.parse_args(argv)
    root = Path(args.root or tempfile.mkdtemp(prefix="trl-recipes-"))
    model_dir = tiny_llama(root / "tiny-llama")
    failures = []
    for name in args.only:
        before = set((root / "runs").glob("*")) if (root / "runs").exists() else set()
        train(name, model_dir, root, args.steps)
        (run_dir,) = set((root / "runs").glob("*")) - before
        info, report = judged(run_dir)
        label, dash = line_style.algorithm_text(info.algorithm), line_style.dash_for(info.algorithm)
        codes = {f.code for f in report.findings}
        dtype = info.other.get("logprob_dtype") or getattr(info, "logprob_dtype", None)
        print(f"\n== {name}: run {info.name!r} · {label} · line {dash} · {info.status}")
        print(f"   log-probs recorded as {dtype}")
        for f in report.findings:
            print(f"   [{f.severity}] {f.code}: {f.title}")
        want_label, want_dash, must, must_not = EXPECT[name]
        wrong = [
            *([f"label {label!r}, expected {want_label!r}"] if label != want_label else []),
            *([f"line {dash}, expected {want_dash}"] if dash != want_dash else []),
            *(f"no {c}" for c in must if c not in codes),
            *(f"unexpected {c}" for c in must_not if c in codes),
        ]
        failures += [f"{name}: {w}" for w in wrong]
    print(f"\nruns under {root / 'runs'}")
    print("\n".join(["all as expected"] if not failures else ["NOT as expected:", *failures]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
