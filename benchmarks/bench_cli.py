"""How fast the command line answers: `--help`, `--version`, `list`, and `validate` (fast and
`--build`) of every built-in scenario, each a fresh process as a user starts it; and the readers of a
finished run: `report` of a chemo/quick demo run and `compare` of two runs (issue 43: they build no
model and import no torch, and answer within ``REPORT_TARGET_S`` and ``COMPARE_TARGET_S``).

The run is made once, in a temporary folder, by ``api.run("chemo/quick", budget="demo")`` (a minute
or two, not timed); the second run `compare` reads is a copy of it under another name (reading a
copy costs what reading another run of the scenario costs).

Run: ``python benchmarks/bench_cli.py``. Writes ``benchmarks/results/cli.json`` and prints a table:
median wall seconds of ``REPEATS`` runs per command (``--quick``: one run, three scenarios), and for
the readers also their median CPU seconds (user + system), which a loaded machine inflates less. The
reference in the same run is ``python -c pass`` (interpreter start-up), so a loaded machine shows
as a higher floor rather than as a slower fieldrl; the load average is recorded at start and end.
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine_info, quick_mode, write_result

from fieldrl import __version__
from fieldrl.scenario import builtin_scenarios

REPEATS = 3
TARGET_S = 1.5  # issue 21: --help, --version, list and validate answer within this
REPORT_TARGET_S = 5.0  # issue 43: `fieldrl report` of a finished chemo/quick demo run
COMPARE_TARGET_S = 2.0  # issue 43: `fieldrl compare` of two runs
READ_SCENARIO = "chemo/quick"
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


def wall_and_cpu(cmd: list[str], repeats: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (the child's user + system) of ``cmd``."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def time_readers(tmp: Path, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Wall and CPU seconds of `report` on a finished demo run and `compare` of two runs."""
    from fieldrl import api

    run_dir = api.run(READ_SCENARIO, out=tmp / "run-a", budget="demo", show_progress=False).run_dir
    other = shutil.copytree(run_dir, tmp / "run-b")
    walls, cpus = {}, {}
    for key, args in (
        (f"report ({READ_SCENARIO} demo run)", ["report", str(run_dir)]),
        (f"compare (two {READ_SCENARIO} demo runs)", ["compare", str(run_dir), str(other)]),
    ):
        walls[key], cpus[key] = wall_and_cpu(FIELDRL + args, repeats)
    return walls, cpus


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
    with tempfile.TemporaryDirectory(prefix="fieldrl-bench-cli-") as tmp:
        readers, reader_cpu = time_readers(Path(tmp), repeats)
    rows.update(readers)
    rows["python -c pass (reference, again)"] = wall([sys.executable, "-c", "pass"], repeats)
    report_s, compare_s = readers.values()
    fast = {k: v for k, v in rows.items() if "--build" not in k and "reference" not in k and k not in readers}
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
        "readers_cpu_seconds": {k: round(v, 3) for k, v in reader_cpu.items()},
        "report_target_s": REPORT_TARGET_S,
        "compare_target_s": COMPARE_TARGET_S,
        "report_within_target": report_s <= REPORT_TARGET_S,
        "compare_within_target": compare_s <= COMPARE_TARGET_S,
        "load_average_1min_at_end": os.getloadavg()[0],
        "headline": [
            {
                "label": "fieldrl report, chemo/quick demo run",
                "value": round(report_s, 2),
                "unit": "s",
                "target": f"< {REPORT_TARGET_S:g} s",
            },
            {
                "label": "fieldrl compare, two runs",
                "value": round(compare_s, 2),
                "unit": "s",
                "target": f"< {COMPARE_TARGET_S:g} s",
            },
        ],
    }
    path = write_result(RESULT, result)
    for k, v in rows.items():
        cpu = f"  ({reader_cpu[k]:.2f} s CPU)" if k in reader_cpu else ""
        print(f"{k:<50} {v:6.2f} s{cpu}")
    print(f"slowest (without --build): {result['slowest_fast_command']} {result['slowest_fast_seconds']} s")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
