"""Training vector envs that respect libsumo's one-simulation-per-process rule.

With libsumo and ``n_envs > 1``, each parallel env lives in its own worker process (as SB3's
``SubprocVecEnv`` does for Gymnasium envs), holding an ``AgentSlotVecEnv`` over one ``TrafficEnv``;
the main process concatenates their agent slots. With one env, or over TraCI, everything stays in
process.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices

from fieldrl.domains.multiagent import AgentSlotVecEnv

#: episode seeds of worker ``i`` start at ``seed + i * SEED_STRIDE``
SEED_STRIDE = 100_003


def _make(params: Any) -> Any:
    from fieldrl.domains.traffic.env import TrafficEnv

    return TrafficEnv(params)


def _worker(remote: Any, params: Any, seed: int, parent_pid: int) -> None:
    import torch

    from fieldrl.processes import die_with_parent

    die_with_parent(parent_pid)  # a simulator worker never outlives the training job that owns it

    torch.set_num_threads(1)
    venv = AgentSlotVecEnv([partial(_make, params)], seed)
    try:
        while True:
            cmd, data = remote.recv()
            if cmd == "reset":
                remote.send((venv.reset(), venv.action_masks()))
            elif cmd == "step":
                obs, rew, done, infos = venv.step(data)
                remote.send((obs, rew, done, infos, venv.action_masks()))
            elif cmd == "seed":
                venv.seed(data)
                remote.send(None)
            elif cmd == "close":
                venv.close()
                remote.send(None)
                break
    except (EOFError, KeyboardInterrupt):
        venv.close()


class SubprocSlotVecEnv(VecEnv):
    """Agent slots of ``n_envs`` traffic envs, one worker process each."""

    def __init__(
        self,
        params: Any,
        n_envs: int,
        seed: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        n_slots: int,
    ):
        ctx = mp.get_context("spawn")
        self.remotes, self.processes = [], []
        for i in range(n_envs):
            parent, child = ctx.Pipe()
            args = (child, params, seed + i * SEED_STRIDE, os.getpid())
            proc = ctx.Process(target=_worker, args=args, daemon=True)
            proc.start()
            child.close()
            self.remotes.append(parent)
            self.processes.append(proc)
        self.n_slots = n_slots
        super().__init__(n_envs * n_slots, observation_space, action_space)
        self._masks = np.ones((self.num_envs, int(action_space.n)), dtype=bool)
        self._actions: np.ndarray | None = None

    def seed(self, seed: int | None = None) -> list[None]:
        for i, remote in enumerate(self.remotes):
            remote.send(("seed", None if seed is None else seed + i * SEED_STRIDE))
        for remote in self.remotes:
            remote.recv()
        return [None] * self.num_envs

    def reset(self) -> np.ndarray:
        for remote in self.remotes:
            remote.send(("reset", None))
        results = [remote.recv() for remote in self.remotes]
        self._masks = np.concatenate([m for _, m in results])
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return np.concatenate([o for o, _ in results])

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        for i, remote in enumerate(self.remotes):
            remote.send(("step", actions[i * self.n_slots : (i + 1) * self.n_slots]))

    def step_wait(self):
        results = [remote.recv() for remote in self.remotes]
        obs = np.concatenate([r[0] for r in results])
        rew = np.concatenate([r[1] for r in results])
        done = np.concatenate([r[2] for r in results])
        infos = [info for r in results for info in r[3]]
        self._masks = np.concatenate([r[4] for r in results])
        return obs, rew, done, infos

    def action_masks(self) -> np.ndarray:
        return self._masks.copy()

    def close(self) -> None:
        if self.closed:
            return
        for remote in self.remotes:
            try:
                remote.send(("close", None))
                remote.recv()
            except (BrokenPipeError, EOFError):
                pass
        for proc in self.processes:
            proc.join(timeout=10)
        self.closed = True

    closed = False

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        idx = self._get_indices(indices)
        if attr_name == "action_masks":
            return [partial(self._slot_mask, i) for i in idx]
        if attr_name in ("render_mode",):
            return [None for _ in idx]
        raise AttributeError(f"SubprocSlotVecEnv does not expose {attr_name}")

    def _slot_mask(self, row: int) -> np.ndarray:
        return self._masks[row].copy()

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError("SubprocSlotVecEnv: set_attr is unsupported")

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        if method_name == "action_masks":
            return [self._masks[i] for i in self._get_indices(indices)]
        raise NotImplementedError(f"SubprocSlotVecEnv: env_method({method_name!r}) is unsupported")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
