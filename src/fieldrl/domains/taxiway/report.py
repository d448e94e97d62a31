"""The taxiway pages of the report: airport map with taxi paths and conflicts, KPIs by density, findings.

Everything comes from the run's traces and summary; nothing is simulated here (the layout is
read to draw the map).
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph  # noqa: E402

from fieldrl.domains.taxiway.env import load_params_layout  # noqa: E402
from fieldrl.reports.figures import png_bytes  # noqa: E402
from fieldrl.reports.findings import fmt  # noqa: E402

KIND_STYLE = {
    "separation": ("o", "#d62728", "separation"),
    "head_on": ("X", "#9467bd", "head-on"),
    "runway": ("^", "#ff7f0e", "runway incursion"),
}
CHART_KPIS = ("conflicts_per_100", "taxi_time_min", "throughput_per_hour", "decision_ms")


def _first_seed(traces: pd.DataFrame) -> pd.DataFrame:
    first = traces.groupby("policy")["train_seed"].transform("min")
    return traces[traces["train_seed"] == first]


def _draw_layout(ax: Any, layout: Any) -> None:
    xy = {n.id: (n.x, n.y) for n in layout.nodes}
    for r in layout.runways:
        ends = r.get("ends")
        if ends:
            (x0, y0), (x1, y1) = ends
            ax.plot([x0, x1], [y0, y1], color="#555555", linewidth=5, solid_capstyle="butt", zorder=1)
            ax.text(x0, y0 + 25, str(r["id"]), fontsize=6, color="#333333")
    for e in layout.edges:
        (x0, y0), (x1, y1) = xy[e.u], xy[e.v]
        ax.plot([x0, x1], [y0, y1], color="#bbbbbb", linewidth=1.0, zorder=2)
    stands = np.array([(n.x, n.y) for n in layout.nodes if n.kind == "stand"])
    ax.scatter(stands[:, 0], stands[:, 1], s=6, marker="s", color="#888888", zorder=3)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def map_figure(frame: pd.DataFrame, layout: Any, policies: list[str]) -> bytes | None:
    """One panel per policy: taxi paths of the first held-out episode, conflicts of all held-out episodes."""
    policies = [p for p in policies if p in set(frame["policy"])]
    if not policies or "kind" not in frame:
        return None
    ncols = min(2, len(policies))
    nrows = int(np.ceil(len(policies) / ncols))
    xs = np.array([n.x for n in layout.nodes])
    ys = np.array([n.y for n in layout.nodes])
    aspect = (np.ptp(ys) + 200) / (np.ptp(xs) + 200)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.2, nrows * (3.6 * aspect + 0.45) + 0.3))
    axes = np.atleast_1d(axes).reshape(-1)
    cmap = plt.get_cmap("tab20")
    for ax, policy in zip(axes, policies, strict=False):
        _draw_layout(ax, layout)
        rows = frame[frame["policy"] == policy]
        paths = rows[rows["kind"] == "aircraft"].sort_values(["slot", "step"])
        for slot, grp in paths.groupby("slot"):
            x, y, step = grp["x"].to_numpy(), grp["y"].to_numpy(), grp["step"].to_numpy()
            jump = np.hypot(np.diff(x), np.diff(y)) > 200
            gap = np.diff(step) > 1
            breaks = np.flatnonzero(jump | gap) + 1
            for seg_x, seg_y in zip(np.split(x, breaks), np.split(y, breaks), strict=True):
                ax.plot(seg_x, seg_y, color=cmap(int(slot) % 20), linewidth=1.2, alpha=0.7, zorder=4)
        events = rows[rows["kind"].isin(list(KIND_STYLE))]
        counts = []
        for kind, (marker, color, label) in KIND_STYLE.items():
            ev = events[events["kind"] == kind]
            if len(ev):
                ax.scatter(
                    ev["x"],
                    ev["y"],
                    marker=marker,
                    s=22,
                    color=color,
                    edgecolor="black",
                    linewidth=0.3,
                    zorder=5,
                    label=label,
                )
            counts.append(f"{len(ev)} {label}")
        ax.set_title(f"{policy}\n" + ", ".join(counts), fontsize=7)
    for ax in axes[len(policies) :]:
        ax.axis("off")
    handles = [
        plt.Line2D([], [], marker=m, color=c, linestyle="", label=lab) for m, c, lab in KIND_STYLE.values()
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return png_bytes(fig)


def kpi_chart(ctx: Any, policies: list[str]) -> bytes | None:
    """Mean KPI with 95 % bootstrap CI per policy, one group of bars per variant (density)."""
    variants = list(ctx.scenario.variant_names)
    kpis = [ctx.domain.kpi(k) for k in CHART_KPIS]
    fig, axes = plt.subplots(2, 2, figsize=(7.2, 5.4))
    width = 0.8 / max(len(policies), 1)
    palette = plt.get_cmap("tab10")
    for ax, kpi in zip(axes.reshape(-1), kpis, strict=True):
        for j, policy in enumerate(policies):
            vals, lows, highs = [], [], []
            for v in variants:
                entry = ctx.summary["variants"][v]["policies"].get(policy, {}).get(kpi.name, {}).get("mean")
                if entry is None:
                    vals.append(np.nan)
                    lows.append(np.nan)
                    highs.append(np.nan)
                    continue
                vals.append(entry["value"])
                lows.append(entry["low"])
                highs.append(entry["high"])
            x = np.arange(len(variants)) + (j - (len(policies) - 1) / 2) * width
            vals_a, lows_a, highs_a = np.array(vals), np.array(lows), np.array(highs)
            err = np.vstack([np.clip(vals_a - lows_a, 0, None), np.clip(highs_a - vals_a, 0, None)])
            ax.bar(
                x,
                vals_a,
                width,
                yerr=np.nan_to_num(err),
                capsize=2,
                label=policy,
                color=palette(j % 10),
                edgecolor="black",
                linewidth=0.3,
            )
        ax.set_xticks(np.arange(len(variants)))
        ax.set_xticklabels(variants, fontsize=7)
        ax.set_title(f"{kpi.label} ({kpi.unit})" if kpi.unit else kpi.label, fontsize=8)
        if kpi.name == "decision_ms":
            ax.set_yscale("log")
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return png_bytes(fig)


def _value(ctx: Any, variant: str, policy: str, kpi: str) -> tuple[float, float, float] | None:
    entry = ctx.summary["variants"][variant]["policies"].get(policy, {}).get(kpi, {}).get("mean")
    if entry is None:
        return None
    return entry["value"], entry["low"], entry["high"]


def manager_text(ctx: Any, variant: str, policies: list[str], planner: str | None) -> str:
    """The findings in plain words for an airport operations manager."""
    parts = []
    conf = {p: _value(ctx, variant, p, "conflicts_per_100") for p in policies}
    conf = {p: v for p, v in conf.items() if v is not None}
    if not conf:
        return ""
    safest = min(conf, key=lambda p: conf[p][0])
    parts.append(
        "Conflicts per 100 movements (two aircraft closer than the separation minimum, meeting head-on on "
        "a taxiway, or an aircraft on a runway that is in use), mean with 95 % confidence interval: "
        + "; ".join(f"{p} {fmt(v)} [{fmt(lo)}, {fmt(hi)}]" for p, (v, lo, hi) in conf.items())
        + "."
    )
    taxi = {p: _value(ctx, variant, p, "taxi_time_min") for p in policies}
    done = {p: _value(ctx, variant, p, "completed_pct") for p in policies}
    parts.append(
        "Mean taxi time (pushback request to take-off roll, or runway exit to stand) of completed movements: "
        + "; ".join(f"{p} {fmt(v[0])} min" for p, v in taxi.items() if v is not None)
        + ". Movements completed before the end of the period: "
        + "; ".join(f"{p} {fmt(v[0])} %" for p, v in done.items() if v is not None)
        + " (a controller that lets aircraft block each other strands traffic; its taxi times only count "
        "the aircraft that got through)."
    )
    if planner is not None and planner in conf:
        pv = conf[planner][0]
        pt = taxi.get(planner)
        learned = [e.label for e in ctx.scenario.policies.learned if e.label in conf]
        for lp in learned:
            lt = taxi.get(lp)
            if pt is None or lt is None:
                continue
            gap = 100.0 * (lt[0] / pt[0] - 1.0) if pt[0] else float("nan")
            ld, pd_ = done.get(lp), done.get(planner)
            all_through = ld is None or pd_ is None or ld[0] >= pd_[0] - 0.5
            verdict = "meets" if conf[lp][0] <= pv and abs(gap) <= 5.0 and all_through else "does not meet"
            parts.append(
                f"Against the planning baseline ({planner}): {lp} has {fmt(conf[lp][0])} conflicts per 100 "
                f"movements vs {fmt(pv)}, and a mean taxi time {fmt(abs(gap))} % "
                f"{'longer' if gap >= 0 else 'shorter'}"
                + ("" if all_through else f", but completes only {fmt(ld[0])} % of movements vs ")
                + ("" if all_through else f"{fmt(pd_[0])} %")
                + f"; it {verdict} the target of no more conflicts, taxi time within 5 % and every "
                "movement completed."
            )
    parts.append(
        f"For operations: the safest controller here was {safest}. "
        + (
            f"{planner} plans every taxi route in space and time as the aircraft calls for pushback or "
            "vacates the runway, so no two plans meet; it is the reference a learned controller must match "
            "before it is worth trialling. "
            if planner is not None
            else ""
        )
        + "These are simulated schematic airports, not a safety case."
    )
    return " ".join(parts)


def report_section(ctx: Any) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("The airport, taxi paths and conflicts", styles["Heading2"])]
    order = [p["name"] for p in ctx.summary["policies"]]
    planner = next((e.label for e in ctx.scenario.policies.heuristics if e.use == "prioritized"), None)
    traces = ctx.traces
    for variant in ctx.scenario.variant_names:
        params = ctx.domain.params_model.model_validate(ctx.scenario.variant_params(variant))
        layout = load_params_layout(params.layout, params.layout_file)
        heading = [] if variant == "default" else [Paragraph(f"Density {variant}", styles["Heading3"])]
        story += heading
        story.append(ctx.para(manager_text(ctx, variant, order, planner)))
        frame = traces[traces["variant"] == variant] if not traces.empty else pd.DataFrame()
        if frame.empty or "kind" not in frame:
            continue
        frame = _first_seed(frame)
        png = map_figure(frame, layout, order)
        if png is not None:
            story.append(
                KeepTogether(
                    [
                        ctx.para(
                            f"{layout.name}, {params.rate():g} movements per hour. Coloured lines: the taxi "
                            "paths of the first held-out period (one colour per agent slot); markers: where "
                            "conflicts happened in all held-out periods evaluated together with it. Grey "
                            "squares are stands, dark bars runways. " + layout.source + "."
                        ),
                        ctx.figure(f"taxiway-map-{variant}", png),
                    ]
                )
            )
    chart = kpi_chart(ctx, order)
    if chart is not None:
        story.append(Paragraph("Key figures by traffic density", styles["Heading3"]))
        story.append(
            ctx.para(
                "Mean over held-out periods with 95 % bootstrap confidence intervals. Computation per "
                "decision is the controller's wall-clock time per aircraft per 5-second step on this machine "
                "(log scale)."
            )
        )
        story.append(ctx.figure("taxiway-kpis", chart))
    return story
