"""What the command line prints: scenario lists, validation notes and KPI tables that fit the terminal.

Light on purpose: nothing here imports a domain, torch or SB3, so ``fieldrl list`` answers at once.
KPI tables that would be wider than the terminal are split into several, each repeating the row
labels, instead of letting every column shrink to "pers…".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fieldrl.errors import FieldrlError
from fieldrl.estimates import duration_text, overview, workload
from fieldrl.policies.algorithms import NAMES
from fieldrl.reportkit.numbers import MIN_CASES, fmt, with_range
from fieldrl.results import Interval, Kpi, Summary
from fieldrl.scenario import Scenario, builtin_scenarios

#: the learned-policy algorithms (the algorithm table's names, sorted)
ALGORITHM_NAMES = tuple(sorted(NAMES))
#: widest first (row-label) column of a KPI table, in characters
LABEL_WIDTH = 26


def scenarios_root() -> Path:
    return Path(str(resources.files("fieldrl") / "scenarios"))


def scenarios_table() -> Table:
    """Every built-in scenario: its name, what it studies, and roughly how long each budget takes."""
    root = scenarios_root()
    table = Table(
        title="Built-in scenarios: fieldrl run NAME [--budget demo]",
        caption=f"Files: {root}/DOMAIN/NAME.yaml. Times: one process (--jobs 1) on 2 cores, rough.",
        caption_justify="left",
        show_lines=True,
    )
    table.add_column("scenario", no_wrap=True)
    table.add_column("what it runs; expected time per budget", ratio=1)
    for name in builtin_scenarios():
        domain, stem = name.split("/", 1)
        info = overview(name, root / domain / f"{stem}.yaml")
        times = " · ".join(f"{budget} {t}" for budget, t in info.times.items())
        table.add_row(name, Text(info.summary + "\n") + Text(times, style="bold"))
    return table


def domain_summary(name: str) -> str:
    """First sentence of a registered domain module's docstring, read without importing the domain.

    :raises BrokenDomainError: its module cannot be found or does not parse.
    """
    from fieldrl.domains import module_docstring

    return module_docstring(name).split("\n")[0].rstrip(".")


def domains_table() -> RenderableType:
    """Each registered domain in one line (and the extra it needs, if missing), and the algorithms.

    A domain whose package is broken (or whose name two packages register) is left out of the table
    and named below it in one line: a third party's broken package never breaks ``fieldrl list``.
    """
    from fieldrl.domains import BrokenDomainError, domain_names, unavailable

    table = Table(
        title="Domains: fieldrl list DOMAIN shows its heuristics and KPIs",
        caption="Algorithms for learned policies: " + ", ".join(ALGORITHM_NAMES),
        caption_justify="left",
    )
    table.add_column("domain", no_wrap=True)
    table.add_column("what it simulates", ratio=1)
    refused: list[Text] = []
    for d in domain_names():
        problem = unavailable(d)
        if isinstance(problem, BrokenDomainError):
            refused.append(Text(f"left out: {problem}", style="red", overflow="fold"))
            continue
        summary = domain_summary(d)
        if problem is not None:
            summary += f" (not installed: {problem.advice.rpartition(': ')[2]})"
        table.add_row(d, escape(summary))
    return Group(table, *refused)


def domain_tables(name: str) -> list[Table]:
    """A domain's heuristics and KPIs (this imports the domain and its simulator)."""
    from fieldrl.domains import domain_names, get_domain

    if name not in domain_names():
        raise FieldrlError(f"DOMAIN = {name!r}: allowed: {', '.join(domain_names())}")
    domain = get_domain(name)
    heuristics = Table(title=f"{domain.title}: heuristics (use: NAME in a scenario)")
    heuristics.add_column("use", no_wrap=True)
    heuristics.add_column("what it does", ratio=1)
    for h, spec in domain.heuristics.items():
        heuristics.add_row(h, spec.description)
    kpis = Table(title=f"{domain.title}: KPIs (report: {{primary_kpi: NAME}})")
    for column in ("name", "what it measures", "unit", "better"):
        kpis.add_column(column, overflow="fold")
    for k in domain.kpis:
        better = "machine time" if k.wall_clock else ("higher" if k.higher_is_better else "lower")
        kpis.add_row(k.name, k.label, k.unit or "-", better)
    tables = [heuristics, kpis]
    if domain.stress_axes:
        axes = Table(title=f"{domain.title}: stress axes (fieldrl stress RUN_DIR --axis NAME[=V1,V2,...])")
        for column in ("name", "what moves", "range", "default points"):
            axes.add_column(column, overflow="fold")
        for name, axis in domain.stress_axes.items():
            unit = f" {axis.unit}" if axis.unit else ""
            points = ", ".join(format(v, axis.fmt) for v in axis.points)
            axes.add_row(name, axis.label, f"{axis.low:g} to {axis.high:g}{unit}", points)
        tables.append(axes)
    return tables


def stress_table(summary: Any) -> list[Table]:
    """Per stress axis and setting: the best learned and best standard policy's primary KPI at each
    point, their paired difference and whether the learned policy is ahead, level or behind."""
    from fieldrl.reports.stress import point_verdicts

    tables = []
    for name, axis in summary.axes.items():
        for variant, setting in axis.variants.items():
            if not (setting.best_learned and setting.best_heuristic):
                continue  # nothing to compare (a run without learned policies): the report says so
            where = "" if variant == "default" else f", setting {variant}"
            unit = f" ({axis.unit})" if axis.unit else ""
            table = Table(title=f"Stress: {axis.label.lower()}{unit}{where}; {summary.primary_label.lower()}")
            learned, standard = setting.best_learned or "-", setting.best_heuristic or "-"
            for column in (name, escape(learned), escape(standard), "difference [95 % CI]", "learned is"):
                table.add_column(column, overflow="fold")
            verdicts = point_verdicts(summary, name, variant)
            for point, said in zip(setting.points, verdicts, strict=True):
                trained = " (trained)" if point.value == setting.trained else ""
                cells = [format(point.value, axis.fmt) + trained]
                for policy in (setting.best_learned, setting.best_heuristic):
                    stats = point.described(policy or "", summary.primary_kpi)
                    cells.append(fmt(stats.mean.value) if stats else "-")
                diff = point.compared(summary.primary_kpi)
                cells.append(with_range(diff.difference) if diff else "-")
                table.add_row(*cells, said)
            tables.append(table)
    return tables


def validation_text(ref: str, budget: str, scenario: Scenario) -> str:
    """What ``fieldrl run`` would do with ``scenario`` (already under ``budget``), and how long it takes."""
    load = workload(scenario)
    n_train = len(scenario.seeds.train)
    n_eval = len(scenario.seeds.eval)
    lines = [
        f"[green]ok[/] {escape(ref)}, budget {budget}: domain {scenario.domain}",
        f"  settings: {escape(', '.join(scenario.variant_names))}",
        f"  policies: {len(scenario.policies.heuristics)} heuristic(s), "
        f"{len(scenario.policies.learned)} learned x {n_train} training seed(s)",
    ]
    if scenario.policies.learned:
        lines.append(f"  training: {load.training_runs} run(s), {load.train_steps:,} env steps in all")
        lines += [f"    {escape(p)}: {n:,} steps" for p, n in load.steps_by_policy.items()]
        for entry in scenario.policies.learned:
            if entry.tuning is not None:
                replaced = entry.tuning.replaced
                told = f"; replaces the scenario's {', '.join(replaced)}" if replaced else ""
                lines.append(
                    f"    {escape(entry.label)}: hyperparameters from {escape(str(entry.tuning.file))} "
                    f"({entry.tuning.trials} trials{escape(told)})"
                )
            if entry.variants is not None:
                lines.append(f"    {escape(entry.label)}: only in {escape(', '.join(entry.variants))}")
            if entry.params:
                own = ", ".join(f"{k} = {v}" for k, v in entry.params.items())
                lines.append(f"    {escape(entry.label)}: its own settings: {escape(own)}")
    lines.append(
        f"  held-out test: {load.eval_episodes:,} episodes "
        f"({n_eval} seed(s) x {scenario.episodes_per_seed} episode(s), per policy and setting)"
    )
    if load.validation_episodes:
        lines.append(f"  validation during training: {load.validation_episodes:,} episodes")
    if scenario.stress is not None:
        axes = ", ".join(a.axis for a in scenario.stress.axes)
        where = ", ".join(scenario.stressed_variants)
        lines.append(
            f"  stress test: {load.stress_episodes:,} episodes ({escape(axes)}; setting {escape(where)}; "
            "nothing retrained)"
        )
    lines.append(f"  expected time: {duration_text(load.seconds(scenario.domain))} with --jobs 1 (rough)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- KPI tables


@dataclass(frozen=True)
class KpiColumn:
    """One KPI column: its header words and one cell per row (rich markup, lines split by newlines)."""

    header: str
    cells: list[str]

    @property
    def width(self) -> int:
        """Wide enough for the longest header word and the longest cell line, never wider than needed."""
        words = max((len(w) for w in self.header.split()), default=1)
        cells = max((cell_width(c) for c in self.cells), default=1)
        return max(words, cells, min(12, len(self.header)))


def cell_width(markup: str) -> int:
    """Width on screen of the widest line of a rich-markup cell."""
    return max(Text.from_markup(line).cell_len for line in markup.split("\n"))


def kpi_header(kpi: Kpi) -> str:
    arrow = "↑" if kpi.higher_is_better else "↓"
    unit = f" ({kpi.unit})" if kpi.unit else ""
    return f"{kpi.label}{unit} {arrow}"


def stat_cell(m: Interval, with_ci: bool) -> str:
    """A mean over the held-out cases, with the 95 % CI half-width on a second line when there are enough."""
    if not with_ci or m.value != m.value:
        return fmt(m.value)
    half = max(m.high - m.value, m.value - m.low)
    return f"{fmt(m.value)}\n[dim]±{fmt(half)}[/]"


def split_columns(widths: Sequence[int], first: int, total: int) -> list[list[int]]:
    """Indices of ``widths`` in as few groups as fit ``total`` each (first column and borders included),
    with about as many columns in each group (no last table holding a single column)."""

    def groups(most: int) -> list[list[int]]:
        out: list[list[int]] = []
        used = 0
        for i, w in enumerate(widths):
            if not out or used + w + 3 > total or len(out[-1]) >= most:
                out.append([])
                used = first + 3 + 1
            out[-1].append(i)
            used += w + 3
        return out

    greedy = groups(len(widths))
    even = groups(-(-len(widths) // len(greedy))) if greedy else greedy
    return even if len(even) == len(greedy) else greedy


def kpi_tables(title: str, labels: list[str], columns: list[KpiColumn], total: int) -> list[Table]:
    """Rows x KPI columns as one table, or several (row labels repeated) where one would not fit ``total``."""
    first = min(LABEL_WIDTH, max([len("policy"), *(cell_width(label) for label in labels)]))
    groups = split_columns([c.width for c in columns], first, total)
    tables = []
    for n, group in enumerate(groups, start=1):
        part = f" (table {n} of {len(groups)})" if len(groups) > 1 else ""
        table = Table(title=title + part)
        table.add_column("policy", width=first, overflow="fold")
        for i in group:
            column = columns[i]
            table.add_column(escape(column.header), width=column.width, justify="right", overflow="fold")
        for r, label in enumerate(labels):
            table.add_row(label, *(columns[i].cells[r] for i in group))
        tables.append(table)
    return tables


def summary_tables(summary: Summary, total: int) -> list[Table]:
    """One table (or a few, to fit) per setting: KPI means with 95 % CI half-widths; * marks the best."""
    tables = []
    for variant, entry in summary.variants.items():
        kpis = summary.measured_kpis(variant) or summary.kpis
        policies = list(entry.policies.items())
        with_ci = all(v[k.name].n_eval_seeds >= MIN_CASES for _, v in policies for k in kpis)
        columns = [
            KpiColumn(kpi_header(k), [stat_cell(v[k.name].mean, with_ci) for _, v in policies]) for k in kpis
        ]
        best = (entry.best_learned, entry.best_heuristic)
        labels = [escape(p) + (" *" if p in best else "") for p, _ in policies]
        where = "" if variant == "default" else f", setting {variant}"
        how = "mean ± 95 % CI half-width" if with_ci else f"mean (no CI: fewer than {MIN_CASES} cases)"
        title = f"{escape((summary.scenario or 'run') + where)}: {how}; * best of its kind"
        tables += kpi_tables(title, labels, columns, total)
    return tables


def compare_label(key: tuple[str, str, str], name_run: bool) -> str:
    """Policy, then (dimmed) its run where several runs share the table, and its setting."""
    run, variant, policy = key
    where = [run] if name_run else []
    if variant != "default":
        where.append(f"setting {variant}")
    return escape(policy) + (f"\n[dim]{escape(', '.join(where))}[/]" if where else "")


def compare_tables(frame: Any, total: int) -> list[Table]:
    """``fieldrl compare``: one table per domain with that domain's KPIs (runs of several domains);
    ``frame`` is :func:`fieldrl.api.compare`'s table."""
    tables = []
    for domain, rows in frame.groupby("domain", sort=False):
        records = list(rows.itertuples(index=False))
        kpis = {
            r.kpi: Kpi(name=r.kpi, label=r.label, unit=r.unit, higher_is_better=bool(r.higher_is_better))
            for r in records
        }
        means = {
            (r.run, r.variant, r.policy, r.kpi): Interval(
                value=float(r.mean), low=float(r.low), high=float(r.high)
            )
            for r in records
        }
        keys = list(dict.fromkeys((r.run, r.variant, r.policy) for r in records))
        with_ci = all(r.n_cases >= MIN_CASES for r in records)
        columns = []
        for k in kpis.values():
            cells = []
            for key in keys:
                mean = means.get((*key, k.name))
                cells.append("-" if mean is None else stat_cell(mean, with_ci))
            columns.append(KpiColumn(kpi_header(k), cells))
        labels = [compare_label(key, len({k[0] for k in keys}) > 1) for key in keys]
        how = "mean ± 95 % CI half-width" if with_ci else "mean"
        title = f"{domain}: {how} over held-out cases"
        tables += kpi_tables(title, labels, columns, total)
    return tables
