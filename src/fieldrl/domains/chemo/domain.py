"""The chemotherapy dosing domain: wires params, envs, heuristics and KPIs together."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import Domain, EpisodeRecord, StressAxis
from fieldrl.domains.chemo import metrics
from fieldrl.domains.chemo.cohort import load_cohort
from fieldrl.domains.chemo.heuristics import HEURISTICS
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.domains.speed import Speed
from fieldrl.simulators.chemo import PRESETS

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.chemo.env import ChemoEnv, ChemoEvalEnvs, ChemoVecEnv
    from fieldrl.reportkit.context import ReportContext


def noise_axis(field: str, label: str, unit: str, points: Sequence[float], high: float = 1.0) -> StressAxis:
    """A stress axis on one of the preset's noise levels: the run's own level is the preset's unless the
    scenario set it, and the world at that level is the scenario's params unchanged."""

    def level(params: ChemoParams) -> float:
        return float(getattr(params.noise(), field))

    def apply(raw: dict[str, Any], value: float) -> dict[str, Any]:
        if raw.get(field) is None and value == getattr(PRESETS[raw.get("preset", "s1")], field):
            return raw  # the preset's own level: nothing to set
        return {**raw, field: value}

    return StressAxis(label, unit, tuple(points), 0.0, high, level, apply)


class ChemoDomain(Domain[ChemoParams]):
    """Chemotherapy dosing on the Ahn & Park (2011) tumour-immune-drug model (DTR-Bench)."""

    name = "chemo"
    title = "Chemotherapy dosing"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=2700.0, off_policy=170.0, episode_s=0.05)
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
    file_params = ("cohort_file",)
    stress_axes = {
        "obs_noise": noise_axis(
            "obs_noise", "Observation noise", "s.d., fraction of each measurement", (0.0, 0.1, 0.2, 0.5, 0.8)
        ),
        "pkpd_noise": noise_axis(
            "pkpd_noise",
            "Patient-to-patient variability",
            "spread of each model parameter, fraction of nominal",
            (0.0, 0.1, 0.2, 0.4, 0.6),
        ),
        "missing_rate": noise_axis(
            "missing_rate", "Missing measurements", "share of steps", (0.0, 0.25, 0.5, 0.75), high=0.95
        ),
    }

    def resolve_files(self, params: dict[str, Any], folder: Path) -> dict[str, Any]:
        """As the base, and the cohort file's digest recorded beside its path (if readable)."""
        resolved = super().resolve_files(params, folder)
        path = resolved.get("cohort_file")
        if isinstance(path, str) and path and resolved.get("cohort_sha256") is None:
            with contextlib.suppress(ValueError):  # the params validator names the problem
                resolved["cohort_sha256"] = load_cohort(path).sha256
        return resolved

    def held_out_params(self, params: ChemoParams, eval_seeds: Sequence[int]) -> ChemoParams:
        """With a cohort, bind row ``i`` to the ``i``-th held-out seed (one row per seed needed)."""
        p = self.checked_params(params)
        if p.cohort_file is None:
            return p
        size, n = load_cohort(p.cohort_file).size, len(eval_seeds)
        if size < n:
            raise ValueError(
                f"cohort_file {Path(p.cohort_file).name} has {size:,} patients but the scenario has "
                f"{n:,} held-out seeds; give at least one row per held-out seed (row i is the patient "
                "of the i-th seed), or fewer seeds"
            )
        bound = p.model_copy()
        bound._held_out_seeds = tuple(int(s) for s in eval_seeds)
        return bound

    def make_env(self, params: ChemoParams, seed: int | None = None) -> ChemoEnv:
        from fieldrl.domains.chemo.env import ChemoEnv

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

    def make_train_vec_env(self, params: ChemoParams, n_envs: int, seed: int) -> ChemoVecEnv:
        from fieldrl.domains.chemo.env import ChemoVecEnv

        p = self.checked_params(params)
        return ChemoVecEnv(n_envs, p.noise(), p.max_t, seed=seed)

    def make_eval_envs(
        self, params: ChemoParams, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> ChemoEvalEnvs:
        from fieldrl.domains.chemo.env import ChemoEvalEnvs

        p = self.checked_params(params)
        patients = None
        if p.cohort_file is not None and p._held_out_seeds is not None:
            row = {seed: i for i, seed in enumerate(p._held_out_seeds)}
            rows = [row[int(c)] for c in (seeds if cases is None else cases)]
            cohort = load_cohort(p.cohort_file)
            patients = (cohort.params[rows], cohort.centres[rows])
        return ChemoEvalEnvs(seeds, p.noise(), p.max_t, patients)

    # -- decision differences (words in :mod:`fieldrl.domains.chemo.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.chemo.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.chemo.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.chemo.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.chemo.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.chemo.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.chemo.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The gap between the two patients' tumours, in points of the tumour at the start, plus 100 points
        while only one of the two patients has died."""
        from fieldrl.domains.chemo.replay import divergence

        return divergence(a, b)
