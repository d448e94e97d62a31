"""What decision differences cost (issue 40, part 2): the report's decision-difference section against the
rest of ``fieldrl report`` (target: it adds under 10 %), and recording the decisions against the plain
held-out evaluation they extend, measured in the same run.

Each scenario is trained once at the demo budget; then ``api.evaluate`` is timed with and without
recording decisions (alternating), and the report is made ``REPEATS`` times, each in a fresh process as
``fieldrl report`` is, timing the decision section (``decision_pages``) inside the report's own run: on a
loaded machine two whole reports differ by more than the section costs. ``--quick``: one repeat.

Run: ``python benchmarks/bench_decisions.py``. Writes ``benchmarks/results/decisions.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_info, quick_mode, write_result

from fieldrl import __version__, api

REPEATS = 3
SCENARIOS = ["chemo/quick", "wealth/single-goal", "taxiway/quick"]
TARGET = 0.10  # issue 40: the decision-difference section adds under 10 % to `report`
RESULT = Path(__file__).parent / "results" / "decisions.json"


#: one ``fieldrl report`` in a fresh process, the decision section timed within it
_REPORT_TIMED = """
import json, sys, time
start = time.perf_counter()
import fieldrl.reports.pdf as pdf
from fieldrl import api
section, pages = [0.0], pdf.decision_pages
def timed(*args, **kwargs):
    begin = time.perf_counter()
    out = pages(*args, **kwargs)
    section[0] += time.perf_counter() - begin
    return out
pdf.decision_pages = timed
api.report(sys.argv[1])
print(json.dumps({"report_s": time.perf_counter() - start, "section_s": section[0]}))
"""


def _report_in_fresh_process(run_dir: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _REPORT_TIMED, str(run_dir)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _timed(func: Any) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def _measure(ref: str, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fieldrl-bench-decisions-") as tmp:
        run_dir = api.train(ref, out=Path(tmp) / "run", budget="demo", show_progress=False)
        recorder = api._record_decisions
        evaluate_with, evaluate_without, reports = [], [], []
        for _ in range(repeats):
            api._record_decisions = lambda *a, **k: None
            evaluate_without.append(_timed(lambda: api.evaluate(run_dir, show_progress=False)))
            api._record_decisions = recorder
            evaluate_with.append(_timed(lambda: api.evaluate(run_dir, show_progress=False)))
            reports.append(_report_in_fresh_process(run_dir))
        decided = api.open_run(run_dir)[0]
        from fieldrl.evaluation.decisions import read_decision_summary

        summary = read_decision_summary(decided)
        count = sum(s.decisions for s in summary.variants.values()) if summary else 0
    ev_with, ev_without = statistics.median(evaluate_with), statistics.median(evaluate_without)
    shares = [r["section_s"] / (r["report_s"] - r["section_s"]) for r in reports]
    return {
        "scenario": f"{ref}, demo budget (trained once)",
        "decisions_recorded": count,
        "evaluate_without_decisions_s": [round(t, 3) for t in evaluate_without],
        "evaluate_with_decisions_s": [round(t, 3) for t in evaluate_with],
        "recording_share_of_evaluation": round((ev_with - ev_without) / ev_without, 3),
        "report_s": [round(r["report_s"], 3) for r in reports],
        "section_s": [round(r["section_s"], 3) for r in reports],
        "section_share_of_report": round(statistics.median(shares), 3),
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
