"""Which Stable-Baselines3 / sb3-contrib algorithms a scenario may name, and how
their YAML hyperparameters become constructor arguments.

The algorithms are the rows of :data:`fieldrl.policies.algorithms.TABLE`. Importing this module
imports no torch: checking a scenario (``fieldrl validate``) reads the constructor signatures
:mod:`~fieldrl.policies.signatures` takes from the classes' source; the algorithm classes load
on first use of ``ALGORITHMS`` or :func:`algorithm_class`.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any

from fieldrl.policies.algorithms import BY_NAME, NAMES
from fieldrl.policies.signatures import (
    RESERVED,
    SIGNATURES,
    algorithm_parameters,
    parameter_kind,
    whole_number_parameters,
)

#: scenario names of the algorithms (the keys of ``ALGORITHMS``)
ALGORITHM_NAMES: tuple[str, ...] = NAMES

#: activation functions a scenario may name (``policy_kwargs.activation_fn``)
ACTIVATION_NAMES = ("tanh", "relu", "elu", "leaky_relu")


@functools.cache
def _algorithms() -> dict[str, Any]:
    return {name: algorithm_class(name) for name in NAMES}


@functools.cache
def algorithm_class(algorithm: str) -> Any:
    """The SB3 class of registry name ``algorithm`` (imports torch on first use)."""
    row = BY_NAME[algorithm]
    return getattr(importlib.import_module(row.module), row.class_name)


def _activations() -> dict[str, Any]:
    import torch.nn as nn

    return {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}


def __getattr__(name: str) -> Any:
    """``ALGORITHMS`` (scenario name -> class) and ``ACTIVATIONS``, loaded when first asked for."""
    if name == "ALGORITHMS":
        return _algorithms()
    if name == "ACTIVATIONS":
        return _activations()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALGORITHM_NAMES", "RESERVED", "algorithm_class", "algorithm_parameters", "build_kwargs"]


#: numeric hyperparameters with a meaningful range: ``(low, high, integer)``; SB3 checks few of these
#: itself, so a typo (``gamma: 7.5``) would otherwise pass validation and fail, or mislead, in training
RANGES: dict[str, tuple[float, float, bool]] = {
    "gamma": (0.0, 1.0, False),
    "gae_lambda": (0.0, 1.0, False),
    "tau": (0.0, 1.0, False),
    "exploration_fraction": (0.0, 1.0, False),
    "exploration_initial_eps": (0.0, 1.0, False),
    "exploration_final_eps": (0.0, 1.0, False),
    "learning_rate": (1e-12, 10.0, False),
    "clip_range": (1e-12, 10.0, False),
    "clip_range_vf": (1e-12, 1e6, False),
    "ent_coef": (0.0, 1e6, False),
    "vf_coef": (0.0, 1e6, False),
    "max_grad_norm": (1e-12, 1e12, False),
    "target_kl": (1e-12, 1e6, False),
    "target_policy_noise": (0.0, 1e6, False),
    "target_noise_clip": (0.0, 1e6, False),
    "n_steps": (1, 10**9, True),
    "n_epochs": (1, 10**6, True),
    "buffer_size": (1, 10**10, True),
    "learning_starts": (0, 10**10, True),
    "gradient_steps": (-1, 10**6, True),
    "policy_delay": (1, 10**6, True),
    "target_update_interval": (1, 10**10, True),
    "n_quantiles": (1, 10**4, True),
    "top_quantiles_to_drop_per_net": (0, 10**4, True),
    "n_critics": (1, 100, True),
}


def _range_problem(key: str, value: Any) -> str | None:
    """What is wrong with a numeric hyperparameter's value, or None (also None for non-numbers)."""
    value = _number(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # e.g. ent_coef: auto, or a value SB3 itself judges at construction
    if not math.isfinite(value):
        return "must be a finite number (NaN and infinity are not allowed)"
    if key not in RANGES:
        return None
    low, high, integer = RANGES[key]
    if integer and int(value) != value:
        return f"must be a whole number in [{low}, {high:.0f}]"
    if not low <= value <= high:
        shown = f"[{low:g}, {high:g}]" if not integer else f"[{low}, {high:.0f}]"
        return f"must lie in {shown}" + (" (0 < value)" if low == 1e-12 else "")
    return None


def _net_arch_problem(arch: Any) -> str | None:
    """``net_arch`` is a list of layer widths (or a dict of such lists, e.g. ``{pi: [...], vf: [...]}``)."""
    layers = (
        [w for v in arch.values() for w in (v if isinstance(v, list) else [v])]
        if isinstance(arch, dict)
        else arch
    )
    if not isinstance(layers, list) or not all(
        isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in layers
    ):
        return "net_arch must list layer widths, whole numbers >= 1 (or {pi: [...], vf: [...]})"
    return None


def check_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> tuple[str, str] | None:
    """Return ``(key, what is allowed)`` for the first unusable hyperparameter, else None."""
    allowed = algorithm_parameters(algorithm)
    for key, value in hyperparameters.items():
        if key not in allowed:
            return key, f"not a parameter of {algorithm}; allowed: {', '.join(allowed)}"
        problem = _kind_problem(parameter_kind(algorithm, key), value)
        if problem:
            return key, problem
        problem = _range_problem(key, value)
        if problem:
            return key, problem
        if key == "policy_kwargs" and isinstance(value, dict):
            act = value.get("activation_fn")
            if act is not None and act not in ACTIVATION_NAMES:
                return key, f"activation_fn must be one of {', '.join(ACTIVATION_NAMES)}"
            for arch in (k for k in value if str(k).endswith("_arch")):  # net_arch, pre_lstm_arch, ...
                problem = _net_arch_problem(value[arch])
                if problem:
                    return key, problem.replace("net_arch", str(arch))
        if key == "action_noise" and value is not None:
            problem = _noise_problem(value)
            if problem:
                return key, problem
    return None


def _is_int(value: Any) -> bool:
    """A whole number (``3``, ``3.0``, YAML 1.1's string ``'1e6'``); :func:`build_kwargs` makes it an int."""
    value = _number(value)
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )


def _is_float(value: Any) -> bool:
    value = _number(value)
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_auto(value: Any) -> bool:
    """SB3's ``"auto"`` (entropy coefficient learned), or ``"auto_0.1"`` (learned, starting at 0.1)."""
    if not isinstance(value, str):
        return False
    return value == "auto" or (value.startswith("auto_") and _is_float(value[5:]))


def _is_train_freq(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return len(value) == 2 and _is_int(value[0]) and value[1] in ("step", "episode")
    return _is_int(value)


#: kind (``AlgorithmSignature.kinds``) -> (does a value fit, what is allowed in words)
_KIND_CHECKS: dict[str, tuple[Any, str]] = {
    "int": (_is_int, "a whole number"),
    "float": (_is_float, "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "mapping": (lambda v: isinstance(v, dict), "a mapping"),
    "class": (lambda v: False, "null (a class cannot be named in a scenario)"),
    "auto|float": (lambda v: _is_float(v) or _is_auto(v), "a number, 'auto' or 'auto_<number>'"),
    "train_freq": (_is_train_freq, "a whole number, or [n, step] / [n, episode]"),
    "noise": (lambda v: isinstance(v, dict), "{type: normal|ornstein-uhlenbeck, sigma: float}"),
    "floats": (lambda v: isinstance(v, list) and all(_is_float(x) for x in v), "a list of numbers"),
}


def _kind_problem(kind: str, value: Any) -> str | None:
    """What is wrong with the kind of ``value`` (a list where SB3 takes an int ...), or None.

    SB3 checks few of its arguments' types: ``n_epochs: [1, 2]`` is accepted by the constructor
    and fails mid-training, after the run folder was written.
    """
    base = kind.rstrip("?")
    fits, words = _KIND_CHECKS[base]
    if value is None:
        return None if kind.endswith("?") else f"must be {words}, not null"
    if fits(value):
        return None
    what = "true/false" if isinstance(value, bool) else f"a {type(value).__name__}"
    optional = " or null" if kind.endswith("?") and base != "class" else ""
    return f"must be {words}{optional}, not {what}"


def _noise_problem(value: Any) -> str | None:
    if not isinstance(value, dict) or value.get("type") not in ("normal", "ornstein-uhlenbeck"):
        return "action_noise must be {type: normal|ornstein-uhlenbeck, sigma: float}"
    sigma = value.get("sigma", 0.1)
    if not isinstance(sigma, int | float) or sigma < 0 or set(value) - {"type", "sigma"}:
        return "action_noise takes only type and sigma >= 0"
    return None


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``3e-4`` as a string; accept it as the number it means."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _whole(value: Any) -> Any:
    """A whole float as the int SB3 wants (``buffer_size: 1e6`` is ``1000000.0`` once read)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def build_kwargs(
    hyperparameters: dict[str, Any], action_dim: int | None, algorithm: str | None = None
) -> dict[str, Any]:
    """Turn YAML-friendly hyperparameters into SB3 constructor keyword arguments.

    :param algorithm: the registry name they are for; None: any (whole numbers become ints for an
        argument that takes one in any algorithm, which reads every algorithm's source once).
    """
    if algorithm is None:
        whole = whole_number_parameters()
    else:
        kinds = SIGNATURES[algorithm].kinds
        whole = frozenset(k for k, kind in kinds.items() if kind.rstrip("?") in ("int", "train_freq"))
    kwargs: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        if key == "policy_kwargs":
            value = dict(value)
            if "activation_fn" in value:
                value["activation_fn"] = _activations()[value["activation_fn"]]
        elif key == "action_noise" and value is not None:
            import numpy as np
            from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

            dim = action_dim or 1
            sigma = float(value.get("sigma", 0.1)) * np.ones(dim)
            noise_cls = NormalActionNoise if value["type"] == "normal" else OrnsteinUhlenbeckActionNoise
            value = noise_cls(mean=np.zeros(dim), sigma=sigma)
        elif key == "train_freq" and isinstance(value, list):
            value = tuple(_whole(v) for v in value)
        else:
            value = _number(value)
            if key in whole:
                value = _whole(value)
        kwargs[key] = value
    return kwargs
