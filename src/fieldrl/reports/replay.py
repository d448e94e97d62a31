"""The report's storyboard: two policies on one held-out case, at the moments they differ most.

Drawn from the run folder's latest recorded replay (``fieldrl replay``, which ``fieldrl run`` makes with
the best standard and the best learned policy): its ``replay.json`` and storyboard PNGs, each read back
against the manifest. Nothing is played here: a report never steps an env.
"""

from __future__ import annotations

from typing import Any

from reportlab.lib.units import cm
from reportlab.platypus import KeepTogether, Paragraph, Spacer, Table, TableStyle

from fieldrl.evaluation.replay import KIND_WORDS, ReplayRecord, ReplaySide, read_replays
from fieldrl.evaluation.store import RunFolder
from fieldrl.reportkit.context import ReportContext
from fieldrl.reportkit.layout import PAGE_WIDTH, image

HEADING = "Side by side: one held-out case, two policies"
#: storyboard frames per row: one, so that both panels of a frame are read at about the size they were
#: drawn (two to a row shrank their labels to 3 points)
COLUMNS = 1
GUTTER = 8.0
#: a storyboard frame is at most this tall (narrower where it would be taller): three fit on a page
FRAME_HEIGHT = 7.5 * cm


def _who(side: ReplaySide) -> str:
    """``the best learned policy, PPO`` (the run's own choice) or ``the learned policy PPO``."""
    if side.role.startswith("the best"):
        return f"{side.role}, {side.policy}"
    return f"the {KIND_WORDS[side.kind]} policy {side.policy}"


def storyboard_sentence(record: ReplayRecord) -> str:
    """Which case and which two policies, how each episode ended and what the frames were chosen by."""
    left, right = record.sides
    where = "" if record.variant == "default" else f", setting {record.variant}"
    ends = ", ".join(f"{s.policy} {s.episode_return:.4g} after {s.steps} steps" for s in record.sides)
    apart = any(d > 0 for d in record.divergences)
    chosen = (
        f"The frames below are the moments where the two differ most, spread over the episode; how far "
        f"apart they are is {record.divergence_meaning}."
        if apart
        else "The two played identically (nothing told them apart), so the frames below are spread evenly."
    )
    return (
        f"Held-out seed {record.seed}{where}: on the left {_who(left)}; on the right {_who(right)}. Both "
        f"played the same case from the same start; nothing was retrained. Returns at the end: {ends}. "
        f"{chosen}"
    )


def replay_pages(ctx: ReportContext, folder: RunFolder) -> list[Any]:
    """The storyboard section: a heading, what was replayed, and the storyboard's frames in a grid, each
    captioned with its step and the two returns; without a recorded replay, how to make one."""
    styles = ctx.styles
    records = read_replays(folder)
    if not records:
        return [
            Paragraph(HEADING, styles["Heading2"]),
            ctx.para(
                "No replay was recorded for this run. `fieldrl replay RUN_DIR` plays the best standard and "
                "the best learned policy side by side on a held-out case (an animated GIF, and an MP4 "
                "where ffmpeg is available) and adds its storyboard here.",
                "Small",
            ),
        ]
    record = records[-1]  # the latest replay asked for
    media = ", ".join(f"{record.folder}/{name}" for name in (record.gif, record.mp4) if name)
    head: list[Any] = [
        Paragraph(HEADING, styles["Heading2"]),
        ctx.para(storyboard_sentence(record), "Finding"),
        ctx.para(f"The whole episode, animated: {media} in the run folder.", "Small"),
        Spacer(1, 4),
    ]
    width = (PAGE_WIDTH - GUTTER * (COLUMNS - 1)) / COLUMNS
    left, right = record.sides
    cells = []
    for frame in record.storyboard:
        png = folder.read_verified(f"{record.folder}/{frame.file}", "run `fieldrl replay RUN_DIR` again")
        moment = f"Step {frame.step}" if frame.clock is None else f"Time {frame.clock:g}"
        caption = (
            f"{moment}: return so far {left.policy} {frame.returns[0]:.4g}, "
            f"{right.policy} {frame.returns[1]:.4g}"
        )
        cells.append([image(png, width, FRAME_HEIGHT), ctx.para(caption, "Small")])
    rows = [cells[i : i + COLUMNS] for i in range(0, len(cells), COLUMNS)]
    rows[-1] += [""] * (COLUMNS - len(rows[-1]))
    grid = Table(rows, colWidths=[width + GUTTER / 2] * COLUMNS, hAlign="LEFT")
    grid.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), GUTTER / 2),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 6),
            ]
        )
    )
    return [KeepTogether(head), grid]
