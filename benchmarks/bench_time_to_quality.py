"""Time to quality: CPU seconds and environment steps each learned entry of each domain's small
scenario needs to reach the best heuristic's level on the validation seeds (or how close it gets
within a fixed budget).

Run: ``python benchmarks/bench_time_to_quality.py [--quick] [chemo/quick ...]``. Writes
``benchmarks/results/time_to_quality.json``; naming scenarios re-measures only those and keeps the
others' entries of the existing file (each scenario records when it was measured).

For every scenario the best heuristic is scored on the scenario's validation seeds (first
setting); every learned entry is then trained once (training seed = the scenario's first) with
validation-gated evaluation every ``budget / EVALUATIONS`` steps on the same seeds, exactly as a
run trains it (tuned hyperparameters and the entry's own ``params`` included; an entry that does not
run in the first setting is left out). Training is
capped at ``STEP_CAP`` steps (``--quick``: ``QUICK_CAP``) so the whole suite stays within an hour
or so; the cap is recorded. CPU seconds are the training process's own CPU time, validation
excluded, with one torch thread (time-to-quality on one core).

Each warm-started entry (imitation or residual) also gets the first validation checkpoint that beat
its start, the clone (issue 41: "moved past the clone"), in steps and CPU seconds, or None.
``--backfill`` adds that to an existing results file from the curves it holds, training nothing.

``TARGETS`` adds fixed levels an issue set (chemo/full s1: SAC and TD3 to return 250), with a finer
validation grid; they run in the full benchmark or with ``--only chemo/full``.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from _common import machine_info, quick_mode, write_result

RESULT = Path(__file__).parent / "results" / "time_to_quality.json"
SCENARIOS = (
    "chemo/quick",
    "memory/cue",
    "wealth/single-goal",
    "uav/quick",
    "traffic/quick",
    "rail/quick",
    "taxiway/quick",
)
STEP_CAP = 120_000
QUICK_CAP = 4_096
EVALUATIONS = 20
#: fixed levels named by an issue: (scenario, learned entry, level on the primary KPI, steps)
TARGETS = {"chemo/full": [("SAC", 250.0, 12_000), ("TD3", 250.0, 12_000)]}
TARGET_EVALUATIONS = 24


def _reached(curve: list[tuple], level: float, higher: bool) -> tuple[int, float] | None:
    for steps, _updates, cpu, _wall, value in curve:
        if math.isfinite(value) and (value >= level if higher else value <= level):
            return steps, cpu
    return None


def first_setting(name: str) -> tuple[Any, Any, str, Any]:
    """The scenario, its domain, its first setting and that setting's validated params."""
    from fieldrl.domains import get_domain
    from fieldrl.scenario import load_scenario

    scenario = load_scenario(name)
    domain = get_domain(scenario.domain)
    variant = scenario.variant_names[0]
    return scenario, domain, variant, domain.params_model.model_validate(scenario.variant_params(variant))


def training_curve(scenario: Any, domain: Any, params: Any, entry: Any, steps: int, evaluations: int) -> list:
    """Train ``entry`` once for ``steps`` as a run would, validating ``evaluations`` times; its curve
    as (timesteps, updates, CPU seconds, wall seconds, validation value) rows."""
    from fieldrl.evaluation import runner
    from fieldrl.policies.learned import VALIDATION_FILE, train_model
    from fieldrl.scenario_checks import training_vec_env

    trained = entry.model_copy(update={"train_steps": steps, "validate_every": max(1, steps // evaluations)})
    validation = runner.validation_for(scenario, domain, params, trained)
    assert validation is not None
    seed = scenario.seeds.train[0]
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = train_model(
            training_vec_env(scenario, domain, params, trained),
            trained.training_spec(),
            seed,
            Path(tmp),
            validation=validation,
            demonstrations=runner.demonstrations_for(scenario, domain, params, trained, seed),
            prepare=runner.preparation_for(trained),
        )
    rows = pd.read_csv(io.BytesIO(artifacts[VALIDATION_FILE]))
    return [
        (int(r.timesteps), int(r.updates), r.cpu_seconds, r.wall_seconds, r.value) for r in rows.itertuples()
    ]


def measure_targets(name: str, targets: list[tuple[str, float, int]]) -> list[dict[str, Any]]:
    """CPU seconds for named learned entries to reach a fixed level (an issue's target) on the
    scenario's first setting, with a validation every ``steps / TARGET_EVALUATIONS`` steps."""
    from fieldrl.evaluation import runner
    from fieldrl.scenario_checks import entry_of

    scenario, domain, variant, params = first_setting(name)
    higher = runner.selection_kpi(scenario, domain).higher_is_better
    out = []
    for label, level, steps in targets:
        entry = entry_of(scenario, label)
        own = domain.params_model.model_validate(scenario.policy_params(variant, label))
        curve = training_curve(scenario, domain, own, entry, steps, TARGET_EVALUATIONS)
        hit = _reached(curve, level, higher)
        shown = f"{hit[1]:.1f} CPU-s, {hit[0]:,} steps" if hit else "not reached"
        print(f"{name} [{variant}] {label} to {level:g}: {shown}", flush=True)
        out.append(
            {
                "scenario": name,
                "variant": variant,
                "policy": label,
                "level": level,
                "train_steps": steps,
                "tuned": entry.tuning is not None,
                "reached": hit is not None,
                "steps_to_level": hit[0] if hit else None,
                "cpu_seconds_to_level": hit[1] if hit else None,
                "curve": [list(r) for r in curve],
            }
        )
    return out


def measure(name: str, cap: int) -> dict[str, Any]:
    from fieldrl.evaluation import runner
    from fieldrl.evaluation.summary import oracle_labels
    from fieldrl.scenario_checks import heuristic_policy

    scenario, domain, variant, params = first_setting(name)
    kpi = runner.selection_kpi(scenario, domain)
    heuristics = {
        h.label: runner.validation_score(
            scenario, domain, params, heuristic_policy(scenario, domain, params, h.label)
        )
        for h in scenario.policies.heuristics
    }
    # the level to reach is the best practitioner's rule; an oracle (e.g. wealth's DP optimum) is
    # recorded beside it but is not a rule anyone can use in operations
    oracles = set(oracle_labels(scenario, domain))
    finite = {k: v for k, v in heuristics.items() if math.isfinite(v) and k not in oracles}
    best_rule = (max if kpi.higher_is_better else min)(finite, key=finite.__getitem__) if finite else None
    level = finite.get(best_rule, math.nan) if best_rule else math.nan
    entries = []
    for entry in scenario.policies.learned:
        if not entry.runs_in(variant):
            continue
        # the entry's own settings (traffic's decision interval, rail's advice, wealth's goal gap) over
        # the setting's, as a run trains and validates it
        own = domain.params_model.model_validate(scenario.policy_params(variant, entry.label))
        steps = min(entry.train_steps, cap)
        started = time.perf_counter()
        curve = training_curve(scenario, domain, own, entry, steps, EVALUATIONS)
        values = [row[4] for row in curve if math.isfinite(row[4])]
        best_value = (max if kpi.higher_is_better else min)(values) if values else math.nan
        hit = _reached(curve, level, kpi.higher_is_better) if math.isfinite(level) else None
        entries.append(
            {
                "policy": entry.label,
                "algorithm": entry.algorithm,
                "tuned": entry.tuning is not None,
                "anchored": "imitation" if entry.imitate else ("residual" if entry.residual else None),
                "train_steps": steps,
                "scenario_train_steps": entry.train_steps,
                "own_params": entry.params,
                "reached_best_rule": hit is not None,
                "steps_to_rule": hit[0] if hit else None,
                "cpu_seconds_to_rule": hit[1] if hit else None,
                "best_value": best_value,
                "gap_to_rule": best_value - level if math.isfinite(level) else None,
                "training_cpu_seconds": curve[-1][2] if curve else None,
                "wall_seconds_with_validation": time.perf_counter() - started,
                "curve": [list(r) for r in curve],
            }
        )
        entries[-1] |= _moved_past(entries[-1], kpi.higher_is_better)
        shown = f"{hit[1]:.1f} CPU-s, {hit[0]:,} steps" if hit else f"not reached (best {best_value:.4g})"
        print(f"{name:20} {entry.label:14} to {best_rule} ({level:.4g}): {shown}", flush=True)
    return {
        "scenario": name,
        "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "variant": variant,
        "kpi": kpi.name,
        "higher_is_better": kpi.higher_is_better,
        "validation_seeds": len(scenario.seeds.validation or []),
        "heuristics": heuristics,
        "oracles": sorted(oracles),
        "best_rule": best_rule,
        "best_rule_value": level,
        "entries": entries,
    }


def _moved_past(entry: dict[str, Any], higher: bool) -> dict[str, Any]:
    """For a warm-started entry: when its validation score first beat its start's (None: never)."""
    from fieldrl.reports.pdf import moved_past_start

    if not entry.get("anchored"):
        return {}
    moved = moved_past_start([(r[0], r[2], r[4]) for r in entry["curve"]], higher)
    return {
        "moved_past_start": moved is not None,
        "steps_to_move_past_start": moved[0] if moved else None,
        "cpu_seconds_to_move_past_start": moved[1] if moved else None,
    }


def backfill() -> None:
    """Add the moved-past-the-start fields to the results file from the curves it holds."""
    data = json.loads(RESULT.read_text())
    for scenario in data["scenarios"]:
        for entry in scenario["entries"]:
            entry |= _moved_past(entry, scenario["higher_is_better"])
    RESULT.write_text(json.dumps(data, indent=2) + "\n")
    for scenario in data["scenarios"]:
        for e in scenario["entries"]:
            if e.get("anchored"):
                print(scenario["scenario"], e["policy"], e["moved_past_start"], e["steps_to_move_past_start"])


def _merged(results: list[dict], targets: list[dict]) -> tuple[list[dict], list[dict]]:
    """``results`` and ``targets`` with the existing results file's entries for everything else."""
    path = RESULT.parent / "quick" / RESULT.name if quick_mode() else RESULT
    if not path.exists():
        return results, targets
    old = json.loads(path.read_text())
    fresh = {r["scenario"] for r in results}
    kept = [r for r in old.get("scenarios", []) if r["scenario"] not in fresh]
    fresh_targets = {(t["scenario"], t["policy"]) for t in targets}
    kept_targets = [t for t in old.get("targets", []) if (t["scenario"], t["policy"]) not in fresh_targets]
    order = {name: k for k, name in enumerate(SCENARIOS)}
    merged = sorted(kept + results, key=lambda r: order.get(r["scenario"], len(order)))
    return merged, kept_targets + targets


def main() -> dict[str, Any] | None:
    if "--backfill" in sys.argv:
        backfill()
        return None
    import torch

    torch.set_num_threads(1)
    quick = quick_mode()
    cap = QUICK_CAP if quick else STEP_CAP
    only = [a for a in sys.argv[1:] if "/" in a]
    results = [measure(name, cap) for name in (only or SCENARIOS) if name not in TARGETS]
    targets = (
        []
        if quick
        else [
            t for name in (only or TARGETS) if name in TARGETS for t in measure_targets(name, TARGETS[name])
        ]
    )
    if only:  # keep what the existing file measured for the scenarios not named
        results, targets = _merged(results, targets)
    headline = []
    for r in results:
        for e in r["entries"]:
            if e["reached_best_rule"]:
                value, unit = e["cpu_seconds_to_rule"], "CPU-s"
                label = f"{r['scenario']} {e['policy']}: CPU-s to reach {r['best_rule']}"
            else:
                value, unit = e["gap_to_rule"], r["kpi"]
                label = f"{r['scenario']} {e['policy']}: best minus {r['best_rule']} (not reached)"
            headline.append({"label": label, "value": value, "unit": unit})
    for t in targets:
        headline.append(
            {
                "label": f"{t['scenario']} [{t['variant']}] {t['policy']}: CPU-s to {t['level']:g}",
                "value": t["cpu_seconds_to_level"],
                "unit": "CPU-s",
            }
        )
    result = {
        "benchmark": "time to quality: training to the best heuristic's validation level",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "step_cap": cap,
        "evaluations_per_training": EVALUATIONS,
        "scenarios": results,
        "targets": targets,
        "headline": headline,
        "curves": [
            {
                "title": f"{r['scenario']}: {r['kpi']} on validation seeds vs training CPU seconds",
                "xlabel": "training CPU seconds",
                "ylabel": r["kpi"],
                "series": {
                    **{
                        e["policy"]: {"x": [c[2] for c in e["curve"]], "y": [c[4] for c in e["curve"]]}
                        for e in r["entries"]
                    },
                },
            }
            for r in results
        ],
    }
    written = write_result(RESULT, result)
    print(f"wrote {written}")
    return result


if __name__ == "__main__":
    main()
