"""How fast the command line answers: `--help`, `--version`, `list`, and `validate` (fast and
`--build`) of every built-in scenario, each a fresh process as a user starts it.

Run: ``python benchmarks/bench_cli.py``. Writes ``benchmarks/results/cli.json`` and prints a table:
median wall seconds of ``REPEATS`` runs per command (``--quick``: one run, three scenarios). The
reference in the same run is ``python -c pass`` (interpreter start-up), so a loaded machine shows
as a higher floor rather than as a slower fieldrl.
"""

from __future__ import annotations

import datetime as dt
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine_info, quick_mode, write_result

from fieldrl import __version__
from fieldrl.scenario import builtin_scenarios

REPEATS = 3
TARGET_S = 1.5  # issue 21: --help, --version, list and validate answer within this
RESULT = Path(__file__).parent / "results" / "cli.json"
FIELDRL = [sys.executable, "-m", "fieldrl.cli"]


def wall(cmd: list[str], repeats: int) -> float:
    """Median wall seconds of ``cmd`` (its exit status must be 0)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    repeats = 1 if quick_mode() else REPEATS
    scenarios = builtin_scenarios()[:3] if quick_mode() else builtin_scenarios()
    rows: dict[str, float] = {"python -c pass (reference)": wall([sys.executable, "-c", "pass"], repeats)}
    for args in (["--help"], ["--version"], ["list"]):
        rows[" ".join(args)] = wall(FIELDRL + args, repeats)
    for name in scenarios:
        rows[f"validate {name}"] = wall(FIELDRL + ["validate", name], repeats)
    for name in scenarios[:3]:
        rows[f"validate --build {name}"] = wall(FIELDRL + ["validate", "--build", name], repeats)
    fast = {k: v for k, v in rows.items() if "--build" not in k and "reference" not in k}
    result = {
        "benchmark": "command-line response times (fresh process each)",
        "date": dt.date.today().isoformat(),
        "machine": machine_info(fieldrl=__version__),
        "repeats": repeats,
        "target_s": TARGET_S,
        "seconds": {k: round(v, 3) for k, v in rows.items()},
        "slowest_fast_command": max(fast, key=fast.get),
        "slowest_fast_seconds": round(max(fast.values()), 3),
        "all_within_target": max(fast.values()) <= TARGET_S,
    }
    path = write_result(RESULT, result)
    for k, v in rows.items():
        print(f"{k:<50} {v:6.2f} s")
    print(f"slowest (without --build): {result['slowest_fast_command']} {result['slowest_fast_seconds']} s")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
