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

from fieldrl.domains.taxiway import metrics  # noqa: E402
from fieldrl.domains.taxiway.env import load_params_layout  # noqa: E402
from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402
from fieldrl.reportkit.numbers import fmt, with_range  # noqa: E402
from fieldrl.results import Interval  # noqa: E402

KIND_STYLE = {
    "separation": ("o", "#d62728", "separation"),
    "head_on": ("X", "#9467bd", "head-on"),
    "runway": ("^", "#ff7f0e", "runway incursion"),
}
STRANDED_STYLE = ("s", "black", "stuck at the end (gridlock)")
#: KPI -> chart title (plain words; units in the title once)
CHART_KPIS = {
    "conflicts_per_100": "Conflicts per 100 movements",
    "completed_pct": "Movements completed in the period (%)",
    "taxi_time_min": "Mean taxi time of completed movements (min)",
    "throughput_per_hour": "Movements completed per hour",
    "crossing_wait_s": "Wait in front of runway crossings (s per movement)",
    "decision_ms": "Computation per aircraft decision (ms, log scale)",
}


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
        stuck = rows[rows["kind"] == "stranded"]
        if len(stuck):
            marker, color, label = STRANDED_STYLE
            ax.scatter(
                stuck["x"],
                stuck["y"],
                marker=marker,
                s=18,
                facecolor="none",
                edgecolor=color,
                linewidth=0.8,
                zorder=6,
            )
        counts.append(f"{len(stuck)} stuck at the end")
        ax.set_title(f"{policy}\n" + ", ".join(counts), fontsize=7)
    for ax in axes[len(policies) :]:
        ax.axis("off")
    handles = [
        plt.Line2D([], [], marker=m, color=c, linestyle="", label=lab) for m, c, lab in KIND_STYLE.values()
    ]
    m, c, lab = STRANDED_STYLE
    handles.append(plt.Line2D([], [], marker=m, markerfacecolor="none", color=c, linestyle="", label=lab))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return png_bytes(fig)


def kpi_chart(ctx: ReportContext, policies: list[str]) -> bytes | None:
    """Mean KPI with 95 % bootstrap CI per policy, one group of bars per variant (density)."""
    variants = ctx.variants()
    kpis = [ctx.kpi(k) for k in CHART_KPIS]
    labels = [_variant_label(ctx, v) for v in variants]
    fig, axes = plt.subplots(3, 2, figsize=(7.2, 7.6))
    width = 0.8 / max(len(policies), 1)
    palette = plt.get_cmap("tab10")
    for ax, kpi in zip(axes.reshape(-1), kpis, strict=True):
        means = [ctx.stat(v, p, kpi.name) for v in variants for p in policies]
        if all(m is None or not m.value for m in means):  # e.g. no runway crossings on the small airport
            ax.set_title(CHART_KPIS[kpi.name], fontsize=8)
            ax.text(0.5, 0.5, "zero for every controller", ha="center", va="center", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        for j, policy in enumerate(policies):
            vals, lows, highs = [], [], []
            for v in variants:
                entry = ctx.stat(v, policy, kpi.name)
                if entry is None:
                    vals.append(np.nan)
                    lows.append(np.nan)
                    highs.append(np.nan)
                    continue
                vals.append(entry.value)
                lows.append(entry.low)
                highs.append(entry.high)
            x = np.arange(len(variants)) + (j - (len(policies) - 1) / 2) * width
            vals_a, lows_a, highs_a = np.array(vals), np.array(lows), np.array(highs)
            err = np.vstack([np.clip(vals_a - lows_a, 0, None), np.clip(highs_a - vals_a, 0, None)])
            ax.bar(
                x,
                vals_a,
                width,
                yerr=np.nan_to_num(err).tolist(),  # a (2, 1) array warns in matplotlib
                capsize=2,
                label=policy,
                color=palette(j % 10),
                edgecolor="black",
                linewidth=0.3,
            )
        ax.set_xticks(np.arange(len(variants)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(CHART_KPIS[kpi.name], fontsize=8)
        if kpi.name == "decision_ms":
            ax.set_yscale("log")
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return png_bytes(fig)


def _variant_label(ctx: ReportContext, variant: str) -> str:
    params = ctx.params(variant)
    return f"{params.rate():g} movements/h" if variant == "default" else f"{variant}\n{params.rate():g}/h"


def manager_text(ctx: ReportContext, variant: str, policies: list[str], planner: str | None) -> list[str]:
    """The findings in plain words for an airport operations manager, one short paragraph each."""
    values: dict[str, dict[str, Interval]] = {
        kpi: {p: v for p in policies if (v := ctx.stat(variant, p, kpi)) is not None}
        for kpi in ("conflicts_per_100", "completed_pct", "taxi_time_min", "throughput_per_hour")
    }
    conf, done, taxi = values["conflicts_per_100"], values["completed_pct"], values["taxi_time_min"]
    if not conf:
        return []
    params = ctx.params(variant)
    near_m = (params.separation_cells - 1) * params.cell_m
    few = ctx.too_few_cases(variant)
    parts = [
        "Safety, conflicts per 100 movements (two aircraft within "
        f"{near_m:g} m of each other along the taxiways, two aircraft nose to nose in one taxiway segment, "
        "or an aircraft on a runway in use; mean over the test periods"
        + ("" if few else " with its 95 % confidence interval")
        + "): "
        + "; ".join(f"{p} {with_range(v)}" for p, v in conf.items())
        + ".",
        "Getting traffic through, share of the period's movements completed before it ended: "
        + "; ".join(f"{p} {with_range(v, ' %')}" for p, v in done.items())
        + ". A movement not completed was stuck on the taxiways (gridlock: aircraft waiting for each "
        "other for good; black squares on the map), or could not push back or vacate the runway "
        "because the taxiways were full.",
        "Mean taxi time of the completed movements (pushback request to take-off roll, or runway exit "
        "to stand): "
        + "; ".join(f"{p} {with_range(v, ' min')}" for p, v in taxi.items())
        + ". A controller that strands traffic can show short taxi times: only the aircraft that got "
        "through are counted.",
    ]
    if planner is not None and planner in conf:
        pv, pt, pd_ = conf[planner].value, taxi.get(planner), done.get(planner)
        for lp in [p.label for p in ctx.learned() if p.label in conf]:
            lt, ld = taxi.get(lp), done.get(lp)
            if pt is None or lt is None or ld is None or pd_ is None:
                continue
            gap = 100.0 * (lt.value / pt.value - 1.0) if pt.value else float("nan")
            all_through = ld.value >= pd_.value - 0.5
            ok = conf[lp].value <= pv and abs(gap) <= 5.0 and all_through
            parts.append(
                f"Target check for {lp} against {planner}: {fmt(conf[lp].value)} vs {fmt(pv)} conflicts per "
                f"100 movements, {fmt(ld.value)} % vs {fmt(pd_.value)} % of movements completed, taxi time "
                f"{fmt(abs(gap))} % {'longer' if gap >= 0 else 'shorter'}. It "
                + ("meets" if ok else "does not meet")
                + " the target (no more conflicts, every movement through, taxi time within 5 %)."
            )
    parts += shield_text(ctx, variant, [p for p in policies if p in conf], planner, conf, done)
    safest = min(conf, key=lambda p: (conf[p].value, -(done[p].value if p in done else 0.0)))
    parts.append(
        f"For operations: the safest controller that also got the traffic through here was {safest}. "
        + (
            f"{planner} plans each aircraft's route in space and time when it calls for pushback or "
            "vacates the runway, around the routes already planned, so no two plans meet; a learned "
            "controller must match it before it is worth a trial. "
            if planner is not None
            else ""
        )
        + "These are simulated, schematic airports, not a safety case."
    )
    return parts


def _mean_ci(values: np.ndarray, samples: int = 2000) -> tuple[float, float, float]:
    """Mean over the test periods with a 95 % percentile-bootstrap interval (seeded: reports repeat)."""
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(samples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def shield_text(
    ctx: ReportContext,
    variant: str,
    policies: list[str],
    planner: str | None,
    conf: dict[str, Interval],
    done: dict[str, Interval],
) -> list[str]:
    """For each shielded learned policy: how often the shield overrode it, and the issue's target check."""
    rows = ctx.results[ctx.results["variant"] == variant] if not ctx.results.empty else ctx.results
    parts = []
    for policy in policies:
        mine = rows[rows["policy"] == policy] if not rows.empty else rows
        counts = {
            key: mine.loc[mine["metric"] == key, "value"].to_numpy(dtype=float) for key in metrics.SHIELD_KEYS
        }
        if not all(len(v) and np.isfinite(v).all() for v in counts.values()):
            continue
        ov, uv, share = (_mean_ci(v) for v in counts.values())

        def shown(x: tuple[float, float, float], unit: str = "") -> str:
            return f"{fmt(x[0])}{unit} [{fmt(x[1])}, {fmt(x[2])}]"

        text = (
            f"{policy} acts through a runtime shield: before a move of the learned policy is made, the "
            "planner checks that a conflict-free route to the goal still starts with it, given every other "
            f"aircraft's reserved route. Per 100 movements the shield replaced {shown(ov)} learned moves it "
            "could not confirm as conflict-free, and took over "
            f"{shown(uv)} times from an aircraft the learned policy kept holding while a free route existed; "
            f"in all, {shown(share, ' %')} of the learned policy's decisions were overridden (mean over the "
            "test periods, 95 % interval). The fewer overrides, the more of the work the learned policy "
            "does on its own."
        )
        if planner is not None and planner in done and policy in done and policy in conf:
            gap = done[policy].value - done[planner].value
            ok = conf[policy].value == 0.0 and gap >= -5.0
            text += (
                f" Target check (no conflicts; movements completed at most 5 points below {planner}): "
                f"{fmt(conf[policy].value)} conflicts per 100 movements, {fmt(done[policy].value)} % vs "
                f"{fmt(done[planner].value)} % completed; it {'meets' if ok else 'does not meet'} the target."
            )
        parts.append(text)
    return parts


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("The airport, taxi paths and conflicts", styles["Heading2"])]
    order = ctx.policies()
    planner = ctx.heuristic_label("prioritized")
    traces = ctx.traces
    if advised := ctx.learned_setting("advice"):
        story.append(
            ctx.para(
                f"{advised}: at every step each aircraft also sees the move prioritized planning would "
                "make for it now (planned around the moves actually made), and may follow it or not. A "
                "policy that always follows it taxis as prioritized planning does; what it adds is only "
                "where it chose otherwise."
            )
        )
    for variant in ctx.variants():
        params = ctx.params(variant)
        layout = load_params_layout(params.layout, params.layout_file)
        heading = [] if variant == "default" else [Paragraph(f"Density {variant}", styles["Heading3"])]
        story += heading
        story += [ctx.para(text) for text in manager_text(ctx, variant, order, planner)]
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
                            "routes flown in the first test period; red, purple and orange markers: where "
                            "conflicts happened in all test periods; black squares: where aircraft were "
                            "still stuck when a test period ended. Grey squares are stands, dark bars "
                            "runways. " + layout.source + "."
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
                "Mean over the test periods (traffic not used in training) with 95 % bootstrap confidence "
                "intervals. Computation per decision is the controller's time per aircraft per 5-second "
                "step on this (shared) computer, log scale."
            )
        )
        story.append(ctx.figure("taxiway-kpis", chart))
    return story
