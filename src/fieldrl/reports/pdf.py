"""Build ``report.pdf`` for a run folder with reportlab.

Order follows what a stakeholder needs: the finding in plain words first, then the
KPI table with units and confidence intervals, the comparison chart, learning
curves, the domain's own figures, and an appendix with everything needed to
reproduce the numbers.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pandas as pd
import yaml
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.platypus import (
    Image,
    KeepTogether,
    ListFlowable,
    ListItem,
    PageBreak,
    Paragraph,
    Preformatted,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from fieldrl.domains import get_domain
from fieldrl.domains.base import Domain
from fieldrl.evaluation.store import RunFolder
from fieldrl.names import slug
from fieldrl.reports import figures
from fieldrl.reports.findings import fmt, pair_findings, variant_findings
from fieldrl.scenario import Scenario

PAGE_WIDTH = A4[0] - 4 * cm


@dataclass
class ReportContext:
    """What a domain's ``report_section`` may use to add its own pages."""

    folder: RunFolder
    scenario: Scenario
    domain: Domain
    summary: dict[str, Any]
    results: pd.DataFrame
    traces: pd.DataFrame
    styles: Any
    colors: dict[str, str]
    figure_files: list[str] = field(default_factory=list)

    def figure(self, name: str, png: bytes, width: float = PAGE_WIDTH) -> Image:
        """Save ``png`` under figures/ and return it as a flowable scaled to ``width``."""
        rel = f"figures/{slug(name)}.png"
        self.folder.write_bytes(rel, png, record=False)
        self.figure_files.append(rel)
        return _image(png, width)

    def para(self, text: str, style: str = "BodyText") -> Paragraph:
        return Paragraph(escape(text), self.styles[style])


def _image(png: bytes, width: float) -> Image:
    from reportlab.lib.utils import ImageReader

    w, h = ImageReader(io.BytesIO(png)).getSize()
    return Image(io.BytesIO(png), width=width, height=width * h / w)


def _styles() -> Any:
    styles = getSampleStyleSheet()
    styles.add(ParagraphStyle("Finding", parent=styles["BodyText"], fontSize=10.5, leading=14))
    styles.add(ParagraphStyle("Small", parent=styles["BodyText"], fontSize=8, leading=10))
    styles["Code"].fontSize, styles["Code"].leading = 6.5, 7.5
    styles.add(ParagraphStyle("Cell", parent=styles["BodyText"], fontSize=7.5, leading=9))
    return styles


def _learning_curves(folder: RunFolder, scenario: Scenario, variant: str) -> pd.DataFrame:
    from fieldrl.evaluation.runner import model_dir
    from fieldrl.policies.learned import CURVE_FILE

    frames = []
    recorded = folder.hashes()
    for entry in scenario.policies.learned:
        for seed in scenario.seeds.train:
            rel = f"{model_dir(variant, entry.label, seed)}/{CURVE_FILE}"
            if rel in recorded:
                frame = pd.read_csv(io.BytesIO(folder.read_verified(rel, "")))
                frames.append(frame.assign(policy=entry.label, seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def best_policies(
    entry: dict[str, Any], kpis: list[dict[str, Any]], stat: str = "mean"
) -> dict[str, str | None]:
    """KPI name -> the policy with the best ``stat`` value; None where no policy has a value (NaN)."""
    best: dict[str, str | None] = {}
    for k in kpis:
        sign = 1 if k["higher_is_better"] else -1
        scored = {
            p: sign * v[k["name"]][stat]["value"]
            for p, v in entry["policies"].items()
            if math.isfinite(v[k["name"]][stat]["value"])
        }
        best[k["name"]] = max(scored, key=scored.__getitem__) if scored else None
    return best


def kpi_table(ctx: ReportContext, variant: str, stat: str = "mean") -> Table:
    """Policies x KPIs: ``stat`` (mean or iqm) with its CI; bold marks the best per KPI."""
    entry = ctx.summary["variants"][variant]
    kpis = ctx.summary["kpis"]
    cell = ctx.styles["Cell"]
    header = [Paragraph("<b>Policy</b>", cell)]
    for k in kpis:
        arrow = "higher is better" if k["higher_is_better"] else "lower is better"
        unit = f" ({escape(k['unit'])})" if k["unit"] else ""
        header.append(Paragraph(f"<b>{escape(k['label'])}</b>{unit}<br/><i>{arrow}</i>", cell))
    rows = [header]
    best = best_policies(entry, kpis, stat)
    kinds = {p["name"]: p["kind"] for p in ctx.summary["policies"]}
    for policy, values in entry["policies"].items():
        label = f"{escape(policy)}<br/><font size=6>{kinds.get(policy, '')}</font>"
        row = [Paragraph(label, cell)]
        for k in kpis:
            m = values[k["name"]][stat]
            text = f"{fmt(m['value'])}<br/><font size=6>[{fmt(m['low'])}, {fmt(m['high'])}]</font>"
            if best[k["name"]] == policy:
                text = f"<b>{text}</b>"
            row.append(Paragraph(text, cell))
        rows.append(row)
    first = 3.2 * cm
    widths = [first] + [(PAGE_WIDTH - first) / len(kpis)] * len(kpis)
    table = Table(rows, colWidths=widths, repeatRows=1)
    style = [
        ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ]
    for i, policy in enumerate(entry["policies"], start=1):
        if kinds.get(policy) == "learned":
            style.append(("BACKGROUND", (0, i), (-1, i), colors.HexColor("#f4f8fc")))
    table.setStyle(TableStyle(style))
    return table


def _bullets(items: list[Paragraph]) -> ListFlowable:
    return ListFlowable([ListItem(p, leftIndent=10) for p in items], bulletType="bullet", start="•")


def build_report(folder: RunFolder, scenario: Scenario, meta: dict[str, Any]) -> Path:
    domain = get_domain(scenario.domain)
    summary = folder.read_json("summary.json", "evaluate the run first (`fieldrl evaluate RUN_DIR`)")
    ctx = ReportContext(
        folder=folder,
        scenario=scenario,
        domain=domain,
        summary=summary,
        results=folder.read_parquet("results.parquet", "evaluate the run first (`fieldrl evaluate RUN_DIR`)"),
        traces=folder.read_parquet("traces.parquet")
        if "traces.parquet" in folder.hashes()
        else pd.DataFrame(),
        styles=_styles(),
        colors=figures.policy_colors(summary["policies"]),
    )
    title = scenario.report.title or f"{domain.title}: {scenario.name}"
    story = _front_page(ctx, title, meta.get("budget", "full"))
    for variant in scenario.variant_names:
        story.extend(_variant_pages(ctx, variant))
    story.extend(_comparison_pages(ctx))
    domain_flowables = domain.report_section(ctx)
    if domain_flowables:
        story.append(PageBreak())
        story.extend(domain_flowables)
    story.append(PageBreak())
    story.extend(_appendix(ctx, meta))

    buffer = io.BytesIO()
    doc = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=2 * cm,
        rightMargin=2 * cm,
        topMargin=1.6 * cm,
        bottomMargin=1.6 * cm,
        title=title,
        author="fieldrl",
    )
    doc.build(story, onFirstPage=_footer, onLaterPages=_footer)
    folder.write_bytes("report.pdf", buffer.getvalue(), record=False)
    folder.record(*ctx.figure_files, "report.pdf")
    return folder.path / "report.pdf"


#: front-page caveat for runs below the full budget
_BUDGET_NOTES = {
    "quick": "Note: this run used the 'quick' budget (short training, few seeds); its numbers show the "
    "pipeline working, not what the learned policies can reach.",
    "medium": "Note: this run used the scenario's 'medium' budget (a fraction of the full training "
    "and fewer seeds; see the appendix); the learned policies' numbers are what that "
    "budget reaches, not necessarily what the full study would.",
}


def _front_page(ctx: ReportContext, title: str, budget: str) -> list[Any]:
    """Title, what was compared, and the findings in plain words."""
    scenario, styles = ctx.scenario, ctx.styles
    story: list[Any] = [Paragraph(escape(title), styles["Title"])]
    story.append(
        ctx.para(
            f"Report generated {dt.date.today().isoformat()} by fieldrl from run folder "
            f"'{ctx.folder.path.name}' (budget: {budget}).",
            "Small",
        )
    )
    if scenario.description:
        story.append(ctx.para(scenario.description.strip()))
    n_eval = len(scenario.seeds.eval) * scenario.episodes_per_seed
    settings = ""
    if scenario.variants:
        settings = f", separately for each setting: {', '.join(scenario.variant_names)}"
    story.append(
        ctx.para(
            f"What was compared: {len(scenario.policies.heuristics)} standard (heuristic) policies and "
            f"{len(scenario.policies.learned)} learned policies, each trained on "
            f"{len(scenario.seeds.train)} independent training seed(s). Every policy was then tested on "
            f"the same {n_eval} held-out cases (seeds never used in training){settings}. "
            "Ranges in brackets are 95 % bootstrap confidence intervals."
        )
    )
    failed = len(ctx.summary.get("failed_episodes") or [])
    if failed:
        runs = len(scenario.policies.heuristics) + len(scenario.policies.learned) * len(scenario.seeds.train)
        total = n_eval * runs * len(scenario.variant_names)
        story.append(
            Paragraph(
                f"<b>{failed} of {total} held-out episodes failed</b> (simulator errors, each retried "
                "once on a fresh simulator) and are left out of every number in this report; the appendix "
                "lists them.",
                styles["Finding"],
            )
        )
    story.append(Paragraph("Key findings", styles["Heading2"]))
    lines = [line for v in scenario.variant_names for line in variant_findings(ctx.summary, v)]
    story.append(_bullets([ctx.para(line, "Finding") for line in lines + pair_findings(ctx.summary)]))
    if budget in _BUDGET_NOTES:
        story.append(ctx.para(_BUDGET_NOTES[budget], "Small"))
    return story


def _variant_pages(ctx: ReportContext, variant: str) -> list[Any]:
    """KPI table, comparison chart and learning curves of one variant."""
    styles = ctx.styles
    suffix = "" if variant == "default" else f" — {variant}"
    head = [  # kept on one page: a heading never ends a page without its table
        Paragraph(f"Results{suffix}", styles["Heading2"]),
        ctx.para(f"Settings: {_params_text(ctx.scenario, ctx.domain, variant)}", "Small"),
        kpi_table(ctx, variant),
        Spacer(1, 6),
        ctx.para(
            "Mean over held-out cases; brackets: 95 % CI; bold: best on that measure; shaded rows: "
            "learned policies." + _not_measured_text(ctx.summary, variant),
            "Small",
        ),
    ]
    story: list[Any] = [KeepTogether(head)]
    chart = ctx.figure(f"kpis-{variant}", figures.kpi_comparison(ctx.summary, variant))
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
    return story


def _not_measured_text(summary: dict[str, Any], variant: str) -> str:
    """A note on KPIs without a value for any policy in ``variant`` (n/a column, no chart panel)."""
    measured = {k["name"] for k in figures.measured_kpis(summary, variant)}
    missing = [k["label"] for k in summary["kpis"] if k["name"] not in measured]
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
        story.append(
            KeepTogether(
                [
                    Paragraph(heading, ctx.styles["Heading2"]),
                    ctx.para(
                        "Difference on the same held-out cases (policy minus baseline) in every setting, "
                        "with 95 % confidence intervals; an interval crossing 0 means no clear difference.",
                        "Small",
                    ),
                    ctx.figure(f"pair-{index}", png),
                ]
            )
        )
    return story


def _footer(canvas: Any, doc: Any) -> None:
    canvas.saveState()
    canvas.setFont("Helvetica", 7)
    canvas.drawRightString(A4[0] - 2 * cm, 1 * cm, f"fieldrl report — page {doc.page}")
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
    conf = int(round(100 * ctx.summary["confidence"]))
    out.append(
        ctx.para(
            "Protocol. Learned policies were trained with Stable-Baselines3 on the training seeds only. "
            "Every policy, standard or learned, was then run with deterministic actions on the same held-out "
            "evaluation seeds (common random numbers: the same simulated cases for everyone). Each number is "
            f"the mean over held-out episodes (and over training seeds for learned policies). {conf} % "
            f"confidence intervals come from a stratified percentile bootstrap "
            f"({ctx.summary['bootstrap_samples']} resamples) over training seeds and evaluation seeds, "
            "using the same evaluation-seed draws for every policy, so comparisons are paired. The "
            "interquartile mean (IQM, table below) is reported beside the mean for robustness. "
            "'Best' policies are chosen by the primary measure, "
            f"{ctx.domain.kpi(ctx.summary['primary_kpi']).label}."
        )
    )
    failed = ctx.summary.get("failed_episodes") or []
    if failed:
        out.append(Paragraph("Failed episodes", styles["Heading3"]))
        out.append(
            ctx.para(
                f"{len(failed)} held-out episode(s) ended in a simulator error; they were re-run alone on a "
                "fresh simulator, failed again, and are left out of every number above (an eval seed with "
                "no successful episode has no value). First failures:",
                "Small",
            )
        )
        for f in failed[:10]:
            where = "" if f["variant"] == "default" else f" [{f['variant']}]"
            out.append(
                ctx.para(
                    f"{f['policy']}{where}, train seed {f['train_seed']}, eval seed {f['eval_seed']}, "
                    f"episode {f['episode']}: {escape(f['reason'])}",
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
        out.append(kpi_table(ctx, variant, stat="iqm"))
    out.append(Paragraph("Policies", styles["Heading3"]))
    rows = [["Policy", "Kind", "Definition"]]
    for h in s.policies.heuristics:
        settings = ", ".join(f"{k}={v}" for k, v in h.settings.items()) or "defaults"
        rows.append(
            [
                h.label,
                "standard",
                f"{h.use} ({settings}): {ctx.domain.heuristics[h.use].description}",
            ]
        )
    for entry in s.policies.learned:
        hp = ", ".join(f"{k}={v}" for k, v in entry.hyperparameters.items()) or "SB3 defaults"
        rows.append(
            [
                entry.label,
                "learned",
                f"{entry.algorithm} {entry.policy}, {entry.train_steps:,} env steps, {entry.n_envs} envs, "
                f"normalise obs={entry.normalize_obs}, reward={entry.normalize_reward}; {hp}"
                + _imitation_text(entry),
            ]
        )
    out.append(_text_table(rows, styles, [3 * cm, 1.6 * cm, PAGE_WIDTH - 4.6 * cm]))
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
    versions = ctx.folder.read_json("versions.json") if "versions.json" in ctx.folder.hashes() else {}
    out.append(ctx.para(", ".join(f"{k} {v}" for k, v in versions.items()), "Small"))
    return out


def _imitation_text(entry: Any) -> str:
    if entry.imitate is None:
        return ""
    m = entry.imitate
    return (
        f". Warm start: behaviour-cloned from {m.heuristic} on {m.episodes} training-seed episodes "
        f"({m.epochs} epochs, at most {m.max_decisions:,} decisions) before RL training"
    )


def _seed_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{len(seeds)} seeds, {seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _text_table(rows: list[list[str]], styles: Any, widths: list[float]) -> Table:
    cell = styles["Cell"]
    data = [[Paragraph(escape(str(c)), cell) for c in row] for row in rows]
    table = Table(data, colWidths=widths, repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    return table
