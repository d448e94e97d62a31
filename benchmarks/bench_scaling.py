"""Scaling of a whole study: wall time of ``chemo/full`` (demo budget) at ``--jobs 1``, ``--jobs 2``
and on Ray (a local Ray instance with 2 CPUs), all in one run, plus what a cluster would do on paper;
and scaling of a tuning study (``fieldrl tune``: trials of one learned entry shared by N workers),
whose fan-out should be nearly linear.

Run: ``python benchmarks/bench_scaling.py [--quick]``. Writes ``benchmarks/results/scaling.json``.
``--quick`` trims the study to presets s1 and s5.

The "on paper" figures use Amdahl's law with the serial fraction ``s`` solved from the measured
1- and 2-worker times (``T2 = T1 (s + (1 - s) / 2)``): ``T(N machines x c cores) = T1 (s + (1 - s)
/ (N c))``. It ignores that no job can be split (the longest job bounds the wall time) and the
network cost of a real cluster, so read it as a best case.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path

from _common import machine_info, quick_mode, write_result

import fieldrl
from fieldrl.api import Backend
from fieldrl.scenario import load_scenario

RESULT = Path(__file__).parent / "results" / "scaling.json"
CLUSTER = (1, 2, 4, 8, 16)  # machines of CORES cores each, on paper
CORES = 2


def study(quick: bool) -> Path:
    """The chemo/full study as the scaling figures were first measured: untuned entries (the tuned PPO's
    rollout alone is 16,384 steps), 5 presets x 3 learners x 2 seeds of 4,096 steps, 20 patients.
    ``--quick`` trims it to presets s1 and s5 (one PPO rollout, 4,096 steps, is the least it can train)."""
    import yaml

    from fieldrl.scenario import scenario_text

    raw = yaml.safe_load(scenario_text("chemo/full")[1])
    for entry in raw["policies"]["learned"]:
        entry.pop("tuned", None)
    quick_budget = {"train_steps": 4096, "train_seeds": 2, "eval_seeds": 20, "validation_seeds": 5}
    raw["budgets"] = {"demo": {**quick_budget, "validations": 3}}
    folder = Path(tempfile.mkdtemp(prefix="fieldrl-scaling-"))
    (folder / "raw.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    data = load_scenario(folder / "raw.yaml").with_budget("demo").model_dump(mode="json", exclude_none=True)
    if quick:
        data["variants"] = {k: v for k, v in data["variants"].items() if k in ("s1", "s5")}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def wall_time(scenario: Path, backend: Backend, out: Path) -> dict[str, float]:
    """Seconds of the whole study and of its phases (train, evaluate, report)."""
    start = time.perf_counter()
    run = fieldrl.api.train(scenario, out=out, jobs=backend, show_progress=False)
    trained = time.perf_counter()
    fieldrl.api.evaluate(run, jobs=backend, show_progress=False)
    evaluated = time.perf_counter()
    fieldrl.api.report(run)
    end = time.perf_counter()
    return {
        "total": end - start,
        "train": trained - start,
        "evaluate": evaluated - trained,
        "report": end - evaluated,
    }


TUNING_TRIALS = 8
TUNING_STEPS = 30_000


def tuning_wall_time(backend: Backend, out: Path, quick: bool) -> float:
    """Seconds of an equal-effort tuning study of chemo/quick's PPO (fixed trials and steps)."""
    from fieldrl.evaluation.tuning import tune

    start = time.perf_counter()
    tune(
        "chemo/quick",
        trials=4 if quick else TUNING_TRIALS,
        out=out,
        backend=backend,
        policies=["PPO"],
        train_steps=4096 if quick else TUNING_STEPS,
        show_progress=False,
    )
    return time.perf_counter() - start


def tuning_scaling(quick: bool) -> dict:
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, backend in {"jobs 1": Backend(jobs=1), "jobs 2": Backend(jobs=2)}.items():
            times[label] = tuning_wall_time(backend, Path(tmp) / label.replace(" ", "_"), quick)
            print(f"tuning {label:15} {times[label]:8.1f} s")
    t1, t2 = times["jobs 1"], times["jobs 2"]
    serial = min(max(2 * t2 / t1 - 1, 0.0), 1.0)
    return {
        "workload": f"fieldrl tune chemo/quick --policy PPO: {4 if quick else TUNING_TRIALS} trials of "
        f"{4096 if quick else TUNING_STEPS:,} steps",
        "wall_seconds": times,
        "speedup_jobs2": t1 / t2,
        "serial_fraction_amdahl": serial,
        "on_paper_seconds_by_machines": {str(n): t1 * (serial + (1 - serial) / (n * CORES)) for n in CLUSTER},
    }


def main() -> dict:
    quick = quick_mode()
    scenario = study(quick)
    runs = {
        "jobs 1": Backend(jobs=1),
        "jobs 2": Backend(jobs=2),
        "ray (local, 2 CPUs)": Backend(jobs=2, name="ray"),
    }
    times, phases = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, backend in runs.items():
            phases[label] = wall_time(scenario, backend, Path(tmp) / label.replace(" ", "_"))
            times[label] = phases[label]["total"]
            detail = ", ".join(f"{k} {v:.1f} s" for k, v in phases[label].items() if k != "total")
            print(f"{label:22} {times[label]:8.1f} s ({detail})")
    t1, t2 = times["jobs 1"], times["jobs 2"]
    serial = min(max(2 * t2 / t1 - 1, 0.0), 1.0)
    tuning = tuning_scaling(quick)
    paper = {str(n): t1 * (serial + (1 - serial) / (n * CORES)) for n in CLUSTER}
    scenario_data = load_scenario(scenario)
    result = {
        "benchmark": "wall time of the chemo/full study (demo budget) by backend",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "workload": {
            "scenario": "chemo/full, demo budget" + (", presets s1+s5" if quick else ""),
            "variants": scenario_data.variant_names,
            "train_jobs": len(scenario_data.variant_names)
            * len(scenario_data.policies.learned)
            * len(scenario_data.seeds.train),
        },
        "wall_seconds": times,
        "phase_seconds": phases,
        "train_speedup_jobs2": phases["jobs 1"]["train"] / phases["jobs 2"]["train"],
        "speedup_jobs2": t1 / t2,
        "speedup_ray": t1 / times["ray (local, 2 CPUs)"],
        "serial_fraction_amdahl": serial,
        "on_paper_seconds_by_machines": paper,
        "on_paper_assumptions": f"{CORES} cores per machine, Amdahl with the measured serial fraction; "
        "no job splitting, no network cost (best case)",
        "tuning": tuning,
        "headline": [
            {"label": "study speed-up, 2 local workers vs 1 (same run)", "value": t1 / t2, "unit": "x"},
            {
                "label": "study speed-up, Ray (local, 2 CPUs) vs 1 worker",
                "value": t1 / times["ray (local, 2 CPUs)"],
                "unit": "x",
            },
            {
                "label": "training phase speed-up, 2 local workers vs 1",
                "value": phases["jobs 1"]["train"] / phases["jobs 2"]["train"],
                "unit": "x",
            },
            {"label": "serial fraction (Amdahl, from 1 and 2 workers)", "value": serial, "unit": ""},
            {"label": "tuning study speed-up, 2 workers vs 1", "value": tuning["speedup_jobs2"], "unit": "x"},
            {
                "label": "tuning study serial fraction (Amdahl)",
                "value": tuning["serial_fraction_amdahl"],
                "unit": "",
            },
        ],
        "curves": [
            {
                "title": "study wall time: measured and on paper",
                "xlabel": f"workers (cores; machines x {CORES})",
                "ylabel": "seconds",
                "series": {
                    "measured, local pool": {"x": [1, 2], "y": [t1, t2]},
                    "measured, Ray": {"x": [2], "y": [times["ray (local, 2 CPUs)"]]},
                    "on paper (Amdahl)": {"x": [n * CORES for n in CLUSTER], "y": list(paper.values())},
                },
            },
            {
                "title": "tuning study wall time: measured and on paper",
                "xlabel": f"workers (cores; machines x {CORES})",
                "ylabel": "seconds",
                "series": {
                    "measured, local pool": {
                        "x": [1, 2],
                        "y": [tuning["wall_seconds"]["jobs 1"], tuning["wall_seconds"]["jobs 2"]],
                    },
                    "on paper (Amdahl)": {
                        "x": [n * CORES for n in CLUSTER],
                        "y": list(tuning["on_paper_seconds_by_machines"].values()),
                    },
                },
            },
        ],
    }
    written = write_result(RESULT, result)
    print(
        f"speed-up 2 workers {t1 / t2:.2f}x, Ray {result['speedup_ray']:.2f}x, serial fraction {serial:.2f}"
    )
    print(f"wrote {written}")
    return result


if __name__ == "__main__":
    main()
