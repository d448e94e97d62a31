"""Plain-words findings from ``summary.json``: what a stakeholder reads first.

Part of the PDF assembler; the words for single numbers (:func:`~fieldrl.reportkit.numbers.fmt`,
:func:`~fieldrl.reportkit.numbers.with_range`) are in the report kit, which the domains' pages use too.
The sentences are built from the paired comparison (best learned vs best heuristic
on the same held-out seeds) and say "did worse" when the learned policy did worse.
"""

from __future__ import annotations

import math
from typing import Any

from fieldrl.reportkit.numbers import MIN_CASES, fmt, pct, too_few
from fieldrl.reportkit.summary import cases, failures_ended, failures_in, ranked


def label(kpi: dict[str, Any]) -> str:
    """KPI label inside a sentence: lower-case first letter unless it starts an acronym."""
    text = kpi["label"]
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def oracle_lines(summary: dict[str, Any], variant: str) -> list[str]:
    """What the exact optimisers scored: a ceiling to read the others against, not a competitor."""
    entry = summary["variants"][variant]
    primary = next(k for k in summary["kpis"] if k["name"] == summary["primary_kpi"])
    unit = f" {primary['unit']}" if primary["unit"] else ""
    where = "" if variant == "default" else f"On {variant}: "
    lines = []
    for oracle in summary.get("oracles") or []:
        if oracle in entry["policies"]:
            value = entry["policies"][oracle][primary["name"]]["mean"]["value"]
            lines.append(
                f"{where}{oracle} is an exact optimiser that knows the model (a ceiling no practitioner can "
                f"reach, not a standard policy): {fmt(value)}{unit} on {label(primary)}."
            )
    return lines


def masked_for_small_samples(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with every interval and win rate of a setting with fewer than :data:`MIN_CASES`
    held-out cases set to NaN (the means stay), and ``too_few_cases`` set on that setting.

    Report text built from it, the domains' own pages included, then prints no interval it cannot
    support: a bootstrap over two cases says nothing.
    """
    nan = float("nan")

    def blank(stat: dict[str, Any]) -> dict[str, Any]:
        return {**stat, "low": nan, "high": nan}

    variants = {}
    for name, entry in summary["variants"].items():
        if not entry["policies"] or cases(entry, *entry["policies"]) >= MIN_CASES:
            variants[name] = entry
            continue
        entry = {**entry, "too_few_cases": True}
        entry["policies"] = {
            p: {k: {**v, "mean": blank(v["mean"]), "iqm": blank(v["iqm"])} for k, v in kpis.items()}
            for p, kpis in entry["policies"].items()
        }
        if "comparison" in entry:
            entry["comparison"] = {
                k: {x: blank(y) for x, y in v.items()} for k, v in entry["comparison"].items()
            }
        if "probability_better" in entry:
            entry["probability_better"] = blank(entry["probability_better"])
        entry["pairs"] = [
            {**pair, "kpis": {k: {x: blank(y) for x, y in v.items()} for k, v in pair["kpis"].items()}}
            for pair in entry.get("pairs", [])
        ]
        variants[name] = entry
    return {**summary, "variants": variants}


def _change(kpi: dict[str, Any], comparison: dict[str, Any], learned: float, base: float, scale: float):
    """(verdict, phrase) for one KPI: verdict is better / worse / unclear (different: an unranked KPI).

    ``scale`` is the largest absolute mean of this KPI over all policies: differences
    below 0.1 % of it count as no difference, and a relative (%) difference is only
    quoted where the unit is not itself a percentage and the baseline is not near
    zero (nor close to zero in some bootstrap resamples, which makes the relative CI explode);
    otherwise the difference is absolute.
    """
    diff = comparison["difference"]
    if diff["value"] == diff["low"] == diff["high"] == 0:  # no resample differs: the same every time
        return "unclear", f"{label(kpi)} the same on every held-out case"
    sign = 1 if kpi["higher_is_better"] else -1
    negligible = abs(diff["value"]) < 1e-3 * scale
    if (diff["low"] > 0 or diff["high"] < 0) and not negligible:
        verdict = "better" if sign * diff["value"] > 0 else "worse"
        if not ranked(kpi):
            verdict = "different"  # a trade-off: higher or lower, never better or worse
    else:
        verdict = "unclear"
    unit = kpi["unit"]
    percentage = unit == "%" or unit.startswith("% ")  # "%", "% of trains", "% of initial"
    direction = "higher" if diff["value"] > 0 else "lower"
    rel = comparison["relative_percent"]
    relative_ok = (
        unit != ""
        and not percentage
        and abs(base) >= 0.01 * scale
        and all(math.isfinite(rel[k]) and abs(rel[k]) < 1000 for k in ("value", "low", "high"))
    )
    if relative_ok:
        size = f"{pct(abs(rel['value']))[1:]} {direction}"
        ci = f"95 % CI {pct(rel['low'])} to {pct(rel['high'])}"
    else:
        amount = fmt(abs(diff["value"]))
        points = " percentage point" if amount == "1" else " percentage points"
        unit_text = points if percentage else (f" ({unit})" if unit else "")
        size = f"{amount}{unit_text} {direction}"
        ci = f"95 % CI {fmt(diff['low'])} to {fmt(diff['high'])}"
    return verdict, f"{label(kpi)} {size} ({ci})"


def averaged_apart(
    kpis: dict[str, dict[str, Any]], kpi: dict[str, Any], entry: dict[str, Any], learned: str, heuristic: str
) -> tuple[dict[str, Any], float, float] | None:
    """``(base KPI, learned mean, standard mean)`` where ``kpi`` is a mean over a population (its
    ``among``, e.g. delay over the trains that arrived) on which the two policies differ clearly;
    otherwise None. Such means are not compared: fewer trains arriving makes their delay shorter."""
    among = kpi.get("among")
    base = kpis.get(among) if among else None
    if base is None:
        return None
    lb, hb = (entry["policies"][p][base["name"]]["mean"]["value"] for p in (learned, heuristic))
    verdict, _ = _change(base, entry["comparison"][base["name"]], lb, hb, _scale(entry, base["name"]))
    return None if verdict == "unclear" else (base, lb, hb)


def _scale(entry: dict[str, Any], name: str) -> float:
    """Largest absolute mean of KPI ``name`` over the variant's policies (NaN means left out)."""
    values = (v[name]["mean"]["value"] for v in entry["policies"].values())
    return max((abs(x) for x in values if math.isfinite(x)), default=0.0)


def variant_findings(summary: dict[str, Any], variant: str) -> list[str]:
    """Plain-words findings for one setting: best learned against best standard policy, every KPI.

    Below :data:`MIN_CASES` held-out cases there are no confidence intervals and no "beat it n % of
    the time": the numbers are stated and the comparison is called what it is, too small.
    """
    entry = summary["variants"][variant]
    kpis = {k["name"]: k for k in summary["kpis"]}
    primary = kpis[summary["primary_kpi"]]
    where = "" if variant == "default" else f"On {variant}: "
    learned, heuristic = entry.get("best_learned"), entry.get("best_heuristic")
    unit = f" {primary['unit']}" if primary["unit"] else ""
    if not learned or not heuristic:
        best = learned or heuristic
        if best is None:
            return [
                f"{where}No policy has results here: every held-out episode ended "
                f"{failures_ended(failures_in(summary, variant))} (see 'Failed episodes' in the appendix)."
            ] + oracle_lines(summary, variant)
        stats = entry["policies"][best][primary["name"]]["mean"]
        kinds = {p["kind"] for p in summary["policies"]}
        why = (
            "the scenario has only one kind of policy" if len(kinds) < 2 else "the other kind has no results"
        )
        ci = ""
        if cases(entry, best) >= MIN_CASES:
            ci = f" (95 % CI {fmt(stats['low'])} to {fmt(stats['high'])})"
        return [
            f"{where}{best} had the best {label(primary)}: {fmt(stats['value'])}{unit}{ci}. No learned-vs-"
            f"standard comparison: {why}."
        ] + oracle_lines(summary, variant)

    def means(name: str) -> tuple[float, float, float]:
        scale = _scale(entry, name)
        lv, hv = (entry["policies"][p][name]["mean"]["value"] for p in (learned, heuristic))
        return lv, hv, scale

    lv, hv, scale = means(primary["name"])
    n = cases(entry, learned, heuristic)
    if n < MIN_CASES:
        return [
            f"{where}{learned}, the best learned policy, scored {fmt(lv)}{unit} on {label(primary)} and "
            f"{heuristic}, the best standard policy, {fmt(hv)}{unit}: {too_few(n)}."
        ] + oracle_lines(summary, variant)
    comparison = entry["comparison"]
    verdict, phrase = _change(primary, comparison[primary["name"]], lv, hv, scale)
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
    timed = [label(k) for k in kpis.values() if k.get("wall_clock")]
    apart: list[str] = []  # KPIs averaged over populations of clearly different size: not compared
    for name, kpi in kpis.items():
        if name == primary["name"] or kpi.get("wall_clock"):
            continue
        lv_k, hv_k, scale_k = means(name)
        if math.isnan(lv_k) or math.isnan(hv_k):
            continue  # not measured for one or both (e.g. a KPI that does not apply here): nothing to compare
        differs = averaged_apart(kpis, kpi, entry, learned, heuristic)
        if differs is not None:
            base_kpi, lb, hb = differs
            base_unit = f" {base_kpi['unit']}" if base_kpi["unit"] else ""
            apart.append(
                f"{kpi['label']} is not compared: it is averaged over {label(base_kpi)}, and the two "
                f"policies differ clearly there ({fmt(lb)} vs {fmt(hb)}{base_unit})."
            )
            continue
        v, p = _change(kpi, comparison[name], lv_k, hv_k, scale_k)
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
    pb = entry["probability_better"]
    lines.append(
        f"On a given held-out case, {learned} beat {heuristic} on {label(primary)} "
        f"{100 * pb['value']:.0f} % of the time (95 % CI {100 * pb['low']:.0f}-{100 * pb['high']:.0f} %)."
    )
    return lines + oracle_lines(summary, variant)


def pair_findings(summary: dict[str, Any]) -> list[str]:
    """One sentence per requested comparison (policy minus baseline): where it helps, hurts, or ties."""
    kpis = {k["name"]: k for k in summary["kpis"]}
    primary = kpis[summary["primary_kpi"]]
    variants = list(summary["variants"])
    pairs = summary["variants"][variants[0]].get("pairs", []) if variants else []
    lines = []
    for index, pair in enumerate(pairs):
        verdicts: dict[str, list[str]] = {"better": [], "worse": [], "unclear": [], "few": []}
        for variant in variants:
            entry = summary["variants"][variant]
            where = "" if variant == "default" else f"{variant}: "
            n = cases(entry, pair["policy"], pair["baseline"])
            if n < MIN_CASES:
                verdicts["few"].append(f"{where}{n} case(s)")
                continue
            result = entry["pairs"][index]["kpis"][primary["name"]]
            scale = _scale(entry, primary["name"])
            lv = entry["policies"][pair["policy"]][primary["name"]]["mean"]["value"]
            bv = entry["policies"][pair["baseline"]][primary["name"]]["mean"]["value"]
            verdict, phrase = _change(primary, result, lv, bv, scale)
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
        lines.append(f"{pair['policy']} compared with {pair['baseline']}: it " + ", and ".join(parts) + ".")
    return lines


def pair_setting_sentences(summary: dict[str, Any]) -> list[str]:
    """Page 1: one sentence per setting on the scenario's requested comparisons (e.g. "does memory
    help?"): each pair's verdict on the primary KPI, and where both sides trained on several seeds,
    which of the two depends less on its training seed (standard deviation across seeds)."""
    kpis = {k["name"]: k for k in summary["kpis"]}
    primary = kpis[summary["primary_kpi"]]
    lines = []
    for variant, entry in summary["variants"].items():
        parts = []
        for pair in entry.get("pairs", []):
            policy, baseline = pair["policy"], pair["baseline"]
            n = cases(entry, policy, baseline)
            if n < MIN_CASES:
                parts.append(f"{policy} and {baseline} had too few held-out cases to compare ({n})")
                continue
            lv, bv = (entry["policies"][p][primary["name"]]["mean"]["value"] for p in (policy, baseline))
            verdict, phrase = _change(
                primary, pair["kpis"][primary["name"]], lv, bv, _scale(entry, primary["name"])
            )
            word = {"better": "did better than", "worse": "did worse than"}.get(
                verdict, "could not be told apart from"
            )
            text = f"{policy} {word} {baseline} ({phrase})"
            stability = pair.get("stability")
            if stability:
                text += _stability_clause(stability, policy, baseline)
            parts.append(text)
        if parts:
            where = "" if variant == "default" else f"{variant}: "
            lines.append(where + "; ".join(parts) + ".")
    return lines


def _stability_clause(stability: dict[str, Any], policy: str, baseline: str) -> str:
    """ ", and it was steadier across its N training seeds (SD a against b, ...)" or the opposite."""
    own, other, diff = stability["policy"], stability["baseline"], stability["sd_difference"]
    seeds = len(own["per_seed"])
    if diff["high"] < 0:
        how = f"{policy} was the steadier across training seeds"
    elif diff["low"] > 0:
        how = f"{baseline} was the steadier across training seeds"
    else:
        how = "their spread across training seeds could not be told apart"
    return (
        f", and {how} (standard deviation of the {seeds} seeds' means {fmt(own['sd']['value'])} against "
        f"{fmt(other['sd']['value'])}, difference 95 % CI {fmt(diff['low'])} to {fmt(diff['high'])}; "
        f"worst seed {fmt(own['worst']['value'])} against {fmt(other['worst']['value'])})"
    )
