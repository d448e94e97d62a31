"""The input probe's cases (``benchmarks/probe_inputs.py``) as tests: one test per case.

The cases, the commands they run and the classification of the outcome live in the probe; this
module only imports it and asserts, per row the case produces (its follow-ups and any baseline run
it needed included), what the probe's report calls fine: ``problem(row) == ""`` (a clear error that
names the field or value, exit 2, one line, no traceback, nothing left behind; a reasonable
acceptance; a clean interruption). A known deviation (``KNOWN``) must keep exactly its recorded
outcome and is reported as xfail; if it gets worse (a traceback, a hang, a pickle run) or better,
the test fails, so that ``KNOWN`` is updated.

Marked ``probe``. Cases that need real runs (the baseline runs, tampering with a finished run,
interruption, CLI cases on a run folder, and real runs of mutated scenarios that validate) are
also marked ``probe_slow``, which ``addopts`` deselects: ``pytest -m probe_slow`` runs them.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_probe() -> Any:
    name = "probe_inputs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "probe_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


probe_inputs = _load_probe()

#: deviations the last full probe recorded (benchmarks/results/probe_inputs.md; for the interrupt
#: category the rerun in probe_inputs_interrupt.md) or seen since: case id -> the report's outcome
#: column and why. (S-chemo-buffer-1e12, accepted in that report, is now a clear error.)
KNOWN: dict[str, tuple[str, str]] = {
    "S-chemo-cnn-policy": ("accepted (nonsense)", "CnnPolicy refused only by validate --build"),
    "F-traffic-net-empty": ("accepted (nonsense)", "an empty net file passes plain validate"),
    # refused as it should be (exit 2, no pickle run), but after --trust's own warning line: two lines
    "T-weights-pickle-trust": (
        "other",
        "--trust prints its warning before the one-line error (not a weights file): two lines by design",
    ),
    "I-sigterm-training-jobs2-resume": (
        "other",
        "resumed run compared with plain chemo/quick (no checkpoints): different training by design",
    ),
    "I-kill9-group-jobs2-resume": (
        "other",
        "resumed run compared with plain chemo/quick (no checkpoints): different training by design",
    ),
}
#: outcomes that are never acceptable, known deviation or not
NEVER = ("traceback", "hang", "pickle-executed", "left-output")


def _params() -> Iterator[Any]:
    probe = probe_inputs.Probe(_args())
    try:
        for category in probe_inputs.CATEGORIES:
            for case in probe.cases(category):
                marks = [pytest.mark.probe]
                if case.heavy:
                    marks.append(pytest.mark.probe_slow)
                yield pytest.param(category, case.cid, False, id=case.cid, marks=marks)
                # the probe runs a validated mutation for real: meant (try_run) or nonsense accepted
                domain = case.cid.split("-")[1]
                if (
                    case.category in ("scenario", "scenario-files")
                    and domain in probe_inputs.FAST_DOMAINS
                    and (case.try_run or KNOWN.get(case.cid, ("",))[0] == "accepted (nonsense)")
                ):
                    marks = [pytest.mark.probe, pytest.mark.probe_slow]
                    yield pytest.param(category, case.cid, True, id=f"{case.cid}+run", marks=marks)
    finally:
        probe.close()


def _args() -> Any:
    import argparse

    return argparse.Namespace(budget="demo", timeout=120.0, keep_temp=False)


@pytest.fixture(scope="session")
def probe() -> Iterator[Any]:
    """One probe per worker: its baseline runs are made once and shared by the cases that need them."""
    made = probe_inputs.Probe(_args())
    yield made
    made.close()


@pytest.mark.parametrize(("category", "cid", "runs"), list(_params()))
def test_probe_case(probe: Any, category: str, cid: str, runs: bool) -> None:
    (case,) = [c for c in probe.cases(category) if c.cid == cid]
    probe.mutation_runs = 0
    probe.max_mutation_runs = probe_inputs.MAX_MUTATION_RUNS if runs else 0
    rows = probe.run_one(case)
    if runs:
        rows = [r for r in rows if r["id"] == f"{cid}-run"]
        if not rows:
            pytest.skip("the mutated scenario did not validate: nothing to run")
    assert rows, "the case recorded nothing"
    known = []
    for row in rows:
        seen = probe_inputs.outcome_label(row)
        described = (
            f"{row['id']}: {seen} (exit {row['exit']}, {row['lines']} line(s), traceback {row['traceback']}, "
            f"left {row['left_behind'] or '-'}, pickle {row['pickle_marker'] or '-'}, "
            f"note {row['note'] or '-'})"
            f"\n  command: {row['command']}\n  output: {row['output_head']}"
        )
        assert row["outcome"] not in NEVER, described
        if row["id"] in KNOWN:
            expected, why = KNOWN[row["id"]]
            assert seen == expected, f"known deviation changed (update KNOWN): {described}"
            assert probe_inputs.problem(row), f"no longer a deviation (remove from KNOWN): {described}"
            known.append(f"{row['id']}: {expected} ({why})")
        else:
            assert not probe_inputs.problem(row), f"{probe_inputs.problem(row)}: {described}"
    if known:
        pytest.xfail("known deviation: " + "; ".join(known))
