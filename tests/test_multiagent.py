"""The PettingZoo adapters: agent slots for shared training, lockstep episodes for evaluation."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.test import parallel_api_test, parallel_seed_test
from sb3_contrib import MaskablePPO

from fieldrl.domains.multiagent import AgentSlotVecEnv, ParallelLockstepEnvs, SlotMap
from fieldrl.policies.learned import SB3Policy


class Signals(ParallelEnv):
    """Agents arrive one per step, each shown a target in {0, 1} (action 2 is always masked);
    an agent is rewarded 1 for picking its target and leaves after ``stay`` steps."""

    metadata = {"name": "signals_v0"}

    def __init__(self, n_agents: int = 4, stay: int = 3, max_slots: int = 3):
        self.possible_agents = [f"a{i}" for i in range(n_agents)]
        self.stay = stay
        self.max_slots = max_slots

    @functools.cache  # noqa: B019 - spaces are per agent name, as PettingZoo does
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(3)

    def action_mask(self, agent: str) -> np.ndarray:
        return np.array([True, True, False])

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.eye(2, dtype=np.float32)[self.target[a]] for a in self.agents}

    def reset(self, seed=None, options=None):
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.age: dict[str, int] = {}
        self.target: dict[str, int] = {}
        self.correct = 0
        self.agents = []
        self._arrive()
        return self._obs(), {a: {} for a in self.agents}

    def _arrive(self) -> None:
        if self.t < len(self.possible_agents):
            agent = self.possible_agents[self.t]
            self.agents.append(agent)
            self.age[agent] = 0
            self.target[agent] = int(self.rng.integers(2))

    def step(self, actions):
        rewards = {a: float(int(actions[a]) == self.target[a]) for a in self.agents}
        self.correct += int(sum(rewards.values()))
        for a in self.agents:
            self.age[a] += 1
            self.target[a] = int(self.rng.integers(2))
        terms = {a: self.age[a] >= self.stay for a in self.agents}
        truncs = {a: False for a in self.agents}
        self.agents = [a for a in self.agents if not terms[a]]
        self.t += 1
        self._arrive()
        for a in self.agents:  # a newcomer is reported in every dict
            rewards.setdefault(a, 0.0)
            terms.setdefault(a, False)
            truncs.setdefault(a, False)
        return self._obs(), rewards, terms, truncs, {a: {} for a in terms}

    def episode_info(self) -> dict[str, float]:
        return {"correct": float(self.correct)}


def test_toy_env_passes_pettingzoo_conformance():
    parallel_api_test(Signals(), num_cycles=20)
    parallel_seed_test(Signals)


def test_slot_map_reuses_freed_slots_and_refuses_overflow():
    slots = SlotMap(2)
    slots.update(["a", "b"])
    assert slots.agents == ["a", "b"]
    assert slots.update(["b", "c"]) == [0]
    assert slots.agents == ["c", "b"]
    with pytest.raises(RuntimeError, match="max_slots"):
        slots.update(["b", "c", "d"])


def test_agent_slots_report_departures_and_free_slots_stay_black():
    venv = AgentSlotVecEnv([Signals, Signals], seed=0)
    assert venv.num_envs == 6
    obs = venv.reset()
    assert obs[0].sum() == 1 and obs[1].sum() == 0  # a0 seated, slots 1-2 still free
    assert venv.env_method("action_masks", indices=[0])[0].tolist() == [True, True, False]
    dones_seen = []
    for _ in range(4):
        _, _, dones, infos = venv.step(np.zeros(6, dtype=int))
        dones_seen.append(dones[:3].copy())
    # a0 leaves after 3 steps: its slot reports done once, with a terminal observation
    assert dones_seen[2][0] and not dones_seen[1][0]


def test_maskable_ppo_learns_shared_policy_and_evaluates_in_lockstep():
    venv = AgentSlotVecEnv([Signals for _ in range(4)], seed=1)
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=64, seed=0, learning_rate=3e-3)
    model.learn(6000)
    policy = SB3Policy("shared", model)
    envs = ParallelLockstepEnvs([Signals() for _ in range(5)], seeds=range(100, 105), info_keys=["correct"])
    obs = envs.reset()
    policy.reset(envs.n)
    policy.bind_envs(envs)
    assert obs.shape == (5, 3, 2)
    total = np.zeros(5)
    done = np.zeros(5, dtype=bool)
    while not done.all():
        actions = policy.act(obs, np.zeros(5, dtype=bool))
        seated = np.array([[a is not None for a in envs.slot_agents(i)] for i in range(5)])
        assert actions.shape == (5, 3) and (actions[seated] != 2).all()  # the mask is respected
        obs, reward, term, trunc, info = envs.step(actions)
        total += np.where(done, 0.0, reward)
        done |= term | trunc
    # 4 agents x 3 decisions each; a random policy would get 6
    assert np.all(info["correct"] == total)
    assert total.mean() >= 11
