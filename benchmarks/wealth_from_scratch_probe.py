"""Issue 41 probe: what moves per-problem PPO from scratch toward 99 % of DP on wealth/single-goal?

One training run per call, outside the pipeline so that a training-only change (a reward, a
learning-rate schedule) can be tried without adding it to fieldrl first:

- ``base``: the scenario's observation and reward, PPO with the values its study chose before the gap
  existed (n_envs 8, lr 6.2e-4, ...);
- ``gap``: the observation with ``goal_gap`` (the gap to the goal, as ``params: {goal_gap: true}``);
- ``expected``: on the last decision the reward is the expected utility of the goal given the wealth
  and portfolio chosen (a normal CDF under the engine's own GBM), not the realised 0 or 1: the same
  expectation with less variance;
- ``both``: ``gap`` and ``expected``.

``--decay`` lowers the learning rate linearly to 2 % of its value. Every 20,480 steps the
deterministic policy is scored on 4,000 validation paths (the best is kept); at the end the last
and the kept policy play 20,000 test paths, paired with the converged DP optimum on the same paths.
Prints one ``RESULT`` line: % of DP with the 95 % half-width of the paired difference.

Run: ``python benchmarks/wealth_from_scratch_probe.py gap --seed 0 --steps 409600``; results of
2026-12-07 in docs/wealth.md (issue 41 section).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.stats import norm
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecEnvWrapper, VecNormalize

from fieldrl.domains.wealth.env import append_goal_gap
from fieldrl.domains.wealth.envs import WealthVecEnv, observation_table
from fieldrl.domains.wealth.heuristics import dp_solution
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.scenario import load_scenario
from fieldrl.simulators.gbwm.engine import simulate

VALIDATE_EVERY = 20_480
VALIDATION_PATHS, TEST_PATHS = 4_000, 20_000


class ExpectedFinalReward(VecEnvWrapper):
    """The last decision's reward replaced by its expectation over the final year's market."""

    def __init__(self, venv: WealthVecEnv):
        super().__init__(venv)
        self.batch = venv._slots[0][0]
        self.problem = venv.fixed

    def reset(self) -> np.ndarray:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        self._before = (self.batch.t.copy(), self.batch.wealth.copy(), np.asarray(actions).reshape(-1, 2))
        self.venv.step_async(actions)

    def step_wait(self):
        obs, reward, done, infos = self.venv.step_wait()
        p = self.problem
        t, wealth, actions = self._before
        last = t == p.T - 1
        if last.any():
            option = actions[last, 0].clip(0, p.n_options - 1)
            cost = p.option_cost[p.T - 1, option]
            paid = cost <= wealth[last]
            now = np.where(paid, p.option_utility[p.T - 1, option], 0.0)
            x = wealth[last] - np.where(paid, cost, 0.0) + p.infusion[p.T - 1]
            k = actions[last, 1].clip(0, p.k - 1)
            reward = reward.copy()
            reward[last] = now + self._expected_final(x, k)
        return obs, reward, done, infos

    def _expected_final(self, x: np.ndarray, k: np.ndarray) -> np.ndarray:
        p, f = self.problem, self.problem.frontier
        levels = sorted(
            (c, u) for c, u in zip(p.option_cost[p.T], p.option_utility[p.T], strict=True) if u > 0
        )
        expected, best = np.zeros(len(x)), 0.0
        for cost, utility in levels:
            if utility > best:
                reach = norm.cdf((np.log(np.maximum(x, 1e-12) / cost) + f.drift[k]) / f.sigma[k])
                expected += (utility - best) * reach
                best = utility
        return expected.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=["base", "gap", "expected", "both"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=409_600)
    parser.add_argument("--decay", action="store_true", help="linear learning-rate decay")
    parser.add_argument("--scenario", default="wealth/single-goal")
    args = parser.parse_args()
    torch.set_num_threads(1)
    gap = args.variant in ("gap", "both")
    scenario = load_scenario(args.scenario)
    params = WealthParams.model_validate({**scenario.variant_params(None), "goal_gap": gap})
    problem = params.problem()
    # the values of tuned/single-goal-PPO.yaml before its 2026-12-07 study with the gap in its space
    lr = 0.00061739
    model: PPO | None = None

    def learning_rate(_: float) -> float:
        done = model.num_timesteps if model is not None else 0
        return lr * max(0.02, 1 - done / args.steps) if args.decay else lr

    raw = WealthVecEnv(params, 8, seed=args.seed)
    env = ExpectedFinalReward(raw) if args.variant in ("expected", "both") else raw
    env = VecNormalize(env, norm_obs=True, norm_reward=False, gamma=0.98)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=512,
        gamma=0.98,
        gae_lambda=0.999774,
        learning_rate=learning_rate,
        ent_coef=0.00030161,
        max_grad_norm=0.54370059,
        batch_size=32,
        n_epochs=10,
        clip_range=0.2,
        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation_fn": torch.nn.ReLU},
        seed=args.seed,
        device="cpu",
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes a /tmp folder per learn()
    table = observation_table(problem, params.max_obs_goals, raw.levels)

    def policy(t: int, wealth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        obs = np.repeat(table[min(t, problem.T)][None, :], len(wealth), axis=0)
        obs[:, 1] = np.clip(wealth / problem.W0, -100, 100)
        if gap:
            obs = append_goal_gap(obs)
        action, _ = model.predict(env.normalize_obs(obs.astype(np.float32)), deterministic=True)
        return action[:, 0], action[:, 1]

    dp = dp_solution(problem).act
    z_val = np.random.default_rng(777).standard_normal((VALIDATION_PATHS, problem.T))
    z_test = np.random.default_rng(999).standard_normal((TEST_PATHS, problem.T))
    dp_val = simulate(problem, dp, VALIDATION_PATHS, z=z_val).utility.mean()
    best, kept, kept_step, start = -np.inf, None, 0, time.process_time()
    while model.num_timesteps < args.steps:
        model.learn(VALIDATE_EVERY, reset_num_timesteps=False)
        score = 100 * simulate(problem, policy, VALIDATION_PATHS, z=z_val).utility.mean() / dp_val
        print(
            f"{args.variant} seed {args.seed} step {model.num_timesteps} validation {score:.2f} % of DP",
            flush=True,
        )
        if score > best:
            state = {k: v.clone() for k, v in model.policy.state_dict().items()}
            best, kept, kept_step = (
                score,
                (state, env.obs_rms.mean.copy(), env.obs_rms.var.copy()),
                model.num_timesteps,
            )
    dp_test = simulate(problem, dp, TEST_PATHS, z=z_test).utility

    def paired() -> str:
        utility = simulate(problem, policy, TEST_PATHS, z=z_test).utility
        half = 1.96 * (utility - dp_test).std(ddof=1) / np.sqrt(TEST_PATHS) / dp_test.mean()
        return f"{100 * utility.mean() / dp_test.mean():.2f} % (±{100 * half:.2f})"

    last = paired()
    model.policy.load_state_dict(kept[0])
    env.obs_rms.mean, env.obs_rms.var = kept[1], kept[2]
    print(
        f"RESULT {args.scenario} {args.variant} decay={args.decay} seed {args.seed} steps {args.steps} "
        f"cpu {time.process_time() - start:.0f} s: last {last}, kept (step {kept_step}) {paired()}",
        flush=True,
    )


if __name__ == "__main__":
    main()
