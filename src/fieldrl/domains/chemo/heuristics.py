"""Baseline dosing rules, batched, behind the same Policy protocol as learned models.

Observations are ``[T, I, B]`` (tumour, immune cells, drug concentration), possibly
noisy or stale; actions are doses in ``[0, 1]`` of shape ``(n_envs, 1)``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, NoSettings, Settings
from fieldrl.policies.base import Policy
from fieldrl.simulators.chemo import DT

STEPS_PER_DAY = round(1.0 / DT)


class ConstantSettings(Settings):
    dose: float = Field(0.5, ge=0.0, le=1.0, description="Dose given every step (0..1).")


class PulsedSettings(Settings):
    dose: float = Field(1.0, ge=0.0, le=1.0, description="Dose during on-days (0..1).")
    on_days: float = Field(3.0, ge=DT, le=1000.0, description="Days of dosing per cycle (multiple of 0.25).")
    off_days: float = Field(
        4.0, ge=0.0, le=1000.0, description="Days without dosing per cycle (multiple of 0.25)."
    )


class TumourFeedbackSettings(Settings):
    gain: float = Field(5.0, ge=0.0, le=1000.0, description="Dose per unit of observed tumour above target.")
    target: float = Field(
        0.05,
        ge=0.0,
        le=2.0,
        description="Observed tumour level T at or below which no drug is given.",
    )
    max_dose: float = Field(1.0, ge=0.0, le=1.0, description="Upper limit on the dose (0..1).")
    b_limit: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="Stop dosing while observed drug concentration B >= this (normal-cell "
        "safety cap; B approaches 1 under continuous maximum dose).",
    )


class _Base(Policy):
    """Shared plumbing: a name and a stateless ``reset``."""

    def __init__(self, name: str):
        self.name = name
        self.n_envs = 0

    def reset(self, n_envs: int) -> None:
        self.n_envs = int(n_envs)


class ConstantDose(_Base):
    """The same dose every step (``none`` = 0, ``max-dose`` = 1)."""

    def __init__(self, name: str, dose: float):
        super().__init__(name)
        self.dose = float(dose)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return np.full((len(obs), 1), self.dose, dtype=np.float32)


class PulsedDose(_Base):
    """Cycles of ``on_days`` at ``dose`` then ``off_days`` at 0, restarting each episode.

    Days are converted to 0.25-day steps (rounded); the step counter restarts where
    ``episode_start`` is True.
    """

    def __init__(self, name: str, dose: float, on_days: float, off_days: float):
        super().__init__(name)
        self.dose = float(dose)
        self.on_steps = max(1, round(on_days * STEPS_PER_DAY))
        self.off_steps = max(0, round(off_days * STEPS_PER_DAY))
        self._count = np.zeros(0, dtype=np.int64)

    def reset(self, n_envs: int) -> None:
        super().reset(n_envs)
        self._count = np.zeros(n_envs, dtype=np.int64)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        if len(self._count) != len(obs):
            self.reset(len(obs))
        self._count[np.asarray(episode_start, dtype=bool)] = 0
        on = self._count % (self.on_steps + self.off_steps) < self.on_steps
        self._count += 1
        return np.where(on, self.dose, 0.0).astype(np.float32)[:, None]


class TumourFeedback(_Base):
    """Dose in proportion to the observed tumour, with a drug-concentration safety cap.

    ``dose = clip(gain * (T_obs - target), 0, max_dose)``, and no dose while the observed
    drug concentration ``B_obs >= b_limit``. Normal cells ``N`` are not observed, so the
    rule cannot see the toxicity it causes; instead it caps how much drug builds up,
    since the normal-cell kill rate is ``a3 (1 - exp(-B))``. The dose falls as the
    tumour shrinks, and stops once it is at ``target``, letting the immune system
    (which the drug also harms) recover and hold the tumour down.
    """

    def __init__(self, name: str, gain: float, target: float, max_dose: float, b_limit: float):
        super().__init__(name)
        self.gain, self.target = float(gain), float(target)
        self.max_dose, self.b_limit = float(max_dose), float(b_limit)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        tumour, drug = obs[:, 0], obs[:, 2]
        dose = np.clip(self.gain * (tumour - self.target), 0.0, self.max_dose)
        dose = np.where(drug >= self.b_limit, 0.0, dose)
        return dose.astype(np.float32)[:, None]


HEURISTICS: dict[str, HeuristicSpec] = {
    "none": HeuristicSpec(NoSettings, lambda s, p, name: ConstantDose(name, 0.0), "No treatment (dose 0)."),
    "constant": HeuristicSpec(
        ConstantSettings,
        lambda s, p, name: ConstantDose(name, s.dose),
        "The same dose every step.",
    ),
    "max-dose": HeuristicSpec(
        NoSettings, lambda s, p, name: ConstantDose(name, 1.0), "Maximum dose every step."
    ),
    "pulsed": HeuristicSpec(
        PulsedSettings,
        lambda s, p, name: PulsedDose(name, s.dose, s.on_days, s.off_days),
        "Cycles of on-days at a fixed dose and off-days without drug.",
    ),
    "tumour-feedback": HeuristicSpec(
        TumourFeedbackSettings,
        lambda s, p, name: TumourFeedback(name, s.gain, s.target, s.max_dose, s.b_limit),
        "Dose proportional to observed tumour above a target; pauses while drug level is high.",
    ),
}
