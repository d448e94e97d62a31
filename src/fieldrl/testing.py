"""Conformance check for fieldrl domains, shipped with the package as PettingZoo ships its API tests.

>>> from fieldrl.testing import check_domain
>>> check_domain("chemo")  # raises AssertionError naming the domain and what failed

:func:`check_domain` checks a domain against the contract in :mod:`fieldrl.domains.base` on a small
scenario of its own (a built-in one under its demo budget, cut to one held-out seed):

1. the declared parts: KPIs, headline KPIs, heuristics and their :class:`~fieldrl.domains.base.Settings`;
2. its envs: Gymnasium's and Stable-Baselines3's ``check_env`` on the single-agent env, PettingZoo's
   ``parallel_api_test`` on the parallel env of a :class:`~fieldrl.domains.multiagent.ParallelDomain`;
3. seeding: the same seed gives the same first observations and rewards over a few steps (the raw envs
   and the evaluation batch);
4. the runner's evaluation path: a heuristic and an untrained learned policy of the scenario play
   held-out episodes through :func:`fieldrl.evaluation.runner.run_episodes`, and every declared KPI comes
   back with shape ``(n,)``;
5. the report: the scenario's heuristics are evaluated into a run folder and the report is built; the
   domain's ``report_section`` must return flowables and ``report.pdf`` must exist.

Fast by design (seconds per domain): nothing is trained and every episode count is one or two.
"""

from __future__ import annotations

import io
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import yaml
from pydantic import BaseModel, ValidationError

from fieldrl.domains.base import Domain, EvalEnvs, Settings
from fieldrl.policies.base import Policy
from fieldrl.scenario import Scenario
from fieldrl.scenario_checks import training_vec_env

#: steps compared by the seeding checks
DETERMINISM_STEPS = 5
#: random steps PettingZoo's ``parallel_api_test`` takes
PARALLEL_API_CYCLES = 20
#: held-out episodes of the runner checks
CHECK_SEEDS = 2
#: held-out episodes of each heuristic and variant in the report check's run
REPORT_SEEDS = 1


class _Failure(AssertionError):
    pass


def check_domain(
    domain: Domain[Any] | str,
    scenario: str | Path | Scenario | None = None,
    folder: str | Path | None = None,
    report: bool = True,
) -> None:
    """Check that ``domain`` meets fieldrl's domain contract; raise ``AssertionError`` naming what failed.

    :param domain: a registered domain or its name.
    :param scenario: a scenario of that domain (built-in name, file or :class:`~fieldrl.scenario.Scenario`);
        default: its built-in ``quick`` scenario (else its first built-in one) under the ``demo`` budget.
    :param folder: where the report check writes its run folder (default: a temporary folder, removed).
    :param report: also evaluate the scenario's heuristics into a run folder and build its report.
    """
    from fieldrl.domains import get_domain

    if isinstance(domain, str):
        domain = get_domain(domain)
    label = getattr(domain, "name", type(domain).__name__)
    try:
        plan = _tiny(_scenario(domain, scenario))
    except AssertionError as exc:
        raise AssertionError(f"domain {label!r}, scenario: {exc}") from None
    except Exception as exc:
        raise AssertionError(f"domain {label!r}, scenario: {type(exc).__name__}: {exc}") from exc
    steps: list[tuple[str, Callable[[], None]]] = [
        ("declared contract", lambda: _check_declared(domain, plan)),
        ("env checkers", lambda: _check_envs(domain, plan)),
        ("seeding determinism", lambda: _check_determinism(domain, plan)),
        ("runner: heuristic and learned episodes", lambda: _check_runner(domain, plan)),
        ("decision differences and replay snapshots", lambda: _check_decisions(domain, plan)),
    ]
    if report:
        steps.append(("report section", lambda: _check_report(domain, plan, folder)))
    for what, step in steps:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step()
        except _Failure as exc:
            raise AssertionError(f"domain {label!r}, {what}: {exc}") from None
        except Exception as exc:
            raise AssertionError(f"domain {label!r}, {what}: {type(exc).__name__}: {exc}") from exc


def _fail(message: str) -> NoReturn:
    raise _Failure(message)


# ----------------------------------------------------------------------------- the scenario


def default_scenario(domain: Domain[Any]) -> str:
    """The built-in scenario :func:`check_domain` uses for ``domain``: ``<name>/quick`` or its first."""
    from fieldrl.scenario import builtin_scenarios

    names = [s for s in builtin_scenarios() if s.split("/", 1)[0] == domain.name]
    if not names:
        _fail("no built-in scenario; pass one to check_domain(domain, scenario)")
    return f"{domain.name}/quick" if f"{domain.name}/quick" in names else names[0]


def _scenario(domain: Domain[Any], scenario: str | Path | Scenario | None) -> Scenario:
    from fieldrl.scenario import load_scenario

    if scenario is None:
        scenario = default_scenario(domain)
    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if loaded.domain != domain.name:
        _fail(f"the scenario is of domain {loaded.domain!r}")
    return loaded.with_budget("demo")


def _tiny(scenario: Scenario) -> Scenario:
    """``scenario`` with :data:`CHECK_SEEDS` held-out seeds, no validation seeds, one episode per seed."""
    data = scenario.model_dump()
    data["seeds"]["eval"] = data["seeds"]["eval"][:CHECK_SEEDS]
    data["seeds"]["validation"] = None
    data["episodes_per_seed"] = 1
    return Scenario.model_validate(data)


def _params(domain: Domain[Any], scenario: Scenario, variant: str | None = None) -> BaseModel:
    return domain.params_model.model_validate(scenario.variant_params(variant or scenario.variant_names[0]))


def _heuristic(domain: Domain[Any], scenario: Scenario, params: BaseModel, index: int = 0) -> Policy:
    entry = scenario.policies.heuristics[index]
    spec = domain.heuristics[entry.use]
    return spec.build(spec.settings_model.model_validate(entry.settings), params, entry.label)


# ----------------------------------------------------------------------------- 1. declared parts


def _check_declared(domain: Domain[Any], scenario: Scenario) -> None:
    for attr in ("name", "title", "params_model", "kpis", "heuristics"):
        if not hasattr(domain, attr):
            _fail(f"the class attribute {attr!r} is not set")
    if not (isinstance(domain.params_model, type) and issubclass(domain.params_model, BaseModel)):
        _fail(f"params_model must be a pydantic model, got {domain.params_model!r}")
    names = [k.name for k in domain.kpis]
    if not names or len(set(names)) != len(names):
        _fail(f"kpis must be a non-empty list of distinct names, got {names}")
    for k in domain.kpis:
        if k.among is not None and k.among not in names:
            _fail(f"KPI {k.name!r} is averaged among {k.among!r}, which is not a KPI")
    unknown = [h for h in domain.headline_kpis if h not in names]
    if unknown:
        _fail(f"headline_kpis {unknown} are not KPIs ({names})")
    if not domain.heuristics:
        _fail("no heuristics: every domain needs a baseline")
    if int(domain.eval_batch_size) < 1:
        _fail(f"eval_batch_size must be >= 1, got {domain.eval_batch_size}")
    params = _params(domain, scenario)
    for use, spec in domain.heuristics.items():
        if not (isinstance(spec.settings_model, type) and issubclass(spec.settings_model, Settings)):
            _fail(f"heuristic {use!r}: settings_model must subclass fieldrl.domains.base.Settings")
        if spec.settings_model.model_config.get("extra") != "forbid":
            _fail(f"heuristic {use!r}: settings_model must refuse unknown settings (extra='forbid')")
        if domain.heuristic_problem(use, params) is not None:
            continue
        try:
            settings = spec.settings_model()
        except Exception:
            continue  # settings without defaults: built where the scenario gives them
        policy = spec.build(settings, params, use)
        if not isinstance(policy, Policy):
            _fail(f"heuristic {use!r} builds {type(policy).__name__}, which is not a fieldrl Policy")
    _check_stress_axes(domain, scenario, params)


def _check_stress_axes(domain: Domain[Any], scenario: Scenario, params: BaseModel) -> None:
    """Each stress axis that applies to the scenario leaves its params as they were at the value they
    trained at (that point must replay the plain evaluation), and its default points lie in its range
    and give valid params."""
    raw = scenario.variant_params(scenario.variant_names[0])
    for name, axis in domain.stress_axes.items():
        if not (axis.points and all(axis.low <= v <= axis.high for v in axis.points)):
            _fail(
                f"stress axis {name!r}: its points {list(axis.points)} must lie in [{axis.low}, {axis.high}]"
            )
        if axis.problem(raw) is not None:
            continue  # it says it cannot move this world
        if domain.params_model.model_validate(axis.apply(raw, axis.trained(params))) != params:
            _fail(f"stress axis {name!r}: apply(params, trained value) changes the params")
        for value in axis.points:
            try:
                domain.params_model.model_validate(axis.apply(raw, value))
            except ValidationError as exc:
                _fail(f"stress axis {name!r} at {value:g}: not valid params ({exc.errors()[0]['msg']})")


# ----------------------------------------------------------------------------- 2. env checkers


def _has_single_agent_env(domain: Domain[Any]) -> bool:
    return type(domain).make_env is not Domain.make_env


def _check_envs(domain: Domain[Any], scenario: Scenario) -> None:
    from fieldrl.domains.multiagent import ParallelDomain

    params = _params(domain, scenario)
    parallel = isinstance(domain, ParallelDomain)
    if not parallel and not _has_single_agent_env(domain):
        _fail("neither make_env (single-agent) nor a ParallelDomain's make_parallel_env is implemented")
    if _has_single_agent_env(domain):
        from gymnasium.utils.env_checker import check_env as gym_check_env
        from stable_baselines3.common.env_checker import check_env as sb3_check_env

        with _closing(domain.make_env(params)) as env:
            _run(
                "gymnasium check_env on make_env(params)", lambda: gym_check_env(env, skip_render_check=True)
            )
        with _closing(domain.make_env(params)) as env:
            _run("Stable-Baselines3 check_env on make_env(params)", lambda: sb3_check_env(env, warn=False))
    if parallel:
        from pettingzoo.test import parallel_api_test

        with _closing(domain.make_parallel_env(params, False)) as env, redirect_stdout(io.StringIO()):
            _run(
                "PettingZoo parallel_api_test on make_parallel_env(params)",
                lambda: parallel_api_test(env, num_cycles=PARALLEL_API_CYCLES),
            )


def _run(what: str, check: Callable[[], Any]) -> None:
    try:
        check()
    except _Failure:
        raise
    except Exception as exc:
        _fail(f"{what} failed: {type(exc).__name__}: {exc}")


@contextmanager
def _closing(env: Any) -> Iterator[Any]:
    try:
        yield env
    finally:
        env.close()


# ----------------------------------------------------------------------------- 3. seeding


def _check_determinism(domain: Domain[Any], scenario: Scenario) -> None:
    from fieldrl.domains.multiagent import ParallelDomain

    params = _params(domain, scenario)
    seed = int(scenario.seeds.eval[0])
    if _has_single_agent_env(domain):
        _same("make_env", *(_gym_rollout(domain.make_env(params), seed) for _ in range(2)))
    if isinstance(domain, ParallelDomain):
        _same("make_parallel_env", *(_parallel_rollout(domain, params, seed) for _ in range(2)))
    held_out = domain.held_out_params(params, scenario.seeds.eval)
    seeds = [int(s) for s in scenario.seeds.eval][: domain.eval_batch_size]  # one batch, as the runner plays
    runs = [_eval_rollout(domain, held_out, _heuristic(domain, scenario, params), seeds) for _ in range(2)]
    _same(f"make_eval_envs with heuristic {scenario.policies.heuristics[0].label!r}", *runs)


def _same(where: str, first: list[Any], second: list[Any]) -> None:
    if len(first) != len(second):
        _fail(f"{where}: the same seed gave episodes of different lengths ({len(first)} and {len(second)})")
    for step, (a, b) in enumerate(zip(first, second, strict=True)):
        for what, x, y in zip(("observation", "reward"), a, b, strict=True):
            if not _equal(x, y):
                _fail(f"{where}: the same seed gave different {what}s at step {step}")


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    return np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)


def _gym_rollout(env: Any, seed: int) -> list[tuple[Any, Any]]:
    with _closing(env):
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        out: list[tuple[Any, Any]] = [(obs, 0.0)]
        for _ in range(DETERMINISM_STEPS):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            out.append((obs, reward))
            if terminated or truncated:
                break
    return out


def _parallel_rollout(domain: Any, params: BaseModel, seed: int) -> list[tuple[Any, Any]]:
    from gymnasium import spaces

    with _closing(domain.make_parallel_env(params, False)) as env:
        obs, _ = env.reset(seed=seed)
        out: list[tuple[Any, Any]] = [(obs, {})]
        for t in range(DETERMINISM_STEPS):
            if not env.agents:
                break
            actions = {}
            for k, agent in enumerate(env.agents):
                space = env.action_space(agent)
                space.seed(seed + 1000 * t + k)
                mask = None
                if hasattr(env, "action_mask") and isinstance(space, spaces.Discrete):
                    mask = np.asarray(env.action_mask(agent), dtype=np.int8)
                actions[agent] = space.sample(mask) if mask is not None and mask.any() else space.sample()
            obs, rewards, _, _, _ = env.step(actions)
            out.append((obs, rewards))
    return out


def _eval_rollout(domain: Domain[Any], params: BaseModel, policy: Policy, seeds: list[int]) -> list[Any]:
    envs: EvalEnvs = domain.make_eval_envs(params, seeds)
    try:
        obs = envs.reset()
        policy.reset(len(seeds))
        policy.bind_envs(envs)
        start = np.ones(len(seeds), dtype=bool)
        out: list[tuple[Any, Any]] = [(np.array(obs), np.zeros(len(seeds)))]
        for _ in range(DETERMINISM_STEPS):
            obs, reward, terminated, truncated, _ = envs.step(np.asarray(policy.act(obs, start)))
            start = np.zeros(len(seeds), dtype=bool)
            out.append((np.array(obs), np.asarray(reward)))
            if np.all(np.asarray(terminated) | np.asarray(truncated)):
                break
        return out
    finally:
        envs.close()


# ----------------------------------------------------------------------------- 4. the runner


def _check_runner(domain: Domain[Any], scenario: Scenario) -> None:
    from fieldrl.evaluation import runner

    params = _params(domain, scenario)
    held_out = domain.held_out_params(params, scenario.seeds.eval)
    seeds = [int(s) for s in scenario.seeds.eval]
    entry = scenario.policies.heuristics[0] if scenario.policies.heuristics else None
    if entry is None:
        _fail("the scenario has no heuristic to check")
    kpis, trace = runner.run_episodes(domain, held_out, _heuristic(domain, scenario, params), seeds)
    _check_kpis(domain, kpis, len(seeds), f"heuristic {entry.label!r}")
    if trace is not None and not hasattr(trace, "columns"):
        _fail(f"episode_trace returned {type(trace).__name__}, not a pandas DataFrame")
    for learned in scenario.policies.learned[:1]:
        policy = _untrained(scenario, domain, params, learned)
        kpis, _ = runner.run_episodes(domain, held_out, policy, seeds[:1], trace_index=None)
        _check_kpis(domain, kpis, 1, f"learned {learned.label!r} (untrained)")


def _check_decisions(domain: Domain[Any], scenario: Scenario) -> None:
    """A standard policy asked about its twin's states answers as the twin did at every decision; the
    observation's features are named one by one; a replay snapshot is plain data."""
    from fieldrl.evaluation.decisions import askable, play_decisions

    params = _params(domain, scenario)
    labels = [e.label for e in scenario.policies.heuristics]
    asked = [k for k, label in enumerate(labels) if askable(scenario, domain, label)]
    seeds = [int(s) for s in scenario.seeds.eval][: max(1, min(2, int(domain.eval_batch_size)))]
    envs: EvalEnvs = domain.make_eval_envs(domain.held_out_params(params, scenario.seeds.eval), seeds)
    try:
        if asked:
            twin, other = (_heuristic(domain, scenario, params, asked[0]) for _ in range(2))
            _, _, _, feats, acts, answers = play_decisions(domain, envs, twin, other, len(seeds))
            names = domain.decision_features(envs, feats.shape[1])
            if len(names) != feats.shape[1] or not all(isinstance(n, str) and n for n in names):
                _fail(f"decision_features named {len(names)} features; the observation has {feats.shape[1]}")
            if not np.array_equal(acts, answers):
                _fail(
                    f"heuristic {labels[asked[0]]!r}, asked about its twin's states (Policy.observe_envs), "
                    "answered differently: its answers depend on more than the state (or it changes the envs)"
                )
        else:
            envs.reset()
        snapshot = domain.replay_snapshot(envs, 0)
    finally:
        envs.close()
    _plain(snapshot, "replay_snapshot")


def _plain(value: Any, where: str) -> None:
    """``value`` holds only numbers, strings, lists, tuples, dicts and numpy arrays (no simulator)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _plain(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for k, item in enumerate(value):
            _plain(item, f"{where}[{k}]")
    elif isinstance(value, np.ndarray):
        if value.dtype == object:
            _fail(f"{where}: a numpy array of Python objects; snapshots hold plain data")
    elif value is not None and not isinstance(value, (bool, int, float, str, np.generic)):
        _fail(f"{where}: {type(value).__name__}; snapshots hold plain data (numbers, strings, arrays)")


def _untrained(scenario: Scenario, domain: Domain[Any], params: BaseModel, entry: Any) -> Policy:
    """``entry``'s model, untrained, as the evaluated policy; its training env takes a few steps first."""
    import torch

    from fieldrl.evaluation import runner
    from fieldrl.policies.learned import SB3Policy, build_model

    torch.set_num_threads(1)
    venv = training_vec_env(scenario, domain, params, entry)(1, 0)
    try:
        model = build_model(entry.training_spec(), venv, seed=0)
        venv.reset()
        venv.action_space.seed(0)
        for _ in range(DETERMINISM_STEPS):
            venv.step(np.stack([venv.action_space.sample() for _ in range(venv.num_envs)]))
    finally:
        venv.close()
    policy: Policy = SB3Policy(entry.label, model, None)
    wrap = runner.evaluation_wrapper(scenario, domain, params, entry)
    return wrap(policy) if wrap is not None else policy


def _check_kpis(domain: Domain[Any], kpis: dict[str, np.ndarray], n: int, who: str) -> None:
    missing = [k.name for k in domain.kpis if k.name not in kpis]
    if missing:
        _fail(f"episode_kpis left out the declared KPIs {missing} ({who})")
    for name, values in kpis.items():
        shape = np.shape(values)
        if shape != (n,):
            _fail(f"KPI {name!r} has shape {shape}, not ({n},) for {n} episodes ({who})")
        if not np.issubdtype(np.asarray(values).dtype, np.number):
            _fail(f"KPI {name!r} is not numeric ({who})")


# ----------------------------------------------------------------------------- 5. the report


def _check_report(domain: Domain[Any], scenario: Scenario, folder: str | Path | None) -> None:
    from fieldrl.domains import get_domain

    if get_domain(domain.name) is not domain:
        _fail(
            f"the registry's domain {domain.name!r} is another object: register this one to check its report"
        )
    if folder is None:
        with tempfile.TemporaryDirectory(prefix=f"fieldrl-check-{domain.name}-") as tmp:
            _report_run(domain, scenario, Path(tmp))
    else:
        _report_run(domain, scenario, Path(folder))


def _report_run(domain: Domain[Any], scenario: Scenario, root: Path) -> None:
    """Evaluate the heuristics of ``scenario`` into a run folder under ``root`` and build its report."""
    from fieldrl import api

    data = scenario.model_dump(mode="json", exclude={"budgets"})
    data["policies"]["learned"] = []  # nothing is trained: the learned path is checked on its own
    data["seeds"]["eval"] = data["seeds"]["eval"][:REPORT_SEEDS]
    kept = {h["name"] or h["use"] for h in data["policies"]["heuristics"]}
    pairs = data["report"]["comparisons"]
    data["report"]["comparisons"] = [c for c in pairs if {c["policy"], c["baseline"]} <= kept]
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"check-{domain.name}-", dir=root))
    path = work / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    run = api.create_run(path, work / "run")
    api.evaluate(run.path, jobs=1, show_progress=False)
    sections: list[list[Any]] = []
    original = domain.report_section

    def recorded(context: Any) -> list[Any]:
        flowables = original(context)
        sections.append(list(flowables))
        return flowables

    domain.report_section = recorded  # type: ignore[method-assign]
    try:
        pdf = api.report(run.path)
    finally:
        del domain.report_section
    if not Path(pdf).is_file() or Path(pdf).stat().st_size == 0:
        _fail(f"no report at {pdf}")
    if not sections:
        _fail("the report was built without calling report_section")
    if not sections[0] and type(domain).report_section is not Domain.report_section:
        _fail("report_section returned no flowables")
