"""The taxiway training VecEnv (an SB3 ``VecEnv``: importing it imports torch)."""

from __future__ import annotations

from fieldrl.domains.slot_vec_env import AgentSlotVecEnv


class TermRewardSlots(AgentSlotVecEnv):
    """``AgentSlotVecEnv`` that also reports each slot's reward terms (``infos[i]["reward_terms"]``),
    which the value-decomposed learner (:mod:`fieldrl.policies.vd_ppo`) trains on."""

    def step_wait(self):
        before = [list(m.agents) for m in self.maps]
        obs, rewards, dones, infos = super().step_wait()
        for i, env in enumerate(self.envs):
            terms = env.last_reward_terms
            for slot, agent in enumerate(before[i]):
                if agent is not None and agent in terms:
                    infos[i * self.n_slots + slot]["reward_terms"] = terms[agent]
        return obs, rewards, dones, infos
