"""What a stress map costs: five points of one stress axis against the plain held-out evaluation they
replay, in the same run (issue 40: at most 5x).

The run is `chemo/quick` as shipped (PPO, SAC and the practitioners' rules, 30 held-out patients),
trained once at the demo budget; then ``api.evaluate`` (the plain evaluation) and ``api.stress`` on
``obs_noise`` at five points, each timed ``REPEATS`` times from scratch (a new evaluation drops the
stress results, so each repeat plays every point). ``--quick``: one repeat.

Run: ``python benchmarks/bench_stress.py``. Writes ``benchmarks/results/stress.json``.
"""

from __future__ import annotations

import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine_info, quick_mode, write_result

from fieldrl import __version__, api

REPEATS = 3
POINTS = [0.0, 0.1, 0.2, 0.5, 0.8]
TARGET = 5.0  # issue 40: stress over five points costs at most 5x the plain evaluation
RESULT = Path(__file__).parent / "results" / "stress.json"


def main() -> None:
    repeats = 1 if quick_mode() else REPEATS
    with tempfile.TemporaryDirectory(prefix="fieldrl-bench-stress-") as tmp:
        run_dir = api.train("chemo/quick", out=Path(tmp) / "run", budget="demo", show_progress=False)
        plain, stressed = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            api.evaluate(run_dir, show_progress=False)
            plain.append(time.perf_counter() - start)  # a new evaluation drops earlier stress results
            start = time.perf_counter()
            api.stress(run_dir, [("obs_noise", POINTS)], show_progress=False)
            stressed.append(time.perf_counter() - start)
        episodes = len(api.open_run(run_dir)[1].seeds.eval)
    ratio = statistics.median(stressed) / statistics.median(plain)
    result = {
        "benchmark": "stress map cost: five points of one axis against the plain evaluation (same run)",
        "date": dt.date.today().isoformat(),
        "machine": machine_info(fieldrl=__version__),
        "scenario": "chemo/quick, demo budget (trained once), obs_noise at " + ", ".join(map(str, POINTS)),
        "held_out_patients": episodes,
        "repeats": repeats,
        "plain_evaluation_s": [round(t, 3) for t in plain],
        "stress_five_points_s": [round(t, 3) for t in stressed],
        "ratio_median": round(ratio, 2),
        "target": f"<= {TARGET:g}x",
        "within_target": ratio <= TARGET,
        "headline": [
            {
                "label": "stress (5 points) / plain evaluation",
                "value": round(ratio, 2),
                "unit": "x",
                "target": f"<= {TARGET:g}x",
            }
        ],  # fmt: skip
    }
    path = write_result(RESULT, result)
    plain_s, stress_s = statistics.median(plain), statistics.median(stressed)
    print(f"plain evaluation {plain_s:.2f} s, stress over 5 points {stress_s:.2f} s")
    print(f"ratio {ratio:.2f}x (target <= {TARGET:g}x); wrote {path}")


if __name__ == "__main__":
    main()
