"""Which Stable-Baselines3 / sb3-contrib algorithms a scenario may name, and how
their YAML hyperparameters become constructor arguments."""

from __future__ import annotations

import inspect
from typing import Any

import sb3_contrib
import stable_baselines3 as sb3
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

from fieldrl.domains.taxiway.vd_ppo import VDMaskablePPO
from fieldrl.policies.independent import IndependentPPO
from fieldrl.policies.lstm_td3 import LSTMTD3

#: scenario name -> algorithm class
ALGORITHMS: dict[str, type[BaseAlgorithm]] = {
    "a2c": sb3.A2C,
    "ppo": sb3.PPO,
    "independent-ppo": IndependentPPO,  # one network per agent where observations carry agent ids
    "sac": sb3.SAC,
    "td3": sb3.TD3,
    "ddpg": sb3.DDPG,
    "dqn": sb3.DQN,
    "tqc": sb3_contrib.TQC,
    "trpo": sb3_contrib.TRPO,
    "recurrent-ppo": sb3_contrib.RecurrentPPO,
    "maskable-ppo": sb3_contrib.MaskablePPO,
    "lstm-td3": LSTMTD3,
    "vd-maskable-ppo": VDMaskablePPO,
}

#: constructor arguments fieldrl sets itself
RESERVED = {"env", "policy", "seed", "tensorboard_log", "verbose", "device", "_init_setup_model"}

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}


def algorithm_parameters(algorithm: str) -> list[str]:
    """Constructor arguments a scenario may set for ``algorithm``."""
    signature = inspect.signature(ALGORITHMS[algorithm].__init__)
    return [p for p in signature.parameters if p != "self" and p not in RESERVED]


def check_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> tuple[str, str] | None:
    """Return ``(key, what is allowed)`` for the first unusable hyperparameter, else None."""
    allowed = algorithm_parameters(algorithm)
    for key, value in hyperparameters.items():
        if key not in allowed:
            return key, f"not a parameter of {algorithm}; allowed: {', '.join(allowed)}"
        if key == "policy_kwargs" and isinstance(value, dict):
            act = value.get("activation_fn")
            if act is not None and act not in ACTIVATIONS:
                return key, f"activation_fn must be one of {', '.join(ACTIVATIONS)}"
        if key == "action_noise" and value is not None:
            problem = _noise_problem(value)
            if problem:
                return key, problem
    return None


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


def build_kwargs(hyperparameters: dict[str, Any], action_dim: int | None) -> dict[str, Any]:
    """Turn YAML-friendly hyperparameters into SB3 constructor keyword arguments."""
    kwargs: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        if key == "policy_kwargs":
            value = dict(value)
            if "activation_fn" in value:
                value["activation_fn"] = ACTIVATIONS[value["activation_fn"]]
        elif key == "action_noise" and value is not None:
            import numpy as np

            dim = action_dim or 1
            sigma = float(value.get("sigma", 0.1)) * np.ones(dim)
            noise_cls = NormalActionNoise if value["type"] == "normal" else OrnsteinUhlenbeckActionNoise
            value = noise_cls(mean=np.zeros(dim), sigma=sigma)
        elif key == "train_freq" and isinstance(value, list):
            value = tuple(value)
        else:
            value = _number(value)
        kwargs[key] = value
    return kwargs
