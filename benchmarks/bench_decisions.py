"""What decision differences cost (issue 40, part 2): the report's decision-difference section against the
rest of ``fieldrl report`` (target: it adds under 10 %), and recording the decisions against the plain
held-out evaluation they extend, measured in the same run.

Each scenario is trained once at the demo budget; then ``api.evaluate`` is timed with and without
recording decisions, and ``api.report`` with and without the decision section (the section is the only
difference: ``decision_pages`` replaced by a function returning nothing), each ``REPEATS`` times,
alternating. ``--quick``: one repeat.

Run: ``python benchmarks/bench_decisions.py``. Writes ``benchmarks/results/decisions.json``.
"""

from __future__ import annotations

import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_info, quick_mode, write_result

import fieldrl.reports.pdf as pdf
from fieldrl import __version__, api

REPEATS = 3
SCENARIOS = ["chemo/quick", "wealth/single-goal", "taxiway/quick"]
TARGET = 0.10  # issue 40: the decision-difference section adds under 10 % to `report`
RESULT = Path(__file__).parent / "results" / "decisions.json"


def _timed(func: Any) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def _measure(ref: str, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fieldrl-bench-decisions-") as tmp:
        run_dir = api.train(ref, out=Path(tmp) / "run", budget="demo", show_progress=False)
        recorder, pages = api._record_decisions, pdf.decision_pages
        evaluate_with, evaluate_without, report_with, report_without = [], [], [], []
        for _ in range(repeats):
            api._record_decisions = lambda *a, **k: None
            evaluate_without.append(_timed(lambda: api.evaluate(run_dir, show_progress=False)))
            api._record_decisions = recorder
            evaluate_with.append(_timed(lambda: api.evaluate(run_dir, show_progress=False)))
            pdf.decision_pages = lambda *a, **k: []
            report_without.append(_timed(lambda: api.report(run_dir)))
            pdf.decision_pages = pages
            report_with.append(_timed(lambda: api.report(run_dir)))
        decided = api.open_run(run_dir)[0]
        from fieldrl.evaluation.decisions import read_decision_summary

        summary = read_decision_summary(decided)
        count = sum(s.decisions for s in summary.variants.values()) if summary else 0
    ev_with, ev_without = statistics.median(evaluate_with), statistics.median(evaluate_without)
    rep_with, rep_without = statistics.median(report_with), statistics.median(report_without)
    return {
        "scenario": f"{ref}, demo budget (trained once)",
        "decisions_recorded": count,
        "evaluate_without_decisions_s": [round(t, 3) for t in evaluate_without],
        "evaluate_with_decisions_s": [round(t, 3) for t in evaluate_with],
        "recording_share_of_evaluation": round((ev_with - ev_without) / ev_without, 3),
        "report_without_section_s": [round(t, 3) for t in report_without],
        "report_with_section_s": [round(t, 3) for t in report_with],
        "section_share_of_report": round((rep_with - rep_without) / rep_without, 3),
    }


def main() -> None:
    repeats = 1 if quick_mode() else REPEATS
    rows = [_measure(ref, repeats) for ref in SCENARIOS]
    worst = max(r["section_share_of_report"] for r in rows)
    result = {
        "benchmark": "decision differences: report section and recording cost (same run)",
        "date": dt.date.today().isoformat(),
        "machine": machine_info(fieldrl=__version__),
        "repeats": repeats,
        "scenarios": rows,
        "target": f"section adds < {TARGET:.0%} to report",
        "within_target": worst < TARGET,
        "headline": [
            {
                "label": f"decision section / rest of report ({r['scenario'].split(',')[0]})",
                "value": round(100 * r["section_share_of_report"], 1),
                "unit": "%",
                "target": f"< {100 * TARGET:g} %",
            }
            for r in rows
        ],
    }
    path = write_result(RESULT, result)
    for r in rows:
        print(
            f"{r['scenario']}: {r['decisions_recorded']} decisions; "
            f"report +{r['section_share_of_report']:.1%}; "
            f"evaluation +{r['recording_share_of_evaluation']:.1%}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
