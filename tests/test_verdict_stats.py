"""The verdict's statistics (``app.verdict_stats``) by hand on tiny cases, against rliable's
definitions restated here, and the curves' pointwise band."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from app import verdict_stats as vs

# ------------------------------------------------------------------------------ the score


def test_final_score_is_the_mean_of_the_last_fifth_of_logged_steps():
    """10 logged steps, final 0.2: the last 2 (steps 8, 9 -> values 8, 9), mean 8.5, rows in any
    order; a NaN step is not a logged step: of 9 logged, ceil(1.8) = 2 (steps 7, 9 -> 8.0)."""
    steps = np.arange(10)
    values = steps.astype(float)
    rev = slice(None, None, -1)
    assert vs.final_score(steps[rev], values[rev]) == 8.5
    values[8] = np.nan
    assert vs.final_score(steps, values) == 8.0
    assert vs.final_score(steps, values, final=1.0) == pytest.approx(np.nanmean(values))
    assert math.isnan(vs.final_score(steps, np.full(10, np.nan)))
    with pytest.raises(ValueError, match="final must be in"):
        vs.final_score(steps, values, final=0.0)
    with pytest.raises(ValueError, match=r"steps and values.*\(10,\) and \(9,\)"):
        vs.final_score(steps, values[:9])


# ------------------------------------------------------------------------------ by hand


def test_separated_groups_difference_ci_excludes_zero():
    """A = [1.0, 1.1, 1.2], B = [0.0, 0.1, 0.2]: any resampled mean of A is >= 1.0 and of B
    <= 0.2, so every resampled difference lies in [0.8, 1.2]: the CI excludes 0, "A" wins;
    delta = 1.1 - 0.1 = 1.0; every a beats every b, P(A > B) = 9/9 = 1."""
    v = vs.compare(
        {"A": (["a1", "a2", "a3"], [1.0, 1.1, 1.2]), "B": (["b1", "b2", "b3"], [0.0, 0.1, 0.2])}
    )
    (p,) = v.pairs
    assert (p.a, p.b, p.verdict) == ("A", "B", "A")
    assert p.delta == pytest.approx(1.0)
    assert 0.8 - 1e-12 <= p.ci[0] < p.ci[1] <= 1.2 + 1e-12
    assert p.p_better == 1.0
    a, b = v.groups
    assert a.estimate == pytest.approx(1.1) and a.n == 3 and a.runs == ("a1", "a2", "a3")
    assert 1.0 - 1e-12 <= a.ci[0] < 1.1 < a.ci[1] <= 1.2 + 1e-12
    assert not v.warnings
    # the other way round: the same pair, signs flipped, "B better" read as the group's name
    w = vs.compare(
        {"B": (["b1", "b2", "b3"], [0.0, 0.1, 0.2]), "A": (["a1", "a2", "a3"], [1.0, 1.1, 1.2])}
    )
    assert w.pairs[0].verdict == "A" and w.pairs[0].delta == pytest.approx(-1.0)
    assert w.pairs[0].p_better == 0.0


def test_identical_groups_read_inconclusive_in_at_least_17_of_20_draws():
    """Two groups of 5 seeds from one distribution (N(0, 1)): with a 95% CI, about 1 draw in 20
    excludes 0 by chance (a bootstrap percentile CI on 5 seeds is a little narrow, so a little
    more); at least 17 of 20 must read inconclusive."""
    inconclusive = 0
    for draw in range(20):
        rng = np.random.default_rng(1000 + draw)
        a, b = rng.normal(size=5), rng.normal(size=5)
        (p,) = vs.compare({"A": (list("abcde"), a), "B": (list("fghij"), b)}).pairs
        inconclusive += p.verdict == vs.INCONCLUSIVE
    assert inconclusive >= 17


def test_p_better_against_a_hand_count():
    """A = [1, 2, 3], B = [2, 2, 0]: a=1 beats 0 (1); a=2 ties 2, 2 (0.5 + 0.5) and beats 0 (1);
    a=3 beats all three (3): U = 1 + 2 + 3 = 6 of 9 pairs, P(A > B) = 2/3; P(B > A) = 1/3."""
    assert vs.p_better([1, 2, 3], [2, 2, 0]) == pytest.approx(6 / 9)
    assert vs.p_better([2, 2, 0], [1, 2, 3]) == pytest.approx(3 / 9)
    # scipy's Mann-Whitney U of A over B, divided by n m: the same count
    u = scipy.stats.mannwhitneyu([1, 2, 3], [2, 2, 0], alternative="greater").statistic
    assert u / 9 == pytest.approx(6 / 9)


def test_one_seed_group_is_warned_and_never_called_better():
    """A group of one run has a point for a CI: the pair is inconclusive however far apart, and
    both groups under 3 seeds are warned about."""
    v = vs.compare({"A": (["a"], [10.0]), "B": (["b1", "b2"], [0.0, 0.1])})
    assert v.groups[0].ci == (10.0, 10.0)
    (p,) = v.pairs
    assert p.ci[0] > 0 and p.verdict == vs.INCONCLUSIVE
    assert [w.split(":")[0] for w in v.warnings] == ["A", "B"]
    assert "never called better" in v.warnings[0] and "2 seeds" in v.warnings[1]


def test_deterministic_and_a_group_draws_alone():
    """Twice the same numbers; a group's CI does not change with the other groups shown; three
    groups give the pairs (0,1), (0,2), (1,2) in order."""
    rng = np.random.default_rng(3)
    s = {g: ([f"{g}{i}" for i in range(6)], rng.normal(size=6)) for g in "xyz"}
    one, two = vs.compare(s), vs.compare(s)
    assert [g.ci for g in one.groups] == [g.ci for g in two.groups]
    assert [p.ci for p in one.pairs] == [p.ci for p in two.pairs]
    assert [(p.a, p.b) for p in one.pairs] == [("x", "y"), ("x", "z"), ("y", "z")]
    alone = vs.compare({"z": s["z"]})
    assert alone.groups[0].ci == one.groups[2].ci and alone.pairs == []


def test_bad_scores_named():
    with pytest.raises(ValueError, match="finite"):
        vs.compare({"A": (["a"], [np.nan])})
    with pytest.raises(ValueError, match="group 'A': 2 run ids for 1 scores"):
        vs.compare({"A": (["a", "b"], [1.0])})


# ------------------------------------------------------------------------------ rliable


# rliable's definitions (Agarwal et al. 2021, google-research/rliable, restated from its docs and
# rliable/metrics.py; rliable is not a dependency):
# - interval estimates (``get_interval_estimates``): a percentile bootstrap CI of the statistic,
#   the runs of each task resampled with replacement (``StratifiedBootstrap``; one task here, so
#   the runs of the group), confidence_interval_size 0.95 -> the 2.5 and 97.5 percentiles;
# - the CI of a comparison of two algorithms resamples each one's runs independently
#   (``StratifiedIndependentBootstrap``);
# - ``probability_of_improvement(scores_x, scores_y)``: per task, 0.5 when the two score arrays
#   are equal, else scipy's mannwhitneyu(x, y, alternative="greater") U divided by n_x n_y;
#   averaged over tasks (one task here).


def rliable_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    if np.array_equal(x, y):
        return 0.5
    u = scipy.stats.mannwhitneyu(x, y, alternative="greater").statistic
    return float(u / (len(x) * len(y)))


def loop_bootstrap_ci(stat, groups: list[np.ndarray], reps: int, seed: int) -> tuple[float, float]:
    """A percentile CI by a plain loop: each group resampled on its own, ``stat`` of the
    resamples, the 2.5 and 97.5 percentiles."""
    rng = np.random.RandomState(seed)
    draws = [stat(*[g[rng.randint(0, len(g), len(g))] for g in groups]) for _ in range(reps)]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_rliable_definitions(seed):
    """Group CI, difference CI and P(A > B) against rliable's definitions computed by a loop with
    another generator: the CIs agree within Monte Carlo error (10,000 resamples each: the 2.5%
    quantile's standard error is ~1.5% of the spread here, tolerance 6%); P(A > B) exactly."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.5, 1.0, size=7), rng.normal(0.0, 0.5, size=5)
    v = vs.compare({"A": (list("abcdefg"), a), "B": (list("hijkl"), b)})
    (p,) = v.pairs
    spread = a.std() + b.std()
    ref_a = loop_bootstrap_ci(np.mean, [a], 10_000, seed)
    ref_d = loop_bootstrap_ci(lambda x, y: x.mean() - y.mean(), [a, b], 10_000, seed)
    np.testing.assert_allclose(v.groups[0].ci, ref_a, atol=0.06 * spread)
    np.testing.assert_allclose(p.ci, ref_d, atol=0.06 * spread)
    assert p.p_better == pytest.approx(rliable_probability_of_improvement(a, b), abs=1e-12)
    assert vs.p_better(a, a) == rliable_probability_of_improvement(a, a) == 0.5


def test_ties_count_half_as_rliable_scipy():
    """Ties (scores of 0/1 rewards often tie): U counts a tie one half, as scipy's does."""
    a, b = np.array([1.0, 1.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.0])
    assert vs.p_better(a, b) == pytest.approx(rliable_probability_of_improvement(a, b))
    # by hand: a=1 vs (1, 0, 0): 0.5 + 2, twice -> 5; a=0: 0 + 0.5 + 0.5 -> 1; a=0.5: 2 -> 8 of 12
    assert vs.p_better(a, b) == pytest.approx(8 / 12)


# ------------------------------------------------------------------------------ the band


def test_pointwise_band_only_where_seeds_are():
    """Three seeds, the third stopping at x=2 and none at x=4 but the first: the count is
    [3, 3, 3, 2, 1]; the mean is over the seeds present; the band is NaN where fewer than 2 seeds
    are and lies within the present seeds' min..max elsewhere."""
    y = np.array(
        [
            [0.0, 1.0, 2.0, 3.0, 4.0],
            [2.0, 3.0, 4.0, 5.0, np.nan],
            [4.0, 5.0, 6.0, np.nan, np.nan],
        ]
    )
    mean, lo, hi, count = vs.pointwise_band(y, "g")
    assert count.tolist() == [3, 3, 3, 2, 1]
    np.testing.assert_allclose(mean, [2.0, 3.0, 4.0, 4.0, 4.0])
    assert np.isnan(lo[4]) and np.isnan(hi[4])
    for i in range(4):
        col = y[:, i][np.isfinite(y[:, i])]
        assert col.min() <= lo[i] <= mean[i] <= hi[i] <= col.max()
    # the first three columns are one seed pattern: shifted seeds, so one set of weights shifts
    # the band by the same 1.0 per column
    np.testing.assert_allclose(np.diff(lo[:3]), [1.0, 1.0])
    np.testing.assert_allclose(np.diff(hi[:3]), [1.0, 1.0])
    np.testing.assert_array_equal(vs.pointwise_band(y, "g")[1], lo)  # deterministic


def test_pointwise_band_of_identical_seeds_is_the_line():
    y = np.tile(np.linspace(0, 1, 6), (4, 1))
    mean, lo, hi, count = vs.pointwise_band(y, "g")
    np.testing.assert_allclose(lo, mean)
    np.testing.assert_allclose(hi, mean)
    with pytest.raises(ValueError, match=r"\(seeds, X\)"):
        vs.pointwise_band(np.zeros(3), "g")
