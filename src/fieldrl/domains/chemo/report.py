"""The chemotherapy pages of the report: what a treatment looks like over 150 days."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from reportlab.platypus import Paragraph  # noqa: E402

from fieldrl.reports.figures import png_bytes  # noqa: E402

DEATH_LINE = 70.0  # N < 0.7 N0 ends the episode


def trajectory_figure(traces: Any, variant: str) -> bytes | None:
    frame = traces[traces["variant"] == variant]
    if frame.empty:
        return None
    fig, axes = plt.subplots(3, 1, figsize=(7, 6.2), sharex=True)
    cmap = plt.get_cmap("tab10")
    for i, (policy, rows) in enumerate(frame.groupby("policy", sort=False)):
        style = {"color": cmap(i % 10), "linewidth": 1.2, "label": policy}
        axes[0].plot(rows["day"], rows["tumour"], **style)
        axes[1].plot(rows["day"], rows["normal"], **style)
        axes[2].plot(rows["day"], rows["dose"], **style, drawstyle="steps-post")
    axes[0].set_ylabel("tumour\n(% of initial)")
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[1].set_ylabel("normal cells\n(% of initial)")
    axes[1].axhline(DEATH_LINE, color="black", linestyle="--", linewidth=0.8)
    axes[1].text(0, DEATH_LINE + 1, "fatal toxicity threshold (70 %)", fontsize=7)
    axes[2].set_ylabel("dose\n(fraction of max)")
    axes[2].set_xlabel("day of treatment")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=3, loc="upper right")
    fig.tight_layout()
    return png_bytes(fig)


def report_section(ctx: Any) -> list[Any]:
    styles = ctx.styles
    story: list[Any] = [Paragraph("Treatment courses of one held-out patient", styles["Heading2"])]
    story.append(
        ctx.para(
            "Each policy treating the same simulated patient (the first held-out case): tumour size, "
            "normal-cell count and the dose given every 6 hours. Learned policies are shown for their first "
            "training seed. A course that stops early is a death from toxicity (normal cells below 70 % of "
            "their starting level)."
        )
    )
    for variant in ctx.scenario.variant_names:
        png = trajectory_figure(ctx.traces, variant) if not ctx.traces.empty else None
        if png is None:
            continue
        if variant != "default":
            story.append(Paragraph(f"Setting {variant}", styles["Heading3"]))
        story.append(ctx.figure(f"treatment-{variant}", png))
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
