"""What each learned-policy algorithm accepts, written out so that checking a scenario needs no torch.

``fieldrl validate`` answers in about a second because it never imports torch or
Stable-Baselines3: the constructor arguments of each algorithm in the registry, whether it is
on- or off-policy, and the defaults the budget checks read are copied here from the classes
themselves. ``tests/test_fast_validate.py`` compares this table with the live classes, so an
upgrade of SB3 that changes a signature fails the suite instead of drifting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class AlgorithmSignature:
    """One algorithm: on- or off-policy, its settable constructor arguments, and some defaults.

    :param kinds: what a scenario may write for an argument where it differs from :data:`KINDS`.
    """

    kind: Literal["on", "off"]
    parameters: tuple[str, ...]
    defaults: dict[str, Any]
    kinds: dict[str, str] = field(default_factory=dict)


_PPO = AlgorithmSignature(
    "on",
    (
        "learning_rate",
        "n_steps",
        "batch_size",
        "n_epochs",
        "gamma",
        "gae_lambda",
        "clip_range",
        "clip_range_vf",
        "normalize_advantage",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "use_sde",
        "sde_sample_freq",
        "rollout_buffer_class",
        "rollout_buffer_kwargs",
        "target_kl",
        "stats_window_size",
        "policy_kwargs",
    ),
    {"n_steps": 2048},
)

#: registry name -> signature (same keys as ``fieldrl.policies.registry.ALGORITHMS``)
SIGNATURES: dict[str, AlgorithmSignature] = {
    "a2c": AlgorithmSignature(
        "on",
        (
            "learning_rate",
            "n_steps",
            "gamma",
            "gae_lambda",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "rms_prop_eps",
            "use_rms_prop",
            "use_sde",
            "sde_sample_freq",
            "rollout_buffer_class",
            "rollout_buffer_kwargs",
            "normalize_advantage",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"n_steps": 5},
    ),
    "ppo": _PPO,
    "independent-ppo": _PPO,  # PPO with one network per agent: the same constructor
    "sac": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "action_noise",
            "replay_buffer_class",
            "replay_buffer_kwargs",
            "optimize_memory_usage",
            "n_steps",
            "ent_coef",
            "target_update_interval",
            "target_entropy",
            "use_sde",
            "sde_sample_freq",
            "use_sde_at_warmup",
            "stats_window_size",
            "policy_kwargs",
        ),
        {
            "n_steps": 1,
            "learning_starts": 100,
            "train_freq": 1,
            "gradient_steps": 1,
            "target_update_interval": 1,
            "buffer_size": 1000000,
        },
        kinds={"ent_coef": "auto|float"},
    ),
    "td3": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "action_noise",
            "replay_buffer_class",
            "replay_buffer_kwargs",
            "optimize_memory_usage",
            "n_steps",
            "policy_delay",
            "target_policy_noise",
            "target_noise_clip",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"n_steps": 1, "learning_starts": 100, "train_freq": 1, "gradient_steps": 1, "buffer_size": 1000000},
    ),
    "ddpg": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "action_noise",
            "replay_buffer_class",
            "replay_buffer_kwargs",
            "optimize_memory_usage",
            "n_steps",
            "policy_kwargs",
        ),
        {"n_steps": 1, "learning_starts": 100, "train_freq": 1, "gradient_steps": 1, "buffer_size": 1000000},
    ),
    "dqn": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "replay_buffer_class",
            "replay_buffer_kwargs",
            "optimize_memory_usage",
            "n_steps",
            "target_update_interval",
            "exploration_fraction",
            "exploration_initial_eps",
            "exploration_final_eps",
            "max_grad_norm",
            "stats_window_size",
            "policy_kwargs",
        ),
        {
            "n_steps": 1,
            "learning_starts": 100,
            "train_freq": 4,
            "gradient_steps": 1,
            "target_update_interval": 10000,
            "buffer_size": 1000000,
        },
    ),
    "tqc": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "action_noise",
            "replay_buffer_class",
            "replay_buffer_kwargs",
            "optimize_memory_usage",
            "n_steps",
            "ent_coef",
            "target_update_interval",
            "target_entropy",
            "top_quantiles_to_drop_per_net",
            "use_sde",
            "sde_sample_freq",
            "use_sde_at_warmup",
            "stats_window_size",
            "policy_kwargs",
        ),
        {
            "n_steps": 1,
            "learning_starts": 100,
            "train_freq": 1,
            "gradient_steps": 1,
            "target_update_interval": 1,
            "buffer_size": 1000000,
        },
        kinds={"ent_coef": "auto|float"},
    ),
    "trpo": AlgorithmSignature(
        "on",
        (
            "learning_rate",
            "n_steps",
            "batch_size",
            "gamma",
            "cg_max_steps",
            "cg_damping",
            "line_search_shrinking_factor",
            "line_search_max_iter",
            "n_critic_updates",
            "gae_lambda",
            "use_sde",
            "sde_sample_freq",
            "rollout_buffer_class",
            "rollout_buffer_kwargs",
            "normalize_advantage",
            "target_kl",
            "sub_sampling_factor",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"n_steps": 2048},
        kinds={"target_kl": "float"},
    ),
    "recurrent-ppo": AlgorithmSignature(
        "on",
        (
            "learning_rate",
            "n_steps",
            "batch_size",
            "n_epochs",
            "gamma",
            "gae_lambda",
            "clip_range",
            "clip_range_vf",
            "normalize_advantage",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "use_sde",
            "sde_sample_freq",
            "target_kl",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"n_steps": 128},
        kinds={"batch_size": "int?"},
    ),
    "maskable-ppo": AlgorithmSignature(
        "on",
        (
            "learning_rate",
            "n_steps",
            "batch_size",
            "n_epochs",
            "gamma",
            "gae_lambda",
            "clip_range",
            "clip_range_vf",
            "normalize_advantage",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "rollout_buffer_class",
            "rollout_buffer_kwargs",
            "target_kl",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"n_steps": 2048},
        kinds={"batch_size": "int?"},
    ),
    "lstm-td3": AlgorithmSignature(
        "off",
        (
            "learning_rate",
            "buffer_size",
            "learning_starts",
            "batch_size",
            "tau",
            "gamma",
            "train_freq",
            "gradient_steps",
            "action_noise",
            "policy_delay",
            "target_policy_noise",
            "target_noise_clip",
            "history_length",
            "lstm_hidden_size",
            "replay_buffer_kwargs",
            "stats_window_size",
            "policy_kwargs",
        ),
        {"learning_starts": 100, "train_freq": 1, "gradient_steps": 1, "buffer_size": 1000000},
    ),
    "vd-maskable-ppo": AlgorithmSignature(
        "on",
        (
            "learning_rate",
            "n_steps",
            "batch_size",
            "n_epochs",
            "gamma",
            "gae_lambda",
            "clip_range",
            "clip_range_vf",
            "normalize_advantage",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "rollout_buffer_class",
            "rollout_buffer_kwargs",
            "target_kl",
            "stats_window_size",
            "policy_kwargs",
            "term_weights",
        ),
        {"n_steps": 2048},
        kinds={"batch_size": "int?"},
    ),
}

#: scenario names of the algorithms :func:`fieldrl.policies.imitation.clone` can warm-start (the
#: first two listed first: the scenario's error message quotes this order)
IMITABLE = ("ppo", "maskable-ppo", "independent-ppo", "a2c", "trpo", "sac", "td3", "ddpg", "tqc")
#: algorithms whose actor fine-tuning can hold back (``fine_tune``): an actor trained by a gradient
#: optimiser (TRPO's natural-gradient step has none)
FINE_TUNABLE = ("ppo", "maskable-ppo", "independent-ppo", "a2c", "recurrent-ppo", "sac", "td3", "ddpg", "tqc")
#: algorithms whose rollouts the pull toward the clone passes over (feed-forward on-policy)
PULLABLE = ("ppo", "maskable-ppo", "independent-ppo", "a2c")

#: the defaults the budget checks read
SIGNATURE_DEFAULT_KEYS = (
    "n_steps",
    "learning_starts",
    "train_freq",
    "gradient_steps",
    "target_update_interval",
    "buffer_size",
)


#: what a scenario may write for each constructor argument, from the classes' type annotations
#: (``tests/test_input_bounds.py`` compares them): ``int``, ``float``, ``bool``, ``mapping``,
#: ``class`` (a class cannot be named in YAML: only null), ``auto|float`` ("auto", "auto_<x>" or a
#: number), ``train_freq`` (n, or [n, "step"|"episode"]), ``noise`` (fieldrl's {type, sigma}) and
#: ``floats`` (a list of numbers); a trailing ``?`` also allows null. A schedule (a callable, where
#: SB3 takes ``float | Schedule``) cannot be written in YAML either: those take a number.
KINDS: dict[str, str] = {
    "learning_rate": "float",
    "n_steps": "int",
    "batch_size": "int",
    "n_epochs": "int",
    "gamma": "float",
    "gae_lambda": "float",
    "clip_range": "float",
    "clip_range_vf": "float?",
    "normalize_advantage": "bool",
    "ent_coef": "float",
    "vf_coef": "float",
    "max_grad_norm": "float",
    "use_sde": "bool",
    "sde_sample_freq": "int",
    "rollout_buffer_class": "class?",
    "rollout_buffer_kwargs": "mapping?",
    "target_kl": "float?",
    "stats_window_size": "int",
    "policy_kwargs": "mapping?",
    "rms_prop_eps": "float",
    "use_rms_prop": "bool",
    "buffer_size": "int",
    "learning_starts": "int",
    "tau": "float",
    "train_freq": "train_freq",
    "gradient_steps": "int",
    "action_noise": "noise?",
    "replay_buffer_class": "class?",
    "replay_buffer_kwargs": "mapping?",
    "optimize_memory_usage": "bool",
    "target_update_interval": "int",
    "target_entropy": "auto|float",
    "use_sde_at_warmup": "bool",
    "policy_delay": "int",
    "target_policy_noise": "float",
    "target_noise_clip": "float",
    "exploration_fraction": "float",
    "exploration_initial_eps": "float",
    "exploration_final_eps": "float",
    "top_quantiles_to_drop_per_net": "int",
    "cg_max_steps": "int",
    "cg_damping": "float",
    "line_search_shrinking_factor": "float",
    "line_search_max_iter": "int",
    "n_critic_updates": "int",
    "sub_sampling_factor": "int",
    "history_length": "int",
    "lstm_hidden_size": "int",
    "term_weights": "floats",
}


def parameter_kind(algorithm: str, parameter: str) -> str:
    """What a scenario may write for ``parameter`` of ``algorithm`` (see :data:`KINDS`)."""
    return SIGNATURES[algorithm].kinds.get(parameter, KINDS[parameter])


def algorithm_parameters(algorithm: str) -> list[str]:
    """Constructor arguments a scenario may set for ``algorithm``."""
    return list(SIGNATURES[algorithm].parameters)
