"""Bootstrap statistics: agree with scipy where the designs coincide, pair correctly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from fieldrl.evaluation.stats import (
    Bootstrap,
    describe,
    iqm,
    paired_difference,
    probability_better,
    value_matrix,
)


def test_single_level_mean_ci_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(1)
    values = rng.lognormal(size=200)
    ours = describe(values[None, :], Bootstrap(200, 4000, seed=3), 0.95).mean
    ref = sps.bootstrap((values,), np.mean, n_resamples=4000, method="percentile", random_state=5)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.value == pytest.approx(values.mean())
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * width)


def test_iqm_ignores_outliers():
    values = np.array([1.0, 2, 3, 4, 5, 6, 7, 1000])
    assert iqm(values) == pytest.approx(np.mean([3, 4, 5, 6]))


def test_ci_widens_with_train_seed_spread():
    rng = np.random.default_rng(0)
    patients = rng.normal(size=50)
    tight = patients[None, :] + rng.normal(0, 0.01, size=(10, 1))
    loose = patients[None, :] + rng.normal(0, 3.0, size=(10, 1))
    boot = Bootstrap(50, 2000)
    width = lambda m: describe(m, boot, 0.95).mean.high - describe(m, boot, 0.95).mean.low  # noqa: E731
    assert width(loose) > 2 * width(tight)


def test_paired_difference_uses_common_seeds():
    # Patients vary hugely, but the learned policy is exactly 1.0 better on every one:
    # a paired comparison must give a tight CI around 1.0.
    rng = np.random.default_rng(2)
    base = rng.normal(0, 50, size=(1, 80))
    learned = np.repeat(base + 1.0, 3, axis=0)
    result = paired_difference(learned, base, Bootstrap(80, 1000), 0.95)
    assert result.difference.value == pytest.approx(1.0)
    assert result.difference.low == pytest.approx(1.0)
    assert result.difference.high == pytest.approx(1.0)


def test_probability_better_respects_direction_and_ties():
    base = np.array([[1.0, 2.0, 3.0, 4.0]])
    learned = np.array([[0.0, 2.0, 4.0, 5.0]])  # loss, tie, win, win
    boot = Bootstrap(4, 500)
    assert probability_better(learned, base, True, boot, 0.95).value == pytest.approx(2.5 / 4)
    assert probability_better(learned, base, False, boot, 0.95).value == pytest.approx(1.5 / 4)


@pytest.mark.filterwarnings("error")  # "Mean of empty slice", scipy's SmallSampleWarning: none allowed
def test_a_kpi_without_values_gives_nan_quietly():
    # A KPI that is NaN on every episode (e.g. a share of an optimum that does not exist):
    # value_matrix drops the NaN cells and leaves a (0, E) matrix.
    eval_seeds = [10, 11, 12]
    frame = pd.DataFrame({"train_seed": 0, "eval_seed": eval_seeds, "value": np.nan})
    empty = value_matrix(frame, eval_seeds)
    assert empty.shape == (0, 3)
    assert np.isnan(iqm(np.full(5, np.nan))) and np.isnan(iqm(np.zeros(0)))
    assert np.isnan(iqm(np.full((4, 3), np.nan), axis=1)).all()
    assert np.isnan(iqm(np.zeros((4, 0)), axis=1)).all() and iqm(np.zeros((4, 0)), axis=1).shape == (4,)
    boot = Bootstrap(3, 200)
    stats = describe(empty, boot, 0.95)
    for stat in ("mean", "iqm"):
        found = stats.stat(stat)
        assert all(np.isnan(v) for v in (found.value, found.low, found.high))
    other = np.array([[1.0, 2.0, 3.0]])
    for learned, base in ((empty, other), (other, empty), (empty, empty)):
        diff = paired_difference(learned, base, boot, 0.95)
        assert np.isnan(diff.difference.value) and np.isnan(diff.relative_percent.value)
    assert np.isnan(probability_better(empty, other, True, boot, 0.95).value)


def test_seed_spread_is_the_spread_of_each_training_seeds_mean_with_intervals_around_it():
    from fieldrl.evaluation.stats import Bootstrap, seed_spread, spread_difference

    rng = np.random.default_rng(3)
    steady = 100 + rng.normal(0, 1, size=(10, 40))  # every seed alike
    shaky = steady + np.linspace(-30, 30, 10)[:, None]  # seeds 30 apart either way
    boot = Bootstrap(40, 1000, seed=0)
    spread, sd_boot, worst_boot = seed_spread(shaky, boot, 0.95, higher_is_better=True)
    per_seed = shaky.mean(axis=1)
    assert spread.per_seed == pytest.approx(per_seed.tolist())
    assert spread.sd.value == pytest.approx(np.std(per_seed, ddof=1))
    assert spread.worst.value == pytest.approx(per_seed.min())
    assert spread.sd.low <= spread.sd.value <= spread.sd.high
    assert len(sd_boot) == len(worst_boot) == 1000
    lower_is_better, _, _ = seed_spread(shaky, boot, 0.95, higher_is_better=False)
    assert lower_is_better.worst.value == pytest.approx(per_seed.max())
    compared = spread_difference(steady, shaky, boot, 0.95, higher_is_better=True, kpi="return")
    assert compared.kpi == "return"
    assert compared.sd_difference.high < 0  # the steady policy is clearly the more stable
    assert compared.worst_difference.low > 0  # and its worst seed clearly better
