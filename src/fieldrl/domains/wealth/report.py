"""The wealth pages of the report: wealth fan charts, goals reached, % of the DP optimum, policy maps.

Everything comes from the run's traces (many held-out paths per policy, see
``WealthDomain.episode_trace``) and summary; nothing is simulated here. With stochastic
inflation of goal costs there is no DP optimum: the section says so in plain words,
compares the strategies on utility and draws the price-index paths instead.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from reportlab.lib import colors  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph, Table, TableStyle  # noqa: E402

from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402
from fieldrl.reportkit.layout import PAGE_WIDTH  # noqa: E402
from fieldrl.reportkit.numbers import fmt, with_range  # noqa: E402
from fieldrl.results import Interval  # noqa: E402

BANDS = ((5, 95), (25, 75))


def _first_seed(traces: pd.DataFrame) -> pd.DataFrame:
    """Each policy's trace from its first training seed (heuristics have one)."""
    first = traces.groupby("policy")["train_seed"].transform("min")
    return traces[traces["train_seed"] == first]


def _policies(frame: pd.DataFrame, order: list[str]) -> list[str]:
    present = set(frame["policy"])
    return [p for p in order if p in present]


def quantile_bands(ax: Any, by_year: Any, years: np.ndarray, color: str) -> None:
    """Median line with the 25-75 % (dark) and 5-95 % (light) bands of a per-year grouped series."""
    for (lo, hi), alpha in zip(BANDS, (0.18, 0.35), strict=True):
        ax.fill_between(
            years,
            by_year.quantile(lo / 100).reindex(years),
            by_year.quantile(hi / 100).reindex(years),
            color=color,
            alpha=alpha,
            linewidth=0,
        )
    ax.plot(years, by_year.median().reindex(years), color=color, linewidth=1.3)


def fan_chart(frame: pd.DataFrame, policies: list[str], relative: bool) -> bytes:
    """One panel per policy: median wealth by year with 25-75 % and 5-95 % bands over paths."""
    column = "wealth_rel" if relative else "wealth"
    ncols = min(3, len(policies))
    nrows = int(np.ceil(len(policies) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.1 * ncols, 2.4 * nrows), sharex=True, sharey=True)
    axes = np.atleast_1d(axes).reshape(-1)
    goal_years = sorted(set(frame.loc[frame["goal_due"] == 1, "year"])) if not relative else []
    for ax, policy in zip(axes, policies, strict=False):
        rows = frame[frame["policy"] == policy]
        by_year = rows.groupby("year")[column]
        years = np.array(sorted(rows["year"].unique()))
        quantile_bands(ax, by_year, years, "#1f77b4")
        for year in goal_years:
            ax.axvline(year, color="black", linestyle=":", linewidth=0.7)
        ax.set_title(f"{policy} ({rows['path'].nunique()} paths)", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes[len(policies) :]:
        ax.axis("off")
    for ax in axes[(nrows - 1) * ncols :]:
        ax.set_xlabel("year", fontsize=8)
    axes[0].set_ylabel("wealth / starting wealth" if relative else "wealth (start of year)", fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)


def policy_maps(frame: pd.DataFrame, policies: list[str], k: int) -> bytes:
    """Portfolio chosen at each visited (year, wealth) on held-out paths, one panel per policy."""
    fig, axes = plt.subplots(1, len(policies), figsize=(3.4 * len(policies), 2.9), sharey=True)
    axes = np.atleast_1d(axes)
    scatter = None
    for ax, policy in zip(axes, policies, strict=True):
        rows = frame[(frame["policy"] == policy) & (frame["portfolio"] >= 0)]
        jitter = np.random.default_rng(0).uniform(-0.25, 0.25, len(rows))
        scatter = ax.scatter(
            rows["year"] + jitter,
            rows["wealth"],
            c=rows["portfolio"],
            cmap="viridis",
            vmin=0,
            vmax=max(k - 1, 1),
            s=3,
            alpha=0.6,
            linewidths=0,
        )
        ax.set_yscale("log")
        ax.set_title(policy, fontsize=8)
        ax.set_xlabel("year", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("wealth (log scale)", fontsize=8)
    if scatter is not None:
        bar = fig.colorbar(scatter, ax=list(axes), shrink=0.9)
        bar.set_label("portfolio (0 = most conservative)", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    return png_bytes(fig)


def goal_table(ctx: ReportContext, frame: pd.DataFrame, policies: list[str]) -> Table | None:
    """% of held-out paths reaching each goal (any level), per policy; fixed problems only."""
    due = frame[frame["goal_due"] == 1]
    years = sorted(due["year"].unique())
    if not years or len(years) > 16:
        return None
    cell = ctx.styles["Cell"]
    rows = [[Paragraph("<b>Policy</b>", cell)] + [Paragraph(f"<b>goal year {y}</b>", cell) for y in years]]
    for policy in policies:
        sub = due[due["policy"] == policy]
        rate = sub.assign(hit=sub["goal"] > 0).groupby("year")["hit"].mean() * 100.0
        rows.append([Paragraph(policy, cell)] + [Paragraph(f"{rate.get(y, 0.0):.0f} %", cell) for y in years])
    table = Table(rows, repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
            ]
        )
    )
    return table


def paired_share(
    results: pd.DataFrame, variant: str, policy: str, dp_name: str, several_problems: bool, seed: int = 0
) -> tuple[float, float, float] | None:
    """``policy``'s expected utility as % of the ``dp`` policy's on the same paths, with a 95 % CI.

    Per held-out seed ``s``: ``a_s``, ``b_s`` = mean utility of ``policy`` (over episodes and
    training seeds) and of DP. One problem: ``100 * sum(a) / sum(b)``; one problem per
    seed: the mean over seeds of ``100 * a_s / b_s`` (seeds with ``b_s = 0`` left out).
    Sharing the paths cancels most of the market luck that widens the ``pct_of_dp`` CIs.
    The CI resamples held-out seeds (2,000 percentile-bootstrap draws).
    """
    rows = results[(results["variant"] == variant) & (results["metric"] == "utility")]
    a = rows[rows["policy"] == policy].groupby("eval_seed")["value"].mean()
    b = rows[rows["policy"] == dp_name].groupby("eval_seed")["value"].mean()
    a, b = a.align(b, join="inner")
    if a.empty:
        return None
    a_arr, b_arr = a.to_numpy(), b.to_numpy()
    if several_problems:
        keep = b_arr > 0
        a_arr, b_arr = a_arr[keep], b_arr[keep]
        if not len(a_arr):
            return None

    def share(idx: np.ndarray) -> np.ndarray:
        if several_problems:
            return 100.0 * (a_arr[idx] / b_arr[idx]).mean(axis=-1)
        return 100.0 * a_arr[idx].sum(axis=-1) / np.maximum(b_arr[idx].sum(axis=-1), 1e-300)

    n = len(a_arr)
    draws = share(np.random.default_rng(seed).integers(0, n, size=(2000, n)))
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(share(np.arange(n))), float(low), float(high)


def _means(ctx: ReportContext, variant: str, kpi: str) -> dict[str, Interval]:
    """Each policy's mean of ``kpi`` in ``variant``, for the policies that have one."""
    return {p: s for p in ctx.evaluated(variant) if (s := ctx.stat(variant, p, kpi)) is not None}


def adviser_text(ctx: ReportContext, variant: str, dp_name: str | None, several_problems: bool) -> str:
    """The % of DP findings in plain words."""
    shares = _means(ctx, variant, "pct_of_dp")
    if not shares:
        return ""
    few = ctx.too_few_cases(variant)
    where = (
        "averaged over the held-out investors' problems (each problem's own optimum is 100 %)"
        if several_problems
        else "for this investor's problem"
    )
    parts = [
        "The dynamic-programming (DP) strategy is the best any strategy can do on average: it plans the "
        "portfolio and the goals to fund for every year and every wealth level in advance. Each strategy's "
        f"expected utility is shown as a share of that optimum, {where}"
        + ("" if few else ", with 95 % confidence intervals")
        + " from the held-out market paths:"
    ]
    ranked = sorted(shares.items(), key=lambda kv: -kv[1].value)
    parts.append("; ".join(f"{p} {with_range(s, ' %')}" for p, s in ranked) + ".")
    if dp_name is not None and dp_name in shares:
        parts.append(
            f"{dp_name} itself scores close to, not exactly, 100 % because a finite number of market paths "
            "is simulated; that gap is the size of the sampling error in every other number."
        )
    if dp_name is None or dp_name not in shares or few:
        return " ".join(parts)  # no paired intervals from too few held-out cases
    paired = {
        p: paired_share(ctx.results, variant, p, dp_name, several_problems) for p, _ in ranked if p != dp_name
    }
    paired = {p: v for p, v in paired.items() if v is not None}
    if paired:
        parts.append(
            f"Measured against {dp_name} on the same market paths, which cancels most of the luck of the "
            "draw, "
            "the expected utility reached is: "
            + "; ".join(f"{p} {fmt(v)} % [{fmt(lo)}, {fmt(hi)}]" for p, (v, lo, hi) in paired.items())
            + " of DP's."
        )
        best, (value, _, _) = max(paired.items(), key=lambda kv: kv[1][0])
        parts.append(
            f"For an adviser: the best strategy short of solving the DP, {best}, gives up about "
            f"{fmt(max(100.0 - value, 0.0))} % of the achievable goal utility; a share above 100 % is luck "
            "in the simulated markets, not a better plan."
        )
    return " ".join(parts)


def price_fan(frame: pd.DataFrame) -> bytes:
    """Price index by year over the held-out paths (the same for every policy on the same seeds)."""
    rows = frame[frame["policy"] == frame["policy"].iloc[0]]
    by_year = rows.groupby("year")["price_index"]
    years = np.array(sorted(rows["year"].unique()))
    fig, ax = plt.subplots(figsize=(4.2, 2.4))
    quantile_bands(ax, by_year, years, "#d62728")
    ax.set_xlabel("year", fontsize=8)
    ax.set_ylabel("price index (year 0 = 1)", fontsize=8)
    ax.set_title(f"Goal-cost price index ({rows['path'].nunique()} paths)", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def inflation_text(ctx: ReportContext, variant: str, inflation: Any, frame: pd.DataFrame) -> str:
    """Plain words for a setting with stochastic inflation: no DP optimum; utility compared directly."""
    few = ctx.too_few_cases(variant)
    parts = [
        "Goal costs in this setting rise with a random price index: the listed costs are in year-0 prices "
        "and each goal is paid at the index of the year it falls due (annual log inflation "
        f"{100 * inflation.mean:.3g} % on average, innovation volatility {100 * inflation.vol:.3g} %, "
        f"persistence {inflation.rho:.3g}). The dynamic-programming (DP) optimum is not available under "
        "stochastic inflation: the price index is a second state variable that the DP solver, a grid "
        "over wealth alone, does not model. So there is no DP strategy and 'share of the DP optimum' is "
        "not applicable (n/a in the tables); the strategies are compared on expected utility directly. "
        "Every strategy met the same market and price-index paths."
    ]
    if not frame.empty and "price_index" in frame:
        rows = frame[frame["policy"] == frame["policy"].iloc[0]]
        last = rows[rows["year"] == rows["year"].max()]["price_index"]
        if len(last):
            lo, mid, hi = np.percentile(last, [5, 50, 95])
            parts.append(
                f"By the last year the index reached {fmt(mid)} on the median path (5-95 %: {fmt(lo)} to "
                f"{fmt(hi)}), so the late goals cost that much more than listed."
            )
    utility = _means(ctx, variant, "utility")
    if utility:
        ranked = sorted(utility.items(), key=lambda kv: -kv[1].value)
        parts.append(
            "Expected utility over the held-out market paths"
            + ("" if few else " with 95 % confidence intervals")
            + ": "
            + "; ".join(f"{p} {with_range(s)}" for p, s in ranked)
            + "."
        )
    learned, heuristic = ctx.best_learned(variant), ctx.best_heuristic(variant)
    comparison = ctx.comparison(variant, "utility")
    diff = None if comparison is None else comparison.difference
    if learned and heuristic and diff and few:
        parts.append(
            f"For an adviser: {learned}, the best learned strategy, and {heuristic}, the best standard rule, "
            "cannot be compared on so few held-out cases."
        )
    elif learned and heuristic and diff:
        if diff.low > 0:
            verdict = "reached more utility than"
        elif diff.high < 0:
            verdict = "reached less utility than"
        else:
            verdict = "could not be told apart from"
        parts.append(
            f"For an adviser: {learned}, the best learned strategy, {verdict} {heuristic}, the best standard "
            f"rule, on the same paths (difference {fmt(diff.value)}, 95 % CI {fmt(diff.low)} to "
            f"{fmt(diff.high)})."
        )
    return " ".join(parts)


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("Wealth paths, goals and decisions", styles["Heading2"])]
    traces = ctx.traces
    order = ctx.policies()
    dp_name = ctx.heuristic_label("dp")
    learned = [p.label for p in ctx.learned()]
    for variant in ctx.variants():
        frame = traces[traces["variant"] == variant] if not traces.empty else pd.DataFrame()
        if variant != "default":
            story.append(Paragraph(f"Setting {variant}", styles["Heading3"]))
        several = not frame.empty and frame["problem"].nunique() > 1
        params = ctx.params(variant)  # validated when the run folder was opened
        inflation = getattr(params, "inflation", None)
        if not frame.empty:
            frame = _first_seed(frame)
        if inflation is not None:
            story.append(ctx.para(inflation_text(ctx, variant, inflation, frame)))
        else:
            story.append(ctx.para(adviser_text(ctx, variant, dp_name, several)))
        if frame.empty:
            continue
        policies = _policies(frame, order)
        story.append(Paragraph("Wealth fan charts", styles["Heading3"]))
        story.append(
            ctx.para(
                "Wealth at the start of each year over the held-out market paths (up to 1,000 per policy; "
                "learned policies: first training seed): median line, 25-75 % band dark, 5-95 % band light. "
                + (
                    "Wealth is shown relative to each investor's starting wealth, since problems differ."
                    if several
                    else "Dotted lines mark the years goals fall due; paying a goal makes wealth drop."
                )
            )
        )
        story.append(ctx.figure(f"wealth-fan-{variant}", fan_chart(frame, policies, relative=several)))
        if inflation is not None and "price_index" in frame:
            story.append(Paragraph("Price index of goal costs", styles["Heading3"]))
            story.append(
                ctx.para(
                    "The price index that multiplies every goal cost, over the held-out paths: median line, "
                    "25-75 % band dark, 5-95 % band light. A goal due in year t costs its listed cost times "
                    "the index in year t."
                )
            )
            story.append(ctx.figure(f"price-index-{variant}", price_fan(frame), width=PAGE_WIDTH * 0.6))
        if several:
            continue
        table = goal_table(ctx, frame, policies)
        if table is not None:
            heading = Paragraph("Goals reached", styles["Heading3"])
            text = ctx.para("Share of held-out paths on which each goal was funded (any level).")
            story.append(KeepTogether([heading, text, table]))  # no heading stranded at a page foot
        mapped = [p for p in [dp_name, *learned] if p in policies]
        if len(mapped) >= 1:
            k = int(frame["portfolio"].max()) + 1 if (frame["portfolio"] >= 0).any() else 1
            story.append(Paragraph("Policy maps", styles["Heading3"]))
            story.append(
                ctx.para(
                    "Portfolio chosen (colour; 0 = most conservative) at each year and wealth actually "
                    "visited on the held-out paths, "
                    + ("DP beside the learned policy. " if dp_name in mapped else "learned policies. ")
                    + "The maps cover visited "
                    "states only: a full map of a learned policy over a wealth grid would need the trained "
                    "model evaluated on that grid during evaluation, which the report does not do."
                )
            )
            width = PAGE_WIDTH * min(1.0, 0.4 + 0.3 * len(mapped))  # one panel need not fill the page
            story.append(ctx.figure(f"policy-map-{variant}", policy_maps(frame, mapped, k), width=width))
    return story
