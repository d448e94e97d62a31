"""The reservation shield of the semi-hierarchical rail env."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pydantic import ValidationError

from fieldrl.domains.multiagent import ParallelLockstepEnvs
from fieldrl.domains.rail import DOMAIN
from fieldrl.domains.rail.env import DEPART, DISPATCH, HOLD, LEFT, RIGHT, STOP, RailParallelEnv
from fieldrl.domains.rail.params import RailParams
from fieldrl.domains.rail.reservation import edges


def _eager(env: RailParallelEnv, rng: np.random.Generator | None = None) -> dict[str, int]:
    """Depart whenever allowed, take an allowed exit (nearest, or random with ``rng``)."""
    acts = {}
    for i in np.flatnonzero(env.pending):
        agent, mask = env.names[i], env.action_mask(env.names[i])
        if env.pending[i] == DISPATCH:
            acts[agent] = DEPART if mask[DEPART] else HOLD
            continue
        allowed = np.flatnonzero(mask[LEFT : RIGHT + 1])
        if not len(allowed):
            acts[agent] = STOP
        elif rng is not None:
            acts[agent] = LEFT + int(rng.choice(allowed))
        else:
            dist = np.where(mask[LEFT : RIGHT + 1], env.option_distances(i), np.inf)
            acts[agent] = LEFT + int(np.argmin(dist))
    return acts


def _no_opposing_reservations(env: RailParallelEnv) -> bool:
    reserved = env._shield.plan.reserved
    return all(reserved.get((b, a), 0) == 0 for (a, b) in reserved)


@pytest.mark.parametrize("seed", [500, 501, 502])
def test_shielded_eager_trains_never_meet_head_on(seed):
    rng = np.random.default_rng(seed)
    shielded = RailParallelEnv(level=1, shield=True)
    shielded.reset(seed=seed)
    while shielded.agents:
        assert _no_opposing_reservations(shielded)
        shielded.step(_eager(shielded, rng))  # random allowed exits: reroutes must stay safe too
    assert shielded.episode_info()["deadlocked"] == 0
    assert shielded.episode_info()["arrived"] > 0


def test_the_same_eager_policy_deadlocks_without_the_shield():
    deadlocks = []
    for seed in [500, 501, 502]:
        env = RailParallelEnv(level=1, shield=False)
        env.reset(seed=seed)
        while env.agents:
            env.step(_eager(env))
        deadlocks.append(env.episode_info()["deadlocked"])
    assert max(deadlocks) > 0


def test_shield_masks_departures_onto_a_reserved_track():
    env = RailParallelEnv(level=1, shield=True)
    env.reset(seed=503)
    masked = 0
    while env.agents:
        for i in np.flatnonzero(env.pending == DISPATCH):
            allowed = env.action_mask(env.names[i])[DEPART]
            free = env._shield.departure_path(int(i)) is not None
            assert allowed == free
            masked += not allowed
        env.step(_eager(env))
    assert masked > 0  # the shield did hold somebody back on this network


def test_a_forbidden_departure_is_held_not_taken():
    env = RailParallelEnv(level=1, shield=True)
    env.reset(seed=503)
    while env.agents:
        blocked = [
            int(i)
            for i in np.flatnonzero(env.pending == DISPATCH)
            if not env.action_mask(env.names[i])[DEPART]
        ]
        if blocked:
            i = blocked[0]
            env.step({env.names[i]: DEPART})
            assert not env.departing[i] and env.config(i) is None
            return
        env.step(_eager(env))
    pytest.fail("no departure was ever masked")


def test_dispatchers_run_unshielded():
    params = RailParams(level=0, shield=True)
    spec = DOMAIN.heuristics["shortest-path"]
    policy = spec.build(spec.settings_model(), params, "shortest path")
    envs = DOMAIN.make_eval_envs(params, [3])
    assert isinstance(envs, ParallelLockstepEnvs)
    envs.reset()
    policy.bind_envs(envs)
    assert not envs.envs[0].shield and envs.envs[0]._shield is None


def test_shielded_env_passes_pettingzoo_conformance():
    parallel_api_test(RailParallelEnv(level=0, shield=True), num_cycles=300)
    parallel_seed_test(lambda: RailParallelEnv(level=0, shield=True))


def test_shield_is_for_the_semi_mode_only():
    with pytest.raises(ValidationError, match="shield applies to mode 'semi' only"):
        RailParams(mode="monolithic", shield=True)
    assert RailParallelEnv(level=0, mode="monolithic", shield=True).shield is False


def test_edges_are_directed_pairs():
    assert edges([(0, 0), (0, 1), (1, 1)]) == [((0, 0), (0, 1)), ((0, 1), (1, 1))]
