"""``fieldrl export``: a trained policy as a bundle that runs without torch, SB3 or the simulator.

The learned model is rebuilt from the run's validated scenario and its weights are loaded as tensors
(:func:`fieldrl.evaluation.runner.build_policy`, the path evaluation takes; nothing is unpickled). One
small torch module then says, step by step, what evaluation computes for an observation:

    observation normalisation (the run's statistics, in float64 as numpy computes them)
    -> the network's deterministic action path
    -> the environment's action (argmax over allowed actions / per dimension; a continuous action
       squashed and unscaled, or clipped, to the action space's bounds)

and is traced to ONNX. A recurrent policy (RecurrentPPO's actor LSTM, LSTM-TD3's window of past
observation-action pairs) has its memory as explicit inputs and outputs: ``episode_start`` and the
state in, the action and the next state out, the state of a row that starts an episode reset first,
as sb3-contrib and LSTM-TD3 do (:func:`state_tensors`).

Before anything is written the bundle is played against the torch policy on one episode of the
domain's own environment (a training seed, never a held-out one; a recurrent policy plays it twice in
one stream, so the reset at the episode boundary is checked too): every action must be the same
(discrete) or within ``1e-5`` (continuous), else the export is refused. Where the run was evaluated,
held-out episodes are then replayed through the bundle alone, as the evaluation played them, and their
KPIs must be the run's (:mod:`fieldrl.bundle_replay`; ``replay``). The bundle's files (see
docs/deploying.md) are written into a temporary folder that is renamed into place at the end, so a
refused or failed export leaves nothing behind.

Refused, in one line: policies whose tested behaviour the network alone is not (a runtime shield, a
residual correction of a heuristic).
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl import runtime
from fieldrl.errors import FieldrlError
from fieldrl.names import slug
from fieldrl.policies.algorithms import BY_NAME, EXPORTABLE, RECURRENT

if TYPE_CHECKING:
    from fieldrl.results import Described, Paired

#: ONNX operator set of the exported graph (onnxruntime >= 1.17 runs it)
OPSET = 17
ONNX_FILE = "policy.onnx"
CARD_MD = "model-card.md"
CARD_JSON = "model-card.json"
#: decisions of the self-check episode compared at most
CHECK_DECISIONS = 500
#: largest difference allowed between the bundle's and the torch policy's continuous actions
TOLERANCE = 1e-5


@dataclass
class ExportResult:
    """What ``export_policy`` wrote: the bundle folder, its contract (``bundle.json``) and model card."""

    folder: Path
    contract: dict[str, Any]
    card: dict[str, Any]


def safeguard_refusal(entry: Any, domain: Any, params: Any, setting: str) -> str | None:
    """Why ``entry`` cannot be exported from ``setting``: the domain's environment evaluated it behind a
    safeguard of its own (:meth:`~fieldrl.domains.base.Domain.environment_safeguard`), which a bundle
    does not hold; None where it did not."""
    safeguard = domain.environment_safeguard(params)
    if safeguard is None:
        return None
    where = "" if setting == "default" else f" in setting {setting}"
    return (
        f"{entry.label} was evaluated{where} behind {safeguard}; exporting it without it is refused: the "
        "bundle would not be the policy that was tested (a setting without that safeguard exports)"
    )


def _exportable_params(scenario: Any, entry: Any, setting: str) -> tuple[Any, Any]:
    """``(domain, params)`` of ``entry`` in ``setting``; refused in one line where the domain's
    environment evaluated it behind a safeguard of its own (:func:`safeguard_refusal`)."""
    from fieldrl.domains import get_domain

    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params(setting, entry.label))
    problem = safeguard_refusal(entry, domain, params, setting)
    if problem is not None:
        raise FieldrlError(problem)
    return domain, params


def refusal(entry: Any, domain_name: str) -> str | None:
    """Why learned entry ``entry`` cannot be exported as a bundle, in one line; None where it can."""
    label = entry.label
    if entry.shield is not None:
        return (
            f"{label} was evaluated behind the {domain_name} runtime shield ({entry.shield.heuristic} vets "
            "every learned action); exporting it without the shield is refused: the bundle would not be the "
            "policy that was tested (shielded export is not supported yet)"
        )
    if entry.residual is not None:
        return (
            f"{label} is a residual policy ({entry.residual.heuristic}'s action plus a learned correction); "
            "exporting the correction without the heuristic is refused: the bundle would not be the policy "
            "that was tested (residual export is not supported yet)"
        )
    if BY_NAME[entry.algorithm].export is None:  # the algorithm table says which graph each network has
        return (
            f"{label} ({entry.algorithm}): export has no graph for its policy network; "
            f"export supports {', '.join(EXPORTABLE)}"
        )
    return None


# ------------------------------------------------------------------------------------- the graph


def state_tensors(policy: Any) -> list[dict[str, Any]]:
    """The state a recurrent SB3 ``policy`` carries from one decision to the next, one entry per tensor
    (ONNX input ``name``, output ``output``, the ``shape`` of one observation row's part, ``dtype``); an
    empty list for a feed-forward policy."""
    lstm = getattr(policy, "lstm_actor", None)
    # RecurrentPPO: the actor LSTM's hidden and cell state (the critic's LSTM is not needed to act)
    if lstm is not None:
        shape = [int(lstm.num_layers), int(lstm.hidden_size)]
        return [
            {
                "name": name,
                "output": f"{name}_out",
                "shape": shape,
                "dtype": "float32",
                "meaning": f"the actor LSTM's {what} state, (layers, hidden size) per observation row",
            }
            for name, what in (("h", "hidden"), ("c", "cell"))
        ]
    from fieldrl.policies.lstm_td3.policies import LSTMTD3Policy

    if isinstance(policy, LSTMTD3Policy):  # the window of past (observation, action) pairs the actor reads
        window, obs_dim, action_dim = int(policy.history_length), int(policy.obs_dim), int(policy.action_dim)
        return [
            {
                "name": "history_obs",
                "output": "history_obs_out",
                "shape": [window, obs_dim],
                "dtype": "float32",
                "meaning": f"the last {window} observations of the episode as the network saw them "
                "(normalised), oldest first, zero-padded",
            },
            {
                "name": "history_actions",
                "output": "history_actions_out",
                "shape": [window, action_dim],
                "dtype": "float32",
                "meaning": "the actions taken after them, scaled to [-1, 1], zero-padded",
            },
            {
                "name": "history_length",
                "output": "history_length_out",
                "shape": [],
                "dtype": "int64",
                "meaning": f"how many of the {window} rows are real (0 at an episode's first decision)",
            },
        ]
    return []


def _graph_module() -> Any:
    """The :class:`PolicyGraph` class (defined on first use: importing this module needs no torch)."""
    import torch
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy, BaseModel
    from stable_baselines3.dqn.policies import DQNPolicy
    from stable_baselines3.td3.policies import TD3Policy
    from torch import nn

    from fieldrl.policies.independent import IndependentMlpExtractor
    from fieldrl.policies.lstm_td3.policies import LSTMTD3Policy

    def kind_of(policy: Any) -> str:
        """Which graph of the algorithm table's (``export``) the policy network gets."""
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
        from sb3_contrib.qrdqn.policies import QRDQNPolicy

        if hasattr(policy, "lstm_actor"):
            return "recurrent-actor-critic"  # RecurrentPPO
        if isinstance(policy, LSTMTD3Policy):
            return "history-actor"  # LSTM-TD3: the actor reads a window of past (observation, action) pairs
        if isinstance(policy, ActorCriticPolicy | MaskableActorCriticPolicy):
            return "actor-critic"
        if isinstance(policy, DQNPolicy):
            return "q"
        if isinstance(policy, QRDQNPolicy):
            return "quantile-q"  # QR-DQN: Q-values are the mean over quantiles
        if isinstance(policy, TD3Policy):  # TD3 and DDPG: the actor ends in tanh
            return "deterministic-actor"
        actor = getattr(policy, "actor", None)
        if actor is not None and all(hasattr(actor, a) for a in ("latent_pi", "mu", "features_extractor")):
            return "squashed-gaussian-actor"  # SAC, TQC
        raise FieldrlError(f"{type(policy).__name__}: not a policy export knows")

    class PolicyGraph(nn.Module):
        """Normalisation, the deterministic action path and the action mapping of one SB3 policy; for a
        recurrent policy also its state: ``(obs[, mask], episode_start, *state)`` in, ``(action[, logits],
        *next state)`` out."""

        def __init__(self, policy: Any, norm: dict[str, Any] | None, masked: bool) -> None:
            super().__init__()
            self.policy = policy
            self.kind = kind_of(policy)
            self.masked = masked
            space = policy.action_space
            self.space = space
            if norm is not None:
                mean = np.asarray(norm["mean"], dtype=np.float64)
                std = np.sqrt(np.asarray(norm["var"], dtype=np.float64) + float(norm["epsilon"]))
                self.register_buffer("mean", torch.as_tensor(mean))
                self.register_buffer("std", torch.as_tensor(std))
                self.clip = float(norm["clip_obs"])
            self.normalized = norm is not None
            if isinstance(space, spaces.Box):
                self.register_buffer("low", torch.as_tensor(np.asarray(space.low, dtype=np.float32)))
                self.register_buffer("high", torch.as_tensor(np.asarray(space.high, dtype=np.float32)))
            self.nvec = [int(n) for n in space.nvec] if isinstance(space, spaces.MultiDiscrete) else []

        def _actor_latent(self, features: torch.Tensor) -> torch.Tensor:
            extractor = self.policy.mlp_extractor
            if not isinstance(extractor, IndependentMlpExtractor):
                return extractor.forward_actor(features)
            # independent-ppo routes each row to its agent's MLP by indexing, which a trace would fix to the
            # rows of the example; here every agent's MLP sees every row and a one-hot keeps its own rows
            # (the same block latent: the agent's block, zeros elsewhere, then the agent's one-hot)
            n = extractor.n_agents
            agent = features[:, features.shape[1] - n :].argmax(dim=1)
            onehot = (agent.unsqueeze(1) == torch.arange(n)).to(features.dtype)
            x = features[:, : features.shape[1] - n]
            blocks = [nets.policy_net(x) * onehot[:, i : i + 1] for i, nets in enumerate(extractor.agents)]
            return torch.cat([*blocks, onehot], dim=1)

        def _raw(self, x: torch.Tensor) -> torch.Tensor:
            policy = self.policy
            if self.kind == "actor-critic":
                features = BaseModel.extract_features(policy, x, policy.pi_features_extractor)
                return policy.action_net(self._actor_latent(features))
            if self.kind == "q":
                return policy.q_net(x)
            if self.kind == "quantile-q":  # QuantileNetwork._predict: the mean over quantiles, per action
                return policy.quantile_net(x).mean(dim=1)
            actor = policy.actor
            if self.kind == "deterministic-actor":
                return actor(x)
            features = actor.extract_features(x, actor.features_extractor)
            return torch.tanh(actor.mu(actor.latent_pi(features)))  # the squashed Gaussian's mode

        def _lstm_step(
            self, x: torch.Tensor, starts: torch.Tensor, h: torch.Tensor, c: torch.Tensor
        ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
            """RecurrentPPO's ``get_distribution`` for one step of every row (sb3-contrib's
            ``_process_sequence`` with a sequence of length one): the state of a row that starts an
            episode is multiplied by ``1 - episode_start`` (zeroed) before the LSTM runs. The state is
            ``(batch, layers, hidden)`` here, ``(layers, batch, hidden)`` inside."""
            policy = self.policy
            features = BaseModel.extract_features(policy, x, policy.pi_features_extractor)
            keep = (1.0 - starts.to(torch.float32)).view(1, -1, 1)
            h0, c0 = keep * h.transpose(0, 1), keep * c.transpose(0, 1)
            out, (h1, c1) = policy.lstm_actor(features.unsqueeze(0), (h0, c0))
            latent = torch.flatten(out.transpose(0, 1), start_dim=0, end_dim=1)
            raw = policy.action_net(policy.mlp_extractor.forward_actor(latent))
            return raw, (h1.transpose(0, 1), c1.transpose(0, 1))

        def _history_step(
            self,
            x: torch.Tensor,
            starts: torch.Tensor,
            hist_obs: torch.Tensor,
            hist_actions: torch.Tensor,
            lengths: torch.Tensor,
        ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
            """LSTM-TD3's ``predict`` for one step: a row that starts an episode has its window emptied
            (``clear_rows``), the actor reads the observation and the window, and the pair (observation,
            scaled action) is appended, a full window dropping its oldest (``push``)."""
            actor = self.policy.actor
            window = hist_obs.shape[1]
            keep = torch.logical_not(starts)
            hist_obs = torch.where(keep.view(-1, 1, 1), hist_obs, torch.zeros_like(hist_obs))
            hist_actions = torch.where(keep.view(-1, 1, 1), hist_actions, torch.zeros_like(hist_actions))
            lengths = torch.where(keep, lengths, torch.zeros_like(lengths))
            memory = actor.memory  # MemoryEncoder.forward, with the row's last real output gathered
            out, _ = memory.lstm(memory.pre(torch.cat([hist_obs, hist_actions], dim=-1)))
            last = torch.maximum(lengths - 1, torch.zeros_like(lengths))
            summary = torch.gather(out, 1, last.view(-1, 1, 1).expand(-1, 1, out.shape[2])).squeeze(1)
            summary = summary * (lengths > 0).unsqueeze(-1).to(summary.dtype)
            scaled = actor.head(torch.cat([summary, actor.current(x)], dim=-1))
            full = (lengths >= window).view(-1, 1, 1)
            hist_obs = torch.where(full, torch.cat([hist_obs[:, 1:], hist_obs[:, :1]], dim=1), hist_obs)
            hist_actions = torch.where(
                full, torch.cat([hist_actions[:, 1:], hist_actions[:, :1]], dim=1), hist_actions
            )
            slot = torch.minimum(lengths, torch.full_like(lengths, window - 1))
            at = (torch.arange(window).view(1, -1) == slot.view(-1, 1)).unsqueeze(-1)
            hist_obs = torch.where(at, x.unsqueeze(1), hist_obs)
            hist_actions = torch.where(at, scaled.unsqueeze(1), hist_actions)
            lengths = torch.minimum(lengths + 1, torch.full_like(lengths, window))
            return scaled, (hist_obs, hist_actions, lengths)

        @staticmethod
        def _mode(logits: torch.Tensor) -> torch.Tensor:
            """argmax of the categorical's probabilities, computed as torch's ``Categorical`` does."""
            normalized = logits - logits.logsumexp(dim=-1, keepdim=True)
            return torch.argmax(torch.softmax(normalized, dim=-1), dim=1)

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            obs = inputs[0]
            mask = inputs[1] if self.masked else None
            rest = inputs[2:] if self.masked else inputs[1:]
            if self.normalized:  # VecNormalize's arithmetic, in float64 as numpy does it
                obs = torch.clamp((obs - self.mean) / self.std, -self.clip, self.clip)
            x = obs.to(torch.float32)
            state: tuple[torch.Tensor, ...] = ()
            if self.kind == "recurrent-actor-critic":
                raw, state = self._lstm_step(x, *rest)
            elif self.kind == "history-actor":
                raw, state = self._history_step(x, *rest)
            else:
                raw = self._raw(x)
            space = self.space
            if self.kind in ("q", "quantile-q"):
                return torch.argmax(raw, dim=1), raw
            if isinstance(space, spaces.Box):
                if self.kind in ("actor-critic", "recurrent-actor-critic") and self.policy.squash_output:
                    raw = torch.tanh(raw)  # gSDE with squash_output: the distribution's mode
                if self.policy.squash_output:
                    action = self.low + 0.5 * (raw + 1.0) * (self.high - self.low)
                else:
                    action = torch.minimum(torch.maximum(raw, self.low), self.high)
                return (action.reshape(-1, *space.shape), *state)
            logits = raw
            if mask is not None:  # sb3-contrib's masking: disallowed logits set to -1e8
                logits = torch.where(mask, logits, torch.tensor(-1e8, dtype=logits.dtype))
            if isinstance(space, spaces.Discrete):
                return self._mode(logits), logits, *state
            if isinstance(space, spaces.MultiDiscrete):
                parts = torch.split(logits, self.nvec, dim=1)
                return torch.stack([self._mode(p) for p in parts], dim=1), logits, *state
            if isinstance(space, spaces.MultiBinary):  # Bernoulli's mode: round(sigmoid(logits))
                return torch.round(torch.sigmoid(logits)).to(torch.int64), logits, *state
            raise FieldrlError(f"action space {space}: not one export knows")

    return PolicyGraph


def onnx_bytes(
    model: Any, norm: dict[str, Any] | None, mask_size: int | None
) -> tuple[bytes, list[str], str]:
    """The ONNX model of SB3 ``model`` with the statistics ``norm`` folded in and, with ``mask_size``, an
    action-mask input; a recurrent policy also takes ``episode_start`` and its state (see
    :func:`state_tensors`) and gives its next state. Returns the bytes, the action outputs' names (the
    state's outputs follow them) and which kind of policy it is."""
    import torch
    from gymnasium import spaces

    masked = mask_size is not None
    graph = _graph_module()(model.policy, norm, masked).eval()
    obs_shape = tuple(model.observation_space.shape)
    example: list[torch.Tensor] = [torch.zeros((3, *obs_shape), dtype=torch.float64)]
    names = ["obs"]
    if mask_size is not None:
        example.append(torch.ones((3, mask_size), dtype=torch.bool))
        names.append("mask")
    state = state_tensors(model.policy)
    if state:
        example.append(torch.tensor([True, False, False]))
        names.append("episode_start")
        for tensor in state:
            dtype = torch.int64 if tensor["dtype"] == "int64" else torch.float32
            example.append(torch.zeros((3, *tensor["shape"]), dtype=dtype))
            names.append(tensor["name"])
    space = model.action_space
    if isinstance(space, spaces.Box):
        outputs = ["action"]
    else:
        outputs = ["action", "q_values" if graph.kind in ("q", "quantile-q") else "logits"]
    every_output = [*outputs, *(t["output"] for t in state)]
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        torch.onnx.export(
            graph,
            tuple(example),
            buffer,
            dynamo=False,
            input_names=names,
            output_names=every_output,
            dynamic_axes={name: {0: "batch"} for name in (*names, *every_output)},
            opset_version=OPSET,
            do_constant_folding=True,
        )
    return buffer.getvalue(), outputs, graph.kind


# ------------------------------------------------------------------------------------- self-check


@dataclass
class Decisions:
    """What the torch policy did in one stream of decisions: per decision the observation, mask and
    action (each without the batch axis of one episode) and whether it started an episode, and the
    domain's names for features and actions."""

    observations: list[np.ndarray]
    masks: list[np.ndarray | None]
    actions: list[np.ndarray]
    per_agent: bool
    agents: int | None
    features: list[str] | None
    action_words: list[str] | None
    starts: list[bool] = field(default_factory=list)
    episodes: int = 1


def play_one_episode(
    domain: Any, params: Any, policy: Any, seed: int, limit: int = CHECK_DECISIONS
) -> Decisions:
    """Play (up to ``limit`` decisions of) one episode with the torch ``policy`` as evaluation plays it,
    recording each observation, the action mask it was given and its action. A recurrent policy plays
    the episode twice in one stream (its state carried over, reset by ``episode_start`` as in
    evaluation), each time up to ``limit // 2`` decisions: the check then covers an episode boundary."""
    passes = 2 if policy.recurrent else 1
    record: Decisions | None = None
    policy.reset(1)
    for _ in range(passes):
        envs = domain.make_eval_envs(params, [seed])
        try:
            obs = np.asarray(envs.reset())
            if record is None:
                obs_shape = tuple(policy.model.observation_space.shape)
                per_agent = obs.shape[1:] != obs_shape
                features = words = None
                if len(obs_shape) == 1:
                    features = list(domain.decision_features(envs, obs_shape[0]))
                    words = domain.action_words(envs)
                agents = obs.shape[1] if per_agent else None
                record = Decisions([], [], [], per_agent, agents, features, words, [], passes)
            policy.bind_envs(envs)
            masked = policy.masked and hasattr(envs, "action_masks")
            start = np.ones(1, dtype=bool)
            for _ in range(limit // passes):
                mask = np.asarray(envs.action_masks(), dtype=bool)[0] if masked else None  # as act reads it
                action = np.asarray(policy.act(obs, start))
                record.observations.append(obs[0].copy())
                record.masks.append(mask)
                record.actions.append(action[0].copy())
                record.starts.append(bool(start[0]))
                obs, _, terminated, truncated, _ = envs.step(action)
                obs = np.asarray(obs)
                start = np.zeros(1, dtype=bool)
                if bool(np.asarray(terminated)[0]) or bool(np.asarray(truncated)[0]):
                    break
        finally:
            envs.close()
    assert record is not None
    return record


def compare(bundle: runtime.Bundle, decisions: Decisions, continuous: bool) -> dict[str, Any]:
    """The bundle's actions against the torch policy's on ``decisions`` (one stream: a recurrent
    bundle's state is carried from decision to decision); refused beyond tolerance."""
    worst = 0.0
    differing = 0
    stream = bundle.stream()
    starts = decisions.starts or [i == 0 for i in range(len(decisions.actions))]
    for i, (obs, mask, expected, start) in enumerate(
        zip(decisions.observations, decisions.masks, decisions.actions, starts, strict=True)
    ):
        got = stream.act(obs, mask, start)
        if got.shape != expected.shape:
            raise FieldrlError(
                f"export check: decision {i}: the bundle answered shape {got.shape}, the policy "
                f"{expected.shape}; nothing was written"
            )
        if continuous:
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - expected), initial=0.0)))
        else:
            differing += int(np.sum(got != expected))
    if worst > TOLERANCE or differing:
        what = (
            f"max |difference| {worst:.3g} > {TOLERANCE:g}"
            if continuous
            else f"{differing} different actions"
        )
        raise FieldrlError(
            "export check: the ONNX graph does not reproduce the policy on "
            f"{len(decisions.actions)} decisions ({what}); nothing was written (please report this as a bug)"
        )
    return {
        "decisions": len(decisions.actions),
        "episodes": decisions.episodes,
        "max_abs_difference" if continuous else "differing_actions": worst if continuous else differing,
    }


# ------------------------------------------------------------------------------------- the bundle


def _contract(
    model: Any,
    norm: dict[str, Any] | None,
    decisions: Decisions,
    mask_size: int | None,
    outputs: list[str],
    kind: str,
) -> dict[str, Any]:
    """``bundle.json``: what goes in, what comes out and how, in plain data."""
    from gymnasium import spaces

    space = model.action_space
    obs_space = model.observation_space
    observation: dict[str, Any] = {
        "shape": list(obs_space.shape),
        "dtype": "float64 (any numbers are accepted and read as float64)",
        "environment_dtype": str(obs_space.dtype),
        "per_agent": decisions.per_agent,
        "normalization": "folded into the graph"
        if norm is not None
        else "none (the policy reads raw observations)",
    }
    if decisions.per_agent:
        observation["agents"] = (
            f"one row per agent: a decision is (agents, {', '.join(map(str, obs_space.shape))}); the "
            f"environment had {decisions.agents} agent slots"
        )
    if decisions.features is not None:
        observation["features"] = decisions.features
    action: dict[str, Any] = {"shape": list(space.shape)}
    if isinstance(space, spaces.Box):
        squash = bool(model.policy.squash_output)
        action |= {
            "kind": "continuous",
            "dtype": "float32",
            "low": np.asarray(space.low, dtype=np.float64).tolist(),
            "high": np.asarray(space.high, dtype=np.float64).tolist(),
            "rule": "the deterministic action (the distribution's mean), "
            + ("squashed by tanh and scaled to [low, high]" if squash else "clipped to [low, high]"),
        }
    elif isinstance(space, spaces.Discrete):
        q_rules = {
            "q": "argmax of the Q-values",
            "quantile-q": "argmax of the Q-values (the means over quantiles)",
        }
        action |= {
            "kind": "discrete",
            "dtype": "int64",
            "n": int(space.n),
            "rule": q_rules.get(
                kind,
                "argmax of the action probabilities" + (" over the allowed actions" if mask_size else ""),
            ),
        }
    elif isinstance(space, spaces.MultiDiscrete):
        action |= {
            "kind": "multi-discrete",
            "dtype": "int64",
            "nvec": [int(n) for n in space.nvec],
            "rule": "per dimension, argmax of its action probabilities"
            + (" over its allowed values" if mask_size else ""),
        }
    else:
        action |= {"kind": "binary", "dtype": "int64", "rule": "1 where the probability is above one half"}
    if decisions.action_words is not None:
        action["words"] = list(decisions.action_words)
    mask = None
    if mask_size is not None:
        mask = {
            "size": mask_size,
            "required": True,
            "meaning": "True (or 1) where an action is allowed, as the environment computes it"
            + (
                " (the values of every dimension, one after another)"
                if isinstance(space, spaces.MultiDiscrete)
                else ""
            )
            + "; a disallowed action's logit is set to -1e8, as in training and evaluation",
        }
    tensors = state_tensors(model.policy)
    state = None
    if tensors:
        state = {
            "episode_start": "episode_start",
            "tensors": tensors,
            "initial": "zeros (a new stream)",
            "rows": "one state row per observation row; a stream keeps its number of rows within an episode",
            "reset": "where episode_start is true the row's state is reset to zeros before acting, as in "
            "training and evaluation",
        }
    contract = {
        "format": runtime.FORMAT_STATE if state else runtime.FORMAT,
        "model": ONNX_FILE,
        "onnx": {
            "observation": "obs",
            "mask": "mask" if mask_size else None,
            "outputs": outputs,
            "opset": OPSET,
        },
        "observation": observation,
        "action": action,
        "mask": mask,
        "normalization": None
        if norm is None
        else {k: (np.asarray(v, dtype=np.float64).tolist()) for k, v in norm.items()},
    }
    if state:
        contract["onnx"]["episode_start"] = "episode_start"
        contract["onnx"]["state"] = {t["name"]: t["output"] for t in tensors}
        contract["state"] = state
    return contract


def _failed_held_out(folder: Any, scenario: Any, domain: Any, setting: str, label: str) -> list[dict] | None:
    """This policy's failed held-out episodes in ``setting`` (every training seed), as the evaluation
    recorded them in ``summary.json``; None for a run not evaluated yet."""
    from fieldrl.evaluation.readback import read_summary

    if "summary.json" not in folder.hashes():
        return None
    return [
        {"train_seed": f.train_seed, "eval_seed": f.eval_seed, "episode": f.episode, "reason": f.reason}
        for f in read_summary(folder, scenario, domain).failures_in(setting, label)
    ]


def _held_out(
    folder: Any, scenario: Any, domain: Any, setting: str, label: str, seed: int
) -> dict[str, Any] | None:
    """This policy's held-out results against the best standard policy (``summary.json``), or None for a
    run not evaluated yet."""
    from fieldrl.evaluation.readback import read_results, read_summary

    if "summary.json" not in folder.hashes():
        return None
    summary = read_summary(folder, scenario, domain)
    entry = summary.variant(setting)
    mine = entry.policies.get(label)
    if mine is None:
        return None
    best = entry.best_heuristic
    results = read_results(folder, scenario)
    own = results[
        (results["variant"] == setting) & (results["policy"] == label) & (results["train_seed"] == seed)
    ]
    kpis = []
    for kpi in summary.kpis:
        if kpi.name not in mine or kpi.wall_clock:
            continue
        values = own[own["metric"] == kpi.name]["value"]
        theirs = entry.stat(best, kpi.name) if best else None
        kpis.append(
            {
                "name": kpi.name,
                "label": kpi.label,
                "unit": kpi.unit,
                "higher_is_better": kpi.higher_is_better,
                "ranked": kpi.ranked,
                "policy": mine[kpi.name].mean.as_dict(),
                "this_seed": float(values.mean()) if len(values) else None,
                "best_standard": None if theirs is None else theirs.as_dict(),
            }
        )
    first = next(iter(mine.values()))
    return {
        "primary_kpi": summary.primary_kpi,
        "best_standard_policy": best,
        "eval_seeds": first.n_eval_seeds,
        "train_seeds": first.n_train_seeds,
        "confidence": summary.confidence,
        "kpis": kpis,
    }


NOT_PROMISED = [
    "No simulator and no domain logic: the bundle maps one observation (and mask) to one action; building "
    "the observation and the mask exactly as the environment does is the caller's job.",
    "No runtime shield or heuristic: what the scenario tested around the network is not in the bundle "
    "(export refuses shielded and residual policies for that reason).",
    "No memory: each decision depends on the current observation only.",
    "The validated range is the scenario's: the held-out results hold for the world the scenario describes "
    "(its parameters are in this card); observations from elsewhere were never tested.",
]
#: what replaces "No memory" on the card of a recurrent policy
MEMORY_KEPT_BY_CALLER = (
    "Memory is the caller's to keep: the state the bundle returns must come back with the next observation "
    "of the same stream (one stream per patient, intersection, ...: one episode after another), with "
    "episode_start true at each episode's first decision; a skipped, repeated or reordered decision, or a "
    "state shared between streams, leaves the policy in a state it was never tested in."
)


def not_promised(recurrent: bool) -> list[str]:
    """The card's "does not promise" lines, for a recurrent policy or not."""
    if not recurrent:
        return list(NOT_PROMISED)
    return [MEMORY_KEPT_BY_CALLER if line.startswith("No memory") else line for line in NOT_PROMISED]


def intended_use(scenario: Any, domain_name: str, held_out: dict[str, Any] | None, stressed: bool) -> str:
    """The card's intended-use paragraph."""
    cases = (
        f"{held_out['eval_seeds']} held-out cases of the {domain_name} simulator"
        if held_out is not None and held_out.get("eval_seeds")
        else f"the {domain_name} simulator"
    )
    stress = (
        " and the stress points below (one condition moved at a time)"
        if stressed
        else " (no stress map was run, so nothing is known about conditions away from them)"
    )
    return (
        "Decision support and shadow mode first: run the bundle beside the people or the system that decide "
        "today (`fieldrl act`), record what it would have done, and compare before it is allowed to act on "
        f"anything. The held-out results on this card are simulated: {cases} as the scenario "
        f"'{scenario.name}' describes the world, not outcomes measured in the field. The validated range is "
        f"the scenario's: its parameters (at the end of this card){stress}. Outside that range the policy "
        "was never tested, and the runtime does not detect when it is there."
    )


def _stress_failures(
    folder: Any, scenario: Any, setting: str, label: str, axis: str, point: float
) -> list[dict[str, Any]]:
    """This policy's failed episodes (every training seed) at one stress point, as the jobs recorded them."""
    from fieldrl.evaluation import runner

    hashes = folder.hashes()
    found = []
    for seed in scenario.seeds.train:
        _, _, failures_rel = runner.partial_results(runner.EvalJob(setting, label, seed, axis, float(point)))
        if failures_rel in hashes:
            found += [
                {"axis": axis, "point": float(point)}
                | {k: f[k] for k in ("train_seed", "eval_seed", "episode")}
                | {"reason": str(f["reason"])}
                for f in folder.read_json(failures_rel)
            ]
    return found


def _paired(
    results: Any, scenario: Any, setting: str, axis: str, value: float, label: str, best: str, kpi: str
) -> Paired | None:
    """``label`` minus ``best`` on ``kpi`` at one stress point, paired on the same held-out cases with the
    bootstrap the stress summary uses (:func:`fieldrl.evaluation.stress.summarize_stress`); None where
    either has no results there."""
    from fieldrl.evaluation.stats import Bootstrap, paired_difference, value_matrix

    here = results[
        (results["axis"] == axis)
        & (results["point"] == value)
        & (results["variant"] == setting)
        & (results["metric"] == kpi)
    ]
    seeds = list(scenario.seeds.eval)
    mine, theirs = (here[here["policy"] == name] for name in (label, best))
    if mine.empty or theirs.empty:
        return None
    boot = Bootstrap(len(seeds), scenario.report.bootstrap_samples, seed=0)
    return paired_difference(
        value_matrix(mine, seeds), value_matrix(theirs, seeds), boot, scenario.report.confidence
    )


def _as_stored(found: Described | None) -> dict[str, Any] | None:
    """A stress point's mean, or None where the point has none (a NaN in it is written null with the
    rest of the card, by :func:`_nan_as_null`)."""
    return None if found is None else found.mean.as_dict()


def _operating_range(
    folder: Any, scenario: Any, setting: str, label: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Where this policy's verdict against the best standard policy holds or flips along each stress axis
    of the run (``stress/summary.json``; None where no stress map was run), and its failed episodes at
    the stress points.

    The stress summary compares the best learned policy only; for this policy the same paired comparison
    is made from ``stress/results.parquet`` as the summary makes it, and judged as the report judges it
    (:func:`fieldrl.reports.stress.point_verdicts`)."""
    from fieldrl.evaluation.stress import STRESS_RESULTS, read_stress_summary, verdict_runs
    from fieldrl.reports.stress import TOO_FEW, axis_sentence, point_verdicts

    stress = read_stress_summary(folder)
    if stress is None:
        return None, []
    results = folder.read_parquet(STRESS_RESULTS)
    kpi = stress.primary_kpi
    axes = []
    failures: list[dict[str, Any]] = []
    for name, axis in stress.axes.items():
        at = axis.variants.get(setting)
        if at is None:
            continue
        best = at.best_heuristic
        mine = []
        for point in at.points:
            lost = _stress_failures(folder, scenario, setting, label, name, point.value)
            failures += [f | {"label": axis.label} for f in lost]
            paired = (
                _paired(results, scenario, setting, name, point.value, label, best, kpi) if best else None
            )
            update = {"comparison": None if paired is None else {kpi: paired}, "failed_episodes": len(lost)}
            mine.append(point.model_copy(update=update))
        own = at.model_copy(update={"best_learned": label, "points": mine})
        view = stress.model_copy(
            update={"axes": {name: axis.model_copy(update={"variants": {setting: own}})}}
        )
        verdicts = point_verdicts(view, name, setting) if best else [TOO_FEW] * len(mine)
        points = []
        for point, verdict in zip(mine, verdicts, strict=True):
            comparison = point.compared(kpi)
            points.append(
                {
                    "value": point.value,
                    "trained": point.value == at.trained,
                    "policy": _as_stored(point.described(label, kpi)),
                    "best_standard": _as_stored(point.described(best, kpi)) if best else None,
                    "difference": None if comparison is None else comparison.difference.as_dict(),
                    "cases": point.cases(kpi),
                    "verdict": verdict,
                    "failed_episodes": point.failed_episodes,
                }
            )
        values = [p["value"] for p in points]
        axes.append(
            {
                "axis": name,
                "label": axis.label,
                "unit": axis.unit,
                "format": axis.fmt,
                "trained": at.trained,
                "tested": values,
                "best_standard_policy": best,
                "points": points,
                "runs": [
                    {"verdict": v, "from": first, "to": last}
                    for v, first, last in verdict_runs(values, verdicts)
                ],
                "sentence": axis_sentence(view, name, setting) if best else None,
            }
        )
    return {
        "source": "stress/summary.json and stress/results.parquet of the run (nothing retrained)",
        "setting": setting,
        "primary_kpi": kpi,
        "primary_label": stress.primary_label,
        "primary_unit": stress.primary_unit,
        "higher_is_better": stress.higher_is_better,
        "confidence": stress.confidence,
        "verdicts": "ahead, level or behind the best standard policy of the plain evaluation on the primary "
        "KPI, paired on the same held-out cases and judged as the report judges it (ahead or behind: the "
        f"interval clears zero and the difference is not negligible); '{TOO_FEW}' below 5 held-out cases",
        "axes": axes,
    }, failures


def _known_failures(
    summary_failed: list[dict[str, Any]],
    operating: dict[str, Any] | None,
    stress_failed: list[dict[str, Any]],
) -> dict[str, Any]:
    """The card's known failure cases: this policy's failed held-out episodes, its failed episodes at the
    stress points, and the stress points where it is behind the best standard policy."""
    losses = [
        {
            "axis": a["axis"],
            "label": a["label"],
            "unit": a["unit"],
            "value": p["value"],
            "best_standard_policy": a["best_standard_policy"],
            "difference": p["difference"],
        }
        for a in (operating or {}).get("axes", [])
        for p in a["points"]
        if p["verdict"] == "behind"
    ]
    return {"held_out": summary_failed, "stress": stress_failed, "stress_losses": losses}


def _card(
    scenario: Any,
    entry: Any,
    setting: str,
    seed: int,
    params: Any,
    record: dict[str, Any],
    run_dir: Path,
    weights_sha256: str,
    held_out: dict[str, Any] | None,
    check: dict[str, Any],
    versions: dict[str, str],
    operating: dict[str, Any] | None = None,
    failures: dict[str, Any] | None = None,
    replayed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    recurrent = entry.algorithm in RECURRENT
    return {
        "format": "fieldrl-model-card/1",
        "scenario": {
            "name": scenario.name,
            "description": " ".join(scenario.description.split()),
            "domain": scenario.domain,
            "setting": setting,
            "params": params.model_dump(mode="json"),
            "run_folder": str(run_dir.resolve()),
        },
        "policy": {
            "name": entry.label,
            "algorithm": entry.algorithm,
            "policy_class": entry.policy,
            "train_seed": seed,
            "hyperparameters": entry.hyperparameters,
            "normalize_obs": entry.normalize_obs,
            "weights_sha256": weights_sha256,
        },
        "training": record,
        "intended_use": intended_use(
            scenario, scenario.domain, held_out, bool(operating and operating["axes"])
        ),
        "held_out": held_out,
        "operating_range": operating,
        "known_failures": failures,
        "export_check": check,
        "held_out_replay": replayed,
        "not_promised": not_promised(recurrent),
        "versions": versions,
    }


def _nan_as_null(value: Any) -> Any:
    """``value`` with every NaN or infinite number as None: the card is strict JSON (null, as the stress
    summary writes them), not Python's ``NaN`` that other JSON readers refuse."""
    if isinstance(value, dict):
        return {k: _nan_as_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_as_null(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def _interval(stat: dict[str, Any] | None) -> str:
    if not stat:
        return "-"
    low, high = stat.get("low"), stat.get("high")
    text = _number(stat.get("value"))
    if low is not None and high is not None and np.isfinite(low) and np.isfinite(high):
        text += f" [{_number(low)}, {_number(high)}]"
    return text


def card_markdown(card: dict[str, Any], contract: dict[str, Any]) -> str:
    """The model card in words (``model-card.md``); ``model-card.json`` holds the same numbers."""
    s, p, t = card["scenario"], card["policy"], card["training"]
    lines = [
        f"# Model card: {p['name']} — {s['name']}",
        "",
        f"{s['description']}",
        "",
        "## What this is",
        f"- Domain: {s['domain']}; setting: {s['setting']}",
        f"- Policy: {p['name']} ({p['algorithm']}, {p['policy_class']}), training seed {p['train_seed']}",
        f"- Training effort (from the weights file): {t.get('num_timesteps', 0):,} environment steps, "
        f"{t.get('gradient_updates', 0):,} gradient updates",
    ]
    selected = t.get("selected")
    if selected:
        when = (
            "the untrained start (step 0)"
            if selected["timesteps"] == 0
            else f"step {selected['timesteps']:,} ({selected['gradient_updates']:,} updates)"
        )
        lines.append(
            f"- Kept checkpoint: {when}, best on the validation seeds "
            f"({selected['kpi']} {_number(selected['value'])})"
        )
    if t.get("fine_tune"):
        lines.append(f"- Fine-tuned from a warm start: {json.dumps(t['fine_tune'], sort_keys=True)}")
    lines += [f"- Weights: SHA-256 {p['weights_sha256']} in {s['run_folder']}", ""]
    if card.get("intended_use"):
        lines += ["## Intended use", "", card["intended_use"], ""]
    held = card["held_out"]
    lines.append("## Held-out results")
    if held is None:
        lines += ["", "The run was not evaluated when this bundle was exported: no held-out results.", ""]
    else:
        best = held["best_standard_policy"] or "none"
        level = held.get("confidence")
        ci = f"{100 * level:g} % CI" if isinstance(level, int | float) else "CI"
        lines += [
            "",
            f"Means over {held['eval_seeds']} held-out cases and {held['train_seeds']} training seed(s) of "
            f"{p['name']}, [{ci}]; the bundle is training seed {p['train_seed']} (its own mean beside). "
            f"Best standard policy: {best}. Primary KPI: {held['primary_kpi']}.",
            "",
            f"| KPI | {p['name']} | seed {p['train_seed']} | {best} |",
            "| --- | --- | --- | --- |",
        ]
        for k in held["kpis"]:
            arrow = "higher is better" if k["higher_is_better"] else "lower is better"
            arrow = arrow if k["ranked"] else "a trade-off, not a goal"
            unit = f", {k['unit']}" if k["unit"] else ""
            lines.append(
                f"| {k['label']} ({arrow}{unit}) | {_interval(k['policy'])} | {_number(k['this_seed'])} | "
                f"{_interval(k['best_standard'])} |"
            )
        lines.append("")
    obs, action = contract["observation"], contract["action"]
    lines += [
        "## Inputs and outputs",
        f"- Observation: shape {tuple(obs['shape'])}"
        + (" per agent, a decision is one row per agent" if obs["per_agent"] else "")
        + f"; normalisation {obs['normalization']}",
        f"- Action: {action['kind']}, shape {tuple(action['shape'])}: {action['rule']}",
    ]
    if contract["mask"]:
        lines.append(
            f"- Action mask (required): {contract['mask']['size']} values, {contract['mask']['meaning']}"
        )
    state = contract.get("state")
    if state:
        lines.append(
            "- Memory (recurrent policy): `episode_start` and the state in, the action and the next state "
            f"out; {state['rows']}; initial state {state['initial']}; {state['reset']}:"
        )
        lines += [
            f"  - `{t['name']}` -> `{t['output']}`: {t['dtype']}, shape {tuple(t['shape'])} per row, "
            f"{t['meaning']}"
            for t in state["tensors"]
        ]
    check = card["export_check"]
    diff = (
        f"max |difference| {check['max_abs_difference']:.3g}"
        if "max_abs_difference" in check
        else f"{check['differing_actions']} different actions"
    )
    played = (
        "one episode"
        if check.get("episodes", 1) == 1
        else f"one episode played {check['episodes']} times in one stream (the state carried over and reset "
        "by episode_start)"
    )
    lines += [
        f"- Checked at export: {check['decisions']} decisions of {played} (training seed "
        f"{check['seed']}), bundle against the torch policy: {diff}",
        f"- {replay_line(card.get('held_out_replay'))}",
        "",
        *_range_markdown(card.get("operating_range"), p["name"]),
        *_failures_markdown(
            card.get("known_failures"), card.get("operating_range"), p["name"], p["train_seed"]
        ),
        "## What the bundle does not promise",
        *[f"- {line}" for line in card["not_promised"]],
        "",
        "## Validated range: the scenario's parameters",
        "```json",
        json.dumps(card["scenario"]["params"], indent=1, sort_keys=True),
        "```",
        "",
    ]
    return "\n".join(lines)


def replay_line(replayed: dict[str, Any] | None) -> str:
    """The card's line on the held-out replay."""
    if replayed is None or "skipped" in replayed:
        why = "not asked for" if replayed is None else replayed["skipped"]
        return f"Held-out replay through the bundle: none ({why})"
    return f"Held-out replay at export: {replayed['sentence']}; {replayed['rule']}"


def _range_markdown(operating: dict[str, Any] | None, name: str) -> list[str]:
    """The card's validated operating range (the stress map, from this policy's side) in words."""
    lines = ["## Validated operating range (stress map)", ""]
    if operating is None:
        return lines + [
            "No stress map was run for this run (`fieldrl stress RUN_DIR`): the only validated range is the "
            "scenario's parameters, at the end of this card.",
            "",
        ]
    if not operating["axes"]:
        return lines + [
            f"The run's stress map does not cover setting {operating['setting']}: there, the only validated "
            "range is the scenario's parameters, at the end of this card.",
            "",
        ]
    unit = f", {operating['primary_unit']}" if operating["primary_unit"] else ""
    lines += [
        f"From the run's stress map: the held-out cases played again with one condition moved away from "
        f"training, nothing retrained. {operating['primary_label']}{unit} "
        f"({'higher' if operating['higher_is_better'] else 'lower'} is better), means over every training "
        f"seed of {name} with {100 * operating['confidence']:g} % intervals; the difference is {name} minus "
        f"the best standard policy. Verdict: {operating['verdicts']}.",
        "",
    ]
    for axis in operating["axes"]:
        best = axis["best_standard_policy"] or "none"
        fmt = axis["format"]
        unit = f" ({axis['unit']})" if axis["unit"] else ""
        lines += [
            f"### {axis['label']}{unit}",
            "",
            f"Tested at {', '.join(format(v, fmt) for v in axis['tested'])}; trained at "
            f"{format(axis['trained'], fmt)}. Best standard policy: {best}.",
            "",
        ]
        if axis["sentence"]:
            lines += [axis["sentence"], ""]
        lines += [
            f"| {axis['label']} | {name} | {best} | difference | cases | verdict | failed episodes |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for p in axis["points"]:
            value = format(p["value"], fmt) + (" (trained)" if p["trained"] else "")
            lines.append(
                f"| {value} | {_interval(p['policy'])} | {_interval(p['best_standard'])} | "
                f"{_interval(p['difference'])} | {p['cases']} | {p['verdict']} | {p['failed_episodes']} |"
            )
        lines.append("")
    return lines


def _failures_markdown(
    failures: dict[str, Any] | None, operating: dict[str, Any] | None, name: str, seed: int
) -> list[str]:
    """The card's known failure cases in words."""
    lines = ["## Known failure cases", ""]
    if failures is None:
        return lines + ["Not known: the run was not evaluated when this bundle was exported.", ""]

    def whose(f: dict[str, Any]) -> str:
        return "this bundle's seed" if f["train_seed"] == seed else f"training seed {f['train_seed']}"

    held, stress, losses = failures["held_out"], failures["stress"], failures["stress_losses"]
    if not held:
        lines.append(f"- Held-out episodes: none of {name}'s failed.")
    for f in held:
        lines.append(
            f"- Held-out case {f['eval_seed']} (episode {f['episode']}, {whose(f)}) failed: {f['reason']}"
        )
    for f in stress:
        lines.append(
            f"- At {f['label']} = {f['point']:g} (stress map): held-out case {f['eval_seed']} (episode "
            f"{f['episode']}, {whose(f)}) failed: {f['reason']}"
        )
    for loss in losses:
        unit = f" ({loss['unit']})" if loss["unit"] else ""
        lines.append(
            f"- Behind {loss['best_standard_policy']} at {loss['label']} = {loss['value']:g}{unit}: "
            f"difference {_interval(loss['difference'])}"
        )
    if operating is None:
        lines.append("- Stress points: no stress map was run, so no condition away from training was tested.")
    elif not losses:
        lines.append(f"- Stress points: at none of them is {name} behind the best standard policy.")
    lines.append("")
    return lines


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for dist in ("fieldrl", "torch", "stable-baselines3", "sb3-contrib", "onnxruntime", "numpy"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def _write_folder(out: Path, files: dict[str, bytes], fmt: str = runtime.FORMAT) -> None:
    """Write ``files`` and their manifest (bundle format ``fmt``) into a new folder renamed to ``out`` once
    complete."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        manifest = {
            "format": fmt,
            "files": {n: runtime.sha256_hex(d) for n, d in sorted(files.items())},
        }
        everything = {**files, runtime.MANIFEST_FILE: (json.dumps(manifest, indent=1) + "\n").encode()}
        for name, data in everything.items():
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)
        if out.is_dir():
            out.rmdir()  # empty (checked): the bundle takes its place
        os.rename(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FieldrlError(
            f"{out}: cannot write the bundle ({exc.strerror or exc}); nothing was written"
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_bundle(
    domain: Any, params: Any, policy: Any, seed: int, limit: int = CHECK_DECISIONS
) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """The ONNX model and ``bundle.json`` of a loaded policy (an :class:`~fieldrl.policies.learned.SB3Policy`,
    feed-forward or recurrent), checked against it on (up to ``limit`` decisions of) one episode of
    ``seed`` (twice in one stream for a recurrent policy): returns ``(onnx bytes, contract, what the check
    found)``; a :class:`FieldrlError` if the bundle acts otherwise."""
    from gymnasium import spaces

    model = policy.model
    _check_spaces(model, policy.name)
    decisions = play_one_episode(domain, params, policy, seed, limit)
    first = decisions.masks[0] if decisions.masks else None  # every decision has a mask, or none has
    mask_size = None if first is None else int(first.shape[-1])
    data, outputs, kind = onnx_bytes(model, policy.norm, mask_size)
    contract = _contract(model, policy.norm, decisions, mask_size, outputs, kind)
    bundle = runtime.Bundle(contract, data, "the exported graph")
    check = compare(bundle, decisions, isinstance(model.action_space, spaces.Box)) | {"seed": seed}
    return data, contract, check


def untrained_policy(scenario: Any, domain: Any, params: Any, entry: Any, seed: int = 0) -> Any:
    """Learned entry ``entry``'s policy as the scenario builds it, before any training: the model
    :func:`~fieldrl.policies.learned.build_model` makes on one env of its training environment (the weights
    training starts from with ``seed``), and for ``normalize_obs`` entries the statistics ``VecNormalize``
    starts from (mean 0, variance 1, its default clip and epsilon). What :func:`check_entry` exports."""
    import inspect

    from stable_baselines3.common.vec_env import VecNormalize

    from fieldrl.policies.learned import SB3Policy, build_model
    from fieldrl.scenario_checks import training_vec_env

    venv = training_vec_env(scenario, domain, params, entry)(1, seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # SB3's batch-size advice for this one env
            model = build_model(entry.training_spec(), venv, seed=seed)
    finally:
        venv.close()
    norm = None
    if entry.normalize_obs:
        fresh = inspect.signature(VecNormalize).parameters  # what training's VecNormalize starts from
        norm = {
            "mean": np.zeros(model.observation_space.shape).tolist(),
            "var": np.ones(model.observation_space.shape).tolist(),
            "clip_obs": float(fresh["clip_obs"].default),
            "epsilon": float(fresh["epsilon"].default),
        }
    return SB3Policy(entry.label, model, norm)


def check_entry(
    scenario: Any, label: str, setting: str | None = None, limit: int = CHECK_DECISIONS
) -> dict[str, Any]:
    """Whether learned entry ``label`` of a validated ``scenario`` exports, without training it: its policy
    is built as training starts it (:func:`untrained_policy`), traced to ONNX and checked against the torch
    policy on (up to ``limit`` decisions of) one episode of the first training seed in ``setting``
    (default: the first it runs in), as ``fieldrl export`` checks trained weights. Returns what the check
    found; a :class:`FieldrlError` with the one line export refuses the entry with (:func:`refusal`), or
    saying how the bundle acts otherwise. Nothing is written."""
    import torch

    entry = next((e for e in scenario.policies.learned if e.label == label), None)
    if entry is None:
        raise FieldrlError(f"{label!r}: not a learned policy of {scenario.name}")
    problem = refusal(entry, scenario.domain)
    if problem is not None:
        raise FieldrlError(problem)
    setting = scenario.variants_of(entry)[0] if setting is None else setting
    torch.set_num_threads(1)
    domain, params = _exportable_params(scenario, entry, setting)
    seed = scenario.seeds.train[0]
    _, _, check = build_bundle(domain, params, untrained_policy(scenario, domain, params, entry), seed, limit)
    return check


def export_policy(
    run_dir: str | Path,
    policy: str,
    setting: str | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    replay: int | None = 1,
) -> ExportResult:
    """Export learned policy ``policy`` of a run as a bundle folder (see the module docstring).

    :param run_dir: a run folder with the policy trained (evaluated too, for the model card's results).
    :param policy: the learned policy's name in the scenario.
    :param setting: the setting (variant) it was trained in; default: the first it runs in.
    :param seed: the training seed; default: the scenario's first.
    :param out: the bundle folder to create (must not exist or be empty); default
        ``exports/<scenario>-<policy>[-<setting>]-seed-<k>-<time>``.
    :param replay: held-out episodes of an evaluated run replayed through the bundle before it is written,
        their KPIs compared with the run's (:mod:`fieldrl.bundle_replay`; the export is refused where they
        differ); None: every one; 0: none. A run not evaluated yet is not replayed (the card says so).
    """
    from fieldrl.api import open_run
    from fieldrl.evaluation.runner import EvalJob, build_policy, model_dir
    from fieldrl.evaluation.store import new_output_folder
    from fieldrl.policies.learned import MODEL_FILE
    from fieldrl.scenario import HeuristicEntry

    folder, scenario, _ = open_run(run_dir)
    learned = {e.label: e for e in scenario.policies.learned}
    if policy not in learned:
        if any(isinstance(e, HeuristicEntry) and e.label == policy for e in scenario.policies.heuristics):
            raise FieldrlError(
                f"--policy = {policy!r}: a standard (heuristic) policy; only learned policies are exported"
            )
        raise FieldrlError(
            f"--policy = {policy!r}: learned policies of this run: {', '.join(learned) or 'none'}"
        )
    entry = learned[policy]
    problem = refusal(entry, scenario.domain)
    if problem is not None:
        raise FieldrlError(problem)
    runs_in = scenario.variants_of(entry)
    setting = runs_in[0] if setting is None else setting
    if setting not in runs_in:
        raise FieldrlError(f"--setting = {setting!r}: {policy} was trained in: {', '.join(runs_in)}")
    seed = scenario.seeds.train[0] if seed is None else seed
    if seed not in scenario.seeds.train:
        raise FieldrlError(f"--seed = {seed!r}: training seeds of this run: {scenario.seeds.train}")
    stem = "-".join(
        [
            slug(scenario.name),
            slug(policy),
            *([] if setting == "default" else [slug(setting)]),
            f"seed-{seed}",
        ]
    )
    target = new_output_folder(out, "exports", stem)
    try:
        import onnxruntime  # noqa: F401  (the export is checked with the runtime that will run it)
    except ImportError:
        raise FieldrlError(
            "export checks the bundle with onnxruntime: pip install 'fieldrl[runtime]'"
        ) from None

    import torch

    torch.set_num_threads(1)
    domain, params = _exportable_params(scenario, entry, setting)
    hashes = folder.hashes()
    loaded = build_policy(scenario, domain, params, EvalJob(setting, policy, seed), str(folder.path), hashes)
    data, contract, check = build_bundle(domain, params, loaded, seed)
    replayed = _replay(
        runtime.Bundle(contract, data, "the exported graph"), folder, scenario, setting, policy, seed, replay
    )
    weights_rel = f"{model_dir(setting, policy, seed)}/{MODEL_FILE}"
    from fieldrl.policies.weights import read_record

    record = read_record(folder.verified_path(weights_rel, hashes[weights_rel]))
    held_out = _held_out(folder, scenario, domain, setting, policy, seed)
    operating, stress_failed = _operating_range(folder, scenario, setting, policy)
    failed = _failed_held_out(folder, scenario, domain, setting, policy)
    card = _card(
        scenario,
        entry,
        setting,
        seed,
        params,
        record,
        folder.path,
        hashes[weights_rel],
        held_out,
        check,
        _versions(),
        operating,
        None if failed is None else _known_failures(failed, operating, stress_failed),
        replayed,
    )
    card = _nan_as_null(card)
    files = {
        ONNX_FILE: data,
        runtime.CONTRACT_FILE: (json.dumps(contract, indent=1) + "\n").encode(),
        CARD_JSON: (json.dumps(card, indent=1, allow_nan=False) + "\n").encode(),
        CARD_MD: card_markdown(card, contract).encode(),
    }
    _write_folder(target, files, contract["format"])
    return ExportResult(target, contract, card)


def _replay(
    bundle: runtime.Bundle,
    folder: Any,
    scenario: Any,
    setting: str,
    policy: str,
    seed: int,
    episodes: int | None,
) -> dict[str, Any]:
    """The card's ``held_out_replay``: ``episodes`` held-out episodes replayed through the (not yet written)
    bundle, their KPIs equal to the run's evaluation (:func:`fieldrl.bundle_replay.replay_held_out`), or why
    none was replayed; a :class:`FieldrlError` where they differ."""
    from fieldrl import bundle_replay

    if episodes == 0:
        return {"skipped": "not asked for: --replay 0"}
    if "results.parquet" not in folder.hashes():
        return {"skipped": "the run was not evaluated when this bundle was exported"}
    try:
        found = bundle_replay.replay_held_out(bundle, folder, scenario, setting, policy, seed, episodes)
    except bundle_replay.NothingToReplay as exc:
        return {"skipped": str(exc)}
    if not found.ok:
        raise FieldrlError(
            f"export check: {found.sentence()}; nothing was written (please report this as a bug)"
        )
    return found.summary()


def _check_spaces(model: Any, policy: str) -> None:
    from gymnasium import spaces

    obs = model.observation_space
    if not isinstance(obs, spaces.Box):
        raise FieldrlError(
            f"{policy}: observations are {type(obs).__name__}, not an array of numbers; export supports "
            "array (Box) observations only"
        )
    if not isinstance(
        model.action_space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary
    ):
        raise FieldrlError(f"{policy}: action space {model.action_space} is not one export supports")


def replay_bundle(bundle_dir: str | Path, run_dir: str | Path | None = None, episodes: int | None = 1) -> Any:
    """Replay held-out episodes of the run a bundle was exported from through the bundle, and compare
    their KPIs with the run's evaluation (see the module docstring).

    :param bundle_dir: a bundle folder written by ``fieldrl export`` (every file checked against its
        manifest first).
    :param run_dir: the run folder; default: the one its model card names.
    :param episodes: how many held-out episodes (the evaluation's first); None: every one.
    :return: the comparison (:class:`fieldrl.bundle_replay.ReplayCheck`); ``ok``: whether the KPIs agree.
    """
    from fieldrl import bundle_replay
    from fieldrl.api import open_run
    from fieldrl.evaluation.runner import model_dir
    from fieldrl.policies.learned import MODEL_FILE

    try:
        contract, files = runtime.read_verified(bundle_dir)
        loaded = runtime.Bundle(contract, files[contract["model"]], str(bundle_dir))
    except runtime.BundleError as exc:
        raise FieldrlError(str(exc)) from None
    if CARD_JSON not in files:
        raise FieldrlError(f"{bundle_dir}: no {CARD_JSON}: not a bundle `fieldrl export` wrote")
    card = json.loads(files[CARD_JSON])
    folder, scenario, _ = open_run(run_dir if run_dir is not None else card["scenario"]["run_folder"])
    setting, label, seed = (
        card["scenario"]["setting"],
        card["policy"]["name"],
        int(card["policy"]["train_seed"]),
    )
    weights_rel = f"{model_dir(setting, label, seed)}/{MODEL_FILE}"
    if folder.hashes().get(weights_rel) != card["policy"]["weights_sha256"]:
        raise FieldrlError(
            f"{folder.path}: not the run this bundle was exported from (its {weights_rel} is not the weights "
            "file the model card names)"
        )
    return bundle_replay.replay_held_out(loaded, folder, scenario, setting, label, seed, episodes)
