"""The algorithm table: every learned-policy algorithm a scenario may name, one row each.

Every list of algorithms in fieldrl is derived from :data:`TABLE`: the registry's names and
classes (:mod:`~fieldrl.policies.registry`), what ``fieldrl list`` prints (:mod:`fieldrl.terminal`),
which algorithms behaviour cloning warm-starts and fine-tuning holds back
(:mod:`~fieldrl.policies.imitation`, :mod:`~fieldrl.scenario`), the search space ``fieldrl tune``
samples (:mod:`~fieldrl.policies.search_spaces`), the time estimate (:mod:`fieldrl.estimates`) and
which algorithms ``fieldrl export`` writes a graph for (:mod:`fieldrl.export`).
What each constructor accepts is not written here: :mod:`~fieldrl.policies.signatures` reads it
from the class's installed source. Adding an algorithm is one row (docs/adding-an-algorithm.md).

Importing this module imports nothing but the standard library (``fieldrl list`` and
``fieldrl validate`` read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: how :func:`fieldrl.policies.imitation.clone` fits an actor to demonstrations: ``on-policy`` (the
#: log-probability of the demonstrated action under the policy's distribution, ``V(s)`` to returns),
#: ``squashed`` (a squashed-Gaussian actor's mean and every Q head: SAC, TQC) or ``deterministic``
#: (a deterministic actor and its Q heads: TD3, DDPG)
CloneFamily = Literal["on-policy", "squashed", "deterministic"]
CLONE_FAMILIES: tuple[CloneFamily, ...] = ("on-policy", "squashed", "deterministic")

#: search spaces of :func:`fieldrl.policies.search_spaces.search_space` (rl-baselines3-zoo's samplers)
SearchSpace = Literal["ppo", "a2c", "trpo", "sac", "td3", "dqn"]
SEARCH_SPACES: tuple[SearchSpace, ...] = ("ppo", "a2c", "trpo", "sac", "td3", "dqn")

#: the policy networks :mod:`fieldrl.export` writes an ONNX graph for, by what decides an action:
#: ``actor-critic`` (the action head's mode: PPO's family, A2C, TRPO), ``recurrent-actor-critic`` (the
#: same after an LSTM whose state is exported: RecurrentPPO), ``q`` (argmax of the Q-values: DQN),
#: ``quantile-q`` (argmax of the mean over quantiles: QR-DQN), ``deterministic-actor`` (a tanh actor:
#: TD3, DDPG), ``squashed-gaussian-actor`` (the squashed Gaussian's mode: SAC, TQC) and
#: ``history-actor`` (an actor reading a window of past observation-action pairs: LSTM-TD3)
ExportGraph = Literal[
    "actor-critic",
    "recurrent-actor-critic",
    "q",
    "quantile-q",
    "deterministic-actor",
    "squashed-gaussian-actor",
    "history-actor",
]
EXPORT_GRAPHS: tuple[ExportGraph, ...] = get_args(ExportGraph)


@dataclass(frozen=True)
class Algorithm:
    """One algorithm a scenario may name (``policies.learned[i].algorithm``).

    :param name: the scenario's name for it (lower case, words joined by ``-``).
    :param cls: where its class lives, ``module:Class`` (as an entry point names it); the module is
        imported only when a model is built, and its source is read to learn the constructor's
        parameters (:mod:`~fieldrl.policies.signatures`).
    :param policy: ``on`` (rollouts, then updates: ``OnPolicyAlgorithm``) or ``off`` (a replay
        buffer and gradient steps between environment steps: ``OffPolicyAlgorithm``).
    :param search_space: which of ``fieldrl tune``'s search spaces samples its hyperparameters
        (:data:`SEARCH_SPACES`); it also names the default network and activation the tuner assumes.
    :param recurrent: its policy carries a memory (an LSTM state) from one decision to the next.
    :param masked: it reads the environment's action masks when it acts (``predict(action_masks=)``).
    :param clone: how behaviour cloning warm-starts it (:data:`CLONE_FAMILIES`); None: it cannot be.
    :param fine_tune: a warm start's fine-tuning (critic warm-up, actor ramp) can act on it: an actor
        trained by a gradient optimiser whose learning rate can be ramped. With ``clone="on-policy"``
        the pull toward the clone applies too (it works on feed-forward on-policy rollouts).
    :param cost: time per environment step relative to its domain's measured speed of its ``policy``
        kind (``Domain.speed``, :class:`fieldrl.domains.speed.Speed`); a recurrent learner is slower than
        its feed-forward twin.
    :param export: the graph ``fieldrl export`` writes for its policy network (:data:`EXPORT_GRAPHS`);
        None: export refuses it (a network with no graph written yet).
    """

    name: str
    cls: str
    policy: Literal["on", "off"]
    search_space: SearchSpace
    recurrent: bool = False
    masked: bool = False
    clone: CloneFamily | None = None
    fine_tune: bool = False
    cost: float = 1.0
    export: ExportGraph | None = None

    @property
    def module(self) -> str:
        return self.cls.partition(":")[0]

    @property
    def class_name(self) -> str:
        return self.cls.partition(":")[2]


#: the rows. Their order is the order of every derived list (``imitation warm starts ppo,
#: maskable-ppo, ...``): the most used first.
TABLE: tuple[Algorithm, ...] = (
    Algorithm(
        "ppo", "stable_baselines3:PPO", "on", "ppo", clone="on-policy", fine_tune=True, export="actor-critic"
    ),
    Algorithm(
        "maskable-ppo",
        "sb3_contrib:MaskablePPO",
        "on",
        "ppo",
        masked=True,
        clone="on-policy",
        fine_tune=True,
        export="actor-critic",
    ),
    # PPO with one network per agent where observations carry agent ids
    Algorithm(
        "independent-ppo",
        "fieldrl.policies.independent:IndependentPPO",
        "on",
        "ppo",
        clone="on-policy",
        fine_tune=True,
        export="actor-critic",
    ),
    Algorithm(
        "a2c", "stable_baselines3:A2C", "on", "a2c", clone="on-policy", fine_tune=True, export="actor-critic"
    ),
    Algorithm("trpo", "sb3_contrib:TRPO", "on", "trpo", clone="on-policy", export="actor-critic"),
    # sequences through an LSTM: ten times PPO's time per step
    Algorithm(
        "recurrent-ppo",
        "sb3_contrib:RecurrentPPO",
        "on",
        "ppo",
        recurrent=True,
        fine_tune=True,
        cost=10.0,
        export="recurrent-actor-critic",
    ),
    Algorithm(
        "sac",
        "stable_baselines3:SAC",
        "off",
        "sac",
        clone="squashed",
        fine_tune=True,
        export="squashed-gaussian-actor",
    ),
    Algorithm(
        "td3",
        "stable_baselines3:TD3",
        "off",
        "td3",
        clone="deterministic",
        fine_tune=True,
        export="deterministic-actor",
    ),
    Algorithm(
        "ddpg",
        "stable_baselines3:DDPG",
        "off",
        "td3",
        clone="deterministic",
        fine_tune=True,
        export="deterministic-actor",
    ),
    Algorithm(
        "tqc",
        "sb3_contrib:TQC",
        "off",
        "sac",
        clone="squashed",
        fine_tune=True,
        export="squashed-gaussian-actor",
    ),
    Algorithm("dqn", "stable_baselines3:DQN", "off", "dqn", export="q"),
    Algorithm("qr-dqn", "sb3_contrib:QRDQN", "off", "dqn", export="quantile-q"),
    Algorithm(
        "lstm-td3",
        "fieldrl.policies.lstm_td3:LSTMTD3",
        "off",
        "td3",
        recurrent=True,
        cost=2.0,
        export="history-actor",
    ),
    Algorithm(
        "vd-maskable-ppo",
        "fieldrl.policies.vd_ppo:VDMaskablePPO",
        "on",
        "ppo",
        masked=True,
        export="actor-critic",
    ),
)

#: scenario name -> row
BY_NAME: dict[str, Algorithm] = {a.name: a for a in TABLE}
#: scenario names of the algorithms, in table order
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the algorithms :func:`fieldrl.policies.imitation.clone` can warm-start
IMITABLE: tuple[str, ...] = tuple(a.name for a in TABLE if a.clone is not None)
#: algorithms whose actor fine-tuning can hold back (``fine_tune``)
FINE_TUNABLE: tuple[str, ...] = tuple(a.name for a in TABLE if a.fine_tune)
#: algorithms whose rollouts the pull toward the clone passes over (feed-forward on-policy, fine-tunable)
PULLABLE: tuple[str, ...] = tuple(a.name for a in TABLE if a.fine_tune and a.clone == "on-policy")
#: prefix of a tuning study's parameter that is part of a warm start's ``fine_tune``
#: (``fine_tune.critic_warmup``; :mod:`fieldrl.policies.search_spaces`, the report's effort table)
FINE_TUNE_PREFIX = "fine_tune."
#: on-policy algorithms (rollouts, then updates)
ON_POLICY: frozenset[str] = frozenset(a.name for a in TABLE if a.policy == "on")
#: off-policy algorithms (gradient steps between environment steps)
OFF_POLICY: frozenset[str] = frozenset(a.name for a in TABLE if a.policy == "off")
#: recurrent algorithms (a memory carried from decision to decision)
RECURRENT: tuple[str, ...] = tuple(a.name for a in TABLE if a.recurrent)
#: algorithms that read action masks
MASKED: tuple[str, ...] = tuple(a.name for a in TABLE if a.masked)
#: algorithms ``fieldrl export`` writes a graph for
EXPORTABLE: tuple[str, ...] = tuple(a.name for a in TABLE if a.export is not None)


def in_search_space(space: SearchSpace) -> frozenset[str]:
    """Names of the algorithms ``fieldrl tune`` samples from search space ``space``."""
    return frozenset(a.name for a in TABLE if a.search_space == space)
