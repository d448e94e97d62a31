"""How fast a domain trains and plays: :class:`Speed`, a domain's measured figure (``Domain.speed``).

``fieldrl list`` gives every built-in scenario's expected time without importing a domain (a domain
may load a simulator), so :func:`declared_speed` reads the figure from the source of the domain's
class, where it is written as a literal ``speed = Speed(...)``; a test holds it equal to the imported
domain's ``speed``.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from fieldrl.policies.signatures import absolute_module


@dataclass(frozen=True)
class Speed:
    """One domain's measured speed, one process (:mod:`fieldrl.estimates` multiplies its counts by it).

    Each domain's figure was measured on the demo budgets of its built-in scenarios (2 cores shared with
    other jobs, ``--jobs 1``; training speed from each model's validation curve, the rest of the wall time
    spread over episodes).

    :param on_policy: environment steps per second of on-policy training (PPO, A2C, ...), updates included.
    :param off_policy: the same for off-policy learners (SAC, TD3, DQN, ...) making one gradient step per
        four environment steps (SB3's default with 4 envs); more or fewer updates per step scale it.
    :param episode_s: seconds per held-out or validation episode of one policy, evaluation overhead included.
    """

    on_policy: float
    off_policy: float
    episode_s: float


#: the speed of a domain that measured none (a third party's, unless it declares one)
DEFAULT_SPEED = Speed(on_policy=500.0, off_policy=100.0, episode_s=1.0)


def declared_speed(domain: str) -> Speed | None:
    """The ``speed = Speed(...)`` the class of registered domain ``domain`` declares in its own body,
    read from source without importing the domain; None where there is none to read (an unknown or
    broken domain, a figure that is not a literal, or one the class inherits)."""
    from fieldrl.domains import BrokenDomainError, entry_point

    try:
        entry = entry_point(domain)
    except (KeyError, BrokenDomainError):
        return None
    module, _, attr = entry.value.partition(":")
    attr = attr.split("[")[0].strip()  # "module:DOMAIN [extra]"
    try:
        found = _instance_class(module.strip(), attr)
        return None if found is None else _speed_in(found)
    except (OSError, SyntaxError, ValueError, TypeError):
        return None


def _source(module: str) -> tuple[ast.Module, bool] | None:
    """``(syntax tree, is a package)`` of ``module``, found without importing it or its parent
    packages (a domain's package imports the domain)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    for i in range(len(rest)):
        locations = None if spec is None else spec.submodule_search_locations
        if locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(".".join([top, *rest[: i + 1]]), list(locations))
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return ast.parse(Path(spec.origin).read_bytes(), spec.origin), spec.origin.endswith("__init__.py")


def _instance_class(module: str, attr: str) -> ast.ClassDef | None:
    """The class of ``module.attr = SomeDomain()`` (an entry point's object)."""
    found = _source(module)
    if found is None:
        return None
    for node in found[0].body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            return _class(module, node.value.func.id, *found)
    return None


def _class(module: str, name: str, tree: ast.Module, package: bool, depth: int = 0) -> ast.ClassDef | None:
    """Class ``name`` as ``module`` sees it: defined there, or imported with ``from ... import``."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and depth < 10:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = absolute_module(module, package, node.module, node.level)
                    imported = _source(source)
                    return None if imported is None else _class(source, alias.name, *imported, depth + 1)
    return None


def _speed_in(cls: ast.ClassDef) -> Speed | None:
    """``speed = Speed(...)`` (or ``speed: Speed = Speed(...)``) in the class body, of literal numbers."""
    for node in cls.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and target.id == "speed" and isinstance(value, ast.Call)):
            continue
        if not (isinstance(value.func, ast.Name) and value.func.id == "Speed"):
            return None
        args = [ast.literal_eval(a) for a in value.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in value.keywords if k.arg is not None}
        return Speed(*args, **kwargs)
    return None
