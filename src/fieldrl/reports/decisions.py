"""Decision differences in words: how often the best learned policy decides as the standard policy would,
and *when* it does not (the rules of the tree :mod:`fieldrl.evaluation.decision_story` fitted).

Reads what evaluation recorded and worked out (``decisions/summary.json``); never steps an env, and
fits the tree only for a folder recorded before the summary kept what it shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from reportlab.lib.units import cm
from reportlab.platypus import KeepTogether, Paragraph

from fieldrl.evaluation.decision_story import (
    MAX_DEPTH,
    MIN_DECISIONS,
    RULE_AGAIN,
    SAME,
    DecisionStory,
    explain,
)
from fieldrl.evaluation.decisions import DecisionSetting, DecisionSummary, read_decisions
from fieldrl.reportkit import figures
from fieldrl.reportkit.context import ReportContext
from fieldrl.reportkit.layout import text_table


def _sentence(label: str, setting: DecisionSetting) -> str:
    learned, standard = setting.learned, setting.standard
    if label == SAME:
        return f"{learned} decides as {standard} would"
    if label == "other":
        return f"{learned} decides otherwise than {standard} would (in several ways)"
    if setting.action_kind == "continuous":
        return f"{learned} sets a {label} than {standard} would"
    return f"{learned} chooses {label.replace(' instead of ', f' where {standard} would choose ')}"


# ----------------------------------------------------------------------------- pages


def decision_pages(ctx: ReportContext, decided: DecisionSummary | None) -> list[Any]:
    """Per setting: the agreement, what differs when (the tree's rules) and how it was measured."""
    styles = ctx.styles
    heading = Paragraph("What the learned policy does differently", styles["Heading2"])
    if decided is None:
        return [
            heading,
            ctx.para(
                "This run's decisions were not recorded (it was evaluated before fieldrl recorded them); "
                "evaluate it again (`fieldrl evaluate RUN_DIR`) to see them here.",
                "Small",
            ),
        ]
    story: list[Any] = []
    for variant, setting in decided.variants.items():
        where = "" if variant == "default" else f" (setting {variant})"
        block: list[Any] = [heading] if not story else []
        if setting.standard is None:
            block.append(ctx.para(f"{setting.learned}{where}: {setting.substituted}.", "Small"))
            story.append(KeepTogether(block))
            continue
        tell = setting.story or explain(read_decisions(ctx.folder, setting), setting)
        block += _setting_block(ctx, setting, tell, where)
        story.append(KeepTogether(block))
    return story


def _setting_block(
    ctx: ReportContext, setting: DecisionSetting, tell: DecisionStory, where: str
) -> list[Any]:
    learned, standard = setting.learned, setting.standard
    asked = (
        f"{standard} was asked, at every decision {learned} took on {setting.episodes} held-out "
        f"episode{'s' if setting.episodes != 1 else ''}, what it would do in the same state"
    )
    if setting.substituted:
        asked += f" ({setting.substituted})"
    out: list[Any] = []
    if tell.decisions == 0 or tell.agreement is None:
        return [ctx.para(f"{learned}{where}: no decisions were recorded.", "Small")]
    head = (
        f"{learned}{where} takes the same decision as {standard} in {tell.agreement:.0%} of "
        f"{tell.decisions:,} decisions."
    )
    if tell.agreement >= RULE_AGAIN:
        head += f" In effect it is {standard} again: it has not learned a different way to decide."
    elif tell.kinds and tell.kinds[0].share >= RULE_AGAIN:
        top, share = tell.kinds[0].label, tell.kinds[0].share
        head += (
            f" Nearly always ({share:.1%} of decisions) {_sentence(top, setting)}: one fixed choice whatever "
            "the state, so no rule is needed to say when (a standard policy that makes that choice would "
            "be worth testing)."
        )
    elif tell.kinds:
        top, share = tell.kinds[0].label, tell.kinds[0].share
        head += f" Its commonest difference: {_sentence(top, setting)} ({share:.0%} of decisions)."
    out.append(ctx.para(head, "Finding"))
    if tell.rules:
        out.append(
            ctx.para(
                f"When it differs, in the words of a depth-{MAX_DEPTH} decision tree over the observation's "
                f"features (the tree reproduces {tell.tree_fidelity or 0:.0%} of the decisions' labels):",
                "BodyText",
            )
        )
        for rule in tell.rules:
            out.append(
                ctx.para(
                    f"• When {rule.conditions}, {_sentence(rule.label, setting)}: {rule.support:.0%} of "
                    f"decisions, fidelity {rule.fidelity:.0%}.",
                    "BodyText",
                )
            )
    elif tell.agreement < 1 and tell.decisions < MIN_DECISIONS:
        out.append(ctx.para(f"Too few decisions ({tell.decisions}) to say when they differ.", "Small"))
    elif tell.agreement < RULE_AGAIN and not (tell.kinds and tell.kinds[0].share >= RULE_AGAIN):
        out.append(
            ctx.para("The differences are scattered: no region of the features holds most of them.", "Small")
        )
    if tell.decisions >= MIN_DECISIONS and tell.agreement < 1:
        png = figures.agreement_by_progress(
            np.array(tell.progress_decisions), np.array(tell.progress_alike), learned, str(standard)
        )
        out.append(ctx.figure(f"decisions-{where or 'default'}", png, max_height=5 * cm))
    if tell.kinds:
        rows = [["what differs", "share of decisions"]]
        rows += [[_sentence(kind.label, setting), f"{kind.share:.1%}"] for kind in tell.kinds]
        out.append(text_table(rows, ctx.styles, [12.5 * cm, 4 * cm]))
    out.append(ctx.para(asked + "; the learned policy's own actions drove the episodes.", "Small"))
    return out
