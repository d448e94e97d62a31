"""Aggregate statistics with stratified bootstrap confidence intervals.

Why hand-written: rliable (the reference for RL evaluation statistics) pins an old
``arch`` that does not build here; the method below is the same stratified
percentile bootstrap it uses, extended to fieldrl's paired design. Values form a
matrix ``M[train_seed, eval_seed]`` (episodes on one eval seed averaged first).
Each bootstrap sample resamples train seeds and eval seeds independently, with the
SAME eval-seed draw used for every policy compared, because every policy faced the
same held-out seeds (common random numbers). ``tests/test_stats.py`` checks the
single-level case against ``scipy.stats.bootstrap``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from fieldrl.results import Described, Interval, Paired, Spread, Stability


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50 % (robust to outlier episodes).

    NaN cells (held-out seeds whose episodes all failed, or a KPI that does not apply) are
    left out; a slice with no values left (all NaN, or empty) is NaN, without a warning.
    """
    # imported here: scipy.stats takes about a second, and readers of a finished run (a report,
    # `fieldrl compare`) import this module without summarising anything
    from scipy import stats as sps

    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return np.full(np.delete(values.shape, axis), np.nan)[()]
    if not np.isnan(values).any():
        return sps.trim_mean(values, 0.25, axis=axis)

    def one(row: np.ndarray) -> float:
        row = row[~np.isnan(row)]
        return float(sps.trim_mean(row, 0.25)) if row.size else float("nan")

    return np.apply_along_axis(one, axis, values)


def value_matrix(frame: pd.DataFrame, eval_seeds: list[int]) -> np.ndarray:
    """``M[train_seed, eval_seed]`` for one policy and metric (episodes averaged)."""
    table = frame.pivot_table(index="train_seed", columns="eval_seed", values="value", aggfunc="mean")
    return table.reindex(columns=eval_seeds).to_numpy(dtype=float)


class Bootstrap:
    """Shared resampling indices so that paired comparisons use the same eval seeds."""

    def __init__(self, n_eval: int, samples: int, seed: int = 0):
        self.samples = samples
        self.rng = np.random.default_rng(seed)
        self.eval_idx = self.rng.integers(0, n_eval, size=(samples, n_eval))
        self._train_idx: dict[tuple[int, int], np.ndarray] = {}

    def train_idx(self, n_train: int, stream: int = 0) -> np.ndarray:
        """Train-seed resampling indices; a different ``stream`` for an independently trained policy."""
        key = (n_train, stream)
        if key not in self._train_idx:
            rng = np.random.default_rng([n_train, 7, stream])
            self._train_idx[key] = rng.integers(0, n_train, size=(self.samples, n_train))
        return self._train_idx[key]

    def resample(self, matrix: np.ndarray, chunk: int = 250) -> Iterator[np.ndarray]:
        """Bootstrap samples of ``matrix``, ``chunk`` at a time, each block ``(chunk, R*E)``."""
        ti = self.train_idx(matrix.shape[0])
        for start in range(0, self.samples, chunk):
            sl = slice(start, start + chunk)
            yield matrix[ti[sl][:, :, None], self.eval_idx[sl][:, None, :]].reshape(ti[sl].shape[0], -1)

    def statistic(self, matrix: np.ndarray, func: Any) -> np.ndarray:
        return np.concatenate([func(block, axis=1) for block in self.resample(matrix)])


def interval(point: float, boot: np.ndarray, confidence: float) -> Interval:
    """``point`` with the percentile interval of its bootstrap samples ``boot`` (NaN without any).

    The functions below return the results model's classes (:mod:`fieldrl.results`), with every field
    set, so that ``Summary.model_dump(exclude_unset=True)`` writes each of them whole."""
    alpha = (1 - confidence) / 2
    if not np.isfinite(boot).any():
        return Interval(value=float(point), low=float("nan"), high=float("nan"))
    low, high = np.nanpercentile(boot, [100 * alpha, 100 * (1 - alpha)])
    return Interval(value=float(point), low=float(low), high=float(high))


def describe(matrix: np.ndarray, boot: Bootstrap, confidence: float) -> Described:
    """Mean and IQM with bootstrap CIs for one policy's value matrix."""
    flat = matrix.reshape(-1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN resample is NaN, and says so
        mean = interval(float(np.nanmean(flat)), boot.statistic(matrix, np.nanmean), confidence)
    return Described(
        mean=mean,
        iqm=interval(float(iqm(flat)), boot.statistic(matrix, iqm), confidence),
        n_train_seeds=int(matrix.shape[0]),
        n_eval_seeds=int(matrix.shape[1]),
    )


def paired_difference(
    learned: np.ndarray, baseline: np.ndarray, boot: Bootstrap, confidence: float
) -> Paired:
    """Learned minus baseline on the same eval seeds: absolute and relative, with CIs.

    :param learned: ``(R, E)`` matrix.
    :param baseline: ``(1, E)`` matrix (a heuristic) or ``(R', E)`` (another learned policy, whose
        independent training seeds are resampled on their own stream).
    """
    ti = boot.train_idx(learned.shape[0])
    bi = boot.train_idx(baseline.shape[0], stream=1)
    ei = boot.eval_idx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN cells: failed episodes
        base_row = np.nanmean(baseline, axis=0)
        learned_means = np.nanmean(learned[ti[:, :, None], ei[:, None, :]], axis=(1, 2))
        base_means = np.nanmean(baseline[bi[:, :, None], ei[:, None, :]], axis=(1, 2))
        point_l, point_b = float(np.nanmean(learned)), float(np.nanmean(base_row))  # NaN: no values
    diff_boot = learned_means - base_means
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_boot = 100.0 * diff_boot / np.abs(base_means)
    rel_boot[~np.isfinite(rel_boot)] = np.nan  # a resample whose baseline mean is 0
    point_rel = 100.0 * (point_l - point_b) / abs(point_b) if point_b != 0 else float("nan")
    return Paired(
        difference=interval(point_l - point_b, diff_boot, confidence),
        relative_percent=interval(point_rel, rel_boot, confidence),
    )


def seed_spread(
    matrix: np.ndarray, boot: Bootstrap, confidence: float, higher_is_better: bool, stream: int = 0
) -> tuple[Spread, np.ndarray, np.ndarray]:
    """How much a learned policy's result depends on its training seed: each seed's mean over the
    held-out cases, their standard deviation and the worst seed's mean, with bootstrap CIs (training
    seeds and held-out cases resampled as for :func:`describe`; ``stream`` as in
    :meth:`Bootstrap.train_idx`). Also returns the bootstrap samples of the SD and the worst seed, so
    that two policies' spreads can be compared on the same resamples.

    With ten seeds the percentile interval of an SD is rough and leans low (a resample repeats seeds);
    it says how wide the spread may be, not more.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN cells: failed episodes
        per_seed = np.nanmean(matrix, axis=1)
        ti = boot.train_idx(matrix.shape[0], stream)
        sd_boot, worst_boot = [], []
        for start in range(0, boot.samples, 250):
            sl = slice(start, start + 250)
            means = np.nanmean(matrix[ti[sl][:, :, None], boot.eval_idx[sl][:, None, :]], axis=2)
            sd_boot.append(np.std(means, axis=1, ddof=1))
            worst_boot.append(np.min(means, axis=1) if higher_is_better else np.max(means, axis=1))
    sd_all, worst_all = np.concatenate(sd_boot), np.concatenate(worst_boot)
    worst = float(np.min(per_seed) if higher_is_better else np.max(per_seed))
    spread = Spread(
        per_seed=[float(v) for v in per_seed],
        sd=interval(float(np.std(per_seed, ddof=1)), sd_all, confidence),
        worst=interval(worst, worst_all, confidence),
    )
    return spread, sd_all, worst_all


def spread_difference(
    policy: np.ndarray,
    baseline: np.ndarray,
    boot: Bootstrap,
    confidence: float,
    higher_is_better: bool,
    kpi: str,
) -> Stability:
    """Two learned policies' spreads across training seeds on ``kpi`` (policy minus baseline, same
    resampled held-out cases, independent seed resamples): is one more stable than the other?"""
    own, sd_p, worst_p = seed_spread(policy, boot, confidence, higher_is_better, stream=0)
    other, sd_b, worst_b = seed_spread(baseline, boot, confidence, higher_is_better, stream=1)
    return Stability(
        kpi=kpi,
        policy=own,
        baseline=other,
        sd_difference=interval(own.sd.value - other.sd.value, sd_p - sd_b, confidence),
        worst_difference=interval(own.worst.value - other.worst.value, worst_p - worst_b, confidence),
    )


def probability_better(
    learned: np.ndarray,
    baseline: np.ndarray,
    higher_is_better: bool,
    boot: Bootstrap,
    confidence: float,
) -> Interval:
    """P(learned does better than baseline on the same held-out seed), ties count half."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN cells: failed episodes
        base_row = np.nanmean(baseline, axis=0)
        sign = 1.0 if higher_is_better else -1.0
        wins = (np.sign(sign * (learned - base_row[None, :])) + 1.0) / 2.0  # 1 win, 0.5 tie, 0 loss
        return interval(float(np.nanmean(wins)), boot.statistic(wins, np.nanmean), confidence)
