"""The traffic pages of the report: delay by mode, fairness, the peak hour, phase usage, findings.

Everything comes from the run's results, traces and summary; nothing is simulated here.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph  # noqa: E402

from fieldrl.domains.traffic.networks import NETCONVERT_YELLOW_CLEARANCE  # noqa: E402
from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402

FIXED = "fixed-time"


def _palette(order: list[str]) -> dict[str, str]:
    """One distinct colour per policy (the spine greys out heuristics; here they must differ)."""
    cmap = plt.get_cmap("tab10")
    return {p: matplotlib.colors.to_hex(cmap(i % 10)) for i, p in enumerate(order)}


def _fixed_label(ctx: ReportContext) -> str | None:
    return ctx.heuristic_label(FIXED)


def delay_boxes(
    results: pd.DataFrame, variant: str, order: list[str], colors: dict[str, str], pedestrians: bool = True
) -> bytes | None:
    """Per policy: mean delay per held-out episode, vehicles and pedestrians side by side."""
    frame = results[(results["variant"] == variant)]
    if frame.empty:
        return None
    policies = [p for p in order if p in set(frame["policy"])]
    modes = [("vehicle_delay_mean", "vehicles")] + ([("pedestrian_delay_mean", "pedestrians")] * pedestrians)
    fig, axes = plt.subplots(1, len(modes), figsize=(7.2, 0.42 * len(policies) + 1.4), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (metric, title) in zip(axes, modes, strict=True):
        data = [
            frame[(frame["policy"] == p) & (frame["metric"] == metric)]["value"].dropna() for p in policies
        ]
        box = ax.boxplot(data, orientation="horizontal", patch_artist=True, widths=0.6, showfliers=True)
        for patch, p in zip(box["boxes"], policies, strict=True):
            patch.set_facecolor(colors.get(p, "#999999"))
            patch.set_alpha(0.6)
        tail = frame[frame["metric"] == metric.replace("mean", "p95")]
        p95 = [tail[tail["policy"] == p]["value"].mean() for p in policies]
        ax.scatter(p95, np.arange(1, len(policies) + 1), marker="|", s=120, color="black", label="95th pct")
        ax.set_title(f"delay per {title[:-1]} (s)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(left=0)
    axes[0].set_yticks(np.arange(1, len(policies) + 1), policies, fontsize=8)
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return png_bytes(fig)


def fairness_chart(ctx: ReportContext, variant: str, order: list[str], colors: dict[str, str]) -> bytes:
    """Mean vehicle vs mean pedestrian delay per policy (95 % CIs); the diagonal is equal treatment."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    top = 0.0
    for p in order:
        v, q = ctx.stat(variant, p, "vehicle_delay_mean"), ctx.stat(variant, p, "pedestrian_delay_mean")
        if v is None or q is None:  # no results for this policy here
            continue
        jain = ctx.value(variant, p, "jain_modes")
        ax.errorbar(
            v.value, q.value,
            xerr=[[v.value - v.low], [v.high - v.value]],
            yerr=[[q.value - q.low], [q.high - q.value]],
            fmt="o", color=colors.get(p, "#555555"), capsize=2, label=f"{p} (Jain {jain:.2f})",
        )  # fmt: skip
        top = max(top, *(x for s in (v, q) for x in (s.value, s.high) if x == x))  # NaN: no interval
    ax.plot([0, top * 1.1], [0, top * 1.1], color="grey", linestyle="--", linewidth=0.8)
    ax.text(top * 0.55, top * 0.5, "equal delay", color="grey", fontsize=7, rotation=35)
    ax.set_xlim(0, top * 1.1)
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel("mean vehicle delay (s)")
    ax.set_ylabel("mean pedestrian delay (s)")
    ax.legend(fontsize=6.5, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return png_bytes(fig)


def _first_seed(traces: pd.DataFrame) -> pd.DataFrame:
    first = traces.groupby("policy")["train_seed"].transform("min")
    return traces[traces["train_seed"] == first]


def peak_series(
    frame: pd.DataFrame,
    policies: list[str],
    periods: list[Any],
    colors: dict[str, str],
    pedestrians: bool = True,
) -> bytes:
    """Queue, waiting pedestrians and the longest current pedestrian wait through the demand periods."""
    panels = [("queue_now", "halting vehicles")]
    if pedestrians:
        panels += [
            ("peds_waiting_now", "pedestrians waiting"),
            ("ped_longest_wait_now", "longest ped. wait\nnow (s), junction 1"),
        ]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.2, 2.2 + 1.35 * len(panels)), sharex=True)
    axes = np.atleast_1d(axes)
    for p in policies:
        rows = frame[frame["policy"] == p]
        for ax, (col, _) in zip(axes, panels, strict=True):
            ax.plot(rows["time_s"] / 60, rows[col], color=colors.get(p, "#555555"), linewidth=1.0, label=p)
    start = 0.0
    for k, per in enumerate(periods):
        for ax in axes:
            if k % 2 == 1:
                ax.axvspan(start / 60, (start + per.duration_s) / 60, color="#eeeeee", zorder=0)
        mid = (start + per.duration_s / 2) / 60
        axes[0].text(mid, 1.02, per.name, transform=axes[0].get_xaxis_transform(), ha="center", fontsize=7)
        start += per.duration_s
    for ax, (_, label) in zip(axes, panels, strict=True):
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("minutes")
    axes[0].legend(fontsize=7, ncol=3, loc="upper left")
    fig.tight_layout()
    return png_bytes(fig)


def phase_usage(frame: pd.DataFrame, policies: list[str], stage_names: list[str]) -> bytes:
    """Share of signal time in each green stage (and changing) over one held-out episode."""
    last = frame.sort_values("step").groupby("policy").tail(1).set_index("policy")
    cols = [f"stage_share_{k}" for k in range(len(stage_names))]
    fig, ax = plt.subplots(figsize=(7.2, 0.38 * len(policies) + 1.2))
    left = np.zeros(len(policies))
    cmap = plt.get_cmap("Set2")
    for k, (col, name) in enumerate(zip(cols, stage_names, strict=True)):
        share = np.array(
            [float(last.loc[p, col]) if p in last.index and col in last else 0.0 for p in policies]
        )
        ax.barh(policies, share * 100, left=left, color=cmap(k), label=name)
        left += share * 100
    ax.set_xlabel("% of signal time")
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.legend(fontsize=7, ncol=len(stage_names), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return png_bytes(fig)


def has_pedestrians(params: Any) -> bool:
    """Whether the scenario's network has signalised crossings (RESCO's networks have none)."""
    from fieldrl.domains.traffic.env import net_file_for, probe_layouts

    layouts, _ = probe_layouts(net_file_for(params), params.pedestrian_stage)
    return any(lay.crossings for lay in layouts)


def finding(ctx: ReportContext, variant: str, pedestrians: bool = True) -> str:
    """Plain words for a traffic engineer: best controllers vs fixed-time, per mode and at the worst."""
    evaluated = ctx.evaluated(variant)
    if not evaluated:
        return (
            "No controller has results at this site: every held-out episode failed (see 'Failed "
            "episodes' in the appendix)."
        )
    pols = set(evaluated)
    fixed = _fixed_label(ctx)
    best_h, best_l = ctx.best_heuristic(variant), ctx.best_learned(variant)
    n = ctx.cases(variant, evaluated[0])
    parts = [f"Over {n} held-out {'days of demand' if pedestrians else 'episodes'} at this site,"]

    def value(p: str, kpi: str) -> float:
        return ctx.value(variant, p, kpi)

    def describe(p: str) -> str:
        if not pedestrians:
            return (
                f"a mean vehicle delay of {value(p, 'vehicle_delay_mean'):.1f} s (95th percentile "
                f"{value(p, 'vehicle_delay_p95'):.0f} s)"
            )
        return (
            f"a mean person delay of {value(p, 'person_delay_mean'):.1f} s (drivers "
            f"{value(p, 'vehicle_delay_mean'):.1f} s, pedestrians "
            f"{value(p, 'pedestrian_delay_mean'):.1f} s; "
            f"longest pedestrian wait {value(p, 'pedestrian_max_wait'):.0f} s)"
        )

    if fixed and fixed in pols:
        parts.append(f"the current fixed-time plan gives {describe(fixed)}.")
    for p in dict.fromkeys([best_h, best_l]):
        if not p or p not in pols or p == fixed:
            continue
        kind = "best standard controller" if ctx.kind(p) == "heuristic" else "best learned controller"
        change = ""
        if fixed in pols:
            rel = 100 * (1 - value(p, "person_delay_mean") / value(fixed, "person_delay_mean"))
            change = f", {abs(rel):.0f} % {'less' if rel >= 0 else 'more'} than fixed-time"
            paired = ctx.pair(variant, p, fixed, "person_delay_mean")
            if paired is not None and not math.isnan(paired.relative_percent.low):
                r = paired.relative_percent  # no interval where there are too few held-out cases
                change += f" (paired 95 % CI {r.low:+.0f} % to {r.high:+.0f} %)"
        parts.append(f"The {kind}, {p}, gives {describe(p)}{change}.")
    if best_l and fixed and best_l in pols and fixed in pols and pedestrians:
        cut = 1 - value(best_l, "person_delay_mean") / value(fixed, "person_delay_mean")
        ped_ok = value(best_l, "pedestrian_max_wait") <= value(fixed, "pedestrian_max_wait")
        goal = cut >= 0.30 and ped_ok
        parts.append(
            f"Target (learned at least 30 % less person delay than fixed-time, pedestrians' longest wait no "
            f"worse): {'met' if goal else 'not met'} on average ({abs(100 * cut):.0f} % "
            f"{'less' if cut >= 0 else 'more'} delay; longest "
            f"pedestrian wait {'no worse' if ped_ok else 'worse'})."
        )
        if (
            best_h
            and best_h in pols
            and value(best_h, "person_delay_mean") < value(best_l, "person_delay_mean")
        ):
            parts.append(
                f"A standard controller ({best_h}) still beats the learned one here: retiming or actuating "
                "the signal captures most of the gain without a learned policy."
            )
    return " ".join(parts)


def _fairness_block(ctx: ReportContext, variant: str, order: list[str], colors: dict[str, str]) -> Any:
    return KeepTogether(
        [
            Paragraph("Who waits: fairness between modes", ctx.styles["Heading3"]),
            ctx.figure(
                f"traffic-fairness-{variant}",
                fairness_chart(ctx, variant, order, colors),
                width=0.75 * 17 * 28.35,
            ),
            ctx.para(
                "Each point is a policy's mean vehicle and pedestrian delay with 95 % bootstrap "
                "intervals. Points above the dashed line make pedestrians wait longer than drivers, "
                "points below it drivers. Jain's index drops either way: a controller that cuts "
                "pedestrian delay below drivers' scores lower without treating pedestrians worse.",
                "Small",
            ),
        ]
    )


def intergreen_note(params: Any) -> str:
    """How signals change stage, so a reader can tell that every controller paid the same."""
    p = params
    ours = (
        "Every stage change under fieldrl's own signal controller (the learned policies and the "
        "controllers fieldrl decides for: max-pressure, longest-queue-first, pedestrian-actuated, "
        f"Webster's timing on fieldrl's controller) runs {p.ped_clearance_s} s of pedestrian clearance "
        f"(where a crossing loses its green), {p.yellow_s} s of yellow and {p.all_red_s} s of all-red, "
        f"and keeps each green {p.min_green_s}-{p.max_green_s} s."
    )
    if not p.generated_programs:
        return ours + (
            " SUMO's programs (fixed-time, Webster, actuated) run the phases this network's own programs "
            "define, their clearances included."
        )
    built = (
        " SUMO's programs (fixed-time, Webster, actuated) were built for this network with the same "
        f"{p.all_red_s} s of all-red after each yellow"
    )
    if (p.yellow_s, p.ped_clearance_s) == NETCONVERT_YELLOW_CLEARANCE:
        return ours + built + ", so every controller changes stage on the same intergreen."
    yellow, clearance = NETCONVERT_YELLOW_CLEARANCE
    return (
        ours
        + built
        + f"; their yellows and pedestrian clearances follow netconvert's defaults ({yellow} s and "
        f"{clearance} s), so they may not match this scenario's."
    )


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("Vehicles and pedestrians", styles["Heading2"])]
    first = ctx.params(ctx.variants()[0])
    if has_pedestrians(first):
        intro = (
            "Delay is counted per person: a driver's delay is SUMO's time loss against driving at the "
            "speed limit plus any wait to enter the network; a pedestrian's delay is the time spent "
            "standing (almost all of it at signalised crossings). Every driver and every pedestrian "
            "counts once in the mean person delay. Fairness between modes is Jain's index of the two "
            "modes' mean delays (1 = both modes wait equally long on average, 0.5 = one mode carries all "
            "the delay). The longest pedestrian wait is the longest time any one pedestrian stood still "
            "in the episode; it can exceed a signal cycle, because SUMO's pedestrians do not step onto a "
            "green crossing while turning vehicles (which turn permissively across it) are on it, so at a "
            "busy junction some miss a whole green."
        )
    else:
        intro = (
            "This network has no signalised pedestrian crossings: a driver's delay is SUMO's time loss "
            "against driving at the speed limit plus any wait to enter the network; pedestrian figures "
            "are zero and the pedestrian charts are left out."
        )
    story.append(ctx.para(intro))
    story.append(ctx.para(intergreen_note(first)))
    if advised := ctx.learned_setting("advice"):
        story.append(
            ctx.para(
                f"{advised}: at every decision the policy also sees which stage Webster's timing "
                "(the Webster program's greens, run on fieldrl's own signal controller with its clearances) "
                "would ask for at that junction now, and may follow it or not. A policy that always follows "
                "it runs Webster's timing; what it adds is only where it chose otherwise."
            )
        )
    order = ctx.policies()
    colors = _palette(order)
    for variant in ctx.variants():
        params = ctx.params(variant)
        peds = has_pedestrians(params)
        heading = [] if variant == "default" else [Paragraph(f"Setting {variant}", styles["Heading3"])]
        story.append(Paragraph("Finding for the traffic engineer", styles["Heading3"]))
        story.append(ctx.para(finding(ctx, variant, peds), "Finding"))
        if not ctx.evaluated(variant):  # every episode failed: no numbers to chart
            continue
        png = delay_boxes(ctx.results, variant, order, colors, peds)
        if png is not None:
            story.append(
                KeepTogether(
                    [
                        *heading,
                        ctx.figure(f"traffic-delays-{variant}", png),
                        ctx.para(
                            "Mean delay of each held-out day by mode (boxes: spread over days and training "
                            "seeds) and the 95th-percentile delay (black tick, averaged over days).",
                            "Small",
                        ),
                    ]
                )
            )
        if peds:
            story.append(_fairness_block(ctx, variant, order, colors))
        if ctx.traces.empty:
            continue
        traces = _first_seed(ctx.traces[ctx.traces["variant"] == variant])
        fixed = _fixed_label(ctx)
        shown = [
            p for p in dict.fromkeys([fixed, ctx.best_heuristic(variant), ctx.best_learned(variant)]) if p
        ]
        shown = [p for p in shown if p in set(traces["policy"])]
        if shown and "time_s" in traces:
            story.append(
                KeepTogether(
                    [
                        Paragraph(
                            "Through the peak: queues and waits over one held-out day", styles["Heading3"]
                        ),
                        ctx.figure(
                            f"traffic-peak-{variant}",
                            peak_series(traces, shown, params.periods, colors, peds),
                        ),
                        ctx.para(
                            "Fixed-time, the best standard and the best learned controller on the first "
                            "held-out day (same demand for all), every 5 s decision: vehicles halting on all "
                            + (
                                "approaches, pedestrians waiting at crossings, and the longest current "
                                "pedestrian wait at the first junction."
                                if peds
                                else "approaches."
                            ),
                            "Small",
                        ),
                    ]
                )
            )
        n_cols = len([c for c in traces.columns if c.startswith("stage_share_")])
        if n_cols:
            names = [f"green stage {k + 1}" for k in range(n_cols - 1)] + ["changing"]
            if params.pedestrian_stage and peds and n_cols >= 2:
                names[n_cols - 2] = "walk-only"
            policies = [p for p in order if p in set(traces["policy"])]
            story.append(
                KeepTogether(
                    [
                        Paragraph("Phase usage", styles["Heading3"]),
                        ctx.figure(f"traffic-phases-{variant}", phase_usage(traces, policies, names)),
                        ctx.para(
                            (
                                "Share of signal time (all junctions) in each green stage, in the exclusive "
                                "pedestrian stage and changing (pedestrian clearance, yellow, all-red) over "
                                "the first held-out day. SUMO's programs never use the walk-only stage."
                            )
                            if peds
                            else "Share of signal time in each green stage and changing (yellow, all-red) "
                            "over the first held-out day.",
                            "Small",
                        ),
                    ]
                )
            )
    return story
