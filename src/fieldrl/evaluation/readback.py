"""An evaluated run's files read back: ``summary.json``, ``results.parquet`` and ``traces.parquet``,
their shape checked, and checked against the run's scenario.

The manifest's hash only says a file is the one the manifest names, and whoever edits a run
folder can rewrite both. Every page of the report and every CLI table indexes these files by the
scenario's variants, policies and KPIs, so a file of another shape (a list where a mapping was
written, a string where a number was, a policy the scenario never had) would end in a traceback
deep inside a page. Reading through this module turns any such file into one message naming the
field, before anything is drawn or printed. The numbers themselves cannot be vouched for: a run
folder is only as trustworthy as whoever had it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pandas.api import types as dtypes
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError, file_shape_error
from fieldrl.evaluation.store import RunFolder
from fieldrl.policies.record import TrainingRecord
from fieldrl.scenario import Scenario

SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.parquet"
TRACES_FILE = "traces.parquet"
NOT_EVALUATED = "evaluate the run first (`fieldrl evaluate RUN_DIR`)"


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Interval(_Shape):
    value: float
    low: float
    high: float


class _Described(_Shape):
    mean: _Interval
    iqm: _Interval
    n_train_seeds: NonNegativeInt = 0
    n_eval_seeds: NonNegativeInt = 0


class _Paired(_Shape):
    difference: _Interval
    relative_percent: _Interval


class _Spread(_Shape):
    per_seed: list[float]
    sd: _Interval
    worst: _Interval


class _Stability(_Shape):
    kpi: str
    policy: _Spread
    baseline: _Spread
    sd_difference: _Interval
    worst_difference: _Interval


class _Pair(_Shape):
    policy: str
    baseline: str
    kpis: dict[str, _Paired]
    stability: _Stability | None = None  # written from issue 44 on


class _Variant(_Shape):
    policies: dict[str, dict[str, _Described]]
    best_heuristic: str | None = None
    best_learned: str | None = None
    comparison: dict[str, _Paired] | None = None
    probability_better: _Interval | None = None
    pairs: list[_Pair] = []


class _Kpi(_Shape):
    name: str
    label: str
    unit: str
    higher_is_better: bool
    wall_clock: bool = False
    among: str | None = None
    binary: bool = False
    ranked: bool = True


class _PolicyRef(_Shape):
    name: str
    kind: str = Field(pattern="^(heuristic|learned)$")


class _Failure(_Shape):
    variant: str
    policy: str
    train_seed: int
    eval_seed: int
    episode: NonNegativeInt
    reason: str


class _Validation(_Shape):
    heuristics: dict[str, dict[str, float | None]]
    learned: dict[str, dict[str, dict[str, TrainingRecord]]]


class _Summary(_Shape):
    """What :func:`fieldrl.evaluation.summary.summarize` writes; the fields the pages read with a
    fallback are optional, so runs evaluated by earlier versions (without them) still report."""

    scenario: str | None = None
    domain: str | None = None
    budget: str | None = None
    confidence: float = Field(gt=0, lt=1)
    bootstrap_samples: NonNegativeInt
    primary_kpi: str
    selection_kpi: str | None = None
    kpis: list[_Kpi]
    policies: list[_PolicyRef]
    oracles: list[str] = []
    variants: dict[str, _Variant]
    failed_episodes: list[_Failure] = []
    validation: _Validation | None = None


def read_summary(folder: RunFolder, scenario: Scenario, domain: Domain) -> dict[str, Any]:
    """The run's ``summary.json`` as written by :func:`fieldrl.api.evaluate`, or one
    :class:`FieldrlError` naming the first field that is not."""
    data = folder.read_json(SUMMARY_FILE, NOT_EVALUATED)
    source = str(folder.path / SUMMARY_FILE)
    try:
        summary = _Summary.model_validate(data)
    except ValidationError as exc:
        raise file_shape_error(exc, source) from None
    problem = _mismatch(summary, scenario, domain)
    if problem:
        raise FieldrlError(f"{source}: {problem} (not what fieldrl wrote for this run: was the file edited?)")
    return summary.model_dump(exclude_none=True)  # absent, not None: the pages test for presence


def _mismatch(summary: _Summary, scenario: Scenario, domain: Domain) -> str | None:
    """The first way the summary disagrees with the run's scenario and domain; None if it agrees."""
    kpis = [k.name for k in domain.kpis]
    policies = scenario.policies.by_kind
    names = {name for name, _ in policies}
    checks: list[tuple[bool, str]] = [
        (
            summary.scenario in (None, scenario.name),
            f"scenario = {summary.scenario!r}: this run is {scenario.name!r}",
        ),
        (summary.domain in (None, domain.name), f"domain = {summary.domain!r}: this run is {domain.name!r}"),
        ([k.name for k in summary.kpis] == kpis, f"kpis: not {domain.name}'s KPIs ({', '.join(kpis)})"),
        (summary.primary_kpi in kpis, f"primary_kpi = {summary.primary_kpi!r}: allowed: {', '.join(kpis)}"),
        (
            summary.selection_kpi in (None, *kpis),
            f"selection_kpi = {summary.selection_kpi!r}: allowed: {', '.join(kpis)}",
        ),
        ([(p.name, p.kind) for p in summary.policies] == policies, "policies: not this run's policies"),
        (set(summary.oracles) <= names, f"oracles = {summary.oracles!r}: not all policies of this run"),
        (
            list(summary.variants) == scenario.variant_names,
            f"variants = {list(summary.variants)!r}: this run's settings are {scenario.variant_names!r}",
        ),
    ]
    for variant, entry in summary.variants.items():
        at = f"variants.{variant}"
        unknown = [n for n in entry.policies if n not in names]
        checks.append((not unknown, f"{at}: {unknown[0]!r} is not a policy of this run" if unknown else ""))
        named = [entry.best_heuristic, entry.best_learned]
        named += [n for pair in entry.pairs for n in (pair.policy, pair.baseline)]
        absent = [n for n in named if n is not None and n not in entry.policies]
        checks.append((not absent, f"{at}: {absent[0]!r} has no results in this setting" if absent else ""))
        tables = [*entry.policies.values(), *(pair.kpis for pair in entry.pairs)]
        tables += [entry.comparison] if entry.comparison is not None else []
        checks.append(
            (all(list(t) == kpis for t in tables), f"{at}: a policy's KPIs are not {', '.join(kpis)}")
        )
    return next((message for ok, message in checks if not ok), None)


def read_results(folder: RunFolder, scenario: Scenario) -> pd.DataFrame:
    """The run's ``results.parquet`` (one row per policy, seed, episode and KPI), or one
    :class:`FieldrlError` saying how it is not the table evaluation writes."""
    from fieldrl.evaluation.runner import RESULT_COLUMNS

    frame = folder.read_parquet(RESULTS_FILE, NOT_EVALUATED)
    source = folder.path / RESULTS_FILE
    if list(frame.columns) != RESULT_COLUMNS:
        raise FieldrlError(
            f"{source}: columns {list(frame.columns)!r}: fieldrl writes {', '.join(RESULT_COLUMNS)} "
            "(was the file edited?)"
        )
    known = {
        "variant": scenario.variant_names,
        "policy": [name for name, _ in scenario.policies.by_kind],
        "kind": ["heuristic", "learned"],
        "metric": None,  # the KPIs, and whatever else a domain measures per episode for its pages
    }
    problem = _column_problem(
        frame, known, integers=("train_seed", "eval_seed", "episode"), floats=("value",)
    )
    if problem:
        raise FieldrlError(f"{source}: {problem} (was the file edited?)")
    return frame


def read_traces(folder: RunFolder, scenario: Scenario) -> pd.DataFrame:
    """The run's per-step ``traces.parquet`` (empty if the run has none): the columns every domain
    writes (variant, policy, train seed) checked against the scenario, and every other column a
    column of numbers or of text. What each domain's own columns mean is its report's to check."""
    if TRACES_FILE not in folder.hashes():
        return pd.DataFrame()
    frame = folder.read_parquet(TRACES_FILE)
    known = {
        "variant": scenario.variant_names,
        "policy": [name for name, _ in scenario.policies.by_kind],
    }
    problem = _column_problem(frame, known, integers=("train_seed",), floats=())
    odd = [c for c in frame.columns if not (dtypes.is_numeric_dtype(frame[c]) or _is_text(frame[c]))]
    problem = problem or (f"column {odd[0]!r} holds neither numbers nor text" if odd else None)
    if problem:
        raise FieldrlError(f"{folder.path / TRACES_FILE}: {problem} (was the file edited?)")
    return frame


def _column_problem(
    frame: pd.DataFrame,
    known: dict[str, list[str] | None],
    integers: tuple[str, ...],
    floats: tuple[str, ...],
) -> str | None:
    """The first column of ``frame`` that is missing, of the wrong type, or names something the run
    does not have (``known``: the names a text column may hold; None: any); None if there is none."""
    for column, allowed in known.items():
        if column not in frame.columns:
            return f"column {column!r} is missing"
        if not _is_text(frame[column]):
            return f"column {column!r} is not text"
        if allowed is None:
            continue
        unknown = sorted(set(frame[column]) - set(allowed))
        if unknown:
            return f"{column} = {unknown[0]!r}: not in this run (allowed: {', '.join(allowed)})"
    for column in (*integers, *floats):
        if column not in frame.columns:
            return f"column {column!r} is missing"
        wanted = "integer" if column in integers else "float"
        check = dtypes.is_integer_dtype if column in integers else dtypes.is_float_dtype
        if not check(frame[column]):
            return f"column {column!r} is {frame[column].dtype}, not {wanted}"
    return None


def _is_text(column: pd.Series) -> bool:
    return bool(dtypes.is_string_dtype(column)) and all(isinstance(v, str) for v in column)
