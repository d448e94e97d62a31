"""Page 1 of the report: an executive summary a stakeholder can trust at a glance.

One verdict sentence on the measures the domain's stakeholder reads first (``Domain.headline_kpis``),
one small table of the best standard policy against the best learned one, one chart, then the terms
used. Every count in it comes from what was run; below :data:`~fieldrl.reportkit.numbers.MIN_CASES`
held-out cases nothing is called better or worse.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.units import cm
from reportlab.platypus import Paragraph, Table, TableStyle

from fieldrl.reportkit import figures
from fieldrl.reportkit.context import ReportContext
from fieldrl.reportkit.layout import CELL_PADDING, min_column_width, spread
from fieldrl.reportkit.numbers import MIN_CASES, fmt, fmt_cell, join_words, plural
from fieldrl.reports.findings import averaged_apart, judged, label, unit_suffix
from fieldrl.results import Described, Kpi, Summary, failures_ended

#: the chart on page 1 shows at most this many measures, and is at most this tall
CHART_KPIS = 4
CHART_HEIGHT = 4.6 * cm


def headline_kpis(summary: Summary, variant: str, chosen: tuple[str, ...] | list[str]) -> list[Kpi]:
    """The measures page 1 leads with: the domain's headline KPIs that were measured here, in its order;
    without any, the primary KPI and the next ranked measured ones."""
    measured = {k.name: k for k in summary.measured_kpis(variant)}
    picked = [measured[n] for n in chosen if n in measured]
    if picked:
        return picked
    primary = summary.primary_kpi
    rest = [k for n, k in measured.items() if n != primary and k.is_ranked]
    return ([measured[primary]] if primary in measured else []) + rest[: CHART_KPIS - 1]


def _paren_unit(kpi: Kpi) -> str:
    return f" ({kpi.unit})" if kpi.unit else ""


def verdict_sentence(summary: Summary, variant: str, headlines: list[Kpi]) -> str:
    """One sentence: the best learned policy against the best standard one, on the headline measures."""
    entry = summary.variant(variant)
    learned, heuristic = entry.best_learned, entry.best_heuristic
    primary = summary.primary
    if not learned or not heuristic:
        best = learned or heuristic
        if best is None:
            return (
                "No policy has results: every held-out episode ended "
                f"{failures_ended(summary.failures_in(variant))}."
            )
        kind = "learned" if learned else "standard"
        value = entry.policies[best][primary.name].mean.value
        return (
            f"Only {kind} policies have results here; the best on {label(primary)} was {best} "
            f"({fmt(value)}{unit_suffix(primary)})."
        )
    n = entry.cases(learned, heuristic)
    if n < MIN_CASES:
        return (
            f"This run has {plural(n, 'held-out case')}, too few to compare {learned} (the best learned "
            f"policy) with {heuristic} (the best standard policy): their numbers are set side by side "
            "below without confidence intervals."
        )
    groups: dict[str, list[str]] = {"better": [], "worse": [], "unclear": [], "different": []}
    comparison = entry.comparison or {}
    for k in headlines:
        verdict, phrase = judged(summary, variant, k, learned, heuristic, comparison[k.name])
        groups[verdict].append(phrase if verdict == "different" else label(k))
    clauses = []
    if groups["better"]:
        clauses.append(f"did better on {join_words(groups['better'])}")
    if groups["worse"]:
        clauses.append(f"did worse on {join_words(groups['worse'])}")
    if groups["unclear"]:
        clauses.append(f"could not be told apart on {join_words(groups['unclear'])}")
    text = f"Against {heuristic}, the best standard policy, {learned}, the best learned policy, "
    text += join_words(clauses) if clauses else "has no measure to compare"
    if groups["different"]:
        text += "; not ranked, but different: " + "; ".join(groups["different"])
    return text + f" (over {n} held-out cases)."


def ranking_sentence(summary: Summary, variant: str, explained: bool) -> str | None:
    """The measure that picked "best", when it is not one of the headline measures (e.g. a reward)."""
    entry = summary.variant(variant)
    learned, heuristic = entry.best_learned, entry.best_heuristic
    if not learned or not heuristic:
        return None
    primary = summary.primary
    lv, hv = entry.value(learned, primary.name), entry.value(heuristic, primary.name)
    see = " (see 'How to read this')" if explained else ""
    text = (
        f"The ranking measure, {label(primary)}, picked both{see}: {learned} {fmt(lv)}, "
        f"{heuristic} {fmt(hv)}{unit_suffix(primary)}"
    )
    if entry.cases(learned, heuristic) < MIN_CASES:
        return text + "."
    verdict, phrase = judged(
        summary, variant, primary, learned, heuristic, (entry.comparison or {})[primary.name]
    )
    return text + ("; no clear difference." if verdict == "unclear" else f"; {phrase}.")


def settings_sentence(summary: Summary, headline: tuple[str, ...] = ()) -> str:
    """Several settings: in how many the best learned policy beat the best standard one on the primary KPI,
    and in how many it was clearly worse on another of the ``headline`` measures."""
    primary = summary.primary
    counts = {"better": 0, "worse": 0, "unclear": 0, "few": 0, "none": 0}
    for variant, entry in summary.variants.items():
        learned, heuristic = entry.best_learned, entry.best_heuristic
        if not learned or not heuristic:
            counts["none"] += 1
        elif entry.cases(learned, heuristic) < MIN_CASES:
            counts["few"] += 1
        else:
            comparison = (entry.comparison or {})[primary.name]
            counts[judged(summary, variant, primary, learned, heuristic, comparison)[0]] += 1
    n = len(summary.variants)
    if counts["few"] == n:
        fewest = min(e.all_cases() for e in summary.variants.values())
        return (
            f"Across {n} settings, too few held-out cases ({fewest} in each; at least {MIN_CASES} needed) "
            "to compare the best learned policy with the best standard one: the table sets them side by side."
        )
    parts = []
    for key, words in (
        ("better", "did better in"),
        ("worse", "did worse in"),
        ("unclear", "could not be told apart in"),
    ):
        if counts[key]:
            parts.append(f"{words} {counts[key]}")
    text = (
        f"Across {n} settings, the best learned policy, against the best standard one on {label(primary)}, "
    )
    text += join_words(parts) if parts else "could not be compared in any"
    if counts["few"]:
        text += f"; {counts['few']} had too few held-out cases to compare"
    if counts["none"]:
        text += f"; {counts['none']} had only one kind of policy"
    elsewhere = [v for v in summary.variants if _worse_elsewhere(summary, v, headline)]
    if elsewhere:
        text += (
            f". On another headline measure it was clearly worse in {len(elsewhere)} of them "
            f"({', '.join(elsewhere)}; see the table)"
        )
    return text + "."


def _headline_changes(summary: Summary, variant: str, headline: tuple[str, ...]) -> dict[str, list[str]]:
    """Phrases for the headline measures other than the primary on which the best learned policy clearly
    differs from the best standard one: ``{"better": [...], "worse": [...]}``. A mean over a population
    the two policies differ clearly on (delay over arrived trains, when fewer arrived) is left out,
    as the findings leave it out."""
    entry = summary.variant(variant)
    found: dict[str, list[str]] = {"better": [], "worse": []}
    learned, heuristic = entry.best_learned, entry.best_heuristic
    if not learned or not heuristic or entry.cases(learned, heuristic) < MIN_CASES:
        return found
    for kpi in headline_kpis(summary, variant, headline):
        comparison = entry.compared(kpi.name)
        if (
            kpi.name == summary.primary_kpi
            or kpi.wall_clock
            or not kpi.is_ranked
            or comparison is None
            or averaged_apart(summary, kpi, variant, learned, heuristic) is not None
        ):
            continue
        verdict, phrase = judged(summary, variant, kpi, learned, heuristic, comparison)
        if verdict in found:
            found[verdict].append(phrase)
    return found


def _worse_elsewhere(summary: Summary, variant: str, headline: tuple[str, ...]) -> bool:
    return bool(headline) and bool(_headline_changes(summary, variant, headline)["worse"])


def grid_table(rows: list[list[str]], cell: Any, preferred: tuple[float, ...], width: float) -> Table:
    """Rows of paragraph markup as a table ``width`` wide: each column at least its widest word (so
    no word is broken) and at least its ``preferred`` width, the rest of the width shared equally."""
    minimum = [min_column_width(list(c), cell.fontSize) for c in zip(*rows, strict=True)]
    widths = spread([max(m, w) for m, w in zip(minimum, preferred, strict=True)], width)
    table = Table([[Paragraph(c, cell) for c in row] for row in rows], colWidths=widths, repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), CELL_PADDING),
                ("RIGHTPADDING", (0, 0), (-1, -1), CELL_PADDING),
            ]
        )
    )
    return table


def _value(stats: Described, with_ci: bool) -> str:
    m = stats.mean
    if not with_ci or m.low != m.low:
        return fmt_cell(m.value)
    return f"{fmt_cell(m.value)}<br/><font size=6>[{fmt_cell(m.low)}, {fmt_cell(m.high)}]</font>"


def _best_any(summary: Summary, variant: str, kpi: Kpi) -> str:
    """The policy with the best mean on ``kpi`` among all of them (optimum included, and named so)."""
    if not kpi.is_ranked:
        return "not ranked"
    best = summary.best(variant, kpi.name)
    if best is None:
        return "n/a"
    is_oracle = summary.is_oracle(best) and "optim" not in best.lower()
    tag = " (optimum)" if is_oracle else ""
    return f"{escape(best)}{tag}: {fmt_cell(summary.variant(variant).value(best, kpi.name))}"


def headline_table(ctx: ReportContext, variant: str, headlines: list[Kpi], width: float) -> Table | None:
    """Measures x (best standard, best learned, best of all): the one table page 1 holds."""
    summary = ctx.summary
    entry = summary.variant(variant)
    pair = [p for p in (entry.best_heuristic, entry.best_learned) if p]
    if not pair:
        return None
    primary = summary.primary
    rows_kpis = headlines if primary in headlines else [primary, *headlines]
    with_ci = entry.cases(*pair) >= MIN_CASES
    cell = ctx.styles["Cell"]
    kinds = ["best standard" if p == entry.best_heuristic else "best learned" for p in pair]
    header = ["<b>Measure</b>"] + [
        f"<b>{escape(p)}</b><br/><i>{k}</i>" for p, k in zip(pair, kinds, strict=True)
    ]
    header.append("<b>Best of all policies</b>")
    rows = [header]
    for k in rows_kpis:
        note = " <i>(ranks the policies)</i>" if k is primary and primary not in headlines else ""
        arrow = "higher is better" if k.higher_is_better else "lower is better"
        arrow = arrow if k.is_ranked else "not ranked"
        rows.append(
            [f"{escape(k.label)}{escape(_paren_unit(k))}{note}<br/><font size=6>{arrow}</font>"]
            + [_value(entry.policies[p][k.name], with_ci) for p in pair]
            + [_best_any(summary, variant, k)]
        )
    preferred = (5 * cm,) + (3 * cm,) * len(pair) + (3.5 * cm,)
    return grid_table(rows, cell, preferred, width)


def settings_table(ctx: ReportContext, width: float) -> Table:
    """Several settings: one row each, best standard against best learned on the primary KPI."""
    summary = ctx.summary
    primary = summary.primary
    cell = ctx.styles["Cell"]
    rows = [
        [
            "<b>Setting</b>",
            f"<b>Best standard policy</b><br/><i>{escape(label(primary))}</i>",
            f"<b>Best learned policy</b><br/><i>{escape(label(primary))}</i>",
            "<b>Learned against standard</b>",
        ]
    ]
    for variant, entry in summary.variants.items():
        learned, heuristic = entry.best_learned, entry.best_heuristic
        pair = [p for p in (heuristic, learned) if p]
        with_ci = bool(pair) and entry.cases(*pair) >= MIN_CASES
        shown = [
            "-" if p is None else f"{escape(p)}: {_value(entry.policies[p][primary.name], with_ci)}"
            for p in (heuristic, learned)
        ]
        if not learned or not heuristic:
            verdict = "no comparison (one kind only)"
        elif not with_ci:
            verdict = f"too few cases to compare ({entry.cases(learned, heuristic)})"
        else:
            comparison = (entry.comparison or {})[primary.name]
            verdict, phrase = judged(summary, variant, primary, learned, heuristic, comparison)
            verdict = {"better": "better", "worse": "worse", "unclear": "no clear difference"}[verdict]
            verdict = f"{verdict}: {escape(phrase)}" + _other_headlines(ctx, variant)
        rows.append([escape(variant), *shown, verdict])
    return grid_table(rows, cell, (3 * cm, 4 * cm, 4 * cm, 4 * cm), width)


def _other_headlines(ctx: ReportContext, variant: str) -> str:
    """The domain's other headline measures on which the best learned policy clearly differs from the
    best standard one (a tie on the primary KPI must not hide a loss elsewhere)."""
    found = _headline_changes(ctx.summary, variant, tuple(ctx.domain.headline_kpis))
    pairs = (("Worse", found["worse"]), ("Better", found["better"]))
    return "".join(f"<br/><b>{word}:</b> {escape('; '.join(items))}" for word, items in pairs if items)


def glossary(ctx: ReportContext, with_ci: bool) -> list[str]:
    """'How to read this': the terms page 1 and the tables use, each in one sentence."""
    scenario, summary = ctx.scenario, ctx.summary
    primary = summary.primary
    n_seeds, episodes = len(scenario.seeds.eval), scenario.episodes_per_seed
    each = f", {episodes} episodes each" if episodes > 1 else ""
    algorithms = [e.label for e in scenario.policies.learned]
    terms = [
        (
            "Held-out cases",
            f"{n_seeds} simulated cases (seeds {scenario.seeds.eval[0]} on{each}) never used in training; "
            "every policy faced the same ones.",
        ),
        (
            "Standard and learned policies",
            "the rules practitioners use today (heuristics), and policies trained by reinforcement learning"
            + (f" ({', '.join(algorithms)})" if algorithms else "")
            + " on separate training cases; the best of each kind is the one with the best "
            + ("" if label(primary).startswith("mean ") else "mean ")
            + f"{label(primary)}.",
        ),
    ]
    domain_terms = getattr(ctx.domain, "glossary", {})
    explained = {t.lower() for t in domain_terms}
    if summary.oracles and not explained & {o.lower() for o in summary.oracles}:
        terms.append(
            (
                "Optimum",
                f"{', '.join(summary.oracles)}: an exact optimiser that knows the model; a ceiling to "
                "read the others against, not a standard policy.",
            )
        )
    if with_ci:
        terms.append(
            (
                "95 % CI",
                "the range in brackets; a difference whose range includes 0 'could not be told apart' from "
                "chance.",
            )
        )
    else:
        terms.append(
            (
                "No confidence intervals",
                f"with fewer than {MIN_CASES} held-out cases a range would say nothing, so none is shown "
                "and nothing is called better or worse.",
            )
        )
    terms += list(domain_terms.items())
    return [f"<b>{escape(t)}</b>: {escape(x)}" for t, x in terms]


def chart(ctx: ReportContext, headlines: list[Kpi], width: float) -> Any:
    """One chart: every policy on the headline measures (one setting), or best against best per setting."""
    summary = ctx.summary
    if len(summary.variants) > 1:
        png = figures.best_by_setting(summary)
    else:
        variant = next(iter(summary.variants))
        png = figures.kpi_comparison(summary, variant, kpis=headlines[:CHART_KPIS], ncols=CHART_KPIS)
    return ctx.figure("page1-chart", png, width=width, max_height=CHART_HEIGHT)
