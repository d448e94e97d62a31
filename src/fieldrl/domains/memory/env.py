"""Cue-then-act: the right final action depends on an observation that is no longer visible.

Step 0 shows a cue ``c`` in {-1, +1}; the next ``delay`` steps show no cue, only how far the
episode has run; at the last step (step ``delay``) the action must have the cue's sign.
A memoryless policy cannot do better than chance (50 %).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SIGNAL_LIMIT = 3.0


class MemoryEnv(gym.Env):
    """The cue-memory task.

    Observation ``[signal, progress]`` (float32): ``signal`` is the cue at step 0 and 0
    afterwards, plus Gaussian noise of s.d. ``noise`` at every step (clipped to +/-3);
    ``progress = t / delay`` runs from 0 to 1, reaching 1 at the deciding step. Action: one
    number in ``[-1, 1]``. Reward 0 until the deciding step, then +1 if ``action * cue > 0``
    and -1 otherwise, and the episode terminates (``delay + 1`` steps in all).
    ``info = {"cue": c, "success": 1.0 on a correct final step else 0.0}``.

    :param delay: steps between the cue and the deciding step.
    :param noise: s.d. of the observation noise on the signal.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, delay: int = 5, noise: float = 0.0):
        super().__init__()
        if delay < 1:
            raise ValueError(f"delay must be >= 1, got {delay}")
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.delay = int(delay)
        self.noise = float(noise)
        self.observation_space = spaces.Box(
            low=np.array([-SIGNAL_LIMIT, 0.0], dtype=np.float32),
            high=np.array([SIGNAL_LIMIT, 1.0], dtype=np.float32),
            dtype=np.float32,
        )
        self.action_space = spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)
        self._t = 0
        self._cue = 1.0

    def _obs(self) -> np.ndarray:
        signal = self._cue if self._t == 0 else 0.0
        if self.noise > 0:
            signal += self.noise * self.np_random.standard_normal()
        signal = float(np.clip(signal, -SIGNAL_LIMIT, SIGNAL_LIMIT))
        return np.array([signal, self._t / self.delay], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._cue = float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {"cue": self._cue, "success": 0.0}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        if self._t < self.delay:
            self._t += 1
            return self._obs(), 0.0, False, False, {"cue": self._cue, "success": 0.0}
        success = a * self._cue > 0
        obs = np.array([0.0, 1.0], dtype=np.float32)
        return obs, 1.0 if success else -1.0, True, False, {"cue": self._cue, "success": float(success)}
