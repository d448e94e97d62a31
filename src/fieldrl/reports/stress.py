"""The report's stress map: where the learned policy's advantage holds as the world moves away from
training (``stress/summary.json``, :mod:`fieldrl.evaluation.stress`), and one sentence for page 1."""

from __future__ import annotations

from typing import Any

from reportlab.platypus import KeepTogether, Paragraph

from fieldrl.evaluation.stress import StressSummary, verdict_runs
from fieldrl.reportkit import figures
from fieldrl.reportkit.context import ReportContext
from fieldrl.reportkit.layout import PAGE_WIDTH, text_table
from fieldrl.reportkit.numbers import MIN_CASES, fmt, join_words, with_range
from fieldrl.reports.findings import _change
from fieldrl.reports.findings import label as in_sentence
from fieldrl.results import Interval, Kpi

#: the verdict of a point with fewer than MIN_CASES held-out cases (or no pair to compare)
TOO_FEW = "too few cases"
#: how a verdict reads between the learned and the standard policy's names
_PHRASES = {"ahead": "ahead of", "level": "level with", "behind": "behind"}


def _span(first: float, last: float, fmt: str) -> str:
    """``0.1–0.5``; ``−3 to −1.5`` where a dash would read as a minus."""
    if first == last:
        return format(first, fmt)
    joint = " to " if min(first, last) < 0 else "–"
    return f"{format(first, fmt)}{joint}{format(last, fmt)}"


def _words(text: str) -> str:
    """A label inside a sentence (lower case, acronyms kept)."""
    return in_sentence(text)


#: a point's verdict, from the learned policy's side, by the plain report's word for the difference
_VERDICTS = {"better": "ahead", "worse": "behind", "unclear": "level", "different": "level"}


def point_verdicts(stress: StressSummary, name: str, variant: str) -> list[str]:
    """``ahead``, ``level`` or ``behind`` at each point of axis ``name`` in ``variant``: the best learned
    policy against the best standard policy on the primary KPI, judged as the plain report judges it
    (an interval clear of zero, a difference not negligible, enough held-out cases)."""
    setting = stress.axes[name].variants[variant]
    kpi = Kpi(
        name=stress.primary_kpi,
        label=stress.primary_label,
        unit=stress.primary_unit,
        higher_is_better=stress.higher_is_better,
    )
    said = []
    for point in setting.points:
        comparison = point.compared(stress.primary_kpi)
        if comparison is None or point.cases(stress.primary_kpi) < MIN_CASES:
            said.append(TOO_FEW)
            continue
        here = point.results()
        learned = here.policies[str(setting.best_learned)][kpi.name].mean.value
        base = here.policies[str(setting.best_heuristic)][kpi.name].mean.value
        said.append(_VERDICTS[_change(kpi, comparison, learned, base, here.scale(kpi.name))[0]])
    return said


def _runs(stress: StressSummary, name: str, variant: str) -> list[tuple[str, float, float]]:
    setting = stress.axes[name].variants[variant]
    return verdict_runs([p.value for p in setting.points], point_verdicts(stress, name, variant))


def _steps(runs: list[tuple[str, float, float]], fmt: str) -> str:
    """``ahead at 0–0.1, level at 0.2–0.5 and behind at 0.8``."""
    return join_words([f"{verdict} at {_span(first, last, fmt)}" for verdict, first, last in runs])


def axis_sentence(stress: StressSummary, name: str, variant: str) -> str | None:
    """Where the best learned policy is ahead of, level with or behind the best standard policy along
    axis ``name`` in ``variant``, and where that flips, in one sentence; None without such a pair."""
    axis = stress.axes[name]
    setting = axis.variants[variant]
    learned, standard = setting.best_learned, setting.best_heuristic
    if not (learned and standard):
        return None
    runs = _runs(stress, name, variant)
    label = _words(axis.label)
    unit = f", {axis.unit}" if axis.unit else ""
    trained = f"trained at {format(setting.trained, axis.fmt)}"
    if len(runs) == 1:
        tested = _span(setting.points[0].value, setting.points[-1].value, axis.fmt)
        if runs[0][0] == TOO_FEW:
            compared = f"{learned} with {standard}"
            return f"Too few held-out cases to compare {compared} at any tested {label} ({tested})."
        where = f"at every tested {label} ({tested}{unit}; {trained})"
        return f"{learned} is {_PHRASES[runs[0][0]]} {standard} {where}."
    flips = [
        f"between {format(a[2], axis.fmt)} and {format(b[1], axis.fmt)}"
        for a, b in zip(runs, runs[1:], strict=False)
    ]
    return (
        f"Against {standard}, {learned} is {_steps(runs, axis.fmt)} ({label}{unit}; {trained}): the verdict "
        f"flips {join_words(flips)}."
    )


def front_sentence(stress: StressSummary | None, variant: str) -> str | None:
    """Page 1's sentence on the stress map (in setting ``variant``), or None without one."""
    if stress is None:
        return None
    said, pair = [], None
    for name, axis in stress.axes.items():
        setting = axis.variants.get(variant)
        if setting is None or not (setting.best_learned and setting.best_heuristic):
            continue
        pair = (setting.best_learned, setting.best_heuristic)
        runs = _runs(stress, name, variant)
        if len(runs) == 1 and runs[0][0] == TOO_FEW:
            said.append(f"{_words(axis.label)}: too few held-out cases to compare")
        elif len(runs) == 1:
            tested = _span(setting.points[0].value, setting.points[-1].value, axis.fmt)
            said.append(f"{_words(axis.label)}: {runs[0][0]} across {tested}")
        else:
            said.append(f"{_words(axis.label)}: {_steps(runs, axis.fmt)}")
    if pair is None:
        return None
    return (
        f"Stress test (the same held-out cases in other conditions, nothing retrained), {pair[0]} against "
        f"{pair[1]} on {_words(stress.primary_label)}: {'; '.join(said)} (see 'Stress map')."
    )


def stress_pages(ctx: ReportContext, stress: StressSummary | None) -> list[Any]:
    """The stress map: per axis and stressed setting, the paired difference at each point (figure),
    the sentence naming where the verdict flips, and the two policies' values (table)."""
    if stress is None:
        return []
    styles = ctx.styles
    head: list[Any] = [
        Paragraph("Stress map: where the learned policy's advantage holds", styles["Heading2"]),
        ctx.para(
            "The trained policies were played again on the same held-out cases while one condition of the "
            "world moved away from what training saw; nothing was retrained. Each point is the best "
            f"learned policy minus the best standard policy on {_words(stress.primary_label)}, paired on the "
            f"same cases, with its {stress.confidence:.0%} confidence interval; the dashed line marks the "
            "value the run trained (and was evaluated) at.",
            "Small",
        ),
    ]
    story: list[Any] = []
    better = "higher" if stress.higher_is_better else "lower"
    for name, axis in stress.axes.items():
        for variant, setting in axis.variants.items():
            if not (setting.best_learned and setting.best_heuristic):
                continue
            verdicts = point_verdicts(stress, name, variant)
            diffs = []
            for point in setting.points:
                paired = point.compared(stress.primary_kpi)
                diff = None if paired is None else paired.difference
                ok = diff is not None and point.cases(stress.primary_kpi) >= MIN_CASES
                nan = float("nan")
                diffs.append(
                    (diff.value, diff.low, diff.high)
                    if ok and diff
                    else (diff.value if diff else nan, nan, nan)
                )
            unit = f" ({axis.unit})" if axis.unit else ""
            where = "" if variant == "default" else f", setting {variant}"
            png = figures.stress_map(
                [p.value for p in setting.points],
                diffs,
                verdicts,
                setting.trained,
                f"{axis.label}{unit}",
                f"{setting.best_learned} − {setting.best_heuristic} ({better} is better)",
                log=axis.log,
            )
            block = [
                *(head if not story else []),  # the section's heading stays with its first map
                Paragraph(f"{axis.label}{where}", styles["Heading3"]),
                ctx.para(axis_sentence(stress, name, variant) or "", "Finding"),
                ctx.figure(f"stress-{name}-{variant}", png),
                _table(ctx, stress, name, variant),
            ]
            story.append(KeepTogether(block))
    return story


def _table(ctx: ReportContext, stress: StressSummary, name: str, variant: str) -> Any:
    axis = stress.axes[name]
    setting = axis.variants[variant]
    rows = [[axis.label, str(setting.best_learned), str(setting.best_heuristic), "difference", "learned is"]]
    for point, said in zip(setting.points, point_verdicts(stress, name, variant), strict=True):
        cells = [format(point.value, axis.fmt) + (" (trained)" if point.value == setting.trained else "")]
        enough = point.cases(stress.primary_kpi) >= MIN_CASES

        def ranged(stat: Interval, enough: bool = enough) -> str:
            return with_range(stat) if enough else fmt(stat.value)

        for policy in (setting.best_learned, setting.best_heuristic):
            stats = point.described(str(policy), stress.primary_kpi)
            cells.append(ranged(stats.mean) if stats else "-")
        diff = point.compared(stress.primary_kpi)
        cells.append(ranged(diff.difference) if diff else "-")
        cells.append(said + (f" ({point.failed_episodes} failed)" if point.failed_episodes else ""))
        rows.append(cells)
    return text_table(rows, ctx.styles, [f * PAGE_WIDTH for f in (0.16, 0.2, 0.2, 0.26, 0.18)])
