"""Words for decision differences: the observation's features and the action, as an oncologist reads them."""

from __future__ import annotations

from typing import Any

#: the observed ``[T, I, B]`` (model units: a tumour at its carrying capacity is 1; normal cells hidden)
FEATURES = ["tumour cells", "immune cells", "drug in the blood"]


def features(envs: Any, n_features: int) -> list[str]:
    return FEATURES[:n_features]


def action_words(envs: Any) -> list[str]:
    return ["dose"]
