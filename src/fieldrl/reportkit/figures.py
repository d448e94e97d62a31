"""Shared matplotlib figures: KPI comparison with CIs, learning and validation curves, paired
differences; :func:`png_bytes` and the policy palette for the domains' own figures."""

from __future__ import annotations

import io
import textwrap
import warnings
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fieldrl.reportkit.numbers import MIN_CASES  # noqa: E402
from fieldrl.reportkit.numbers import finite as _finite  # noqa: E402
from fieldrl.results import Kpi, PolicyRef, Summary  # noqa: E402

HEURISTIC_COLOR = "#8c8c8c"
LEARNED_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]


def legend_below(ax: Any, handles: list[Any], ncol: int, **options: Any) -> None:
    """A small frameless legend centred under ``ax`` (replay frames: the map keeps the whole panel);
    ``options`` go to ``ax.legend`` (labels, spacing, a handler map)."""
    style = {"handletextpad": 0.5, "columnspacing": 1.0, "handlelength": 1.4, **options}
    ax.legend(
        handles=handles,
        fontsize=6,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        frameon=False,
        **style,
    )


def stacked_panels(ax: Any, upper_from: float, lower_height: float, xlabel_y: float) -> tuple[Any, Any]:
    """Two panels inside ``ax``: the upper one from ``upper_from`` (a share of ``ax``'s height) to the top,
    the lower one from the bottom up to ``lower_height``. Made on the first call and found again on the
    next ones (a replay keeps its axes between frames; making them is the slow part); their labels sit
    at fixed places (placing them around the ticks is slow too)."""
    if len(ax.child_axes) == 2:
        return ax.child_axes[0], ax.child_axes[1]
    upper = ax.inset_axes((0.0, upper_from, 1.0, 1.0 - upper_from))
    lower = ax.inset_axes((0.0, 0.0, 1.0, lower_height))
    for panel in (upper, lower):
        panel.yaxis.set_label_coords(-0.11, 0.5)
    lower.xaxis.set_label_coords(0.5, xlabel_y)
    return upper, lower


def png_bytes(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=150, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def policy_colors(policies: list[PolicyRef]) -> dict[str, str]:
    colors, i = {}, 0
    for p in policies:
        if p.kind == "heuristic":
            colors[p.name] = HEURISTIC_COLOR
        else:
            colors[p.name] = LEARNED_COLORS[i % len(LEARNED_COLORS)]
            i += 1
    return colors


def kpi_comparison(summary: Summary, variant: str, kpis: list[Kpi] | None = None, ncols: int = 3) -> bytes:
    """One panel per KPI: mean per policy (95 % CI bars where there are enough held-out cases),
    learned in colour, heuristics grey.

    KPIs without a value for any policy (see :meth:`Summary.measured_kpis`) get no panel; ``kpis`` picks
    some.
    """
    entry = summary.variant(variant)
    kpis = kpis or summary.measured_kpis(variant) or summary.kpis  # nothing measured: draw as is
    policies = [p for p in summary.policies if p.name in entry.policies]
    colors = policy_colors(summary.policies)
    with_ci = min(entry.cases(p.name) for p in policies) >= MIN_CASES if policies else False
    ncols = min(ncols, len(kpis))
    nrows = int(np.ceil(len(kpis) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 0.32 * len(policies) * nrows + 1.4 * nrows))
    axes = np.atleast_1d(axes).reshape(-1)
    names = [p.name for p in policies]
    y = np.arange(len(names))[::-1]
    for ax, kpi in zip(axes, kpis, strict=False):
        stats = [entry.policies[n][kpi.name].mean for n in names]
        values = np.array([s.value for s in stats])
        err = np.array([[s.value - s.low for s in stats], [s.high - s.value for s in stats]])
        xerr = np.clip(err, 0, None) if with_ci else None
        ax.barh(y, values, xerr=xerr, color=[colors[n] for n in names], capsize=2)
        ax.set_yticks(y, names if ax is axes[0] or ncols == 1 else names, fontsize=7)
        arrow = "higher is better" if kpi.higher_is_better else "lower is better"
        arrow = arrow if kpi.is_ranked else "not ranked"
        unit = f" ({kpi.unit})" if kpi.unit else ""
        ax.set_title(textwrap.fill(f"{kpi.label}{unit}", 28) + f"\n{arrow}", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.axvline(0, color="black", linewidth=0.5)
    for ax in axes[len(kpis) :]:
        ax.axis("off")
    fig.tight_layout()
    return png_bytes(fig)


def learning_curves(curves: pd.DataFrame, colors: dict[str, str], bins: int = 30) -> bytes | None:
    """Training episode return against env steps: mean over seeds, band = min-max over seeds.

    These are *training* curves: they show that learning happened, not how well the
    policy does on held-out cases (the KPI table does that).
    """
    if curves.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for policy, frame in curves.groupby("policy", sort=False):
        edges = np.linspace(0, frame["timesteps"].max(), bins + 1)
        per_seed = []
        for _, seed_frame in frame.groupby("seed"):
            idx = np.clip(np.digitize(seed_frame["timesteps"], edges) - 1, 0, bins - 1)
            sums = np.bincount(idx, weights=seed_frame["episode_return"], minlength=bins)
            counts = np.bincount(idx, minlength=bins)
            with np.errstate(invalid="ignore"):
                per_seed.append(sums / counts)
        arr = np.array(per_seed)
        centers = (edges[:-1] + edges[1:]) / 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN bins of short runs
            mean = np.nanmean(arr, axis=0)
            low, high = np.nanmin(arr, axis=0), np.nanmax(arr, axis=0)
        ok = ~np.isnan(mean)
        color = colors.get(policy)
        ax.plot(centers[ok], mean[ok], label=f"{policy} ({len(per_seed)} seed(s))", color=color)
        ax.fill_between(centers[ok], low[ok], high[ok], alpha=0.2, color=color)
    ax.set_xlabel("environment steps of training")
    ax.set_ylabel("training episode return")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return png_bytes(fig)


def validation_curves(
    curves: pd.DataFrame, heuristic: tuple[str, float] | None, kpi_label: str, colors: dict[str, str]
) -> bytes | None:
    """Validation score against training steps and training CPU seconds (time-to-quality).

    One line per learned policy and training seed; a marker where the kept checkpoint is; the
    best heuristic's score on the same validation seeds as a dashed line.
    """
    if curves.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0), sharey=True)
    for (policy, seed), frame in curves.groupby(["policy", "seed"], sort=False):
        color = colors.get(policy)
        first = seed == curves.loc[curves["policy"] == policy, "seed"].iloc[0]
        for ax, x in zip(axes, ("timesteps", "cpu_seconds"), strict=True):
            ax.plot(frame[x], frame["value"], color=color, lw=1, alpha=0.8, label=policy if first else None)
            kept = frame[frame["best"] == 1]
            ax.plot(kept[x], kept["value"], "o", color=color, ms=4)
    for ax in axes:
        if heuristic is not None and _finite(heuristic[1]):
            ax.axhline(
                heuristic[1], color=HEURISTIC_COLOR, ls="--", lw=1.2, label=f"{heuristic[0]} (best rule)"
            )
        ax.grid(alpha=0.3)
    axes[0].set_xlabel("environment steps of training")
    axes[1].set_xlabel("CPU seconds of training")
    axes[0].set_ylabel(f"{kpi_label}\n(validation seeds)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", ncol=min(4, len(labels)), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return png_bytes(fig)


def pair_differences(summary: Summary, index: int) -> bytes:
    """Policy-minus-baseline difference with 95 % CI for every KPI, across variants.

    KPIs whose difference is NaN in every variant (not measured for the pair) get no panel.
    """
    variants = list(summary.variants)
    pairs = [summary.variants[v].pairs[index] for v in variants]
    pair = pairs[0]
    kpis = [
        k for k in summary.kpis if any(_finite(p.kpis[k.name].difference.value) for p in pairs)
    ] or summary.kpis
    ncols = min(3, len(kpis))
    nrows = int(np.ceil(len(kpis) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.4 * nrows))
    axes = np.atleast_1d(axes).reshape(-1)
    x = np.arange(len(variants))
    for ax, kpi in zip(axes, kpis, strict=False):
        diffs = [p.kpis[kpi.name].difference for p in pairs]
        values = np.array([d.value for d in diffs])
        err = np.array([[d.value - d.low for d in diffs], [d.high - d.value for d in diffs]])
        ax.errorbar(x, values, yerr=np.clip(err, 0, None), fmt="o-", capsize=3, color=LEARNED_COLORS[0])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(x, variants, fontsize=7)
        better = "above 0 is better" if kpi.higher_is_better else "below 0 is better"
        unit = f" ({kpi.unit})" if kpi.unit else ""
        ax.set_title(f"{kpi.label}{unit}\n{better}", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(kpis) :]:
        ax.axis("off")
    fig.suptitle(f"{pair.policy} minus {pair.baseline} (95 % CI)", fontsize=9)
    fig.tight_layout()
    return png_bytes(fig)


def best_by_setting(summary: Summary) -> bytes:
    """The primary KPI of the best standard and the best learned policy in each setting, side by side."""
    primary = summary.primary
    variants = list(summary.variants)
    fig, ax = plt.subplots(figsize=(7.0, 2.6))
    x = np.arange(len(variants))
    for offset, standard, color in ((-0.2, True, HEURISTIC_COLOR), (0.2, False, LEARNED_COLORS[0])):
        values, errors = [], [[], []]
        for v in variants:
            entry = summary.variants[v]
            name = entry.best_heuristic if standard else entry.best_learned
            stats = entry.policies[name][primary.name].mean if name else None
            values.append(np.nan if stats is None else stats.value)
            show = stats is not None and entry.cases(name) >= MIN_CASES
            errors[0].append(stats.value - stats.low if show else 0.0)
            errors[1].append(stats.high - stats.value if show else 0.0)
        label = "best standard policy" if standard else "best learned policy"
        yerr = np.clip(np.array(errors, dtype=float), 0, None)
        ax.bar(x + offset, values, width=0.4, color=color, yerr=yerr, capsize=2, label=label)
    ax.set_xticks(x, variants, fontsize=7, rotation=20 if len(variants) > 4 else 0)
    unit = f" ({primary.unit})" if primary.unit else ""
    arrow = "higher is better" if primary.higher_is_better else "lower is better"
    ax.set_ylabel(textwrap.fill(f"{primary.label}{unit}", 24) + f"\n{arrow}", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return png_bytes(fig)


#: colour of a stress point by verdict: the learned policy ahead, level or behind (or too few cases)
VERDICT_COLORS = {"ahead": "#2ca02c", "level": "#8c8c8c", "behind": "#d62728", "too few cases": "#ffffff"}


def stress_map(
    values: list[float],
    differences: list[tuple[float, float, float]],
    verdicts: list[str],
    trained: float,
    axis_label: str,
    difference_label: str,
    log: bool = False,
) -> bytes:
    """Best learned minus best standard policy (``(value, low, high)`` per point) against one stress
    axis: a band for the confidence interval, points coloured by verdict, zero and the value the run
    trained at marked."""
    fig, ax = plt.subplots(figsize=(6.5, 2.9))
    x = np.asarray(values, dtype=float)
    mid, low, high = (np.asarray(column, dtype=float) for column in zip(*differences, strict=True))
    ax.axhline(0, color="black", linewidth=0.7)
    with_band = np.isfinite(low) & np.isfinite(high)
    if with_band.any():
        ax.fill_between(
            x[with_band], low[with_band], high[with_band], color="#1f77b4", alpha=0.18, linewidth=0
        )
    ax.plot(x, mid, color="#1f77b4", linewidth=1.2)
    for verdict, color in VERDICT_COLORS.items():
        chosen = [i for i, said in enumerate(verdicts) if said == verdict]
        if chosen:
            label = verdict if verdict == "too few cases" else f"learned {verdict}"
            ax.scatter(x[chosen], mid[chosen], color=color, edgecolors="#444444", zorder=3, s=28, label=label)
    ax.axvline(trained, color="#444444", linestyle="--", linewidth=1)
    ax.annotate("as trained", (trained, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                ha="left", va="top", xytext=(3, -2), textcoords="offset points")  # fmt: skip
    if log and (x > 0).all():
        ax.set_xscale("log")
        ax.set_xticks(x, [format(v, "g") for v in x])
        ax.minorticks_off()
    ax.set_xlabel(axis_label, fontsize=8)
    ax.set_ylabel(textwrap.fill(difference_label, 40), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return png_bytes(fig)


def agreement_by_progress(counts: np.ndarray, agree: np.ndarray, learned: str, standard: str) -> bytes:
    """Share of decisions on which ``learned`` decides as ``standard`` would, by how far through its
    episode each decision was: ``counts[k]`` decisions in the k-th equal part of the episodes, ``agree[k]``
    of them alike; the number of decisions is written above each bar."""
    bins = len(counts)
    edges = np.linspace(0.0, 1.0, bins + 1)
    share = np.divide(100.0 * agree, counts, out=np.full(bins, np.nan), where=counts > 0)
    fig, ax = plt.subplots(figsize=(6.5, 2.2))
    centres = (edges[:-1] + edges[1:]) / 2 * 100
    ax.bar(centres, np.nan_to_num(share), width=100 / bins * 0.85, color="#1f77b4", alpha=0.8)
    for x, n, value in zip(centres, counts, share, strict=True):
        if n:
            ax.annotate(f"{n:,}", (x, np.nan_to_num(value)), fontsize=6, ha="center", va="bottom",
                        xytext=(0, 1), textcoords="offset points")  # fmt: skip
    ax.set_ylim(0, 109)
    ax.set_xlim(0, 100)
    ax.set_xlabel(
        "how far through the episode (% of its steps); the number of decisions on each bar", fontsize=7
    )
    ax.set_ylabel(textwrap.fill(f"{learned} decides as {standard} (%)", 30), fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return png_bytes(fig)
