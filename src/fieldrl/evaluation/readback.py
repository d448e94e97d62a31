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

import pandas as pd
from pandas.api import types as dtypes
from pydantic import ValidationError

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError, file_shape_error
from fieldrl.evaluation.store import RunFolder
from fieldrl.results import Summary
from fieldrl.scenario import Scenario

SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.parquet"
TRACES_FILE = "traces.parquet"
NOT_EVALUATED = "evaluate the run first (`fieldrl evaluate RUN_DIR`)"


def read_summary(folder: RunFolder, scenario: Scenario, domain: Domain) -> Summary:
    """The run's ``summary.json`` as written by :func:`fieldrl.api.evaluate`, or one
    :class:`FieldrlError` naming the first field that is not.

    A file written before a KPI said whether it is a yes/no outcome or ranked takes what the domain
    declares (the fields stay unset for everything else an older file lacks: see :class:`Summary`)."""
    data = folder.read_json(SUMMARY_FILE, NOT_EVALUATED)
    source = str(folder.path / SUMMARY_FILE)
    try:
        summary = Summary.model_validate(data)
    except ValidationError as exc:
        raise file_shape_error(exc, source) from None
    problem = _mismatch(summary, scenario, domain)
    if problem:
        raise FieldrlError(f"{source}: {problem} (not what fieldrl wrote for this run: was the file edited?)")
    return _with_kpi_facts(summary, domain)


def _with_kpi_facts(summary: Summary, domain: Domain) -> Summary:
    """``summary`` with the domain's word on each KPI the file does not describe fully (yes/no, ranked)."""
    known = {k.name: k for k in domain.kpis}
    kpis, upgraded = [], False
    for k in summary.kpis:
        spec = known[k.name]  # the KPIs are the domain's (checked by _mismatch)
        facts = {"binary": spec.binary, "ranked": spec.ranked and not spec.wall_clock}
        missing = {key: value for key, value in facts.items() if key not in k.model_fields_set}
        kpis.append(k.model_copy(update=missing) if missing else k)
        upgraded = upgraded or bool(missing)
    return summary.model_copy(update={"kpis": kpis}) if upgraded else summary


def _mismatch(summary: Summary, scenario: Scenario, domain: Domain) -> str | None:
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
