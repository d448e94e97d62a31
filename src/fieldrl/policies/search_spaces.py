"""Hyperparameter search spaces for ``fieldrl tune``, one per algorithm family.

They start from rl-baselines3-zoo's samplers (``rl_zoo3/hyperparams_opt.py``) with three
changes for fieldrl's budgets: off-policy learners also tune ``gradient_steps`` apart from
``train_freq`` (up to one gradient step per environment step collected) and the number of
parallel envs (the update-to-data ratio matters more than the library here: see DESIGN's
chemo SAC measurements); learning rates stay in the range that trains within tens of
thousands of steps; and every sampled configuration is brought within the budget (a rollout
no longer than ``train_steps``, ``learning_starts`` well before its end, on-policy batches
large enough for at most ``MAX_UPDATES`` gradient updates), so no trial is wasted on a learner
that cannot learn or that would take hours of CPU.

Each algorithm's row in :data:`fieldrl.policies.algorithms.TABLE` names its space (``ppo``,
``a2c``, ``trpo``, ``sac``, ``td3`` or ``dqn``). A space is declarative (Optuna distributions), so
the tuning record and the report can print it. ``to_hyperparameters`` turns one sample into the
YAML form a scenario uses.
"""

from __future__ import annotations

import math
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from fieldrl.policies.algorithms import (
    BY_NAME,
    FINE_TUNABLE,
    FINE_TUNE_PREFIX,
    ON_POLICY,
    PULLABLE,
    in_search_space,
)

#: off-policy learners with an actor (their spaces tune ``tau``; TD3's also its action noise)
ACTOR_CRITIC_OFF_POLICY = in_search_space("sac") | in_search_space("td3")
#: gradient updates a tuning trial of an on-policy learner may make at most (see to_hyperparameters)
MAX_UPDATES = 100_000
NET_ARCH = {"tiny": [64], "small": [64, 64], "medium": [256, 256], "big": [400, 300]}
GAMMAS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0)


def _cat(*values: Any) -> CategoricalDistribution:
    return CategoricalDistribution(list(values))


def _log(low: float, high: float) -> FloatDistribution:
    return FloatDistribution(low, high, log=True)


def n_envs_choices(n_envs: int) -> tuple[int, ...]:
    """Around the scenario's own number of parallel envs: a quarter, half, same, double."""
    return tuple(sorted({max(1, n_envs // 4), max(1, n_envs // 2), n_envs, min(4096, n_envs * 2)}))


def search_space(algorithm: str, n_envs: int) -> dict[str, BaseDistribution]:
    """The distributions tuned for ``algorithm`` (``n_envs`` is the scenario entry's value)."""
    family = BY_NAME[algorithm].search_space  # KeyError for a name not in the table
    space: dict[str, BaseDistribution] = {"n_envs": _cat(*n_envs_choices(n_envs))}
    if algorithm in ON_POLICY:
        space |= {
            "n_steps": _cat(32, 64, 128, 256, 512, 1024, 2048),
            "gamma": _cat(*GAMMAS),
            "learning_rate": _log(1e-5, 2e-3),
            "net_arch": _cat("tiny", "small", "medium"),
            "activation_fn": _cat("tanh", "relu"),
        }
        if family == "trpo":
            space |= {
                "batch_size": _cat(32, 64, 128, 256, 512),
                "gae_lambda": _cat(0.8, 0.9, 0.95, 0.98, 0.99, 1.0),
                "target_kl": _cat(0.1, 0.05, 0.03, 0.02, 0.01, 0.005),
                "n_critic_updates": _cat(5, 10, 20, 30),
            }
        else:
            space |= {
                "one_minus_gae_lambda": _log(1e-4, 0.1),
                "ent_coef": _log(1e-8, 0.1),
                "max_grad_norm": FloatDistribution(0.3, 2.0),
            }
        if family == "ppo":
            space |= {
                "batch_size": _cat(32, 64, 128, 256, 512, 1024),
                "n_epochs": _cat(1, 5, 10, 20),
                "clip_range": _cat(0.1, 0.2, 0.3, 0.4),
            }
        return space
    space |= {
        "gamma": _cat(*GAMMAS[:-1]),
        "learning_rate": _log(1e-5, 1e-2),
        "batch_size": _cat(32, 64, 128, 256, 512),
        "buffer_size": _cat(10_000, 100_000, 1_000_000),
        "learning_starts": _cat(0, 500, 1000, 2000, 5000),
        "train_freq": _cat(1, 2, 4, 8),
        "gradient_steps": _cat(1, 2, 4, 8, 16),
        "net_arch": _cat("tiny", "small", "medium", "big"),
    }
    if family == "td3":
        space |= {
            "noise_type": _cat("normal", "ornstein-uhlenbeck"),
            "noise_std": FloatDistribution(0.05, 0.5),
        }
    if family in ("sac", "td3"):
        space["tau"] = _cat(0.005, 0.01, 0.02, 0.05)
    if family == "dqn":
        space |= {
            "exploration_fraction": FloatDistribution(0.05, 0.5),
            "exploration_final_eps": FloatDistribution(0.0, 0.2),
            "target_update_interval": _cat(1, 100, 1000, 5000, 10_000),
            "net_arch": _cat("tiny", "small", "medium"),
        }
        space.pop("tau", None)
    return space


def fine_tune_space(algorithm: str, cloned: bool, jump_start: bool) -> dict[str, BaseDistribution]:
    """How a warm start is fine-tuned (``fieldrl.policies.fine_tune``), for a study to choose: the
    critic's warm-up and the actor's ramp (shares of the training steps); with a behaviour clone on
    an on-policy learner, the pull's weight (0: none) and fade; where the entry has a jump-start,
    whether to use it. Tuned with the hyperparameters, in the same trials."""
    if algorithm not in FINE_TUNABLE:
        return {}
    space: dict[str, BaseDistribution] = {
        "critic_warmup": _cat(0.0, 0.05, 0.1, 0.2),
        "actor_ramp": _cat(0.0, 0.1, 0.25),
    }
    if cloned and algorithm in PULLABLE:
        space |= {"pull_weight": _cat(0.0, 0.3, 1.0, 3.0), "pull_fade": _cat(0.25, 0.5, 1.0)}
        if jump_start:
            space["jump_start"] = _cat(False, True)
    return {FINE_TUNE_PREFIX + k: v for k, v in space.items()}


def to_fine_tune(sample: dict[str, Any], written: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ``fine_tune`` section from a sample's ``fine_tune.*`` values (``{}``: they change nothing;
    None: the sample has none); ``written``: the entry's own section (its jump-start's settings)."""
    chosen = {
        k.removeprefix(FINE_TUNE_PREFIX): v for k, v in sample.items() if k.startswith(FINE_TUNE_PREFIX)
    }
    if not chosen:
        return None
    section: dict[str, Any] = {
        "critic_warmup": float(chosen.get("critic_warmup", 0.0)),
        "actor_ramp": float(chosen.get("actor_ramp", 0.0)),
    }
    if chosen.get("pull_weight"):
        section["pull"] = {"weight": float(chosen["pull_weight"]), "fade": float(chosen["pull_fade"])}
    jump = (written or {}).get("jump_start")
    if jump and chosen.get("jump_start", True):
        section["jump_start"] = dict(jump)
    return {k: v for k, v in section.items() if v}  # {} where nothing is fine-tuned


def describe(space: dict[str, BaseDistribution]) -> dict[str, str]:
    """Each parameter's range in words (for the tuning record and the report)."""
    out = {}
    for name, dist in space.items():
        if isinstance(dist, CategoricalDistribution):
            out[name] = "one of " + ", ".join(str(c) for c in dist.choices)
        elif isinstance(dist, FloatDistribution):
            scale = "log-uniform" if dist.log else "uniform"
            out[name] = f"{scale} in [{dist.low:g}, {dist.high:g}]"
        else:  # pragma: no cover - only the two kinds above are used
            out[name] = repr(dist)
    return out


def to_hyperparameters(
    algorithm: str,
    sample: dict[str, Any],
    train_steps: int,
    width: int,
    own: dict[str, Any] | None = None,
    own_n_envs: int = 1,
) -> tuple[dict[str, Any], int]:
    """``(hyperparameters in YAML form, n_envs)`` for one sample, brought within the budget.

    A parameter missing from ``sample`` (one ``fieldrl tune --keep`` holds fixed) keeps the
    entry's own value: it is left out of the result (the entry's hyperparameters fill it) and only
    the sampled values are fitted to the budget, against the entry's value where one is needed.

    :param width: SB3 envs per environment (agent slots in multi-agent domains; 1 otherwise).
    :param own: the scenario entry's hyperparameters (SB3's defaults fill what it leaves out).
    :param own_n_envs: the scenario entry's number of parallel envs.
    """
    own = own or {}
    params = dict(sample)
    n_envs = int(params.pop("n_envs", own_n_envs))
    hp: dict[str, Any] = {}
    arch = params.pop("net_arch", None)
    activation = params.pop("activation_fn", None)
    policy_kwargs: dict[str, Any] = {}
    if arch is not None:
        layers = NET_ARCH[arch]
        if algorithm in ON_POLICY:
            policy_kwargs["net_arch"] = {"pi": layers, "vf": layers}
        else:
            policy_kwargs["net_arch"] = layers
    if activation is not None:
        policy_kwargs["activation_fn"] = activation
    if policy_kwargs:
        hp["policy_kwargs"] = policy_kwargs
    if "one_minus_gae_lambda" in params:
        hp["gae_lambda"] = round(1.0 - params.pop("one_minus_gae_lambda"), 6)
    noise_type, noise_std = params.pop("noise_type", None), params.pop("noise_std", None)
    if noise_type is not None:
        hp["action_noise"] = {"type": noise_type, "sigma": round(float(noise_std), 4)}
    for key, value in params.items():
        hp[key] = round(value, 8) if isinstance(value, float) else value

    def value_of(name: str) -> Any:  # sampled, else the entry's own (None: not a plain number)
        return hp[name] if name in hp else _handset_value(algorithm, name, own, n_envs)

    vec = n_envs * width
    if algorithm in ON_POLICY:
        fits = max(1, train_steps // vec)
        if "n_steps" in hp and hp["n_steps"] > fits:  # a rollout longer than the budget: shorten it
            hp["n_steps"] = max(2, 2 ** int(math.log2(fits))) if fits >= 2 else fits
        if "batch_size" in hp:
            # at most MAX_UPDATES gradient updates per trial: rl-zoo's smallest batches with 20 epochs
            # cost ~16x the updates of SB3's defaults, hours of CPU per trial at fieldrl's budgets
            epochs = value_of("n_epochs") or 10
            floor = max(64, 2 ** math.ceil(math.log2(max(1, train_steps * epochs / MAX_UPDATES))))
            rollout = value_of("n_steps")
            cap = rollout * vec if isinstance(rollout, int) else hp["batch_size"]
            hp["batch_size"] = max(2, min(max(hp["batch_size"], floor), cap))
    else:
        if "learning_starts" in hp:
            hp["learning_starts"] = min(hp["learning_starts"], train_steps // 4)
        freq = value_of("train_freq")
        if "gradient_steps" in hp and isinstance(freq, int):
            # at most one gradient step per environment step collected (update-to-data ratio <= 1)
            hp["gradient_steps"] = min(hp["gradient_steps"], freq * vec)
        if BY_NAME[algorithm].search_space == "dqn" and "target_update_interval" in hp:
            room = max(1, (train_steps - int(value_of("learning_starts") or 0)) // 2)
            hp["target_update_interval"] = min(hp["target_update_interval"], room)
    return hp, n_envs


def _default_arch(algorithm: str) -> list[int]:
    """SB3's default MLP for ``algorithm`` when a scenario names none (by its search space)."""
    return {"sac": [256, 256], "td3": [400, 300]}.get(BY_NAME[algorithm].search_space, [64, 64])


def _handset_value(algorithm: str, name: str, hp: dict[str, Any], n_envs: int) -> Any:
    """The value the scenario's own configuration has for search parameter ``name`` (None: unknown)."""
    import inspect

    from fieldrl.policies.registry import algorithm_class

    kwargs = hp.get("policy_kwargs") or {}
    if name == "n_envs":
        return n_envs
    if name == "net_arch":
        arch = kwargs.get("net_arch", _default_arch(algorithm))
        layers = arch.get("pi") if isinstance(arch, dict) else arch
        return next((key for key, value in NET_ARCH.items() if value == list(layers or [])), None)
    if name == "activation_fn":
        return kwargs.get("activation_fn", "tanh" if algorithm in ON_POLICY else "relu")
    if name == "noise_type":
        return (hp.get("action_noise") or {}).get("type")
    if name == "noise_std":
        return (hp.get("action_noise") or {}).get("sigma")
    if name == "one_minus_gae_lambda":
        name, invert = "gae_lambda", True
    else:
        invert = False
    if name in hp:
        value = hp[name]
    else:
        parameter = inspect.signature(algorithm_class(algorithm).__init__).parameters.get(name)
        value = None if parameter is None else parameter.default
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None  # a schedule, a tuple train_freq, no default: let the sampler choose
    return 1.0 - value if invert else value


def handset_sample(
    algorithm: str, hyperparameters: dict[str, Any], n_envs: int, space: dict[str, BaseDistribution]
) -> dict[str, Any]:
    """The point of ``space`` nearest to a scenario's hand-set configuration (SB3 defaults filling gaps).

    ``fieldrl tune`` runs the hand-set configuration itself as a study's first trial; this is what
    the sampler is told that trial was, so TPE models it like any other point. Values outside a
    range are clipped, numbers between categories go to the nearest category, and a parameter with
    no comparable value (a learning-rate schedule, say) is left out for the sampler to fill.
    """
    sample: dict[str, Any] = {}
    for name, dist in space.items():
        value = _handset_value(algorithm, name, hyperparameters, n_envs)
        if value is None:
            continue
        if isinstance(dist, CategoricalDistribution):
            if value in dist.choices:
                sample[name] = value
            elif isinstance(value, (int, float)):
                numeric = [c for c in dist.choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
                if numeric:
                    target = math.log1p(abs(value))
                    sample[name] = min(numeric, key=lambda c: abs(math.log1p(abs(c)) - target))
        elif isinstance(dist, FloatDistribution):
            sample[name] = min(max(float(value), dist.low), dist.high)
    return sample
