"""Scenario checks that need a domain's judgement beyond its models (heuristic x params combinations),
and what a scenario's policy entries build on their domain (a heuristic, a learned entry's training env).

Part of scenario validation (:mod:`fieldrl.scenario` calls :func:`check_heuristics`); kept apart from the
domain contract (:mod:`fieldrl.domains.base`), which only declares ``Domain.heuristic_problem``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel

from fieldrl.domains.base import Domain
from fieldrl.errors import ScenarioError
from fieldrl.policies.base import Policy


def check_heuristics(scenario: Any, source: str) -> None:
    """Raise a ``ScenarioError`` for the first heuristic entry its domain refuses with some variant's params.

    ``scenario`` is a structurally valid :class:`~fieldrl.scenario.Scenario` (params already
    checked); the error names ``policies.heuristics[i].use``, its value, why, and which
    heuristics that variant does allow.
    """
    from fieldrl.domains import get_domain

    domain = get_domain(scenario.domain)
    for variant in scenario.variant_names:
        params = domain.params_model.model_validate(scenario.variant_params(variant))
        for i, entry in enumerate(scenario.policies.heuristics):
            problem = domain.heuristic_problem(entry.use, params)
            if problem is None:
                _check_build(domain, entry, params, source, f"policies.heuristics[{i}]", variant)
                continue
            allowed = [h for h in sorted(domain.heuristics) if domain.heuristic_problem(h, params) is None]
            where = "" if variant == "default" else f" (variant {variant})"
            raise ScenarioError(
                source,
                f"policies.heuristics[{i}].use",
                entry.use,
                f"{problem}{where}; heuristics allowed with these params: {', '.join(allowed) or 'none'}",
            )


def _check_build(
    domain: Domain[Any], entry: Any, params: BaseModel, source: str, where: str, variant: str
) -> None:
    """Build the heuristic once, so that a setting only its constructor can judge (a portfolio index
    beyond the frontier, say) is refused at validation rather than in the middle of a run."""
    spec = domain.heuristics[entry.use]
    settings = spec.settings_model.model_validate(entry.settings)
    try:
        spec.build(settings, params, entry.label)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        shown = f" (variant {variant})" if variant != "default" else ""
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ScenarioError(source, f"{where}.settings", entry.settings, f"{text}{shown}") from None


def entry_of(scenario: Any, label: str) -> Any:
    """The scenario's policy entry (heuristic or learned) labelled ``label`` (KeyError if none is)."""
    for entry in [*scenario.policies.heuristics, *scenario.policies.learned]:
        if entry.label == label:
            return entry
    raise KeyError(label)


def heuristic_policy(scenario: Any, domain: Domain, params: Any, label: str) -> Policy:
    """The heuristic entry labelled ``label``, built for ``params``."""
    entry = entry_of(scenario, label)
    spec = domain.heuristics[entry.use]
    return spec.build(spec.settings_model.model_validate(entry.settings), params, entry.label)


def training_vec_env(scenario: Any, domain: Domain, params: Any, entry: Any) -> Callable[[int, int], Any]:
    """``(n_envs, seed) -> VecEnv`` the entry trains on (wrapped for residual entries)."""
    if entry.residual is None:
        return partial(domain.make_train_vec_env, params)
    from fieldrl.policies.residual import ResidualVecEnv

    residual = entry.residual

    def make(n_envs: int, seed: int) -> Any:
        heuristic = heuristic_policy(scenario, domain, params, residual.heuristic)
        return ResidualVecEnv(domain.make_train_vec_env(params, n_envs, seed), heuristic, residual.scale)

    return make
