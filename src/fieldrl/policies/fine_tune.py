"""Fine-tuning a behaviour clone without losing what it copied (issue 41).

A clone whose checkpoints validation never replaces usually means RL destroyed it: the critic starts
unfitted to the clone's own behaviour, the first actor updates follow its noise, and every later
checkpoint scores worse. Two remedies from the literature, as options of a learned entry
(``fine_tune:`` in a scenario):

- **Critic warm-up, then an actor ramp** (PIRLNav, Ramrakhya et al. 2023): for ``critic_warmup`` env
  steps only the value function learns, on the clone's own rollouts; over the next ``actor_ramp``
  steps the actor's step size rises linearly from 0 to the algorithm's own learning rate.
- **A pull toward the clone that fades** (kickstarting, Schmitt et al. 2018): after each update the
  actor takes one pass over the rollout's states toward the frozen clone's action
  (cross-entropy: ``-log pi(a_clone | s)``), with a step size of ``weight`` times the learning rate
  at first, falling linearly to nothing over ``fade_steps`` env steps.
- **Jump-start** (JSRL, Uchendu et al. 2023): the frozen clone (the rule, as copied) drives the first
  ``h`` decisions of every training episode and the learner the rest; ``h`` falls by one stage each
  time the learner's validation score reaches the clone's (the first validation), down to 0. The
  clone's decisions are stored as the rollout's actions with the learner's own probability of them,
  so PPO's update sees what was really done (an off-policy step its clipping bounds).

How, without subclassing every algorithm: the actor's step is scaled by hooks on its optimizer (the
parameters' move is multiplied by the scale after each step, which for Adam is exactly a scaled
learning rate: its update is linear in the learning rate), so nothing changes in SB3's losses, its
optimiser state or its checkpoints. The pull is an extra pass with an optimiser of its own (Adam is
scale-free: a weight on the loss would not change the step, so the weight scales the step size).
No library provides these for SB3 (imitation's ``bc`` and ``dagger`` stop at the clone).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from safetensors.torch import save as save_bytes

from fieldrl.policies.spec import FineTuneSchedule

#: the value side of SB3's on-policy actor-critic policies: modules named so anywhere in a parameter's
#: path (``value_net``, ``mlp_extractor.value_net``, fieldrl's per-agent ``mlp_extractor.agents.k.value_net``)
#: or at its root (a recurrent policy's ``lstm_critic`` and ``critic``)
CRITIC_MODULES = ("value_net",)
CRITIC_ROOTS = ("lstm_critic", "critic")


def is_critic_parameter(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in CRITIC_ROOTS or any(part in CRITIC_MODULES for part in parts)


def actor_scale(step: int, warmup: int, ramp: int) -> float:
    """The actor's share of its learning rate after ``step`` env steps: 0 in the warm-up, then a
    linear rise to 1 over ``ramp`` steps."""
    if step < warmup:
        return 0.0
    if ramp <= 0:
        return 1.0
    return float(min(1.0, (step - warmup) / ramp))


def pull_weight(step: int, weight: float, fade_steps: int) -> float:
    """The pull's step size (times the learning rate) after ``step`` env steps: ``weight`` at first,
    falling linearly to 0 at ``fade_steps``."""
    return float(weight * max(0.0, 1.0 - step / fade_steps))


LOG_COLUMNS = (
    "timesteps",
    "actor_scale",
    "pull_weight",
    "pull_loss",
    "guide_horizon",
    "guided_steps",
    "pull_steps",
)
Row = tuple[int, float, float, float, int, int, int]


@dataclass
class FineTuneLog:
    """One row per update: env steps, the actor's scale, the pull's weight, the pull's loss (NaN: none),
    the jump-start's horizon, the decisions the clone took in that rollout, and the optimiser steps the
    pull took after that update (they are gradient updates too, on top of the learner's own)."""

    rows: list[Row] = field(default_factory=list)
    #: called after each row (training keeps the log beside its checkpoints)
    on_row: Callable[[FineTuneLog], None] | None = None

    def add(self, row: Row) -> None:
        self.rows.append(row)
        if self.on_row is not None:
            self.on_row(self)

    @property
    def pull_steps(self) -> int:
        """Every optimiser step the pull took so far."""
        return sum(row[6] for row in self.rows)

    @classmethod
    def from_csv(cls, text: str, up_to: int) -> FineTuneLog:
        """The rows of a kept log up to env step ``up_to`` (a resumed training's, to its checkpoint).
        A log written before the pull's steps were counted has six columns: its pull steps read 0."""
        rows = []
        for line in text.strip().splitlines()[1:]:
            t, a, w, loss, h, n, *pulled = line.split(",")
            if int(t) <= up_to:
                rows.append(
                    (int(t), float(a), float(w), float(loss), int(h), int(n), int(pulled[0]) if pulled else 0)
                )
        return cls(rows=rows)

    def csv_text(self) -> str:
        lines = [",".join(LOG_COLUMNS)]
        lines += [f"{t},{a:.6g},{w:.6g},{loss!r},{h},{n},{m}" for t, a, w, loss, h, n, m in self.rows]
        return "\n".join(lines) + "\n"


def guide_horizon(horizon: int, stages: int, passed: int) -> int:
    """The jump-start's horizon after ``passed`` validations reached the clone's score: it falls from
    ``horizon`` to 0 in ``stages`` equal steps."""
    return int(round(horizon * max(0, stages - passed) / stages))


def reaches(value: float, start: float, higher_is_better: bool) -> bool:
    """Whether a validation score is at least as good as the start's."""
    if not np.isfinite(value):
        return False
    if not np.isfinite(start):
        return True
    return value >= start if higher_is_better else value <= start


class JumpStart:
    """The frozen clone drives the first ``horizon()`` decisions of every training episode.

    Wraps the on-policy model's ``policy.forward``, which SB3 calls only to collect rollouts (predict
    and validation go through ``get_distribution``): for the environments still in their first
    decisions it returns the clone's action and the learner's log-probability and value of it.
    """

    def __init__(
        self,
        model: Any,
        teacher: Any,
        schedule: FineTuneSchedule,
        higher_is_better: bool,
        history: list[float] | None = None,
    ) -> None:
        self.model, self.teacher, self.schedule = model, teacher, schedule
        self.higher_is_better = higher_is_better
        self.start: float | None = None
        self.passed = 0
        self.guided = 0  # decisions the clone took since the last update
        self._steps: np.ndarray | None = None
        for value in history or []:  # a resumed training: its validations so far
            self.on_validation(value)
        self._original = model.policy.forward
        model.policy.forward = self._forward

    @property
    def horizon(self) -> int:
        return guide_horizon(self.schedule.guide_horizon, self.schedule.guide_stages, self.passed)

    def on_validation(self, value: float) -> None:
        """A validation score: the first is the start's (the clone's); each later one that reaches it
        lowers the horizon by a stage."""
        if self.start is None:
            self.start = value
        elif self.horizon > 0 and reaches(value, self.start, self.higher_is_better):
            self.passed += 1

    def _forward(self, obs: torch.Tensor, deterministic: bool = False, **kwargs: Any) -> Any:
        actions, values, log_prob = self._original(obs, deterministic, **kwargs)
        starts = np.asarray(self.model._last_episode_starts, dtype=bool).reshape(-1)
        if self._steps is None or len(self._steps) != len(starts):
            self._steps = np.zeros(len(starts), dtype=np.int64)
        self._steps = np.where(starts, 0, self._steps + 1)  # decisions taken in the episode so far
        guided = self._steps < self.horizon
        if not guided.any():
            return actions, values, log_prob
        self.guided += int(guided.sum())
        masks = kwargs.get("action_masks")
        extra = {} if masks is None else {"action_masks": masks}
        with torch.no_grad():
            clone = self.teacher.get_distribution(obs, **extra).mode()
            where = torch.as_tensor(guided, device=actions.device).view(-1, *([1] * (actions.dim() - 1)))
            mixed = torch.where(where, clone.reshape(actions.shape).to(actions.dtype), actions)
            _, log_prob, _ = self.model.policy.evaluate_actions(obs, mixed, **extra)
        return mixed, values, log_prob

    def remove(self) -> None:
        del self.model.policy.forward  # the class's own method again


def actor_parameters(model: Any) -> tuple[list[torch.nn.Parameter], Any]:
    """The actor's parameters and the optimiser that moves them (an off-policy model's actor has its
    own; an on-policy model's share one with the critic: everything but the value side is the actor)."""
    actor = getattr(model, "actor", None)
    if actor is not None and getattr(actor, "optimizer", None) is not None:
        return list(actor.parameters()), actor.optimizer
    named = model.policy.named_parameters()
    return [p for name, p in named if not is_critic_parameter(name)], model.policy.optimizer


class ActorStepScale:
    """Scales every step the actor's optimiser takes by ``scale()`` (0: the actor does not move).

    A pre-step hook keeps the actor's parameters; a post-step hook moves them back to
    ``before + scale * (after - before)``. The optimiser's own state is what SB3 left it.
    """

    def __init__(self, params: list[torch.nn.Parameter], optimizer: Any, scale: Callable[[], float]):
        self.params, self.scale = params, scale
        self._before: list[torch.Tensor] | None = None
        self._handles = [
            optimizer.register_step_pre_hook(self._keep),
            optimizer.register_step_post_hook(self._rescale),
        ]

    def _keep(self, *_: Any) -> None:
        self._before = [p.detach().clone() for p in self.params] if self.scale() < 1.0 else None

    def _rescale(self, *_: Any) -> None:
        if self._before is None:
            return
        scale = self.scale()
        with torch.no_grad():
            for p, before in zip(self.params, self._before, strict=True):
                p.copy_(before + scale * (p - before))
        self._before = None

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class ClonePull:
    """After each update of an on-policy model, one pass over the rollout's states toward the frozen
    clone's (deterministic) action, with step size ``weight(step) * learning rate``."""

    def __init__(self, model: Any, teacher: Any, weight: Callable[[int], float], batch_size: int):
        self.model, self.teacher, self.weight, self.batch_size = model, teacher, weight, batch_size
        params, _ = actor_parameters(model)
        # a Box policy's state-independent log std is exploration, not behaviour: the pull leaves it
        self.params = [p for p in params if p is not getattr(model.policy, "log_std", None)]
        self.optimizer = torch.optim.Adam(self.params, lr=0.0)
        self.masked = hasattr(model.rollout_buffer, "action_masks")
        self.steps = 0  # optimiser steps of the last pass

    def optimizer_tensors(self) -> dict[str, torch.Tensor]:
        """The pull's Adam state as plain tensors (kept beside a checkpoint as safetensors, so a
        resumed training pulls with the moments it had; nothing pickled)."""
        out = {}
        for i, p in enumerate(self.params):
            state = self.optimizer.state.get(p)
            if state:
                out[f"{i}.exp_avg"] = state["exp_avg"]
                out[f"{i}.exp_avg_sq"] = state["exp_avg_sq"]
                out[f"{i}.step"] = torch.as_tensor(float(state["step"])).reshape(1)
        return out

    def load_optimizer_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`optimizer_tensors`; refused unless they fit these parameters."""
        for i, p in enumerate(self.params):
            if f"{i}.exp_avg" not in tensors:
                continue
            avg, avg_sq = tensors[f"{i}.exp_avg"], tensors[f"{i}.exp_avg_sq"]
            if avg.shape != p.shape or avg_sq.shape != p.shape:
                raise ValueError(
                    f"parameter {i}: state of shape {tuple(avg.shape)}, parameter {tuple(p.shape)}"
                )
            self.optimizer.state[p] = {
                "step": torch.tensor(float(tensors[f"{i}.step"][0])),
                "exp_avg": avg.clone(),
                "exp_avg_sq": avg_sq.clone(),
            }

    def step(self) -> float:
        """One pass; the mean loss (NaN where the weight is 0 and nothing was done)."""
        model = self.model
        self.steps = 0
        weight = self.weight(int(model.num_timesteps))
        if weight <= 0:
            return float("nan")
        buffer = model.rollout_buffer
        # (steps, envs, *shape) before SB3's update, flattened to (steps * envs, *shape) by it
        obs = np.asarray(buffer.observations).reshape(-1, *model.observation_space.shape)
        masks = None
        if self.masked:
            masks = np.asarray(buffer.action_masks).reshape(len(obs), -1)
        policy = model.policy
        obs_t = torch.as_tensor(obs, device=policy.device)
        with torch.no_grad():
            target = self._distribution(self.teacher, obs_t, masks).mode()
        lr = float(model.lr_schedule(model._current_progress_remaining)) * weight
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        policy.set_training_mode(True)
        losses = []
        order = torch.randperm(len(obs), generator=torch.Generator().manual_seed(int(model.num_timesteps)))
        for lo in range(0, len(obs), self.batch_size):
            idx = order[lo : lo + self.batch_size]
            part = None if masks is None else masks[idx.numpy()]
            loss = -self._distribution(policy, obs_t[idx], part).log_prob(target[idx]).mean()
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, float(getattr(model, "max_grad_norm", 0.5)))
            self.optimizer.step()
            self.steps += 1
            losses.append(float(loss.detach()))
        policy.set_training_mode(False)
        return float(np.mean(losses))

    def _distribution(self, policy: Any, obs: torch.Tensor, masks: np.ndarray | None) -> Any:
        if masks is None:
            return policy.get_distribution(obs)
        return policy.get_distribution(obs, action_masks=masks)


def frozen_copy(policy: Any) -> Any:
    """The clone as it is now, never trained again (the pull's teacher)."""
    teacher = copy.deepcopy(policy)
    teacher.set_training_mode(False)
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


PULL_STATE_FILE = "pull_optimizer.safetensors"


@dataclass
class Installed:
    """What :func:`install` put on a model: call it to undo; ``checkpoint_files`` is what a checkpoint
    keeps of it (the pull's optimiser state), so a resumed training continues as the uninterrupted one."""

    undo: Callable[[], None]
    pull: ClonePull | None = None

    def __call__(self) -> None:
        self.undo()

    def checkpoint_files(self) -> dict[str, bytes]:
        if self.pull is None:
            return {}
        return {
            PULL_STATE_FILE: save_bytes(
                {k: v.contiguous().cpu() for k, v in self.pull.optimizer_tensors().items()}
            )
        }


def install(
    model: Any,
    schedule: FineTuneSchedule,
    teacher: Any | None,
    log: FineTuneLog,
    validations: Any = None,
    pull_state: dict[str, torch.Tensor] | None = None,
) -> Installed:
    """Apply ``schedule`` to ``model`` for its ``learn``; returns the undo.

    ``teacher``: the frozen clone the pull and the jump-start use (needed only with them).
    ``validations``: the training's ``ValidationSelector`` (the jump-start listens to its scores and
    reads those of a resumed training). The schedules run on the model's own step count, so a resumed
    training continues them. ``pull_state``: the pull's optimiser state a checkpoint kept.
    """
    params, optimizer = actor_parameters(model)

    def scale() -> float:
        return actor_scale(int(model.num_timesteps), schedule.warmup, schedule.ramp)

    def pull_at(step: int) -> float:  # used only with a pull, whose fade is more than 0 steps
        return pull_weight(step, schedule.pull_weight, schedule.pull_fade)

    scaler = ActorStepScale(params, optimizer, scale) if schedule.warmup or schedule.ramp else None
    if (schedule.pull_fade > 0 or schedule.guide_horizon > 0) and teacher is None:
        raise ValueError("the pull and the jump-start need the clone (fine_tune needs imitate for them)")
    pull = None
    if schedule.pull_fade > 0:
        if not isinstance(model.observation_space, spaces.Box):
            raise ValueError(f"the pull needs Box observations, not {model.observation_space}")
        pull = ClonePull(model, teacher, pull_at, int(getattr(model, "batch_size", 64) or 64))
        if pull_state:
            pull.load_optimizer_tensors(pull_state)
    jump = None
    if schedule.guide_horizon > 0:
        if validations is None:
            raise ValueError("the jump-start lowers its horizon on validation scores; it needs validation")
        history = [row[4] for row in validations.state.rows]
        jump = JumpStart(model, teacher, schedule, validations.validation.higher_is_better, history)
        validations.listeners.append(jump.on_validation)
    original_train = model.train

    def train(*args: Any, **kwargs: Any) -> None:
        original_train(*args, **kwargs)
        step = int(model.num_timesteps)
        loss = float("nan")
        if pull is not None and scale() > 0:  # no actor move of any kind in the critic's warm-up
            loss = pull.step()
        weight = pull_at(step) if pull is not None else 0.0
        guided = 0
        if jump is not None:
            guided, jump.guided = jump.guided, 0
        pulled = pull.steps if pull is not None else 0
        log.add((step, scale(), weight, loss, jump.horizon if jump is not None else 0, guided, pulled))

    model.train = train

    def undo() -> None:
        del model.train  # the class's own method again
        if scaler is not None:
            scaler.remove()
        if jump is not None:
            jump.remove()
            validations.listeners.remove(jump.on_validation)

    return Installed(undo, pull)
