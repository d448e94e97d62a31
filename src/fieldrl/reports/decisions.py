"""Decision differences in words: how often the best learned policy decides as the standard policy would,
and *when* it does not, as the rules of a shallow decision tree (scikit-learn, depth 3) over the
domain's named features, each with its support (share of all decisions) and fidelity (share of the
decisions it covers for which what it says holds).

Reads what evaluation recorded (:mod:`fieldrl.evaluation.decisions`); fits the tree, never steps an env.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from reportlab.lib.units import cm
from reportlab.platypus import KeepTogether, Paragraph

from fieldrl.evaluation.decisions import DecisionSetting, DecisionSummary, read_decisions
from fieldrl.reportkit import figures
from fieldrl.reportkit.context import ReportContext
from fieldrl.reportkit.layout import text_table

SAME = "same"
#: a continuous action counts as the same decision within this share of its range
CONTINUOUS_TOLERANCE = 0.05
#: difference kinds the tree tells apart (the rest are pooled as "other")
KINDS = 3
MAX_DEPTH = 3
MAX_RULES = 4
#: agreement at or above which the learned policy is said to be the rule again
RULE_AGAIN = 0.95
MIN_DECISIONS = 50
#: a rule is printed only where what it says holds for at least this share of the decisions it covers
MIN_FIDELITY = 0.5


# ----------------------------------------------------------------------------- labels


def difference_labels(frame: pd.DataFrame, setting: DecisionSetting) -> np.ndarray:
    """Per decision: :data:`SAME`, or what the learned policy did differently, as a short label."""
    lcols = sorted((c for c in frame.columns if c[0] == "l" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    learned = frame[lcols].to_numpy()
    standard = frame[["s" + c[1:] for c in lcols]].to_numpy()
    words = setting.action_words
    if setting.action_kind == "continuous":
        low = np.asarray(setting.action_low or [0.0] * learned.shape[1], dtype=float)
        high = np.asarray(setting.action_high or [1.0] * learned.shape[1], dtype=float)
        span = np.where(np.isfinite(high - low) & (high > low), high - low, 1.0)
        gap = (learned.astype(float) - standard.astype(float)) / span
        dim = np.abs(gap).argmax(axis=1)
        signed = gap[np.arange(len(gap)), dim]
        names = (
            words if words and len(words) == learned.shape[1] else [f"action[{k}]" for k in range(len(span))]
        )
        name = [names[d] if len(names) > 1 else names[0] for d in dim]
        return np.array(
            [
                SAME if abs(g) <= CONTINUOUS_TOLERANCE else f"{'higher' if g > 0 else 'lower'} {n}"
                for g, n in zip(signed, name, strict=True)
            ],
            dtype=object,
        )
    differs = learned != standard
    out = np.full(len(frame), SAME, dtype=object)
    for i in np.flatnonzero(differs.any(axis=1)):
        j = int(np.flatnonzero(differs[i])[0])
        a, b = int(learned[i, j]), int(standard[i, j])
        if setting.action_kind == "discrete":
            out[i] = f"{_word(words, a)} instead of {_word(words, b)}"
        else:
            part = words[j] if words and j < len(words) else f"action[{j}]"
            out[i] = f"{part} {a} instead of {b}"
    return out


def _word(words: list[str] | None, value: int) -> str:
    return words[value] if words and 0 <= value < len(words) else str(value)


def _sentence(label: str, setting: DecisionSetting) -> str:
    learned, standard = setting.learned, setting.standard
    if label == SAME:
        return f"{learned} decides as {standard} would"
    if label == "other":
        return f"{learned} decides otherwise than {standard} would (in several ways)"
    if setting.action_kind == "continuous":
        return f"{learned} sets a {label} than {standard} would"
    return f"{learned} chooses {label.replace(' instead of ', f' where {standard} would choose ')}"


# ----------------------------------------------------------------------------- the tree


@dataclass
class Rule:
    conditions: str
    label: str
    support: float  # share of all decisions in the rule's region
    fidelity: float  # share of the region's decisions for which the label holds
    count: int


@dataclass
class DecisionStory:
    agreement: float
    same: np.ndarray  # per decision: the two decide alike
    progress: np.ndarray  # per decision: how far through its episode (0 first step, 1 last)
    decisions: int
    kinds: list[tuple[str, float]]  # the commonest differences, share of all decisions
    rules: list[Rule]
    tree_fidelity: float  # share of all decisions whose label the tree predicts


def _bounds_text(bounds: dict[int, list[float]], names: list[str], fmt: str = ".3g") -> str:
    parts = []
    for k, (low, high) in bounds.items():
        name = names[k]
        if np.isfinite(low) and np.isfinite(high):
            parts.append(f"{low:{fmt}} < {name} ≤ {high:{fmt}}")
        elif np.isfinite(low):
            parts.append(f"{name} > {low:{fmt}}")
        else:
            parts.append(f"{name} ≤ {high:{fmt}}")
    return " and ".join(parts) if parts else "always"


def explain(frame: pd.DataFrame, setting: DecisionSetting) -> DecisionStory:
    """Agreement, the commonest differences and the tree's rules for one setting's decisions."""
    from sklearn.tree import DecisionTreeClassifier

    labels = difference_labels(frame, setting)
    n = len(labels)
    same, progress = labels == SAME, episode_progress(frame)
    agreement = float(np.mean(labels == SAME)) if n else float("nan")
    counts = Counter(label for label in labels if label != SAME)
    kinds = [(label, count / n) for label, count in counts.most_common(KINDS)]
    if n < MIN_DECISIONS or not counts or kinds[0][1] >= RULE_AGAIN:  # too few, none, or one fixed choice
        return DecisionStory(agreement, same, progress, n, kinds, [], float("nan"))
    kept = {label for label, _ in kinds}
    target = np.array([lab if lab == SAME or lab in kept else "other" for lab in labels], dtype=object)
    features = frame[[f"f{k}" for k in range(len(setting.features))]].to_numpy(dtype=float)
    tree = DecisionTreeClassifier(
        max_depth=MAX_DEPTH,
        min_samples_leaf=max(10, n // 50),
        class_weight="balanced",  # differences are rarer than agreement; find where they gather
        random_state=0,
    ).fit(features, target)
    predicted = tree.predict(features)
    leaves = tree.apply(features)
    rules = []
    for leaf in np.unique(leaves):
        label = predicted[leaves == leaf][0]
        if label == SAME:
            continue
        inside = leaves == leaf
        rules.append(
            Rule(
                _bounds_text(_leaf_bounds(tree, int(leaf)), setting.features),
                str(label),
                float(inside.mean()),
                float(np.mean(target[inside] == label)),
                int(inside.sum()),
            )
        )
    rules = [r for r in rules if r.fidelity >= MIN_FIDELITY]  # else it says what mostly does not happen
    rules.sort(key=lambda r: -r.support * r.fidelity)
    return DecisionStory(
        agreement, same, progress, n, kinds, rules[:MAX_RULES], float(np.mean(predicted == target))
    )


def episode_progress(frame: pd.DataFrame) -> np.ndarray:
    """Per decision, how far through its episode it was: its step over the episode's last recorded step."""
    if frame.empty or "step" not in frame.columns:
        return np.zeros(len(frame))
    keys = [c for c in ("train_seed", "eval_seed", "episode") if c in frame.columns]
    last = frame.groupby(keys)["step"].transform("max") if keys else frame["step"].max()
    return (frame["step"] / np.maximum(last, 1)).to_numpy(dtype=float)


def _leaf_bounds(tree: Any, leaf: int) -> dict[int, list[float]]:
    """Feature -> [lower, upper] bound on the path from the root to ``leaf``."""
    t = tree.tree_
    parent: dict[int, tuple[int, bool]] = {}
    for node in range(t.node_count):
        if t.children_left[node] >= 0:
            parent[int(t.children_left[node])] = (node, True)
            parent[int(t.children_right[node])] = (node, False)
    bounds: dict[int, list[float]] = {}
    node = leaf
    while node in parent:
        up, left = parent[node]
        k, threshold = int(t.feature[up]), float(t.threshold[up])
        low, high = bounds.setdefault(k, [-np.inf, np.inf])
        bounds[k] = [low, min(high, threshold)] if left else [max(low, threshold), high]
        node = up
    return dict(sorted(bounds.items()))


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
        tell = explain(read_decisions(ctx.folder, setting), setting)
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
    if tell.decisions == 0:
        return [ctx.para(f"{learned}{where}: no decisions were recorded.", "Small")]
    head = (
        f"{learned}{where} takes the same decision as {standard} in {tell.agreement:.0%} of "
        f"{tell.decisions:,} decisions."
    )
    if tell.agreement >= RULE_AGAIN:
        head += f" In effect it is {standard} again: it has not learned a different way to decide."
    elif tell.kinds and tell.kinds[0][1] >= RULE_AGAIN:
        top, share = tell.kinds[0]
        head += (
            f" Nearly always ({share:.1%} of decisions) {_sentence(top, setting)}: one fixed choice whatever "
            "the state, so no rule is needed to say when (a standard policy that makes that choice would "
            "be worth testing)."
        )
    elif tell.kinds:
        top, share = tell.kinds[0]
        head += f" Its commonest difference: {_sentence(top, setting)} ({share:.0%} of decisions)."
    out.append(ctx.para(head, "Finding"))
    if tell.rules:
        out.append(
            ctx.para(
                f"When it differs, in the words of a depth-{MAX_DEPTH} decision tree over the observation's "
                f"features (the tree reproduces {tell.tree_fidelity:.0%} of the decisions' labels):",
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
    elif tell.agreement < RULE_AGAIN and not (tell.kinds and tell.kinds[0][1] >= RULE_AGAIN):
        out.append(
            ctx.para("The differences are scattered: no region of the features holds most of them.", "Small")
        )
    if tell.decisions >= MIN_DECISIONS and tell.agreement < 1:
        png = figures.agreement_by_progress(tell.progress, tell.same, learned, str(standard))
        out.append(ctx.figure(f"decisions-{where or 'default'}", png, max_height=5 * cm))
    if tell.kinds:
        rows = [["what differs", "share of decisions"]]
        rows += [[_sentence(label, setting), f"{share:.1%}"] for label, share in tell.kinds]
        out.append(text_table(rows, ctx.styles, [12.5 * cm, 4 * cm]))
    out.append(ctx.para(asked + "; the learned policy's own actions drove the episodes.", "Small"))
    return out
