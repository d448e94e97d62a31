"""``fieldrl bench``: run every benchmark script, gather their results into one JSON, and render
a benchmark PDF with the headline ratios and scaling plots.

Benchmarks live as scripts in the source tree's ``benchmarks/`` folder (``bench_*.py``); each
measures its ratio against a reference *in the same run* (these machines are shared and noisy)
and writes ``benchmarks/results/<name>.json``. Each script runs in its own process: timings
don't disturb each other, and one simulation per process suits libsumo. A script understands
``--quick`` (a smaller, faster version) where it offers one; quick results, and the quick suite
files, go to ``benchmarks/results/quick/`` so they never replace the full figures.

Result files may carry, besides their own fields:
``headline``: ``[{"label", "value", "unit", "target"?}]`` — the numbers the README quotes;
``curves``: ``[{"title", "xlabel", "ylabel", "log"?, "series": {name: {"x": [...], "y": [...]}}}]``.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fieldrl.errors import FieldrlError
from fieldrl.files import atomic_write_bytes

SUITE_JSON = "suite.json"
SUITE_PDF = "benchmarks.pdf"


def find_bench_dir(explicit: Path | None = None) -> Path:
    """The ``benchmarks/`` folder: given, in the working directory, or beside the source tree."""
    candidates = (
        [explicit] if explicit else [Path.cwd() / "benchmarks", Path(__file__).parents[2] / "benchmarks"]
    )
    for path in candidates:
        if path is not None and path.is_dir() and any(path.glob("bench_*.py")):
            return path
    where = explicit if explicit else "the working directory or the source tree"
    raise FieldrlError(
        f"--dir = {str(where)!r}: no benchmarks/bench_*.py there (run from a fieldrl checkout)"
    )


def discover(bench_dir: Path) -> dict[str, Path]:
    return {p.stem.removeprefix("bench_"): p for p in sorted(bench_dir.glob("bench_*.py"))}


def run_suite(
    bench_dir: Path,
    only: list[str] | None = None,
    quick: bool = False,
    echo: Any = print,
) -> dict[str, Any]:
    """Run the benchmark scripts (all, or ``only``), then gather every result file."""
    scripts = discover(bench_dir)
    unknown = sorted(set(only or []) - set(scripts))
    if unknown:
        raise FieldrlError(f"--only = {unknown[0]!r}: no such benchmark; allowed: {', '.join(scripts)}")
    chosen = {k: v for k, v in scripts.items() if not only or k in only}
    runs: dict[str, Any] = {}
    for name, script in chosen.items():
        echo(f"[bench] {name} ...")
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(script), *(["--quick"] if quick else [])],
            cwd=bench_dir,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(bench_dir)},
        )
        seconds = time.perf_counter() - start
        runs[name] = {"seconds": round(seconds, 1), "exit_status": proc.returncode}
        if proc.returncode != 0:
            runs[name]["error"] = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:500]
            echo(f"[bench] {name} FAILED after {seconds:.0f} s: {runs[name]['error']}")
        else:
            echo(f"[bench] {name} done in {seconds:.0f} s")
    out = bench_dir / "results" / ("quick" if quick else "")
    results = {}
    for path in sorted(out.glob("*.json")):
        if path.name == SUITE_JSON:
            continue
        try:
            results[path.stem] = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            results[path.stem] = {"error": f"unreadable result file: {exc}"}
    suite = {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "runs": runs,
        "results": results,
    }
    atomic_write_bytes(out / SUITE_JSON, (json.dumps(suite, indent=2) + "\n").encode())
    atomic_write_bytes(out / SUITE_PDF, render_pdf(suite))
    return suite


def headlines(suite: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, h) for name, data in suite["results"].items() for h in data.get("headline", [])]


def render_pdf(suite: dict[str, Any]) -> bytes:
    """One page of headline figures, then every scaling curve the results carry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import Image, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    story: list[Any] = [
        Paragraph("fieldrl benchmarks", styles["Title"]),
        Paragraph(
            f"Run {suite['timestamp']}{' (quick versions)' if suite['quick'] else ''}. Every ratio is "
            "measured against its reference in the same run, on the same machine.",
            styles["Normal"],
        ),
        Spacer(1, 0.3 * cm),
    ]
    rows = [["benchmark", "figure", "value", "target"]]
    for name, h in headlines(suite):
        value = h.get("value")
        shown = f"{value:,.3g}" if isinstance(value, int | float) else str(value)
        rows.append(
            [
                name,
                Paragraph(str(h.get("label", "")), styles["BodyText"]),
                f"{shown} {h.get('unit', '')}",
                str(h.get("target", "")),
            ]
        )
    if len(rows) > 1:
        table = Table(rows, colWidths=[3.2 * cm, 8.3 * cm, 3.2 * cm, 2.6 * cm], repeatRows=1)
        table.setStyle(
            TableStyle(
                [
                    ("FONTSIZE", (0, 0), (-1, -1), 8),
                    ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde4ee")),
                    ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                    ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ]
            )
        )
        story.append(table)
    failed = {k: v for k, v in suite["runs"].items() if v.get("exit_status")}
    for name, run in failed.items():
        story.append(Paragraph(f"{name} failed in this run: {run.get('error', '')}", styles["Normal"]))
    for name, data in suite["results"].items():
        for curve in data.get("curves", []):
            fig, ax = plt.subplots(figsize=(6.5, 3.4))
            for label, series in curve["series"].items():
                ax.plot(series["x"], series["y"], marker="o", label=label)
            if curve.get("log"):
                ax.set_yscale("log")
            ax.set_xlabel(curve.get("xlabel", ""))
            ax.set_ylabel(curve.get("ylabel", ""))
            ax.set_title(f"{name}: {curve.get('title', '')}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=130)
            plt.close(fig)
            png.seek(0)
            story.append(Spacer(1, 0.3 * cm))
            story.append(Image(png, width=16 * cm, height=16 * cm * 3.4 / 6.5))
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4, title="fieldrl benchmarks").build(story)
    return buffer.getvalue()
