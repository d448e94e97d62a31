"""The UAV pages of the report: map, policies side by side across pipeline variants, trade-off, ablation.

A scenario's variants switch the pipeline (``pipeline: false`` = MARL baseline, ``rectifier: none``
= ablation) and the load; the learned policy of each variant is a different system. These pages put
them in one table: heuristics (which do not depend on the pipeline switches) from the variant with
the full pipeline, the learned policy from every variant. Numbers are read from ``summary.json``
(means with bootstrap CIs over held-out seeds); the map comes from the traced held-out episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from reportlab.lib import colors  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph, Table, TableStyle  # noqa: E402

from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402
from fieldrl.reportkit.numbers import fmt, with_range  # noqa: E402
from fieldrl.results import Interval  # noqa: E402


@dataclass(frozen=True)
class Row:
    label: str
    variant: str
    policy: str
    kind: str  # heuristic | fixed | pipeline | ablation | marl
    independent: bool = False  # learned: every UAV agent has its own networks


def independent_learners(algorithm: str, params: dict[str, Any]) -> bool:
    """Whether ``algorithm`` trains one network per UAV here (independent-ppo and agent ids on)."""
    return algorithm == "independent-ppo" and bool(params.get("agent_ids", False))


def system_of(params: dict[str, Any]) -> str:
    if params.get("pipeline", True) is False:
        return "marl"
    return "ablation" if params.get("rectifier", "rule") == "none" else "pipeline"


SYSTEM_LABEL = {"pipeline": "full pipeline", "ablation": "pipeline, no rectifier", "marl": "MARL baseline"}


def rows_by_load(ctx: ReportContext) -> dict[float, list[Row]]:
    """Comparable rows grouped by load level."""
    groups: dict[float, list[Row]] = {}
    heuristics = [
        (h.label, "fixed" if h.method == "pipeline-fixed" else "heuristic") for h in ctx.heuristics()
    ]
    learned = ctx.learned()
    for variant in ctx.variants():
        if not ctx.has_results(variant):
            continue
        params = ctx.variant_params(variant)
        load = float(params.get("load", 1.0))
        system = system_of(params)
        rows = groups.setdefault(load, [])
        if system == "pipeline" and not any(r.kind in ("heuristic", "fixed") for r in rows):
            rows.extend(Row(h, variant, h, kind) for h, kind in heuristics)
        for entry in learned:
            if entry.label not in ctx.evaluated(variant):  # an entry limited to other settings
                continue
            own = independent_learners(entry.method, params)
            label = f"{entry.label} ({SYSTEM_LABEL[system]}{', independent learners' if own else ''})"
            rows.append(Row(label, variant, entry.label, system, own))
    return groups


def stat(ctx: ReportContext, row: Row, kpi: str) -> Interval | None:
    return ctx.stat(row.variant, row.policy, kpi)


def _ci(value: Interval | None, digits: str = ".3g") -> str:
    if value is None or value.value != value.value:
        return "n/a"
    if value.low != value.low:
        return f"{value.value:{digits}}"
    return f"{value.value:{digits}} [{value.low:{digits}}, {value.high:{digits}}]"


def bars_figure(ctx: ReportContext, rows: list[Row]) -> bytes:
    """Success rate and cost by policy, with 95 % CIs."""
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 0.38 * len(rows) + 1.4), sharey=True)
    y = np.arange(len(rows))
    palette = {
        "heuristic": "#999999",
        "fixed": "#6a51a3",
        "pipeline": "#1f77b4",
        "ablation": "#9ecae1",
        "marl": "#ff7f0e",
    }
    for ax, (kpi, label) in zip(
        axes, [("success_rate", "task success rate (%)"), ("cost", "system cost per slot")], strict=True
    ):
        vals = [stat(ctx, r, kpi) for r in rows]
        mean = np.array([v.value if v else np.nan for v in vals])
        low = np.array([v.low if v else np.nan for v in vals])
        high = np.array([v.high if v else np.nan for v in vals])
        err = np.vstack([np.nan_to_num(mean - low), np.nan_to_num(high - mean)])
        ax.barh(y, mean, xerr=err, color=[palette[r.kind] for r in rows], capsize=3)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, [r.label for r in rows], fontsize=8)
    axes[0].invert_yaxis()
    fig.tight_layout()
    return png_bytes(fig)


def tradeoff_figure(ctx: ReportContext, rows: list[Row]) -> bytes:
    """Mean delay against energy per slot, one point per policy, with CIs on both axes."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, row in enumerate(rows):
        d, e = stat(ctx, row, "mean_delay_ms"), stat(ctx, row, "energy_j")
        if d is None or e is None or not np.isfinite([d.value, e.value]).all():
            continue
        ax.errorbar(
            e.value,
            d.value,
            xerr=[[max(e.value - e.low, 0)], [max(e.high - e.value, 0)]],
            yerr=[[max(d.value - d.low, 0)], [max(d.high - d.value, 0)]],
            fmt="o" if row.kind in ("heuristic", "fixed") else "s",
            color=cmap(i % 10),
            label=row.label,
            capsize=3,
        )
    ax.set_xlabel("energy per slot (J: propulsion + computing + radio)")
    ax.set_ylabel("mean delay of completed tasks (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return png_bytes(fig)


def map_figure(
    traces: pd.DataFrame, panels: list[tuple[str, str, str]], area: float, spacing: float, bs: tuple
) -> bytes | None:
    """Vehicle density and UAV paths over one held-out episode, a panel per (title, variant, policy)."""
    frames = []
    for title, variant, policy in panels:
        rows = traces[(traces["variant"] == variant) & (traces["policy"] == policy)]
        if not rows.empty:
            first = rows["train_seed"].min()
            frames.append((title, rows[rows["train_seed"] == first].sort_values("slot")))
    if not frames:
        return None
    fig, axes = plt.subplots(1, len(frames), figsize=(4.1 * len(frames), 4.1), squeeze=False)
    for ax, (title, rows) in zip(axes[0], frames, strict=True):
        vx = rows[[c for c in rows.columns if c.startswith("veh") and c.endswith("_x")]].to_numpy().ravel()
        vy = rows[[c for c in rows.columns if c.startswith("veh") and c.endswith("_y")]].to_numpy().ravel()
        ok = np.isfinite(vx) & np.isfinite(vy)
        hist, xe, ye = np.histogram2d(vx[ok], vy[ok], bins=20, range=[[0, area], [0, area]])
        ax.imshow(hist.T, origin="lower", extent=[0, area, 0, area], cmap="Greys", alpha=0.8)
        for line in np.arange(0.0, area + 1e-9, spacing):
            ax.axhline(line, color="#cccccc", linewidth=0.5, zorder=0)
            ax.axvline(line, color="#cccccc", linewidth=0.5, zorder=0)
        ax.plot(*bs, marker="^", color="black", markersize=9, label="base station")
        n_uav = len([c for c in rows.columns if c.startswith("uav") and c.endswith("_x")])
        for u in range(n_uav):
            x, y, z = rows[f"uav{u}_x"].to_numpy(), rows[f"uav{u}_y"].to_numpy(), rows[f"uav{u}_z"].to_numpy()
            ax.plot(x, y, linewidth=0.8, color=plt.get_cmap("tab10")(u))
            sc = ax.scatter(x, y, c=rows["slot"], cmap="viridis", s=8 + 0.1 * (z - z.min()), zorder=3)
            ax.annotate(f"UAV {u} ({z[-1]:.0f} m)", (x[-1], y[-1]), fontsize=7)
        ax.set_xlim(0, area)
        ax.set_ylim(0, area)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("x (m)")
        ax.set_aspect("equal")
    axes[0][0].set_ylabel("y (m)")
    fig.colorbar(sc, ax=axes[0].tolist(), label="slot", shrink=0.8)
    return png_bytes(fig)


def ablation_table(ctx: ReportContext, rows: list[Row]) -> Table:
    cell = ctx.styles["Cell"]
    header = [
        "system",
        "success rate (%)",
        "cost per slot",
        "mean delay (ms)",
        "energy (J/slot)",
        "SOCP ms/UAV",
        "LP ms/slot",
    ]
    data = [[Paragraph(h, cell) for h in header]]
    for row in rows:
        data.append(
            [Paragraph(row.label, cell)]
            + [
                Paragraph(_ci(stat(ctx, row, k), d), cell)
                for k, d in [
                    ("success_rate", ".1f"),
                    ("cost", ".3g"),
                    ("mean_delay_ms", ".0f"),
                    ("energy_j", ".0f"),
                    ("socp_ms", ".2f"),
                    ("lp_ms", ".2f"),
                ]
            ]
        )
    table = Table(data, repeatRows=1, colWidths=[95, 70, 62, 62, 62, 50, 50])
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eeeeee")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    return table


def finding(ctx: ReportContext, rows: list[Row]) -> str:
    """Plain words for a network operator: the full pipeline against the MARL baseline and the best rule."""
    full = next((r for r in rows if r.kind == "pipeline"), None)
    if full is None:
        return "This run has no full-pipeline learned policy, so there is no finding about it."
    f_s, f_c = stat(ctx, full, "success_rate"), stat(ctx, full, "cost")
    rules = [r for r in rows if r.kind == "heuristic"]
    parts = [
        f"With the full pipeline (SOCP flight paths, learned allocation, rectifier, LP offloading) "
        f"{with_range(f_s, ' %')} of tasks met their deadline at a cost of {fmt(f_c.value)} per slot."
    ]
    few = ctx.too_few_cases(full.variant)  # no intervals: nothing "clearly" so
    if rules:
        best = max(rules, key=lambda r: stat(ctx, r, "success_rate").value)
        b_s, b_c = stat(ctx, best, "success_rate"), stat(ctx, best, "cost")
        if few:
            verdict = "a share that so few held-out cases cannot compare with it"
        elif f_s.overlaps(b_s):
            verdict = "a similar share of tasks (the confidence intervals overlap)"
        else:
            verdict = "clearly more tasks" if f_s.value > b_s.value else "clearly fewer tasks"
        parts.append(
            f"The best fixed rule, '{best.label}', completed {fmt(b_s.value)} % "
            f"(cost {fmt(b_c.value)}): the pipeline completed {verdict}."
        )
    marl = next((r for r in rows if r.kind == "marl"), None)
    if marl is not None:
        m_s, m_c = stat(ctx, marl, "success_rate"), stat(ctx, marl, "cost")
        who = (
            "each UAV an independent learner with its own networks"
            if marl.independent
            else "one shared network"
        )
        parts.append(
            f"Reinforcement learning alone (the MARL baseline: {who}; agents also steer the UAVs and pick "
            f"offloading fractions, no optimisation) completed {fmt(m_s.value)} % at a cost of "
            f"{fmt(m_c.value)}."
        )
    abl = next((r for r in rows if r.kind == "ablation"), None)
    if abl is not None:
        a_s = stat(ctx, abl, "success_rate")
        parts.append(f"Without the rectifier the pipeline completed {fmt(a_s.value)} %.")
    fixed = next((r for r in rows if r.kind == "fixed"), None)
    if fixed is not None:
        x_s = stat(ctx, fixed, "success_rate")
        if few:
            word = "cannot be compared, on so few held-out cases,"
        elif x_s.overlaps(f_s):
            word = "did not measurably change the success rate"
        else:
            word = "raised the success rate" if f_s.value > x_s.value else "lowered the success rate"
        paired = ""
        paired_ok = (
            ctx.best_heuristic(full.variant) == fixed.policy and ctx.best_learned(full.variant) == full.policy
        )
        comparison = ctx.comparison(full.variant, "success_rate")
        if paired_ok and not few and comparison is not None:
            d = comparison.difference
            paired = (
                f"; paired on the same held-out cases the difference is {d.value:+.1f} points "
                f"(95 % CI {d.low:+.1f} to {d.high:+.1f})"
            )
            word = "raised the success rate" if d.low > 0 else word
            word = "lowered the success rate" if d.high < 0 else word
        against = "with" if few else "compared with"
        parts.append(
            f"Inside the same pipeline, the learned allocation {word} {against} a fixed admission count "
            f"('{fixed.label}': {fmt(x_s.value)} %{paired})."
        )
    lp, socp = stat(ctx, full, "lp_ms"), stat(ctx, full, "socp_ms")
    parts.append(
        f"For an operator: the optimisation stages cost {fmt(lp.value)} ms of LP time per slot and "
        f"{fmt(socp.value)} ms of SOCP time per UAV on this machine, small against a 1 s slot. "
        "These are simulations of a model city with mean path losses, not field data."
    )
    return " ".join(parts)


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("UAV offloading: the systems side by side", styles["Heading2"])]
    groups = rows_by_load(ctx)
    learners = (
        " ('independent learners': each UAV agent has its own networks, trained on its own samples; "
        "otherwise one network acts for every UAV)"
        if any(r.independent for rows in groups.values() for r in rows)
        else " (one network shared by every UAV agent)"
    )
    story.append(
        ctx.para(
            "Each held-out episode is the same city traffic and task stream for every system. 'Full "
            "pipeline' flies the UAVs by SOCP, lets the learned policy choose how many vehicles each UAV "
            "serves and how it splits its band and CPU, repairs failed and over-served tasks with the "
            "rule-based rectifier and sets offloading fractions by LP; 'MARL baseline' is reinforcement "
            "learning alone, the agents steering the UAVs and choosing offloading fractions themselves"
            f"{learners}; "
            "the rules (grey) fly the SOCP paths with fixed assignment rules, and 'pipeline fixed' (purple) "
            "is the full pipeline with a fixed admission count instead of DRL. Bars and brackets are means "
            "with 95 % bootstrap confidence intervals over held-out seeds."
        )
    )
    for load, rows in sorted(groups.items()):
        heading = f"Load x{load:g}" if len(groups) > 1 else "Success rate and cost"
        story.append(Paragraph(heading, styles["Heading3"]))
        story.append(ctx.figure(f"uav-bars-load{load:g}", bars_figure(ctx, rows)))
        story.append(Paragraph(f"Ablation and solver times (load x{load:g})", styles["Heading3"]))
        story.append(ablation_table(ctx, rows))
        story.append(ctx.para(finding(ctx, rows), "Finding"))
        story.append(
            KeepTogether(
                [
                    Paragraph(f"Delay and energy (load x{load:g})", styles["Heading3"]),
                    ctx.figure(f"uav-tradeoff-load{load:g}", tradeoff_figure(ctx, rows), width=360),
                    ctx.para(
                        "Energy is dominated by UAV propulsion (Zeng 2019 model: about 170 W hovering, "
                        "about 110 W "
                        "cruising at 20 m/s); computing and radio energy are a few joules per slot. "
                        "Systems whose "
                        "UAVs keep moving fast or do not climb use less energy.",
                        "Small",
                    ),
                ]
            )
        )
    if not ctx.traces.empty:
        rows = next(iter(groups.values()), [])
        panels = [(r.label, r.variant, r.policy) for r in rows if r.kind in ("pipeline", "marl")]
        params = ctx.variant_params(ctx.variants()[0])
        from fieldrl.simulators.uav.params import UavParams

        p = UavParams.model_validate(params)
        png = map_figure(ctx.traces, panels[:2], p.area_m, p.road_spacing_m, (p.bs_x_m, p.bs_y_m))
        if png is not None:
            story.append(
                KeepTogether(
                    [
                        Paragraph("Where the UAVs flew", styles["Heading3"]),
                        ctx.figure("uav-map", png),
                        ctx.para(
                            "One held-out episode: grey shading is vehicle density over the episode "
                            "(darker = more "
                            "vehicle-slots), thin lines are roads, the triangle is the base station; dots "
                            "are UAV "
                            "positions coloured by slot, labelled with the final altitude.",
                            "Small",
                        ),
                    ]
                )
            )
    return story
