"""What one setting's decision differences say: how often the best learned policy decides as the standard
policy would, the commonest differences and *when* they happen, as the rules of a shallow decision tree
(scikit-learn, depth 3) over the domain's named features, each with its support (share of all decisions)
and fidelity (share of the decisions it covers for which what it says holds).

Worked out once, as the decisions are recorded (:mod:`fieldrl.evaluation.decisions`), and kept in
``decisions/summary.json``: the report only reads it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from fieldrl.evaluation.decisions import DecisionSetting

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


#: the agreement-by-progress figure's bars: tenths of the episode
PROGRESS_BINS = 10


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


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


# ----------------------------------------------------------------------------- the tree


class Rule(_Strict):
    conditions: str
    label: str
    support: float  # share of all decisions in the rule's region
    fidelity: float  # share of the region's decisions for which the label holds
    count: int


class Kind(_Strict):
    label: str
    share: float  # of all decisions


class DecisionStory(_Strict):
    """What the report says of one setting's decisions, worked out once, when they are recorded."""

    decisions: int
    #: share of decisions on which the two decide alike (None: no decisions)
    agreement: float | None
    #: the commonest differences
    kinds: list[Kind]
    rules: list[Rule]
    #: share of all decisions whose label the tree predicts (None: no tree was fitted)
    tree_fidelity: float | None
    #: per tenth of the episode (by step): decisions taken there, and how many of them alike
    progress_decisions: list[int]
    progress_alike: list[int]


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
    labels = difference_labels(frame, setting)
    n = len(labels)
    same = labels == SAME
    decided, alike = _by_progress(episode_progress(frame), same)
    counts = Counter(label for label in labels if label != SAME)
    kinds = [Kind(label=str(label), share=count / n) for label, count in counts.most_common(KINDS)]
    story = DecisionStory(
        decisions=n,
        agreement=float(np.mean(same)) if n else None,
        kinds=kinds,
        rules=[],
        tree_fidelity=None,
        progress_decisions=decided,
        progress_alike=alike,
    )
    if n < MIN_DECISIONS or not counts or kinds[0].share >= RULE_AGAIN:  # too few, none, or one choice
        return story
    from sklearn.tree import DecisionTreeClassifier

    kept = {kind.label for kind in kinds}
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
                conditions=_bounds_text(_leaf_bounds(tree, int(leaf)), setting.features),
                label=str(label),
                support=float(inside.mean()),
                fidelity=float(np.mean(target[inside] == label)),
                count=int(inside.sum()),
            )
        )
    rules = [r for r in rules if r.fidelity >= MIN_FIDELITY]  # else it says what mostly does not happen
    rules.sort(key=lambda r: -r.support * r.fidelity)
    return story.model_copy(
        update={"rules": rules[:MAX_RULES], "tree_fidelity": float(np.mean(predicted == target))}
    )


def _by_progress(progress: np.ndarray, same: np.ndarray) -> tuple[list[int], list[int]]:
    """Decisions, and decisions alike, in each tenth of the episode."""
    edges = np.linspace(0.0, 1.0, PROGRESS_BINS + 1)
    where = np.clip(np.digitize(progress, edges[1:-1]), 0, PROGRESS_BINS - 1)
    decided = np.bincount(where, minlength=PROGRESS_BINS)
    alike = np.bincount(where, weights=same.astype(float), minlength=PROGRESS_BINS)
    return [int(v) for v in decided], [int(round(v)) for v in alike]


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
