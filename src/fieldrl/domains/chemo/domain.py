"""The chemotherapy dosing domain: wires params, envs, heuristics and KPIs together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from fieldrl.domains.base import Domain, EpisodeRecord
from fieldrl.domains.chemo import metrics
from fieldrl.domains.chemo.env import ChemoEnv, ChemoEvalEnvs, ChemoVecEnv
from fieldrl.domains.chemo.heuristics import HEURISTICS
from fieldrl.domains.chemo.params import ChemoParams


class ChemoDomain(Domain):
    """Chemotherapy dosing on the Ahn & Park (2011) tumour-immune-drug model (DTR-Bench)."""

    name = "chemo"
    title = "Chemotherapy dosing"
    params_model = ChemoParams
    kpis = metrics.KPIS
    heuristics = HEURISTICS
    headline_kpis = ("survival", "tumour_burden", "normal_cells", "total_dose")
    glossary = {
        "DTR-Bench reward": "the score the learned policies are trained on: every 6 hours, normal cells "
        "minus tumour (both relative to the start) minus the dose, and 100 points off for a death. It can "
        "favour giving little drug: read it beside survival and tumour burden.",
    }
    info_keys = ("state", "dose")

    def make_env(self, params: BaseModel, seed: int | None = None) -> ChemoEnv:
        p = self.checked_params(params)
        noise = p.noise()
        env = ChemoEnv(
            obs_noise=noise.obs_noise,
            state_noise=noise.state_noise,
            pkpd_noise=noise.pkpd_noise,
            missing_rate=noise.missing_rate,
            max_t=p.max_t,
        )
        if seed is not None:
            env.reset(seed=seed)
        return env

    def make_train_vec_env(self, params: BaseModel, n_envs: int, seed: int) -> ChemoVecEnv:
        p = self.checked_params(params)
        return ChemoVecEnv(n_envs, p.noise(), p.max_t, seed=seed)

    def make_eval_envs(
        self, params: BaseModel, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> ChemoEvalEnvs:
        p = self.checked_params(params)
        return ChemoEvalEnvs(seeds, p.noise(), p.max_t)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: Any) -> list[Any]:
        from fieldrl.domains.chemo.report import report_section

        return report_section(context)
