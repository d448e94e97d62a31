"""Plain-words findings from ``summary.json``: what a stakeholder reads first.

Part of the PDF assembler; the words for single numbers (:func:`~fieldrl.reportkit.numbers.fmt`,
:func:`~fieldrl.reportkit.numbers.with_range`) are in the report kit, which the domains' pages use too.
The sentences are built from the paired comparison (best learned vs best heuristic
on the same held-out seeds) and say "did worse" when the learned policy did worse.
"""

from __future__ import annotations

import math

from fieldrl.reportkit.numbers import MIN_CASES, fmt, pct, too_few
from fieldrl.results import Kpi, Pair, Paired, Stability, Summary, failures_ended


def label(kpi: Kpi | str) -> str:
    """KPI label (or any label) inside a sentence: lower-case first letter unless it starts an acronym."""
    text = kpi if isinstance(kpi, str) else kpi.label
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def unit_suffix(kpi: Kpi) -> str:
    """`` %`` after a number (nothing for a KPI without a unit)."""
    return f" {kpi.unit}" if kpi.unit else ""


def oracle_lines(summary: Summary, variant: str) -> list[str]:
    """What the exact optimisers scored: a ceiling to read the others against, not a competitor."""
    entry = summary.variant(variant)
    primary = summary.primary
    unit = unit_suffix(primary)
    where = "" if variant == "default" else f"On {variant}: "
    lines = []
    for oracle in summary.oracles:
        if oracle in entry.policies:
            value = entry.value(oracle, primary.name)
            lines.append(
                f"{where}{oracle} is an exact optimiser that knows the model (a ceiling no practitioner can "
                f"reach, not a standard policy): {fmt(value)}{unit} on {label(primary)}."
            )
    return lines


def _change(kpi: Kpi, comparison: Paired, learned: float, base: float, scale: float) -> tuple[str, str]:
    """(verdict, phrase) for one KPI: verdict is better / worse / unclear (different: an unranked KPI).

    ``scale`` is the largest absolute mean of this KPI over all policies: differences
    below 0.1 % of it count as no difference, and a relative (%) difference is only
    quoted where the unit is not itself a percentage and the baseline is not near
    zero (nor close to zero in some bootstrap resamples, which makes the relative CI explode);
    otherwise the difference is absolute.
    """
    diff = comparison.difference
    if diff.value == diff.low == diff.high == 0:  # no resample differs: the same every time
        return "unclear", f"{label(kpi)} the same on every held-out case"
    sign = 1 if kpi.higher_is_better else -1
    negligible = abs(diff.value) < 1e-3 * scale
    if (diff.low > 0 or diff.high < 0) and not negligible:
        verdict = "better" if sign * diff.value > 0 else "worse"
        if not kpi.is_ranked:
            verdict = "different"  # a trade-off: higher or lower, never better or worse
    else:
        verdict = "unclear"
    unit = kpi.unit
    percentage = unit == "%" or unit.startswith("% ")  # "%", "% of trains", "% of initial"
    direction = "higher" if diff.value > 0 else "lower"
    rel = comparison.relative_percent
    relative_ok = (
        unit != ""
        and not percentage
        and abs(base) >= 0.01 * scale
        and all(math.isfinite(x) and abs(x) < 1000 for x in (rel.value, rel.low, rel.high))
    )
    if relative_ok:
        size = f"{pct(abs(rel.value))[1:]} {direction}"
        ci = f"95 % CI {pct(rel.low)} to {pct(rel.high)}"
    else:
        amount = fmt(abs(diff.value))
        points = " percentage point" if amount == "1" else " percentage points"
        unit_text = points if percentage else (f" ({unit})" if unit else "")
        size = f"{amount}{unit_text} {direction}"
        ci = f"95 % CI {fmt(diff.low)} to {fmt(diff.high)}"
    return verdict, f"{label(kpi)} {size} ({ci})"


def judged(
    summary: Summary, variant: str, kpi: Kpi, policy: str, baseline: str, paired: Paired
) -> tuple[str, str]:
    """:func:`_change` of ``policy`` against ``baseline`` on ``kpi`` in ``variant`` (their means, the
    setting's scale), from their paired difference ``paired``."""
    entry = summary.variant(variant)
    return _change(
        kpi, paired, entry.value(policy, kpi.name), entry.value(baseline, kpi.name), entry.scale(kpi.name)
    )


def averaged_apart(
    summary: Summary, kpi: Kpi, variant: str, learned: str, heuristic: str
) -> tuple[Kpi, float, float] | None:
    """``(base KPI, learned mean, standard mean)`` where ``kpi`` is a mean over a population (its
    ``among``, e.g. delay over the trains that arrived) on which the two policies differ clearly;
    otherwise None. Such means are not compared: fewer trains arriving makes their delay shorter."""
    base = next((k for k in summary.kpis if k.name == kpi.among), None) if kpi.among else None
    entry = summary.variant(variant)
    paired = entry.compared(base.name) if base is not None else None
    if base is None or paired is None:
        return None
    verdict, _ = judged(summary, variant, base, learned, heuristic, paired)
    return (
        None
        if verdict == "unclear"
        else (base, entry.value(learned, base.name), entry.value(heuristic, base.name))
    )


def variant_findings(summary: Summary, variant: str) -> list[str]:
    """Plain-words findings for one setting: best learned against best standard policy, every KPI.

    Below :data:`MIN_CASES` held-out cases there are no confidence intervals and no "beat it n % of
    the time": the numbers are stated and the comparison is called what it is, too small.
    """
    entry = summary.variant(variant)
    primary = summary.primary
    where = "" if variant == "default" else f"On {variant}: "
    learned, heuristic = entry.best_learned, entry.best_heuristic
    unit = unit_suffix(primary)
    if not learned or not heuristic:
        best = learned or heuristic
        if best is None:
            return [
                f"{where}No policy has results here: every held-out episode ended "
                f"{failures_ended(summary.failures_in(variant))} (see 'Failed episodes' in the appendix)."
            ] + oracle_lines(summary, variant)
        stats = entry.policies[best][primary.name].mean
        kinds = {p.kind for p in summary.policies}
        why = (
            "the scenario has only one kind of policy" if len(kinds) < 2 else "the other kind has no results"
        )
        ci = ""
        if entry.cases(best) >= MIN_CASES:
            ci = f" (95 % CI {fmt(stats.low)} to {fmt(stats.high)})"
        return [
            f"{where}{best} had the best {label(primary)}: {fmt(stats.value)}{unit}{ci}. No learned-vs-"
            f"standard comparison: {why}."
        ] + oracle_lines(summary, variant)

    lv, hv = entry.value(learned, primary.name), entry.value(heuristic, primary.name)
    n = entry.cases(learned, heuristic)
    if n < MIN_CASES:
        return [
            f"{where}{learned}, the best learned policy, scored {fmt(lv)}{unit} on {label(primary)} and "
            f"{heuristic}, the best standard policy, {fmt(hv)}{unit}: {too_few(n)}."
        ] + oracle_lines(summary, variant)
    comparison = entry.comparison or {}
    verdict, phrase = judged(summary, variant, primary, learned, heuristic, comparison[primary.name])
    verb = {
        "better": "did better than",
        "worse": "did worse than",
        "unclear": "could not be told apart from",
    }[verdict]
    lines = [
        f"{where}{learned}, the best learned policy, {verb} {heuristic}, the best standard policy, on "
        f"{label(primary)}: {fmt(lv)} vs {fmt(hv)}{unit}; {phrase}."
    ]
    others: dict[str, list[str]] = {"better": [], "worse": [], "unclear": [], "different": []}
    timed = [label(k) for k in summary.kpis if k.wall_clock]
    apart: list[str] = []  # KPIs averaged over populations of clearly different size: not compared
    for kpi in summary.kpis:
        if kpi.name == primary.name or kpi.wall_clock:
            continue
        lv_k, hv_k = entry.value(learned, kpi.name), entry.value(heuristic, kpi.name)
        if math.isnan(lv_k) or math.isnan(hv_k):
            continue  # not measured for one or both (e.g. a KPI that does not apply here): nothing to compare
        differs = averaged_apart(summary, kpi, variant, learned, heuristic)
        if differs is not None:
            base_kpi, lb, hb = differs
            apart.append(
                f"{kpi.label} is not compared: it is averaged over {label(base_kpi)}, and the two "
                f"policies differ clearly there ({fmt(lb)} vs {fmt(hb)}{unit_suffix(base_kpi)})."
            )
            continue
        v, p = judged(summary, variant, kpi, learned, heuristic, comparison[kpi.name])
        others[v].append(p if v != "unclear" else label(kpi))
    parts = []
    if others["better"]:
        parts.append("it did better on " + "; ".join(others["better"]))
    if others["worse"]:
        parts.append("it did worse on " + "; ".join(others["worse"]))
    if others["unclear"]:
        parts.append("no clear difference in " + "; ".join(others["unclear"]))
    if others["different"]:
        parts.append("not ranked, but different: " + "; ".join(others["different"]))
    if parts:
        text = ". ".join(p[:1].upper() + p[1:] for p in parts)
        lines.append(f"Against {heuristic}, {text[:1].lower()}{text[1:]}.")
    lines += apart
    if timed:
        lines.append(
            f"{'; '.join(timed).capitalize()}: see the table; computation times depend on the machine "
            "and its load, so they are not ranked here."
        )
    pb = entry.probability_better
    assert pb is not None  # written with the comparison
    lines.append(
        f"On a given held-out case, {learned} beat {heuristic} on {label(primary)} "
        f"{100 * pb.value:.0f} % of the time (95 % CI {100 * pb.low:.0f}-{100 * pb.high:.0f} %)."
    )
    return lines + oracle_lines(summary, variant)


def pair_findings(summary: Summary) -> list[str]:
    """One sentence per requested comparison (policy minus baseline): where it helps, hurts, or ties."""
    primary = summary.primary
    variants = list(summary.variants)
    pairs = summary.variants[variants[0]].pairs if variants else []
    lines = []
    for index, pair in enumerate(pairs):
        verdicts: dict[str, list[str]] = {"better": [], "worse": [], "unclear": [], "few": []}
        for variant in variants:
            entry = summary.variants[variant]
            where = "" if variant == "default" else f"{variant}: "
            n = entry.cases(pair.policy, pair.baseline)
            if n < MIN_CASES:
                verdicts["few"].append(f"{where}{n} case(s)")
                continue
            result = entry.pairs[index].kpis[primary.name]
            verdict, phrase = judged(summary, variant, primary, pair.policy, pair.baseline, result)
            verdicts[verdict].append(f"{where}{phrase}")
        parts = []
        if verdicts["better"]:
            parts.append("did better on " + "; ".join(verdicts["better"]))
        if verdicts["worse"]:
            parts.append("did worse on " + "; ".join(verdicts["worse"]))
        if verdicts["unclear"]:
            parts.append("could not be told apart on " + "; ".join(verdicts["unclear"]))
        if verdicts["few"]:
            parts.append(f"had too few held-out cases to compare ({'; '.join(verdicts['few'])})")
        lines.append(f"{pair.policy} compared with {pair.baseline}: it " + ", and ".join(parts) + ".")
    return lines


def pair_setting_sentences(summary: Summary) -> list[str]:
    """Page 1: one sentence per setting on the scenario's requested comparisons (e.g. "does memory
    help?"): each pair's verdict on the primary KPI, and where both sides trained on several seeds,
    which of the two depends less on its training seed (standard deviation across seeds)."""
    primary = summary.primary
    lines = []
    for variant, entry in summary.variants.items():
        parts = []
        for pair in entry.pairs:
            parts.append(_pair_clause(summary, variant, pair, primary))
        if parts:
            where = "" if variant == "default" else f"{variant}: "
            lines.append(where + "; ".join(parts) + ".")
    return lines


def _pair_clause(summary: Summary, variant: str, pair: Pair, primary: Kpi) -> str:
    policy, baseline = pair.policy, pair.baseline
    n = summary.cases(variant, policy, baseline)
    if n < MIN_CASES:
        return f"{policy} and {baseline} had too few held-out cases to compare ({n})"
    verdict, phrase = judged(summary, variant, primary, policy, baseline, pair.kpis[primary.name])
    word = {"better": "did better than", "worse": "did worse than"}.get(
        verdict, "could not be told apart from"
    )
    text = f"{policy} {word} {baseline} ({phrase})"
    if pair.stability:
        text += _stability_clause(pair.stability, policy, baseline)
    return text


def _stability_clause(stability: Stability, policy: str, baseline: str) -> str:
    """ ", and it was steadier across its N training seeds (SD a against b, ...)" or the opposite."""
    own, other, diff = stability.policy, stability.baseline, stability.sd_difference
    seeds = len(own.per_seed)
    if diff.high < 0:
        how = f"{policy} was the steadier across training seeds"
    elif diff.low > 0:
        how = f"{baseline} was the steadier across training seeds"
    else:
        how = "their spread across training seeds could not be told apart"
    return (
        f", and {how} (standard deviation of the {seeds} seeds' means {fmt(own.sd.value)} against "
        f"{fmt(other.sd.value)}, difference 95 % CI {fmt(diff.low)} to {fmt(diff.high)}; "
        f"worst seed {fmt(own.worst.value)} against {fmt(other.worst.value)})"
    )
