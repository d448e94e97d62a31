"""Build ``report.pdf`` for a run folder with reportlab.

Order follows what a stakeholder needs: the finding in plain words first, then the
KPI table with units and confidence intervals, the comparison chart, learning
curves, the domain's own figures, and an appendix with everything needed to
reproduce the numbers.

This is the assembler: it sits above evaluation (it reads the run folder and may re-summarise
results). The domains' own pages are built from the report kit below them
(:class:`fieldrl.reportkit.context.ReportContext`, which this module fills in).
"""

from __future__ import annotations

import datetime as dt
import io
import math
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pandas as pd
import yaml
from reportlab.lib import colors
from reportlab.lib.units import cm
from reportlab.platypus import (
    CondPageBreak,
    KeepTogether,
    ListFlowable,
    ListItem,
    Paragraph,
    Preformatted,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from fieldrl.domains import get_domain
from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.decisions import read_decision_summary
from fieldrl.evaluation.readback import TRACES_FILE, read_results, read_summary, read_traces
from fieldrl.evaluation.store import RunFolder
from fieldrl.evaluation.stress import StressSummary, read_stress_summary
from fieldrl.policies.algorithms import FINE_TUNE_PREFIX
from fieldrl.reportkit import figures
from fieldrl.reportkit.context import ReportContext, for_report
from fieldrl.reportkit.layout import (
    CELL_PADDING,
    MARGIN,
    PAGE_SIZE,
    PAGE_WIDTH,
    column_groups,
    min_column_width,
    spread,
    stylesheet,
    text_table,
)
from fieldrl.reportkit.numbers import MIN_CASES, fmt, fmt_cell, join_words, plural, too_few
from fieldrl.reports import front
from fieldrl.reports.decisions import decision_pages
from fieldrl.reports.findings import pair_findings, pair_setting_sentences, variant_findings
from fieldrl.reports.replay import replay_pages
from fieldrl.reports.stress import front_sentence, stress_pages
from fieldrl.results import Kpi, Summary, TrainingRecord, VariantResult, failures_ended
from fieldrl.scenario import Scenario, budget_name

#: the curve files training writes beside each model, and their columns: written out here, since the
#: modules that write them (``policies.learned``, ``policies.selection``) import torch and a report
#: imports none (tests/test_light_readers.py checks the two copies agree)
CURVE_FILE = "learning_curve.csv"
CURVE_COLUMNS = ("timesteps", "episode_return", "episode_length")
VALIDATION_FILE = "validation_curve.csv"
VALIDATION_COLUMNS = ("timesteps", "updates", "cpu_seconds", "wall_seconds", "value", "best")


def _learning_curves(folder: RunFolder, scenario: Scenario, variant: str) -> pd.DataFrame:
    return _curves(folder, scenario, variant, CURVE_FILE, CURVE_COLUMNS)


def moved_past_start(
    rows: list[tuple[float, float, float]], higher_is_better: bool
) -> tuple[int, float] | None:
    """``(timesteps, cpu_seconds)`` of the first validation checkpoint that scored better than the first
    (the start: the clone, or the untrained network); None where none did. ``rows``: (timesteps,
    CPU seconds, value) in order."""
    if not rows:
        return None
    start = rows[0][2]
    for steps, cpu, value in rows[1:]:
        better = value > start if higher_is_better else value < start
        if math.isfinite(value) and (not math.isfinite(start) or better):
            return int(steps), float(cpu)
    return None


def _validation_curves(folder: RunFolder, scenario: Scenario, variant: str) -> pd.DataFrame:
    return _curves(folder, scenario, variant, VALIDATION_FILE, VALIDATION_COLUMNS)


def _curves(
    folder: RunFolder, scenario: Scenario, variant: str, name: str, columns: tuple[str, ...]
) -> pd.DataFrame:
    """One curve file per trained model (verified against the manifest), with its policy and seed;
    a file without exactly ``columns``, all numeric, is refused. A training that finished no
    episode has an empty learning curve, and is left out."""
    from fieldrl.evaluation.runner import model_dir

    frames = []
    recorded = folder.hashes()
    for entry in scenario.policies.learned:
        for seed in scenario.seeds.train:
            rel = f"{model_dir(variant, entry.label, seed)}/{name}"
            if rel not in recorded:
                continue
            try:
                frame = pd.read_csv(io.BytesIO(folder.read_verified(rel, "")))
                problem = None if tuple(frame.columns) == columns else f"columns {list(frame.columns)!r}"
                numeric = frame.apply(pd.to_numeric, errors="raise").astype(float)
            except (ValueError, TypeError, pd.errors.ParserError, UnicodeDecodeError) as exc:
                problem = problem or f"not numbers ({' '.join(str(exc).split())[:120]})"
            if problem:
                raise FieldrlError(
                    f"{folder.path / rel}: {problem}; fieldrl writes the numeric columns "
                    f"{', '.join(columns)} (was the file edited?)"
                )
            if not numeric.empty:
                frames.append(numeric.assign(policy=entry.label, seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def best_heuristic_on_validation(summary: Summary, variant: str) -> tuple[str, float] | None:
    """The best heuristic's mean selection KPI on the validation seeds, if they were scored."""
    scores = summary.heuristic_validation(variant)
    finite = {
        k: v for k, v in scores.items() if v is not None and math.isfinite(v) and not summary.is_oracle(k)
    }
    if not finite:
        return None
    pick = max if summary.selection.higher_is_better else min
    name = pick(finite, key=finite.__getitem__)
    return name, finite[name]


def flattered_by_selection(summary: Summary, scenario: Scenario, variant: str) -> list[str]:
    """A sentence naming the learned policies whose kept checkpoints beat the best standard policy
    on the validation cases but are behind that same policy on the held-out cases (none: empty).

    A kept checkpoint is the best of many scored on a few validation cases, so its validation score
    is optimistic (the winner's curse), and a few cases can also favour one controller by chance
    (traffic/quick: 3 validation days put PPO ahead of Webster, 10 put it behind, with the same
    checkpoints kept). The validation curves then show a lead that the held-out test does not
    confirm, and the reader must be told which figure to trust.
    """
    rule = best_heuristic_on_validation(summary, variant)
    if rule is None:
        return []
    rule_name, rule_validation = rule
    kpi = summary.selection
    better = (lambda a, b: a > b) if kpi.higher_is_better else (lambda a, b: a < b)
    unit = f" {kpi.unit}" if kpi.unit else ""
    held_out = summary.variant(variant)

    flattered: list[tuple[str, float, float]] = []
    rule_test = held_out.value(rule_name, kpi.name)
    for entry in scenario.policies.learned:
        records = summary.training_records(variant, entry.label)
        kept = [
            r.selected.value for r in records if r.selected is not None and math.isfinite(r.selected.value)
        ]
        learned_test = held_out.value(entry.label, kpi.name)
        if not kept or not math.isfinite(learned_test) or not math.isfinite(rule_test):
            continue
        learned_validation = sum(kept) / len(kept)
        if better(learned_validation, rule_validation) and better(rule_test, learned_test):
            flattered.append((entry.label, learned_validation, learned_test))
    if not flattered:
        return []
    names = join_words([name for name, _, _ in flattered])
    on_validation = join_words([fmt(v) for _, v, _ in flattered])
    on_test = join_words([fmt(t) for _, _, t in flattered])
    if len(flattered) == 1:
        was, chose, is_ = "was", "its kept checkpoint", "is"
    else:
        was, chose, is_ = "were", "their kept checkpoints", "are"
    cases_text = plural(len(scenario.seeds.validation or []), "validation case")
    return [
        f"{names} {was} ahead of {rule_name} on the {cases_text} that chose {chose} "
        f"({on_validation}{unit} against {fmt(rule_validation)}{unit}) but {is_} behind it "
        f"on the held-out cases ({on_test}{unit} against {fmt(rule_test)}{unit}). A lead on a few "
        "validation cases, where the best of many checkpoints is kept, does not carry over by itself: "
        "trust the held-out figures; more validation cases make that choice more reliable."
    ]


def untrained_warnings(summary: Summary, scenario: Scenario) -> list[str]:
    """One sentence per learned policy whose held-out model made no gradient update."""
    lines = []
    for variant in scenario.variant_names:
        where = "" if variant == "default" else f" ({variant})"
        for entry in scenario.policies.learned:
            records = summary.training_records(variant, entry.label)
            idle = [r for r in records if _kept_updates(r) == 0]
            if not idle:
                continue
            start = _start_of(entry)
            lines.append(
                f"{entry.label}{where}: {len(idle)} of {len(records)} trained model(s) held out made no "
                f"gradient update (the {start} scored best on the validation seeds, or training never "
                f"updated it). Its results are those of the {start}, not of reinforcement learning."
            )
    return lines


def _start_of(entry: Any) -> str:
    """What a learned policy's held-out model is when it never made a gradient update."""
    if entry.residual:
        return f"heuristic {entry.residual.heuristic} with a zero correction"
    return "behaviour-cloned warm start" if entry.imitate else "untrained network"


def collapsed_untrained_warnings(summary: Summary, scenario: Scenario) -> list[str]:
    """:func:`untrained_warnings` in one sentence, however many policies and settings it concerns
    (page 1 has room for one warning, not one per policy and setting)."""
    if len(scenario.variant_names) == 1 and len(scenario.policies.learned) == 1:
        return untrained_warnings(summary, scenario)
    parts, starts = [], set()
    for entry in scenario.policies.learned:
        hit, idle, total = [], 0, 0
        for variant in scenario.variant_names:
            records = summary.training_records(variant, entry.label)
            n = sum(1 for r in records if _kept_updates(r) == 0)
            idle, total = idle + n, total + len(records)
            if n:
                hit.append(variant)
        if not hit:
            continue
        where = "" if hit == ["default"] else f" ({', '.join(hit)})"
        parts.append(f"{entry.label}, {idle} of {total}{where}")
        starts.add(_start_of(entry))
    if not parts:
        return []
    return [
        f"held-out models that made no gradient update: {'; '.join(parts)}. Their results are those of "
        f"the {' or '.join(sorted(starts))} they started from, not of reinforcement learning."
    ]


def _kept_updates(record: TrainingRecord) -> int:
    """Gradient updates of the model held out: its kept checkpoint's, else its last."""
    return record.selected.gradient_updates if record.selected else record.gradient_updates


def best_policies(entry: VariantResult, kpis: list[Kpi], stat: str = "mean") -> dict[str, str | None]:
    """KPI name -> the policy with the best ``stat`` value; None where no policy has a value (NaN)."""
    return {k.name: entry.best(k, stat) for k in kpis}


#: width of the policy column of KPI tables
POLICY_COLUMN = 3.2 * cm


def _kind_label(summary: Summary, policy: str) -> str:
    if summary.is_oracle(policy):
        return "optimum (reference)"
    return {"heuristic": "standard", "learned": "learned"}.get(summary.kind(policy) or "", "")


def _kpi_header(k: Kpi) -> str:
    arrow = "higher is better" if k.higher_is_better else "lower is better"
    arrow = arrow if k.is_ranked else "not ranked"
    unit = f" ({escape(k.unit)})" if k.unit else ""
    return f"<b>{escape(k.label)}</b>{unit}<br/><i>{arrow}</i>"


def _kpi_cells(ctx: ReportContext, variant: str, stat: str, kpis: list[Kpi]) -> list[list[str]]:
    """Header and one row per policy, as paragraph markup (policy column first)."""
    summary = ctx.summary
    entry = summary.variant(variant)
    with_ci = entry.all_cases() >= MIN_CASES
    best = best_policies(entry, kpis, stat)
    rows = [["<b>Policy</b>"] + [_kpi_header(k) for k in kpis]]
    for policy, values in entry.policies.items():
        row = [f"{escape(policy)}<br/><font size=6>{_kind_label(summary, policy)}</font>"]
        for k in kpis:
            m = values[k.name].stat(stat)
            if stat == "iqm" and k.binary:
                row.append("n/a<br/><font size=6>yes/no outcome</font>")
                continue
            text = fmt_cell(m.value)
            if with_ci and m.value == m.value:
                text += f"<br/><font size=6>[{fmt_cell(m.low)}, {fmt_cell(m.high)}]</font>"
            if k.is_ranked and best[k.name] == policy:
                text = f"<b>{text}</b>"
            row.append(text)
        rows.append(row)
    return rows


def kpi_table(ctx: ReportContext, variant: str, stat: str = "mean", kpis: list[Kpi] | None = None) -> Table:
    """Policies x KPIs: ``stat`` (mean or iqm), with its CI where there are enough held-out cases; bold
    marks the best per ranked KPI. Every column is at least as wide as its widest header word."""
    kpis = kpis or ctx.summary.kpis
    rows = _kpi_cells(ctx, variant, stat, kpis)
    size = ctx.styles["Cell"].fontSize
    first = max(POLICY_COLUMN, min_column_width([r[0] for r in rows], size))
    minimum = [min_column_width([r[i] for r in rows], size) for i in range(1, len(rows[0]))]
    widths = [first, *spread(minimum, PAGE_WIDTH - first)]
    cell = ctx.styles["Cell"]
    table = Table([[Paragraph(c, cell) for c in row] for row in rows], colWidths=widths, repeatRows=1)
    style = [
        ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), CELL_PADDING),
        ("RIGHTPADDING", (0, 0), (-1, -1), CELL_PADDING),
    ]
    for i, policy in enumerate(ctx.summary.variant(variant).policies, start=1):
        if ctx.summary.kind(policy) == "learned":
            style.append(("BACKGROUND", (0, i), (-1, i), colors.HexColor("#f4f8fc")))
    table.setStyle(TableStyle(style))
    return table


def kpi_tables(ctx: ReportContext, variant: str, stat: str = "mean") -> list[Table]:
    """:func:`kpi_table` split into as few tables as fit the page width with no header word broken
    (each repeats the policy column): nine traffic KPIs become two tables, not nine squeezed columns."""
    kpis = ctx.summary.kpis
    rows = _kpi_cells(ctx, variant, stat, kpis)
    size = ctx.styles["Cell"].fontSize
    first = max(POLICY_COLUMN, min_column_width([r[0] for r in rows], size))
    minimum = [min_column_width([r[i] for r in rows], size) for i in range(1, len(rows[0]))]
    groups = column_groups(minimum, PAGE_WIDTH - first)
    return [kpi_table(ctx, variant, stat, [kpis[i] for i in group]) for group in groups]


def _bullets(items: list[Paragraph]) -> ListFlowable:
    return ListFlowable([ListItem(p, leftIndent=10) for p in items], bulletType="bullet", start="•")


def build_report(folder: RunFolder, scenario: Scenario, meta: dict[str, Any]) -> Path:
    domain = get_domain(scenario.domain)
    results = read_results(folder, scenario)
    summary = for_report(
        _without_oracle_as_best(read_summary(folder, scenario, domain), results, scenario, domain)
    )
    ctx = ReportContext(
        folder=folder,
        scenario=scenario,
        domain=domain,
        summary=summary,
        results=results,
        traces=read_traces(folder, scenario),
        styles=stylesheet(),
        colors=figures.policy_colors(summary.policies),
    )
    title = scenario.report.title or f"{domain.title}: {scenario.name}"
    stress = read_stress_summary(folder)
    story = _front_page(ctx, title, meta.get("budget", "full"), stress)
    story.append(CondPageBreak(PAGE_ONE_SPILL))
    story.extend(_findings_pages(ctx, meta.get("budget", "full")))
    for variant in scenario.variant_names:
        story.extend(_variant_pages(ctx, variant))
    story.extend(_comparison_pages(ctx))
    stress_flowables = stress_pages(ctx, stress)
    if stress_flowables:
        story.append(CondPageBreak(SECTION_ROOM))
        story.extend(stress_flowables)
    story.append(CondPageBreak(SECTION_ROOM))
    story.extend(replay_pages(ctx, folder))  # the storyboard of the latest replay (fieldrl replay)
    story.append(CondPageBreak(SECTION_ROOM))
    story.extend(decision_pages(ctx, read_decision_summary(folder)))
    domain_flowables = _domain_section(ctx)
    if domain_flowables:
        story.append(CondPageBreak(SECTION_ROOM))
        story.extend(domain_flowables)
    story.append(CondPageBreak(SECTION_ROOM))
    story.extend(_appendix(ctx, meta))

    buffer = io.BytesIO()
    doc = SimpleDocTemplate(
        buffer,
        pagesize=PAGE_SIZE,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=1.6 * cm,
        bottomMargin=1.6 * cm,
        title=title,
        author="fieldrl",
    )
    doc.build(story, onFirstPage=_footer, onLaterPages=_footer)
    folder.write_bytes("report.pdf", buffer.getvalue(), record=False)
    folder.record(*ctx.figure_files, "report.pdf")
    return folder.path / "report.pdf"


#: page 1 ends with a page break unless it spilled onto page 2 (then at least this much of page 2 is
#: left, and the details follow on the same page instead of leaving it nearly empty)
PAGE_ONE_SPILL = 20 * cm
#: the KPI comparison chart is at most this tall (narrower where it would be taller), so that it fits
#: beside the end of the tables above it instead of leaving that page mostly empty
CHART_HEIGHT = 15 * cm
#: a new section starts on a new page only when less than this is left on the current one (a forced page
#: break after a section whose last lines spilled over left pages holding one line)
SECTION_ROOM = 9 * cm


def _without_oracle_as_best(
    summary: Summary, results: pd.DataFrame, scenario: Scenario, domain: Domain
) -> Summary:
    """A summary written before exact optimisers were set apart (its file has no ``oracles``) picked one as
    "best heuristic" and compared the learned policy with it: such a run is re-summarised from its results
    (nothing is re-run)."""
    from fieldrl.evaluation.summary import oracle_labels, summarize

    if "oracles" in summary.model_fields_set or not oracle_labels(scenario, domain):
        return summary
    fresh = summarize(results, scenario, domain, summary.budget or "full")
    return summary.model_copy(update={"variants": fresh.variants, "oracles": fresh.oracles})


#: front-page caveat for runs below the full budget
_BUDGET_NOTES = {
    "demo": "Demo run ('demo' budget: short training, few seeds and held-out cases): its numbers show the "
    "pipeline working, not what the learned policies can reach.",
    "medium": "Note: this run used the scenario's 'medium' budget (less than the full study: fewer "
    "training steps, training seeds, settings or held-out cases; the appendix lists which); the learned "
    "policies' numbers are what that budget reaches, not necessarily what the full study would.",
}


def _front_page(
    ctx: ReportContext, title: str, budget: str, stress: StressSummary | None = None
) -> list[Any]:
    """Page 1: the verdict, one table, one chart, the effort each learned policy got, and the terms used."""
    scenario, styles, summary = ctx.scenario, ctx.styles, ctx.summary
    story: list[Any] = [Paragraph(escape(title), styles["Title"])]
    story.append(
        ctx.para(
            f"Report generated {dt.date.today().isoformat()} by fieldrl from run folder "
            f"'{ctx.folder.path.name}' (budget: {budget}).",
            "Small",
        )
    )
    budget = budget_name(budget)  # runs made before 'quick' was renamed 'demo'
    if budget in _BUDGET_NOTES:
        story.append(Paragraph(f"<b>{escape(_BUDGET_NOTES[budget])}</b>", styles["Small"]))
    variants = scenario.variant_names
    single = len(variants) == 1
    headlines = front.headline_kpis(summary, variants[0], tuple(ctx.domain.headline_kpis))
    if single:
        story.append(ctx.para(front.verdict_sentence(summary, variants[0], headlines), "Verdict"))
        primary = summary.primary_kpi
        if primary not in [k.name for k in headlines]:
            ranking = ctx.domain.kpi(primary).label.lower()
            explained = any(term.lower() in ranking for term in ctx.domain.glossary)
            line = front.ranking_sentence(summary, variants[0], explained)
            if line:
                story.append(ctx.para(line, "Finding"))
        table = front.headline_table(ctx, variants[0], headlines, PAGE_WIDTH)
    else:
        story.append(ctx.para(front.settings_sentence(summary, tuple(ctx.domain.headline_kpis)), "Verdict"))
        table = front.settings_table(ctx, PAGE_WIDTH)
    if table is not None:
        story.extend([Spacer(1, 4), table, Spacer(1, 4)])
    story.append(front.chart(ctx, headlines, PAGE_WIDTH * (0.95 if single else 0.8)))
    stressed = front_sentence(stress, scenario.stressed_variants[0])
    if stressed:
        story.append(ctx.para(stressed, "Finding"))
    for line in pair_setting_sentences(summary):  # the scenario's own question, e.g. does memory help?
        story.append(ctx.para(line, "Finding"))
    failures = summary.failed_episodes
    if failures:
        runs = len(scenario.policies.heuristics) + len(scenario.policies.learned) * len(scenario.seeds.train)
        n_eval = len(scenario.seeds.eval) * scenario.episodes_per_seed
        total = n_eval * runs * len(variants)
        story.append(
            Paragraph(
                f"<b>{len(failures)} of {total} held-out episodes failed</b>: they ended "
                f"{escape(failures_ended(failures))}, each retried once on a fresh simulator, and are left "
                "out of every number in this report; the appendix lists them.",
                styles["Finding"],
            )
        )
    story.extend(_effort_block(ctx))
    with_ci = all(e.all_cases() >= MIN_CASES for e in summary.variants.values() if e.policies)
    story.append(Paragraph("How to read this", styles["Heading3"]))
    story.extend(Paragraph(line, styles["Term"], bulletText="•") for line in front.glossary(ctx, with_ci))
    return story


def _compared_text(scenario: Scenario, oracles: list[str], budget: str) -> str:
    """What the run compared, counted from the scenario as it ran (its budget applied)."""
    n_standard = len(scenario.policies.heuristics) - len(oracles)
    n_learned = len(scenario.policies.learned)
    n_eval, episodes = len(scenario.seeds.eval), scenario.episodes_per_seed
    text = f"What this run compared: {plural(n_standard, 'standard (heuristic) policy', 'standard policies')}"
    if oracles:
        text += (
            f", {plural(len(oracles), 'exact optimum', 'exact optima')} as a reference ({', '.join(oracles)})"
        )
    text += f" and {plural(n_learned, 'learned policy', 'learned policies')}"
    if n_learned:
        text += f", each trained on {plural(len(scenario.seeds.train), 'training seed')}"
    text += f". Every policy was tested on the same {plural(n_eval, 'held-out case')} (not used in training"
    text += f", {episodes} episodes each)" if episodes > 1 else ")"
    if scenario.variants:
        names = ", ".join(scenario.variant_names)
        text += f", separately in each of {len(scenario.variant_names)} settings ({names})"
    text += "."
    if budget != "full":
        text += (
            f" The description above is of the scenario as written; this run used the '{budget}' budget, "
            "and every number in this report comes from what it ran."
        )
    return text


def _findings_pages(ctx: ReportContext, budget: str) -> list[Any]:
    """Page 2: what the run was (from what actually ran), then the findings, setting by setting."""
    scenario, styles = ctx.scenario, ctx.styles
    story: list[Any] = [Paragraph("About this run", styles["Heading2"])]
    if scenario.description:
        story.append(ctx.para(scenario.description.strip()))
    oracles = set(ctx.summary.oracles)
    story.append(ctx.para(_compared_text(scenario, sorted(oracles), budget)))
    story.append(Paragraph("Key findings", styles["Heading2"]))
    for variant in scenario.variant_names:
        lines = variant_findings(ctx.summary, variant)
        lines += flattered_by_selection(ctx.summary, scenario, variant)
        if variant != "default":
            story.append(Paragraph(f"Setting {escape(variant)}", styles["Heading3"]))
            lines = [line.removeprefix(f"On {variant}: ") for line in lines]
        story.append(_bullets([ctx.para(line, "Finding") for line in lines]))
    pairs = pair_findings(ctx.summary)
    if pairs:
        story.append(Paragraph("Requested comparisons", styles["Heading3"]))
        story.append(_bullets([ctx.para(line, "Finding") for line in pairs]))
    return story


def _effort_block(ctx: ReportContext) -> list[Any]:
    """Page 1: how much effort each learned policy got, read from the models and the tuning records."""
    scenario = ctx.scenario
    if not scenario.policies.learned:
        return []
    out: list[Any] = []
    for line in collapsed_untrained_warnings(ctx.summary, scenario):
        out.append(Paragraph(f"<b>Warning:</b> {escape(line)}", ctx.styles["Finding"]))
    rows = [["Learned policy", "Trained (from the models)", "Kept for the test", "Hyperparameters"]]
    warm_started = any(e.imitate or e.residual for e in scenario.policies.learned)
    curves = (  # read once for every entry: each setting's file of every model
        [_validation_curves(ctx.folder, scenario, v) for v in scenario.variant_names] if warm_started else []
    )
    for entry in scenario.policies.learned:
        records = [r for v in scenario.variant_names for r in ctx.summary.training_records(v, entry.label)]
        rows.append(
            [
                entry.label,
                _trained_text(records) + _fine_tune_short(entry),
                _kept_text(records) + _moved_past_text(ctx, entry, curves),
                _tuning_text(entry, scenario.name, scenario.variant_names),
            ]
        )
    out.append(Paragraph("Training effort", ctx.styles["Heading3"]))
    out.append(text_table(rows, ctx.styles, [2.6 * cm, 4.4 * cm, 4.6 * cm, PAGE_WIDTH - 11.6 * cm]))
    return out


def _span(values: list[float], fmt_spec: str = ",.0f") -> str:
    if not values:
        return "n/a"
    low, high = min(values), max(values)
    return f"{low:{fmt_spec}}" if low == high else f"{low:{fmt_spec}}–{high:{fmt_spec}}"


def _trained_text(records: list[TrainingRecord]) -> str:
    if not records:
        return "no model found"
    steps = _span([r.num_timesteps for r in records])
    updates = _span([r.gradient_updates for r in records])
    pulled = [r.fine_tune.pull_updates if r.fine_tune else 0 for r in records]
    pull = f" + {_span(pulled)} steps of the pull toward the clone" if any(pulled) else ""
    return f"{steps} env steps, {updates} gradient updates{pull} ({len(records)} model(s))"


def _moved_past_text(ctx: ReportContext, entry: Any, curves: list[pd.DataFrame]) -> str:
    """For a warm-started policy: whether and when training first beat its start on the validation
    seeds (from each setting's validation ``curves``, whose first row per model scores the start)."""
    if entry.imitate is None and entry.residual is None:
        return ""
    higher = ctx.summary.selection.higher_is_better
    found = []
    for frame in curves:
        if frame.empty:
            continue
        for _, curve in frame[frame["policy"] == entry.label].groupby("seed"):
            rows = curve.sort_values("timesteps")
            found.append(
                moved_past_start(
                    list(zip(rows["timesteps"], rows["cpu_seconds"], rows["value"], strict=True)), higher
                )
            )
    if not found:
        return ""
    start = "its clone" if entry.imitate is not None else "its heuristic (zero correction)"
    moved = [m for m in found if m is not None]
    if not moved:
        return f"; never moved past {start} on validation"
    at = _span([m[0] for m in moved])
    cpu = _span([m[1] for m in moved])
    share = "" if len(moved) == len(found) else f" ({len(moved)} of {len(found)} models)"
    return f"; first moved past {start} at {at} steps, {cpu} CPU s{share}"


def _kept_text(records: list[TrainingRecord]) -> str:
    selected = [r.selected for r in records if r.selected]
    if not selected:
        return "final weights (no validation seeds)"
    at = _span([s.timesteps for s in selected])
    return f"best of its validation checkpoints, at {at} steps"


def tuned_elsewhere(entry: Any, scenario_name: str) -> str | None:
    """Where an entry's study was run when that is not this entry of this scenario (a transferred
    tuning): "on scenario X", "for policy Y" or both; None when it was tuned here, for this entry.

    ``fieldrl tune`` names its studies ``<scenario>/<setting>/<policy>``; hyperparameters tuned on a
    smaller sibling scenario, or for a sibling entry (the same learner without a warm start, say),
    were never scored with this entry on this scenario's validation seeds, and the report must say so.
    """
    if entry.tuning is None:
        return None
    parts = entry.tuning.study.split("/", 2)
    source, policy = parts[0], parts[2] if len(parts) == 3 else entry.label
    where = [f"on scenario {source}"] if source != scenario_name else []
    where += [f"for policy {policy}"] if policy != entry.label else []
    return " ".join(where) or None


def _tuning_text(entry: Any, scenario_name: str, settings: list[str] | None = None) -> str:
    """The effort table's hyperparameter cell. With several ``settings`` in the run, the one the
    study scored on is named: its values serve every setting, tuned on one of them only. A run
    without that setting says so too: none of its settings is the one the values were tuned on."""
    if entry.tuning is None:
        return "as written in the scenario (not tuned)"
    t = entry.tuning
    best = "" if t.best_value is None else f", best validation value {fmt(t.best_value)}"
    source = tuned_elsewhere(entry, scenario_name)
    moved = "" if source is None else f" {source}, transferred here (not tuned for this entry here)"
    parts = t.study.split("/", 2)
    tuned_on = parts[1] if len(parts) == 3 else None
    on = ""
    if settings and len(settings) > 1 and tuned_on in settings:
        on = f" (on setting {tuned_on}, used in every setting)"
    elif settings and tuned_on not in (None, "default", *settings) and source is None:
        on = f" (on setting {tuned_on}, which this run did not test; used in every setting here)"
    aids = ""
    if any(name.startswith(FINE_TUNE_PREFIX) for name in t.search_space):
        aids = ", the fine-tuning aids in its search space"
    return f"tuned: {t.trials} trials of study {t.study}{aids}{on}{moved}{best}"


def _variant_pages(ctx: ReportContext, variant: str) -> list[Any]:
    """KPI table, comparison chart and learning curves of one variant."""
    styles = ctx.styles
    suffix = "" if variant == "default" else f" — {variant}"
    n = ctx.summary.variant(variant).all_cases()
    spread_note = (
        "brackets: 95 % CI"
        if n >= MIN_CASES
        else f"no confidence intervals: {plural(n, 'held-out case')} (fewer than {MIN_CASES})"
    )
    tables = kpi_tables(ctx, variant)
    head = [  # kept on one page: a heading never ends a page without its table
        Paragraph(f"Results{suffix}", styles["Heading2"]),
        ctx.para(f"Settings: {_params_text(ctx.scenario, ctx.domain, variant)}", "Small"),
        tables[0],
    ]
    rest: list[Any] = []
    for table in tables[1:]:
        rest.append(KeepTogether([Spacer(1, 6), table]))  # whole, not three rows left on a page
    rest += [
        Spacer(1, 6),
        ctx.para(
            f"Mean over held-out cases; {spread_note}; bold: best on that measure (none on measures marked "
            "'not ranked'); shaded rows: learned policies." + _not_measured_text(ctx.summary, variant),
            "Small",
        ),
    ]
    story: list[Any] = [KeepTogether(head), *rest]
    n_kpis = len(ctx.summary.measured_kpis(variant))
    png = figures.kpi_comparison(ctx.summary, variant, ncols=4 if n_kpis > 6 else 3)
    chart = ctx.figure(f"kpis-{variant}", png, max_height=CHART_HEIGHT)
    story.append(KeepTogether([Paragraph(f"Comparison chart{suffix}", styles["Heading3"]), chart]))
    png = figures.learning_curves(_learning_curves(ctx.folder, ctx.scenario, variant), ctx.colors)
    if png is not None:
        story.append(
            KeepTogether(
                [
                    Paragraph(f"Learning curves{suffix}", styles["Heading3"]),
                    ctx.figure(f"learning-{variant}", png, width=PAGE_WIDTH * 0.85),
                    ctx.para(
                        "Training-time returns (exploration on, training cases): they show learning "
                        "progress only; the table above is the held-out evaluation.",
                        "Small",
                    ),
                ]
            )
        )
    curves = _validation_curves(ctx.folder, ctx.scenario, variant)
    kpi = ctx.domain.kpi(ctx.summary.selection.name)
    heuristic = best_heuristic_on_validation(ctx.summary, variant)
    flattered = "".join(f" {line}" for line in flattered_by_selection(ctx.summary, ctx.scenario, variant))
    png = figures.validation_curves(curves, heuristic, kpi.label, ctx.colors)
    if png is not None:
        story.append(
            KeepTogether(
                [
                    Paragraph(f"Validation curves{suffix}", styles["Heading3"]),
                    ctx.figure(f"validation-{variant}", png),
                    ctx.para(
                        f"{kpi.label} on the validation seeds (cases used neither in training nor in the "
                        "held-out test) at each evaluation during training, against training steps (left) "
                        "and training CPU seconds (right: time to quality). Dots: the checkpoint kept for "
                        "the held-out test (the best on validation). Dashed: the best standard policy on "
                        "the same validation cases." + flattered,
                        "Small",
                    ),
                ]
            )
        )
    return story


def _not_measured_text(summary: Summary, variant: str) -> str:
    """A note on KPIs without a value for any policy in ``variant`` (n/a column, no chart panel)."""
    measured = {k.name for k in summary.measured_kpis(variant)}
    missing = [k.label for k in summary.kpis if k.name not in measured]
    if not missing:
        return ""
    which = ", ".join(f"'{m}'" for m in missing)
    verb, it = ("has", "it is") if len(missing) == 1 else ("have", "they are")
    return f" n/a: {which} {verb} no value for any policy in this setting, so {it} not charted."


def _comparison_pages(ctx: ReportContext) -> list[Any]:
    """One chart per requested comparison: policy minus baseline across variants."""
    story: list[Any] = []
    for index, pair in enumerate(ctx.scenario.report.comparisons):
        png = figures.pair_differences(ctx.summary, index)
        heading = f"{escape(pair.policy)} against {escape(pair.baseline)}"
        entries = ctx.summary.variants.values()
        n = min((e.cases(pair.policy, pair.baseline) for e in entries), default=0)
        if n >= MIN_CASES:
            caption = (
                "Difference on the same held-out cases (policy minus baseline) in every setting, "
                "with 95 % confidence intervals; an interval crossing 0 means no clear difference."
            )
        else:
            caption = (
                "Difference on the same held-out cases (policy minus baseline) in every setting: mean "
                f"differences only, {too_few(n)}; they show the pipeline, not a difference."
            )
        story.append(
            KeepTogether(
                [
                    Paragraph(heading, ctx.styles["Heading2"]),
                    ctx.para(caption, "Small"),
                    ctx.figure(f"pair-{index}", png),
                ]
            )
        )
    return story


def _footer(canvas: Any, doc: Any) -> None:
    canvas.saveState()
    canvas.setFont("Helvetica", 7)
    canvas.drawRightString(PAGE_SIZE[0] - MARGIN, 1 * cm, f"fieldrl report — page {doc.page}")
    canvas.restoreState()


def _params_text(scenario: Scenario, domain: Domain, variant: str) -> str:
    """The settings the scenario chose (defaults left out), each shortened to fit a line."""
    params = domain.params_model.model_validate(scenario.variant_params(variant))
    chosen = params.model_dump(exclude_unset=True)
    text = "; ".join(f"{k} = {_setting_text(v)}" for k, v in chosen.items() if v is not None)
    return f"{text} (other settings at their defaults)." if text else "all settings at their defaults."


def _setting_text(value: Any, limit: int = 70) -> str:
    if isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_setting_text(v, limit)}" for k, v in value.items()) + "}"
    elif (
        isinstance(value, list | tuple) and value and all(isinstance(v, dict) and "name" in v for v in value)
    ):
        text = f"{len(value)} × (" + ", ".join(str(v["name"]) for v in value) + ")"
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(_setting_text(v, limit) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _appendix(ctx: ReportContext, meta: dict[str, Any]) -> list[Any]:
    s, styles = ctx.scenario, ctx.styles
    out: list[Any] = [Paragraph("Appendix: methods and reproducibility", styles["Heading2"])]
    conf = int(round(100 * ctx.summary.confidence))
    out.append(
        ctx.para(
            "Protocol. Learned policies were trained with Stable-Baselines3 on the training seeds only. "
            "Every policy, standard or learned, was then run with deterministic actions on the same held-out "
            "evaluation seeds (common random numbers: the same simulated cases for everyone). Each number is "
            f"the mean over held-out episodes (and over training seeds for learned policies). {conf} % "
            f"confidence intervals come from a stratified percentile bootstrap "
            f"({ctx.summary.bootstrap_samples} resamples) over training seeds and evaluation seeds, "
            "using the same evaluation-seed draws for every policy, so comparisons are paired. The "
            "interquartile mean (IQM, table below) is reported beside the mean for robustness. "
            "'Best' policies are chosen by the primary measure, "
            f"{ctx.domain.kpi(ctx.summary.primary_kpi).label}."
        )
    )
    failed = ctx.summary.failed_episodes
    if failed:
        out.append(Paragraph("Failed episodes", styles["Heading3"]))
        out.append(
            ctx.para(
                f"{len(failed)} held-out episode(s) ended {failures_ended(failed)}; they were re-run alone "
                "on a fresh simulator, failed again, and are left out of every number above (an eval seed "
                "with no successful episode has no value). First failures:",
                "Small",
            )
        )
        for f in failed[:10]:
            where = "" if f.variant == "default" else f" [{f.variant}]"
            out.append(
                ctx.para(
                    f"{f.policy}{where}, train seed {f.train_seed}, eval seed {f.eval_seed}, "
                    f"episode {f.episode}: {f.reason}",
                    "Small",
                )
            )
    for variant in s.variant_names:
        where = "" if variant == "default" else f" — {variant}"
        out.append(Paragraph(f"Interquartile means{where}", styles["Heading3"]))
        out.append(
            ctx.para(
                "The mean of the middle 50 % of held-out episodes, which a few extreme cases cannot move; "
                "where it disagrees with the mean, a policy's average is driven by a minority of cases.",
                "Small",
            )
        )
        out.extend(kpi_tables(ctx, variant, stat="iqm"))
    out.append(Paragraph("Policies", styles["Heading3"]))
    rows = [["Policy", "Kind", "Definition"]]  # "Kind" column: standard, learned, optimum (reference)
    for h in s.policies.heuristics:
        settings = ", ".join(f"{k}={v}" for k, v in h.settings.items()) or "defaults"
        rows.append(
            [
                h.label,
                _kind_label(ctx.summary, h.label),
                f"{h.use} ({settings}): {ctx.domain.heuristics[h.use].description}",
            ]
        )
    for entry in s.policies.learned:
        hp = ", ".join(f"{k}={v}" for k, v in entry.hyperparameters.items()) or "SB3 defaults"
        records = [r for v in s.variant_names for r in ctx.summary.training_records(v, entry.label)]
        rows.append(
            [
                entry.label,
                "learned",
                f"{entry.algorithm} {entry.policy}, budget {entry.train_steps:,} env steps; trained "
                f"{_trained_text(records)}; {entry.n_envs} envs, "
                f"normalise obs={entry.normalize_obs}, reward={entry.normalize_reward}; {hp}"
                + _own_params_text(entry)
                + _imitation_text(entry)
                + _fine_tune_text(entry)
                + _residual_text(entry)
                + _shield_text(entry),
            ]
        )
    out.append(text_table(rows, styles, [3 * cm, 1.6 * cm, PAGE_WIDTH - 4.6 * cm]))
    out.extend(_tuning_appendix(ctx))
    out.append(Paragraph("Seeds and budget", styles["Heading3"]))
    out.append(
        ctx.para(
            f"Budget: {meta.get('budget', 'full')}. Training seeds: {_seed_text(s.seeds.train)}. "
            f"Evaluation seeds: {_seed_text(s.seeds.eval)}, {s.episodes_per_seed} episode(s) each. "
            "Evaluation seeds are disjoint from training seeds (checked when the scenario is loaded)."
        )
    )
    out.append(Paragraph("Scenario as run", styles["Heading3"]))
    snapshot = yaml.safe_dump(
        s.model_dump(mode="json", exclude={"seeds", "budgets"}), sort_keys=False, allow_unicode=True
    )
    out.append(Preformatted(snapshot, styles["Code"]))
    out.append(Paragraph("Software versions", styles["Heading3"]))
    versions = _library_versions(ctx.folder)
    out.append(ctx.para(", ".join(f"{k} {v}" for k, v in versions.items()), "Small"))
    return out


def _domain_section(ctx: ReportContext) -> list[Any]:
    """The domain's own pages. They draw on the run's per-step traces, whose columns only the domain
    knows (:func:`~fieldrl.evaluation.readback.read_traces` checks the ones every domain shares);
    a traces file without what the pages read ends in one message, not a traceback."""
    try:
        return ctx.domain.report_section(ctx)
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        if ctx.traces.empty:
            raise
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
        raise FieldrlError(
            f"{ctx.folder.path / TRACES_FILE}: the {ctx.domain.name} pages could not be drawn from it "
            f"({detail}); was the file edited? If not, this is a fieldrl bug: please report it"
        ) from None


def _library_versions(folder: RunFolder) -> dict[str, str]:
    """``versions.json`` (package name -> version), refused unless it is that mapping."""
    versions = folder.read_json("versions.json") if "versions.json" in folder.hashes() else {}
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise FieldrlError(
            f"{folder.path / 'versions.json'}: not the package -> version mapping fieldrl writes "
            "(was the file edited?)"
        )
    return versions


def _own_params_text(entry: Any) -> str:
    """A learned entry's own domain settings (a controller's design, an observation option), which the others
    don't share."""
    if not entry.params:
        return ""
    shown = "; ".join(f"{k} = {_setting_text(v)}" for k, v in entry.params.items())
    return f". Runs with its own settings (the other policies use the scenario's): {shown}"


def _residual_text(entry: Any) -> str:
    if entry.residual is None:
        return ""
    r = entry.residual
    return (
        f". Residual: the network's action is a correction of at most {r.scale:g} x half the action "
        f"range added to {r.heuristic}'s action (zero at the start of training)"
    )


def _shield_text(entry: Any) -> str:
    if entry.shield is None:
        return ""
    return (
        f". Runtime shield: on held-out cases {entry.shield.heuristic} vets every action and replaces "
        f"those it cannot confirm as safe, and takes over after {entry.shield.patience} held steps "
        "(overrides counted); training and checkpoint selection are without the shield"
    )


def _tuning_appendix(ctx: ReportContext) -> list[Any]:
    """Each learned entry's tuning study: trials, objective, search space, best validation value."""
    entries = ctx.scenario.policies.learned
    if not entries:
        return []
    out: list[Any] = [Paragraph("Tuning and model selection", ctx.styles["Heading3"])]
    seeds = ctx.scenario.seeds.validation
    out.append(
        ctx.para(
            (
                f"Validation seeds: {_seed_text(seeds)} (disjoint from training and held-out seeds). During "
                "training each learned policy was scored on them every few thousand steps; the "
                "checkpoint with the best score is the one tested on the held-out cases."
            )
            if seeds
            else "This scenario has no validation seeds: each learned policy's final weights were tested.",
            "Small",
        )
    )
    trials = {e.tuning.trials for e in entries if e.tuning is not None}
    if len(trials) > 1:
        out.append(
            ctx.para(
                "Note: the learned entries were not tuned with the same number of trials "
                f"({', '.join(map(str, sorted(trials)))}): the comparison between them is not equal-effort.",
                "Small",
            )
        )
    rows = [["Policy", "Study", "Objective and search space"]]
    for entry in entries:
        t = entry.tuning
        if t is None:
            rows.append([entry.label, "not tuned", "hyperparameters as written in the scenario"])
            continue
        space = "; ".join(f"{k}: {v}" for k, v in t.search_space.items())
        best = (
            ""
            if t.best_value is None
            else f" Best validation value {fmt(t.best_value)} (trial {t.best_trial})."
        )
        if t.handset_value is not None:
            stands = ": no trial beat it, so the hand-set values stand." if t.best_is_handset else "."
            best += f" The scenario's hand-set configuration, run as trial 0, scored {fmt(t.handset_value)}"
            best += stands
        source = tuned_elsewhere(entry, ctx.scenario.name)
        rows.append(
            [
                entry.label,
                f"{t.study}: {t.trials} trials (Optuna TPE, median pruning)"
                + (f", {t.train_steps:,} steps each" if t.train_steps else "")
                + ("" if source is None else f"; run {source}, transferred, not re-tuned for it here"),
                f"{t.objective}.{best} Searched: {space}",
            ]
        )
    out.append(text_table(rows, ctx.styles, [2.6 * cm, 4.4 * cm, PAGE_WIDTH - 7.0 * cm]))
    return out


def _imitation_text(entry: Any) -> str:
    if entry.imitate is None:
        return ""
    m = entry.imitate
    return (
        f". Warm start: behaviour-cloned from {m.heuristic} on {m.episodes} training-seed episodes "
        f"({m.epochs} epochs, at most {m.max_decisions:,} decisions) before RL training"
    )


def _fine_tune_short(entry: Any) -> str:
    """The effort table's word on how a warm start was fine-tuned (the appendix says it in full)."""
    spec = entry.fine_tune
    if spec is None:
        return ""
    parts = []
    if spec.critic_warmup:
        parts.append(f"critic warm-up {spec.critic_warmup:.0%} of training")
    if spec.actor_ramp:
        parts.append(f"actor ramp {spec.actor_ramp:.0%}")
    if spec.pull is not None:
        parts.append(f"pull to the clone {spec.pull.weight:g}× fading over {spec.pull.fade:.0%}")
    if spec.jump_start is not None:
        parts.append(f"jump-start {spec.jump_start.horizon:,} decisions in {spec.jump_start.stages} stage(s)")
    return "; fine-tuned: " + ", ".join(parts) if parts else "; no fine-tuning aid"


def _fine_tune_text(entry: Any) -> str:
    spec = entry.fine_tune
    if spec is None:
        return ""
    warmup, ramp, fade = spec.steps(entry.train_steps)
    parts = []
    if warmup:
        parts.append(f"the critic alone learned for the first {warmup:,} steps")
    if ramp:
        parts.append(f"the actor's learning rate then rose from 0 over {ramp:,} steps")
    if spec.pull is not None:
        parts.append(
            f"a pull toward the clone's action ({spec.pull.weight:g}× the learning rate) faded to "
            f"nothing over {fade:,} steps"
        )
    if spec.jump_start is not None:
        jump = spec.jump_start
        parts.append(
            f"the clone drove the first {jump.horizon:,} decisions of each training episode, down to "
            f"none in {jump.stages} equal step(s), one each time validation reached the clone's score"
        )
    return ". Fine-tuning: " + "; ".join(parts) if parts else ""


def _seed_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{len(seeds)} seeds, {seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))
