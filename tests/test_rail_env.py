"""Rail domain: Flatland levels, semi-hierarchical and monolithic ParallelEnvs, observations, deadlocks."""

from __future__ import annotations

import numpy as np
import pytest
from flatland.envs.step_utils.states import TrainState
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pydantic import ValidationError

from fieldrl.domains.rail.deadlock import deadlocked
from fieldrl.domains.rail.env import (
    CANCEL,
    DEPART,
    DISPATCH,
    HOLD,
    LEFT,
    NOOP,
    ROUTE,
    STOP,
    RailParallelEnv,
)
from fieldrl.domains.rail.levels import LEVELS, SPEED_PROFILE, make_rail_env
from fieldrl.domains.rail.observation import OWN, PER_OPTION
from fieldrl.domains.rail.params import RailParams


def shortest(env: RailParallelEnv) -> dict[str, int]:
    out = {}
    for agent in env.agents:
        mask = env.action_mask(agent)
        if mask[DEPART]:
            out[agent] = DEPART
        elif mask[LEFT:STOP].any():
            out[agent] = LEFT + int(np.argmin(env.option_distances(env.index[agent])))
        else:
            out[agent] = NOOP
    return out


def test_levels_are_flatland3_tests_00_to_04():
    got = [(lv.trains, lv.width, lv.height, lv.cities, lv.malfunction_interval) for lv in LEVELS]
    assert got == [
        (7, 30, 30, 2, 540),
        (10, 30, 30, 2, 900),
        (20, 30, 30, 3, 1800),
        (50, 30, 35, 3, 4500),
        (80, 35, 30, 5, 7200),
    ]
    assert all((lv.malfunction_min, lv.malfunction_max) == (20, 50) for lv in LEVELS)
    assert sum(SPEED_PROFILE.values()) == pytest.approx(1.0)


def test_level_generation_is_deterministic_per_seed():
    a, b, c = (make_rail_env(LEVELS[1], s) for s in (5, 5, 6))
    assert np.array_equal(a.rail.grid, b.rail.grid)
    assert [x.initial_configuration for x in a.agents] == [x.initial_configuration for x in b.agents]
    assert [x.latest_arrival for x in a.agents] == [x.latest_arrival for x in b.agents]
    assert not np.array_equal(a.rail.grid, c.rail.grid)
    assert a.get_num_agents() == 10 and (a.height, a.width) == (30, 30)
    speeds = {float(x.speed_counter.max_speed) for x in make_rail_env(LEVELS[3], 0).agents}
    assert len(speeds) >= 3  # Flatland's mixed speed profile


@pytest.mark.parametrize("mode", ["semi", "monolithic"])
def test_env_passes_pettingzoo_conformance(mode):
    parallel_api_test(RailParallelEnv(level=0, mode=mode), num_cycles=300)
    parallel_seed_test(lambda: RailParallelEnv(level=0, mode=mode))


def test_semi_env_asks_only_real_decisions_with_masks_from_the_rail():
    env = RailParallelEnv(level=0, mode="semi")
    env.reset(seed=3)
    seen = {DISPATCH: 0, ROUTE: 0}
    while env.agents:
        assert env.pending.any() or not env.agents
        for agent in env.agents:
            i, mask = env.index[agent], env.action_mask(agent)
            kind = env.pending[i]
            if kind == DISPATCH:
                assert mask.tolist() == [False, True, True, True, False, False, False, False]
                assert env.state(i) == TrainState.READY_TO_DEPART
            elif kind == ROUTE:
                r, c, d = env.config(i)
                assert env.net.choice[r, c, d]  # a switch with more than one exit
                assert mask[LEFT:STOP].tolist() == env.net.options(r, c, d).tolist()
                assert mask[LEFT:STOP].sum() >= 2 and mask[STOP] and not mask[:LEFT].any()
            else:
                assert mask.tolist() == [True] + [False] * 7
            seen[kind] = seen.get(kind, 0) + 1
        env.step(shortest(env))
    assert seen[DISPATCH] >= 7 and seen[ROUTE] > 0
    assert env.episode_info()["arrived"] > 0


def test_hold_and_cancel_are_obeyed():
    env = RailParallelEnv(level=0, mode="semi", hold_steps=4)
    env.reset(seed=1)
    i = int(np.flatnonzero(env.pending == DISPATCH)[0])
    t = env.fl._elapsed_steps
    env.step({env.names[i]: HOLD})
    assert env.config(i) is None and env.hold_until[i] == t + 4
    while env.pending[i] != DISPATCH:
        env.step({a: NOOP for a in env.agents})
    assert env.fl._elapsed_steps >= t + 4
    _, _, terms, _, _ = env.step({env.names[i]: CANCEL})
    assert terms[env.names[i]] and env.names[i] not in env.agents
    assert env.episode_info()["cancelled"] == pytest.approx(100 / 7)


def test_every_train_that_does_not_arrive_costs_one():
    """Holding all trains is not free: at the step limit each costs -1 (plus Flatland's own
    small penalty), as much as a deadlock; a cancellation costs -1 at once."""
    env = RailParallelEnv(level=0, mode="semi", hold_steps=50)
    env.reset(seed=1)
    totals = dict.fromkeys(env.agents, 0.0)
    first = True
    while env.agents:
        acts = {a: HOLD for a in env.agents if env.pending[env.index[a]] == DISPATCH}
        if first:  # cancel one train, hold the others for ever
            cancelled = next(iter(acts))
            acts[cancelled] = CANCEL
            first = False
        _, rewards, _, _, _ = env.step(acts)
        for agent, r in rewards.items():
            totals[agent] += r
    assert env.episode_info()["arrived"] == 0
    held = [t for a, t in totals.items() if a != cancelled]
    assert all(-1.5 < t <= -1.0 for t in held), held
    assert -2.0 < totals[cancelled] <= -1.0  # plus its travel time / step limit


class _ReadyCounting(RailParallelEnv):
    """Counts, per train, the Flatland steps it ends ready to depart at its origin and not departing."""

    def _flatland_step(self, actions):
        over = super()._flatland_step(actions)
        for i in range(self.n):
            if self.state(i) == TrainState.READY_TO_DEPART and not self.departing[i]:
                self.ready_steps[i] += 1
        return over


def test_holding_a_ready_train_costs_wait_cost_per_step_limit():
    """With ``wait_cost`` every step a train sits at its origin once it may depart costs
    wait_cost / step limit; without it holding costs nothing until the step limit."""
    totals = {}
    for cost in (0.0, 2.0):
        env = _ReadyCounting(level=0, mode="semi", hold_steps=50, wait_cost=cost)
        env.ready_steps = np.zeros(LEVELS[0].trains)
        env.reset(seed=1)
        env.ready_steps[:] = 0  # what happens before the first decision is nobody's reward
        total = dict.fromkeys(env.agents, 0.0)
        while env.agents:
            acts = {a: HOLD for a in env.agents if env.pending[env.index[a]] == DISPATCH}
            for agent, r in env.step(acts)[1].items():
                total[agent] += r
        totals[cost] = total
    assert env.ready_steps.min() > 0
    for i, agent in enumerate(env.names):
        extra = totals[0.0][agent] - totals[2.0][agent]
        assert extra == pytest.approx(2.0 * env.ready_steps[i] / env.max_steps)


def test_masked_action_falls_back_to_the_default():
    env = RailParallelEnv(level=0, mode="semi")
    env.reset(seed=2)
    i = int(np.flatnonzero(env.pending == DISPATCH)[0])
    env.step({env.names[i]: STOP})  # not allowed for a dispatch decision -> hold
    assert env.config(i) is None and not env.departing[i] and not env.cancelled[i]


def test_observation_options_match_rail_and_distance_map():
    env = RailParallelEnv(level=1, mode="semi")
    obs, _ = env.reset(seed=4)
    checked = 0
    for _ in range(60):
        if not env.agents:
            break
        full = env.observe_all()
        for i in np.flatnonzero(env.pending == ROUTE):
            allowed = full[i, [OWN + j * PER_OPTION for j in range(3)]].astype(bool)
            assert allowed.tolist() == env.route_options(i).tolist()
            extra = full[i, [OWN + j * PER_OPTION + 1 for j in range(3)]]
            assert extra[int(np.argmin(env.option_distances(i)))] == 0.0
            assert full[i, ROUTE] == 1.0
            checked += 1
        env.step(shortest(env))
    assert checked > 0


def test_deadlock_fixed_point_covers_head_on_pairs_and_queues_only():
    # 0 <-> 1 head-on, 3 queued behind 0, 2 free to move, 4 blocked by 2 (moving), 5 off the map
    blockers = [[1], [0], [-1], [0], [2], None]
    assert deadlocked(blockers) == {0, 1, 3}
    assert deadlocked([[1, -1], [0]]) == set()  # 0 can still take its free exit
    # a 2 x 2 block with a train in each cell, each wanting the next cell round: Flatland rotates
    # them all at once, so neither they nor the train queued behind (4) are deadlocked
    assert deadlocked([[1], [2], [3], [0], [0]]) == set()
    # three trains that only face each other in pairs (0 <-> 1 <-> 2) have no circle to rotate
    assert deadlocked([[1], [0, 2], [1]]) == {0, 1, 2}
    # a circle is also a way out for a train that may choose it: 0 picks 1 (round 1-2-0) over 3
    assert deadlocked([[1, 3], [2], [0], [0]]) == set()


def test_flatland_moves_a_circle_of_trains_but_not_a_head_on_pair():
    """What ``deadlocked`` assumes of the simulator (Flatland 4's motion check); checked so that a
    Flatland upgrade that changed it would fail here rather than miscount deadlocks."""
    from flatland.envs.agent_chains import MotionCheck

    block = [(0, 0), (0, 1), (1, 1), (1, 0)]
    circle = MotionCheck()
    for i, cell in enumerate(block):
        circle.add_agent(i, cell, block[(i + 1) % 4])
    circle.find_conflicts()
    assert all(circle.check_motion(i, block[(i + 1) % 4]) for i in range(4))
    pair = MotionCheck()
    pair.add_agent(0, (0, 0), (0, 1))
    pair.add_agent(1, (0, 1), (0, 0))
    pair.find_conflicts()
    assert not pair.check_motion(0, (0, 1)) and not pair.check_motion(1, (0, 0))


def test_opposing_train_is_seen_by_the_observation_of_a_deadlocked_train():
    for seed in range(10):
        env = RailParallelEnv(level=1, mode="semi")
        env.reset(seed=seed)
        while env.agents:
            env.step(shortest(env))
        if env.stuck:
            break
    assert env.stuck, "shortest path should deadlock on some level-1 seed"
    full = env.observe_all()
    forward_opposing = [full[i, OWN + PER_OPTION + 2] for i in env.stuck]
    assert max(forward_opposing) > 0  # some deadlocked train sees an opposing train ahead
    assert env.episode_info()["deadlocked"] == pytest.approx(100 * len(env.stuck) / env.n)


def test_curriculum_moves_from_easiest_to_hardest():
    env = RailParallelEnv(curriculum=(0, 1, 2), curriculum_episodes=10)
    first = env.curriculum_weights()
    env.episodes = 10
    last = env.curriculum_weights()
    assert first.sum() == pytest.approx(1) and last.sum() == pytest.approx(1)
    assert first[0] > first[-1] and last[-1] > last[0]
    assert env.max_slots == 20 and len(env.possible_agents) == 20
    env.reset(seed=0)
    assert env.current_level in (0, 1, 2) and env.n == LEVELS[env.current_level].trains


def test_bad_params_name_the_field():
    with pytest.raises(ValidationError, match="level"):
        RailParams(level=7)
    with pytest.raises(ValidationError, match="mode"):
        RailParams(mode="hierarchical")
    with pytest.raises(ValidationError, match="curriculum"):
        RailParams(curriculum=[0, 9])
