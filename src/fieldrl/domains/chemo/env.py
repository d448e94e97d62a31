"""Gymnasium env, SB3 VecEnv and lockstep evaluation batch over :class:`ChemoBatch`.

All three share one engine, so a patient drawn from ``np.random.default_rng(seed)``
follows the same trajectory in :class:`ChemoEnv`, :class:`ChemoEvalEnvs` and
(given the same generator) :class:`ChemoVecEnv`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fieldrl.domains.base import EvalEnvs
from fieldrl.domains.vec_env import BatchedVecEnv
from fieldrl.simulators.chemo import OBS_HIGH, OBS_LOW, PRESETS, ChemoBatch, ChemoNoise


def observation_space() -> spaces.Box:
    """Observed ``[T, I, B]`` (normal cells ``N`` are hidden)."""
    return spaces.Box(low=OBS_LOW, high=OBS_HIGH, shape=(3,), dtype=np.float32)


def action_space() -> spaces.Box:
    """Dose as a fraction of the maximum dose."""
    return spaces.Box(low=0.0, high=1.0, shape=(1,), dtype=np.float32)


def resolve_noise(
    preset: str | None = None,
    obs_noise: float | None = None,
    state_noise: float | None = None,
    pkpd_noise: float | None = None,
    missing_rate: float | None = None,
) -> ChemoNoise:
    """Noise levels from an optional preset name with explicit levels taking precedence."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown chemo preset {preset!r}; choose from {sorted(PRESETS)}")
    base = PRESETS[preset] if preset is not None else ChemoNoise()
    levels = {
        "obs_noise": obs_noise,
        "state_noise": state_noise,
        "pkpd_noise": pkpd_noise,
        "missing_rate": missing_rate,
    }
    for name, value in levels.items():
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {value}")
    return ChemoNoise(**{k: getattr(base, k) if v is None else float(v) for k, v in levels.items()})


def _doses(actions: np.ndarray, n: int) -> np.ndarray:
    return np.clip(np.asarray(actions, dtype=np.float64).reshape(n), 0.0, 1.0)


class ChemoEnv(gym.Env):
    """One patient under chemotherapy (DTR-Bench ``AhnChemoEnv``, continuous action).

    Observation ``[T, I, B]`` (float32, noisy), action the dose in ``[0, 1]`` (clipped),
    one step = 0.25 day. ``info = {"state": [N, T, I, B], "dose": u}``. The env truncates
    itself after ``max_t`` steps; death (``N < 0.7 N0``) terminates with reward -100.

    :param obs_noise: observation noise; None means 0 or the preset's level.
    :param state_noise: process / initial-state noise; None means 0 or the preset's.
    :param pkpd_noise: patient parameter spread; None means 0 or the preset's.
    :param missing_rate: probability of a missing observation; None means 0 or the preset's.
    :param max_t: steps per episode.
    :param preset: optional DTR-Bench setting ``s1`` .. ``s5`` supplying the defaults.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        obs_noise: float | None = None,
        state_noise: float | None = None,
        pkpd_noise: float | None = None,
        missing_rate: float | None = None,
        max_t: int = 600,
        preset: str | None = None,
    ):
        super().__init__()
        self.noise = resolve_noise(preset, obs_noise, state_noise, pkpd_noise, missing_rate)
        self.max_t = int(max_t)
        self.observation_space = observation_space()
        self.action_space = action_space()
        self._batch = ChemoBatch(1, self.noise, self.max_t)

    @property
    def state(self) -> np.ndarray:
        """Current hidden state ``[N, T, I, B]``."""
        return self._batch.state[0].copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs = self._batch.reset_patients([0], [self.np_random])[0]
        return obs, {"state": self.state, "dose": 0.0}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        dose = _doses(action, 1)
        obs, reward, terminated, truncated = self._batch.step(dose)
        info = {"state": self.state, "dose": float(dose[0])}
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), info


class ChemoVecEnv(BatchedVecEnv):
    """``n_envs`` patients in one :class:`ChemoBatch`, autoreset like ``DummyVecEnv``.

    Patient ``i`` draws all its episodes from its own generator, spawned from
    ``np.random.SeedSequence(seed)``, so training is reproducible for a given seed.
    Infos carry ``TimeLimit.truncated``, ``terminal_observation`` on episode ends,
    ``state`` and ``dose``.

    :param n_envs: number of parallel patients.
    :param noise: noise levels.
    :param max_t: steps per episode.
    :param seed: root seed; None draws one from OS entropy.
    """

    SHARED_ATTRS = ("render_mode", "noise", "max_t", "observation_space", "action_space")

    def __init__(
        self,
        n_envs: int,
        noise: ChemoNoise | None = None,
        max_t: int = 600,
        seed: int | None = None,
    ):
        self.noise = noise if noise is not None else ChemoNoise()
        self.max_t = int(max_t)
        self.render_mode = None
        self._batch = ChemoBatch(n_envs, self.noise, self.max_t)
        self._actions = np.zeros(n_envs)
        self._rngs: list[np.random.Generator] = []
        self._pending_seed: int | None = None
        self._seed_rngs(seed)
        super().__init__(n_envs, observation_space(), action_space())

    def _seed_rngs(self, seed: int | None) -> None:
        children = np.random.SeedSequence(seed).spawn(self._batch.n)
        self._rngs = [np.random.default_rng(c) for c in children]

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Re-seed every patient's generator from ``SeedSequence(seed)`` at the next reset."""
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._pending_seed = int(seed)
        return [self._pending_seed] * self.num_envs

    def reset(self) -> np.ndarray:
        if self._pending_seed is not None:
            self._seed_rngs(self._pending_seed)
            self._pending_seed = None
        n = self.num_envs
        obs = self._batch.reset_patients(np.arange(n), self._rngs)
        self.reset_infos = [{"state": self._batch.state[i].copy(), "dose": 0.0} for i in range(n)]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = _doses(actions, self.num_envs)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        obs, reward, terminated, truncated = self._batch.step(self._actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [
            {
                "state": self._batch.state[i].copy(),
                "dose": float(self._actions[i]),
                "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
            }
            for i in range(self.num_envs)
        ]
        finished = np.flatnonzero(dones)
        if len(finished):
            for i in finished:
                infos[i]["terminal_observation"] = obs[i].copy()
            obs[finished] = self._batch.reset_patients(finished, [self._rngs[i] for i in finished])
            for i in finished:
                self.reset_infos[i] = {"state": self._batch.state[i].copy(), "dose": 0.0}
        return obs, reward.astype(np.float32), dones, infos


class ChemoEvalEnvs(EvalEnvs):
    """One held-out episode per seed, stepped in lockstep without autoreset.

    Patient ``i`` is drawn from ``np.random.default_rng(seeds[i])``: the same patient as
    ``ChemoEnv().reset(seed=seeds[i])``. Finished patients stop changing.

    With ``patients``, episode ``i`` treats the given patient instead: its parameters replace
    the PK/PD draw (``pkpd_noise`` has no effect) and its ``[N, T, I]`` is the centre of the
    initial-state spread; everything else the seed draws (initial-state spread, process,
    observation and missing-observation noise) is unchanged.

    :param seeds: one seed per episode.
    :param noise: noise levels.
    :param max_t: steps per episode.
    :param patients: optional ``(params (n, 16), initial [N, T, I] (n, 3))``, one row per episode.
    """

    def __init__(
        self,
        seeds: Iterable[int],
        noise: ChemoNoise | None = None,
        max_t: int = 600,
        patients: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        self.seeds = [int(s) for s in seeds]
        self.n = len(self.seeds)
        self.noise = noise if noise is not None else ChemoNoise()
        self.max_t = int(max_t)
        self.patients = patients
        self._batch = ChemoBatch(self.n, self.noise, self.max_t)
        self._done = np.zeros(self.n, dtype=bool)
        self.initial_info: dict[str, np.ndarray] = {}

    def reset(self) -> np.ndarray:
        rngs = [np.random.default_rng(s) for s in self.seeds]
        given = self.patients or (None, None)
        obs = self._batch.reset_patients(np.arange(self.n), rngs, *given)
        self._done[:] = False
        self.initial_info = {"state": self._batch.state.copy()}
        return obs

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        active = ~self._done
        doses = np.where(active, _doses(actions, self.n), 0.0)
        obs, reward, terminated, truncated = self._batch.step(doses, active=active)
        self._done |= terminated | truncated
        info = {"state": self._batch.state.copy(), "dose": doses}
        return obs, reward, terminated, truncated, info
