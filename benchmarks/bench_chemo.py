"""Chemo engine speed and accuracy: batched RK4 (ChemoBatch) vs one patient with solve_ivp.

Run: ``python benchmarks/bench_chemo.py``. Writes ``benchmarks/results/chemo_steps.json``
and prints a table. Setting s1 (no noise), random doses in [0, 1].
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import scipy
from _common import machine_info, quick_mode, write_result

from fieldrl.simulators.chemo import (
    DEFAULT_SUBSTEPS,
    PRESETS,
    ChemoBatch,
    ChemoNoise,
    reference_trajectory,
)

BATCH_SIZES = (1, 64, 1024)
STEPS = 600  # one episode per timing run
REPEATS = 3
REF_STEPS = 200
RESULT = Path(__file__).parent / "results" / "chemo_steps.json"


def batch_rate(n: int, steps: int = STEPS, repeats: int = REPEATS) -> float:
    """Best patient-steps/s of a :class:`ChemoBatch` of ``n`` patients over ``steps`` steps."""
    doses = np.random.default_rng(0).random((steps, n))
    best = np.inf
    for _ in range(repeats):
        batch = ChemoBatch(n, PRESETS["s1"], max_t=steps)
        batch.reset_patients(np.arange(n), [np.random.default_rng(s) for s in range(n)])
        start = time.perf_counter()
        for d in doses:
            batch.step(d)
        best = min(best, time.perf_counter() - start)
    return n * steps / best


def reference_rate(steps: int = REF_STEPS, repeats: int = REPEATS) -> float:
    """Best steps/s of one patient stepped with ``solve_ivp`` (reference_trajectory)."""
    batch = ChemoBatch(1, PRESETS["s1"])
    batch.reset_patients([0], [np.random.default_rng(0)])
    doses = np.random.default_rng(0).random(steps)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        reference_trajectory(batch.params[0], batch.init_state[0], doses)
        best = min(best, time.perf_counter() - start)
    return steps / best


def max_relative_error(n: int = 8, steps: int = 600, substeps: int = DEFAULT_SUBSTEPS) -> float:
    """Worst per-step relative error over N, T, I, B of the batch vs the reference.

    One nominal patient and ``n`` with PK/PD spread 0.1, each with its own random doses.
    Error at each step: ``|x - ref| / max(|ref|, 1e-9)``.
    """
    rng = np.random.default_rng(1)
    doses = rng.random((steps, n))
    worst = 0.0
    for pkpd in (0.0, 0.1):
        batch = ChemoBatch(n, ChemoNoise(pkpd_noise=pkpd), max_t=steps, substeps=substeps)
        batch.reset_patients(np.arange(n), [np.random.default_rng(s) for s in range(n)])
        states = [batch.state.copy()]
        for d in doses:
            batch.step(d)
            states.append(batch.state.copy())
        states = np.array(states)
        for i in range(n) if pkpd else range(1):
            ref = reference_trajectory(batch.params[i], batch.init_state[i], doses[:, i])
            err = np.abs(states[:, i] - ref) / np.maximum(np.abs(ref), 1e-9)
            worst = max(worst, float(err.max()))
    return worst


def main() -> dict:
    repeats = 1 if quick_mode() else REPEATS
    ref = reference_rate(repeats=repeats)
    rates = {n: batch_rate(n, repeats=repeats) for n in BATCH_SIZES}
    err = max_relative_error()
    err_one_substep = max_relative_error(substeps=1)
    result = {
        "benchmark": "chemo ChemoBatch patient-steps/s vs solve_ivp reference",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(numpy=np.__version__, scipy=scipy.__version__),
        "setting": "s1 (no noise), random doses, dt = 0.25 day",
        "integrator": {"method": "classical RK4", "substeps_per_step": DEFAULT_SUBSTEPS},
        "reference": {
            "method": "scipy solve_ivp DOP853, rtol=1e-10, atol=1e-12, one call per step",
            "steps_per_s": ref,
        },
        "batch": {
            str(n): {"patient_steps_per_s": r, "ratio_to_reference": r / ref} for n, r in rates.items()
        },
        "accuracy": {
            "metric": "max over 600 steps, N/T/I/B and 9 patients of |x-ref|/max(|ref|,1e-9)",
            "max_relative_error": err,
            "max_relative_error_with_1_substep": err_one_substep,
        },
        "settings": {"steps": STEPS, "repeats": REPEATS, "reference_steps": REF_STEPS},
        "headline": [
            {
                "label": f"chemo engine, batch {BATCH_SIZES[-1]}: patient-steps/s vs solve_ivp (same run)",
                "value": rates[BATCH_SIZES[-1]] / ref,
                "unit": "x",
                "target": ">= 100x",
            },
            {
                "label": "chemo RK4 max relative error vs solve_ivp",
                "value": err,
                "unit": "",
                "target": "<= 1e-3",
            },
        ],
        "curves": [
            {
                "title": "patient-steps/s by batch size",
                "xlabel": "patients stepped together",
                "ylabel": "patient-steps/s",
                "log": True,
                "series": {
                    "ChemoBatch (RK4)": {"x": list(BATCH_SIZES), "y": [rates[n] for n in BATCH_SIZES]},
                    "solve_ivp reference": {"x": list(BATCH_SIZES), "y": [ref for _ in BATCH_SIZES]},
                },
            }
        ],
    }
    written = write_result(RESULT, result)

    print(f"reference (solve_ivp, 1 patient): {ref:12,.0f} steps/s")
    print(f"{'batch':>6} {'patient-steps/s':>16} {'x reference':>12}")
    for n, r in rates.items():
        print(f"{n:>6} {r:>16,.0f} {r / ref:>12,.0f}")
    print(f"max relative error vs reference ({DEFAULT_SUBSTEPS} substeps): {err:.2e}")
    print(f"  (with 1 substep: {err_one_substep:.2e})")
    print(f"wrote {written}")
    return result


if __name__ == "__main__":
    main()
