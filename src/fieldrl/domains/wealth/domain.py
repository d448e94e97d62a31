"""The wealth (GBWM) domain: problems, heuristics, KPIs and report wired together; its envs are
in :mod:`~fieldrl.domains.wealth.envs` (held-out episodes and seeds are explained there)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import KPI, Domain, EpisodeRecord
from fieldrl.domains.speed import Speed
from fieldrl.domains.wealth.heuristics import HEURISTICS, heuristic_problem
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.domains.wealth.stress import stress_axes

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.wealth.env import WealthEnv
    from fieldrl.domains.wealth.envs import WealthEvalEnvs, WealthVecEnv
    from fieldrl.reportkit.context import ReportContext

#: held-out paths kept in the trace (for the report's fan charts and policy maps).
MAX_TRACE_PATHS = 1000

KPIS: list[KPI] = [
    KPI("utility", "Utility collected", "", higher_is_better=True),
    KPI("pct_of_dp", "Share of the DP optimum", "% of DP", higher_is_better=True, fmt=".4g"),
    KPI("goals_taken", "Goals reached", "% of goals", higher_is_better=True),
    # leftover wealth earns nothing in the GBWM objective, but it is the client's money
    KPI("final_wealth", "Wealth left at the end", "W0 units", higher_is_better=True),
]


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    """``utility``, ``pct_of_dp`` (utility / DP optimum x 100; 100 when the optimum is 0; NaN,
    i.e. not applicable, when there is no DP optimum: stochastic inflation), ``goals_taken``
    (% of the problem's goals, any level; 0 without goals), ``final_wealth``."""
    active = np.asarray(record.active, dtype=bool)
    init = record.initial_info
    utility = np.asarray(record.returns, dtype=np.float64)
    dp = np.asarray(init["dp_value"], dtype=np.float64)
    pct = np.where(dp > 0, 100.0 * utility / np.where(dp > 0, dp, 1.0), 100.0)
    pct = np.where(np.isnan(dp), np.nan, pct)
    taken = (np.where(active, record.info["option"] > 0, False).sum(axis=0)) + np.where(
        active, record.info["terminal_option"] > 0, False
    ).sum(axis=0)
    n_goals = np.asarray(init["n_goals"], dtype=np.float64)
    goals = np.where(n_goals > 0, 100.0 * taken / np.maximum(n_goals, 1.0), 0.0)
    final = record.final("wealth", np.float64)
    return {"utility": utility, "pct_of_dp": pct, "goals_taken": goals, "final_wealth": final}


def episode_trace(record: EpisodeRecord, index: int, max_paths: int = MAX_TRACE_PATHS) -> pd.DataFrame:
    """Year-by-year trace of many held-out paths (not only episode ``index``), for fan charts.

    Rows: paths ``index .. index + max_paths - 1`` of the batch, years ``0 .. T``. Columns:
    ``path`` (position in the batch: held-out seed-major, episode-minor), ``problem``,
    ``year``, ``wealth`` (start of the year, before its goal; at ``T`` before the final goal),
    ``wealth_rel`` (``wealth / W0``), ``portfolio`` (-1 at ``T``), ``goal`` (level taken,
    0 = none), ``goal_due`` (1 in goal years) and ``utility`` (gained that year); with
    inflation also ``price_index`` (the index at the start of the year; 1 at year 0).
    """
    import pandas as pd

    active = np.asarray(record.active, dtype=bool)
    init = record.initial_info
    info = {k: np.asarray(v, dtype=np.float64) for k, v in record.info.items()}
    frames = []
    for i in range(index, min(active.shape[1], index + max_paths)):
        steps = int(active[:, i].sum())
        w0 = float(init["W0"][i])
        wealth = np.concatenate(
            [[w0], info["wealth"][: steps - 1, i], info["terminal_wealth"][steps - 1 : steps, i]]
        )
        goal = np.concatenate([info["option"][:steps, i], info["terminal_option"][steps - 1 : steps, i]])
        gained = record.rewards[:steps, i] - np.where(
            np.arange(steps) == steps - 1, info["terminal_gain"][:steps, i], 0.0
        )
        utility = np.concatenate([gained, info["terminal_gain"][steps - 1 : steps, i]])
        extra = {}
        if "price_index" in info:
            extra["price_index"] = np.concatenate([[1.0], info["price_index"][:steps, i]])
        frames.append(
            pd.DataFrame(
                {
                    "path": i,
                    "problem": int(init["problem"][i]),
                    "year": np.arange(steps + 1),
                    "wealth": wealth,
                    "wealth_rel": wealth / w0,
                    "portfolio": np.concatenate([info["portfolio"][:steps, i], [-1]]).astype(np.int64),
                    "goal": goal.astype(np.int64),
                    "goal_due": init["goal_due"][i, : steps + 1].astype(np.int64),
                    "utility": utility,
                    **extra,
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ----------------------------------------------------------------------------- domain


class WealthDomain(Domain[WealthParams]):
    """Goals-based wealth management: which goals to fund and how to invest, year by year."""

    name = "wealth"
    title = "Goals-based wealth management"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=2000.0, off_policy=170.0, episode_s=0.05)
    params_model = WealthParams
    kpis = KPIS
    headline_kpis = ("utility", "goals_taken", "final_wealth")
    glossary = {
        "Utility": "the value the investor puts on the goals reached (the GBWM objective).",
        "DP optimum": "the exact dynamic-programming solution of the same problem: it knows the market "
        "model, which no real adviser does, so it is a ceiling, not a standard policy. Its share of the "
        "optimum is 100 % in expectation; on a finite set of held-out market paths luck moves it away.",
        "W0 units": "multiples of the investor's starting wealth.",
    }
    heuristics = HEURISTICS
    policy_params = {
        "goal_gap": "whether its observation adds how far wealth is from the next goal's cost (in log "
        "wealth and in volatilities of the years left)",
    }
    tunable_policy_params = {"goal_gap": {"no": False, "yes": True}}
    # the capital market regime (mean returns, volatilities, inflation of goal costs); default points
    # and ranges in the domain's units, and why: fieldrl.domains.wealth.stress
    stress_axes = stress_axes()

    def heuristic_problem(self, use: str, params: WealthParams) -> str | None:
        return heuristic_problem(use, self.checked_params(params))

    def make_env(self, params: WealthParams, seed: int | None = None) -> WealthEnv:
        from fieldrl.domains.wealth.env import WealthEnv

        p = self.checked_params(params)
        problem = p.problem()
        env = WealthEnv(
            problem,
            random=problem is None,
            max_obs_goals=p.max_obs_goals,
            max_levels=p.max_levels,
            inflation=p.inflation_model(),
            market=p.market(),
            goal_gap=p.goal_gap,
        )
        if seed is not None:
            env.reset(seed=seed)
        return env

    def make_train_vec_env(self, params: WealthParams, n_envs: int, seed: int) -> WealthVecEnv:
        from fieldrl.domains.wealth.envs import WealthVecEnv

        return WealthVecEnv(self.checked_params(params), n_envs, seed=seed)

    def make_eval_envs(
        self, params: WealthParams, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> WealthEvalEnvs:
        from fieldrl.domains.wealth.envs import WealthEvalEnvs

        return WealthEvalEnvs(self.checked_params(params), seeds, cases)

    # -- decision differences (words in :mod:`fieldrl.domains.wealth.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.wealth.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.wealth.decisions import action_words

        return action_words(envs)

    def effective_actions(self, envs: Any, actions: np.ndarray) -> np.ndarray:
        from fieldrl.domains.wealth.decisions import effective_actions

        return effective_actions(envs, actions)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.wealth.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.wealth.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.wealth.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.wealth.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The gap in utility collected so far plus the gap in goals reached; a tenth of the gap in wealth
        (in starting wealths) tells apart the years in which both have reached the same goals."""
        from fieldrl.domains.wealth.replay import divergence

        return divergence(a, b)
