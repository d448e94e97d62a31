"""The chemotherapy pages of the report: what a treatment looks like over 150 days."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from reportlab.platypus import KeepTogether, Paragraph  # noqa: E402

from fieldrl.reportkit.context import ReportContext  # noqa: E402
from fieldrl.reportkit.figures import png_bytes  # noqa: E402

DEATH_LINE = 70.0  # N < 0.7 N0 ends the episode


def course(frame: Any, policy: str) -> Any:
    """One treatment course of ``policy``: a learned policy's first training seed (traces hold one
    course per training seed; drawn together they would join day 150 back to day 0)."""
    rows = frame[frame["policy"] == policy]
    if "train_seed" in rows and not rows.empty:
        rows = rows[rows["train_seed"] == rows["train_seed"].min()]
    return rows


def trajectory_figure(traces: Any, variant: str, policies: list[str]) -> bytes | None:
    """Tumour, normal cells, immune cells, drug level and dose over the course, one line per policy."""
    frame = traces[(traces["variant"] == variant) & traces["policy"].isin(policies)]
    if frame.empty:
        return None
    panels = [
        ("tumour", "tumour\n(% of initial)"),
        ("normal", "normal cells\n(% of initial)"),
        ("immune", "immune cells\n(model units)"),
        ("drug", "drug level B\n(model units)"),
        ("dose", "dose\n(fraction of max)"),
    ]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 8.2), sharex=True)
    cmap = plt.get_cmap("tab10")
    for i, policy in enumerate(p for p in policies if p in set(frame["policy"])):
        rows = course(frame, policy)
        style = {"color": cmap(i % 10), "linewidth": 1.1, "label": policy}
        for ax, (column, _) in zip(axes, panels, strict=True):
            ax.plot(
                rows["day"], rows[column], drawstyle="steps-post" if column == "dose" else "default", **style
            )
    for ax, (_, label) in zip(axes, panels, strict=True):
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[1].axhline(DEATH_LINE, color="black", linestyle="--", linewidth=0.8)
    axes[1].text(0, DEATH_LINE + 1, "fatal toxicity threshold (70 %)", fontsize=7)
    axes[-1].set_xlabel("day of treatment")
    axes[0].legend(fontsize=7, ncol=3, loc="upper right")
    fig.tight_layout()
    return png_bytes(fig)


def cohort_lines(ctx: ReportContext) -> list[str]:
    """One sentence per setting whose held-out patients come from a cohort file."""
    lines = []
    for variant in ctx.variants():
        params = ctx.variant_params(variant)
        path = params.get("cohort_file")
        if path:
            where = "" if variant == "default" else f"Setting {variant}: "
            digest = str(params.get("cohort_sha256") or "")[:12]
            lines.append(
                f"{where}file {Path(path).name}" + (f" (SHA-256 {digest}...)" if digest else "") + "."
            )
    return lines


def report_section(ctx: ReportContext) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("Treatment courses of one held-out patient", styles["Heading2"])]
    story.append(
        ctx.para(
            "The best standard schedule and every learned policy treating the same simulated patient (the "
            "first held-out case): tumour size, normal cells, immune cells, drug level in the blood, and the "
            "dose given every 6 hours. Learned policies are shown for their first training seed. A course "
            "that stops early is a death from toxicity (normal cells below 70 % of their starting level)."
        )
    )
    cohorts = cohort_lines(ctx)
    if cohorts:
        story.append(Paragraph("Held-out patients from your cohort file", styles["Heading3"]))
        story.append(
            ctx.para(
                "The held-out patients are read from a file, one row per patient: the i-th held-out seed "
                "treats the patient of row i (rows beyond the number of held-out seeds are not used). The "
                "seed still draws that patient's observation, process and missing-observation noise from "
                "the noise setting. Training and validation (model selection) patients are still drawn at "
                "random from the noise setting's patient spread, so these results measure how policies "
                "trained on simulated patients treat yours. " + " ".join(cohorts)
            )
        )
    figures_shown = 0
    for variant in ctx.variants():
        best = ctx.best_heuristic(variant)
        shown = ([best] if best else []) + [p.label for p in ctx.learned()]
        png = trajectory_figure(ctx.traces, variant, shown) if not ctx.traces.empty else None
        if png is None:
            continue
        heading = [] if variant == "default" else [Paragraph(f"Setting {variant}", styles["Heading3"])]
        if not figures_shown:  # the section's heading and text stay on the page of its first figure
            intro, story = story, []
            heading = [*intro, *heading]
        figures_shown += 1
        story.append(KeepTogether([*heading, ctx.figure(f"treatment-{variant}", png)]))
    story.append(Paragraph("How to read these results", styles["Heading3"]))
    story.append(
        ctx.para(
            "'Return' is the DTR-Bench score the learned policies were trained to maximise: each 6-hour step "
            "adds normal cells (relative to the start) minus tumour (relative to the start) minus the dose, "
            "and a death costs 100 points. It rewards keeping normal cells high as much as shrinking the "
            "tumour, so a high return can come with less tumour control than a clinician would accept, and "
            "under noise it can disagree with survival. Read it beside the clinical measures: final tumour "
            "burden, the lowest normal-cell count reached (toxicity), survival, and total drug given. "
            "These are simulated patients from a published mathematical model, not clinical evidence."
        )
    )
    return story
