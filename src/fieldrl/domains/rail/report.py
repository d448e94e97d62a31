"""The rail pages of the report: per-level arrival and deadlock charts, a rail map, dispatcher findings.

Charts read the run's summary (means with bootstrap CIs over held-out seeds); the rail map reads the
trace of the first held-out episode (rail cells and every train's moves). Nothing is simulated here.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph  # noqa: E402

from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402
from fieldrl.reportkit.layout import PAGE_WIDTH  # noqa: E402
from fieldrl.reportkit.numbers import with_range  # noqa: E402
from fieldrl.results import Interval  # noqa: E402

OUTCOME_COLORS = {
    "arrived": "#2ca02c",
    "deadlocked": "#d62728",
    "en route": "#ff7f0e",
    "cancelled": "#7f7f7f",
    "never departed": "#7f7f7f",
}


#: the heuristics that send every train off at once on its shortest path (the baseline dispatcher)
SHORTEST_PATH = ("greedy-shortest-route", "shortest-path")


def level_chart(ctx: ReportContext, policies: list[str], kpis: list[tuple[str, str]]) -> bytes:
    """Grouped bars: one group per variant (level), one bar per policy, 95 % CI whiskers."""
    variants = ctx.variants()
    fig, axes = plt.subplots(len(kpis), 1, figsize=(7.2, 2.5 * len(kpis)), squeeze=False)
    width = 0.8 / max(len(policies), 1)
    cmap = plt.get_cmap("tab10")
    x = np.arange(len(variants))
    for ax, (kpi, label) in zip(axes[:, 0], kpis, strict=True):
        for j, policy in enumerate(policies):
            vals = [ctx.stat(v, policy, kpi) for v in variants]
            mean = np.array([np.nan if s is None else s.value for s in vals], dtype=float)
            low = np.array([np.nan if s is None else s.low for s in vals], dtype=float)
            high = np.array([np.nan if s is None else s.high for s in vals], dtype=float)
            err = np.vstack([np.nan_to_num(mean - low), np.nan_to_num(high - mean)])
            ax.bar(
                x + (j - (len(policies) - 1) / 2) * width,
                np.nan_to_num(mean),
                width,
                yerr=err,
                capsize=2,
                color=cmap(j % 10),
                label=policy,
            )
        ax.set_xticks(x, variants, fontsize=7, rotation=20 if len(variants) > 4 else 0)
        ax.set_ylabel(label, fontsize=8)
        ax.set_ylim(0, 105)
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(labelsize=7)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.legend(handles, labels, fontsize=7, ncol=min(len(policies), 5), loc="lower center")
    return png_bytes(fig)


def rail_map(frame: pd.DataFrame, title: str) -> bytes | None:
    """Rail cells in grey; each train's cells in visiting order, coloured by how its journey ended."""
    rail = frame[frame["layer"] == "rail"]
    shape = frame[frame["layer"] == "shape"]
    if rail.empty or shape.empty:
        return None
    # the frame is the rails' extent, not the whole grid: Flatland leaves much of a grid empty, and a
    # map drawn on the full grid filled a third of its frame
    row0, row1 = int(rail["row"].min()), int(rail["row"].max())
    col0, col1 = int(rail["col"].min()), int(rail["col"].max())
    h, w = row1 - row0 + 3, col1 - col0 + 3
    fig, ax = plt.subplots(figsize=(6.2, max(2.5, 6.2 * h / max(w, 1))))
    ax.scatter(rail["col"], rail["row"], marker="s", s=30, color="#d9d9d9", linewidths=0)
    trains = frame[frame["layer"] == "train"]
    rng = np.random.default_rng(0)
    for _train, rows in trains.groupby("train"):
        rows = rows.sort_values("step")
        jitter = rng.uniform(-0.18, 0.18, 2)
        outcome = rows["outcome"].iloc[0]
        ax.plot(
            rows["col"] + jitter[0],
            rows["row"] + jitter[1],
            color=OUTCOME_COLORS.get(outcome, "#1f77b4"),
            linewidth=0.9,
            alpha=0.8,
        )
        ax.plot(rows["col"].iloc[0] + jitter[0], rows["row"].iloc[0] + jitter[1], "o", ms=2.5, color="black")
    targets = frame[frame["layer"] == "target"]
    ax.scatter(targets["col"], targets["row"], marker="*", s=30, color="black", zorder=3)
    handles = [
        plt.Line2D([], [], color=c, label=k) for k, c in OUTCOME_COLORS.items() if k != "never departed"
    ]
    handles += [
        plt.Line2D([], [], marker="o", color="black", linestyle="", ms=3, label="start"),
        plt.Line2D([], [], marker="*", color="black", linestyle="", ms=6, label="destination"),
    ]
    ax.legend(handles=handles, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=6)
    ax.set_xlim(col0 - 1.5, col1 + 1.5)
    ax.set_ylim(row1 + 1.5, row0 - 1.5)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)


def _ci(stat: Interval | None, unit: str = " %") -> str:
    if stat is None:
        return "n/a"
    return with_range(stat, unit)


def dispatcher_finding(ctx: ReportContext, variant: str) -> str:
    """Plain words: the best dispatcher against the shortest-path baseline and the learned policies."""
    best = ctx.best_heuristic(variant)
    heuristics = [h.label for h in ctx.heuristics()]
    base = ctx.heuristic_label(*SHORTEST_PATH)
    if best is None:
        return ""
    where = "" if variant == "default" else f"In {variant}, "
    parts = [
        f"{where}the best dispatcher, {best}, got {_ci(ctx.stat(variant, best, 'arrived'))} of trains "
        f"to their destination with {_ci(ctx.stat(variant, best, 'deadlocked'))} of trains stuck in a "
        "deadlock at the end (mean"
        + ("" if ctx.too_few_cases(variant) else " and 95 % CI")
        + " over the held-out networks)."
    ]
    if base is not None and base != best:
        parts.append(
            f"Letting every train leave at once on its shortest path ({base}) got "
            f"{_ci(ctx.stat(variant, base, 'arrived'))} there, with "
            f"{_ci(ctx.stat(variant, base, 'deadlocked'))} deadlocked: trains meeting head-on on single "
            "track block each other for good, and the trains queued behind them too."
        )
    if best in heuristics and best != base:
        parts.append(
            f"{best} holds a train at its origin while any train on the network is using part of its route "
            "in the opposite direction, so two trains never meet head-on; the price is waiting, visible in a "
            f"mean arrival delay of {_ci(ctx.stat(variant, best, 'delay'), ' steps')} for the trains that "
            "arrived."
        )
    for learned in [p.label for p in ctx.learned()]:
        stat = ctx.stat(variant, learned, "arrived")
        if stat is not None:
            parts.append(
                f"The learned policy {learned} got {_ci(stat)} of trains there, with "
                f"{_ci(ctx.stat(variant, learned, 'deadlocked'))} deadlocked."
            )
    return " ".join(parts)


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    order = ctx.policies()
    story: list[Any] = [Paragraph("Trains arrived and deadlocks, level by level", styles["Heading2"])]
    story.append(
        ctx.para(
            "Share of trains that reached their destination, and share stuck in a deadlock when the episode "
            "ended, for every policy in every setting: mean over the held-out networks and timetables with "
            "95 % bootstrap confidence intervals (learned policies: over training seeds too)."
        )
    )
    story.append(
        ctx.figure(
            "rail-levels",
            level_chart(
                ctx, order, [("arrived", "trains arrived (%)"), ("deadlocked", "trains in deadlock (%)")]
            ),
        )
    )
    story.append(Paragraph("What the dispatchers do", styles["Heading3"]))
    for variant in ctx.variants():
        text = dispatcher_finding(ctx, variant)
        if text:
            story.append(ctx.para(text))
    traces = ctx.traces
    if not traces.empty and "layer" in traces.columns:
        variant = ctx.variants()[0]
        frame = traces[traces["variant"] == variant]
        shown = [ctx.best_heuristic(variant)]
        base = ctx.heuristic_label(*SHORTEST_PATH)
        shown = [p for p in [base, *shown] if p is not None and p in set(frame["policy"])]
        for policy in dict.fromkeys(shown):
            rows = frame[frame["policy"] == policy]
            rows = rows[rows["train_seed"] == rows["train_seed"].min()]
            png = rail_map(rows, f"{policy} — {variant}, first held-out network")
            if png is None:
                continue
            story.append(
                KeepTogether(
                    [
                        Paragraph(f"Rail map: {policy}", styles["Heading3"]),
                        ctx.para(
                            "The rail network of the first held-out case (grey), every train's route from "
                            "its start (dot) towards its destination (star), coloured by how its journey "
                            "ended."
                        ),
                        ctx.figure(
                            f"rail-map-{variant}-{policy}".replace(" ", "-"), png, width=PAGE_WIDTH * 0.8
                        ),
                    ]
                )
            )
    story.append(Paragraph("How to read these results", styles["Heading3"]))
    story.append(
        ctx.para(
            "Trains arrived and deadlocks are the operational measures. The Flatland 3 normalised reward is "
            "the challenge score: 1 minus the total lateness (and, for trains that never arrive, the "
            "remaining travel time) divided by the episode length times the number of trains; it rewards "
            "punctuality, so a dispatcher that makes trains wait can arrive more of them and still lose some "
            "score. These are simulated networks and timetables (Flatland's generators), not a real railway."
        )
    )
    shielded = [v for v in ctx.variants() if ctx.variant_params(v).get("shield")]
    if shielded:
        story.append(
            ctx.para(
                f"Shielded settings ({', '.join(shielded)}): the learned policy may not send a train onto "
                "track that another train has reserved in the opposite direction, the rule the "
                "deadlock-avoiding dispatcher follows; it still decides when each train departs or waits, "
                "which trains are cancelled, and where trains reroute or stop. The dispatchers always run "
                "on their own rules. Circular waits at junctions are not ruled out by the shield."
            )
        )
    if advised := ctx.learned_setting("advice"):
        story.append(
            ctx.para(
                f"{advised}: at every decision the policy also sees what the priority dispatcher "
                "(its default settings) would decide for that train in the present state, and may follow "
                "it or not. A policy that always follows it runs exactly the dispatcher's episode. Where it "
                "scores like priority reroute it has learned (or kept) the dispatcher's decisions; what it "
                "adds is only where it chose otherwise."
            )
        )
    return story
