"""Demonstrations for a warm start follow the evaluation runner's order: reset the simulators, then bind."""

from __future__ import annotations

from fieldrl.domains import get_domain
from fieldrl.domains.taxiway.heuristics import Prioritized
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.policies.imitation import collect


def test_demonstrations_bind_a_multi_agent_heuristic_after_the_simulators_are_reset():
    class _Checks(Prioritized):
        def bind_envs(self, envs):
            assert all(env.sim.t >= 0 and env.agents for env in envs.envs), "bound before reset"
            super().bind_envs(envs)

    domain = get_domain("taxiway")
    envs = domain.make_eval_envs(TaxiwayParams(layout="small", density="high", max_slots=8), [3])
    try:
        demos = collect(envs, _Checks("pp"), 0.99)
    finally:
        envs.close()
    assert len(demos) > 0
