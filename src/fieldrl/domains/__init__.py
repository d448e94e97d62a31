"""Domain registry: the ``fieldrl.domains`` entry-point group, name -> Domain.

Every domain, fieldrl's own and a third party's, is found the same way: an entry point in the
``fieldrl.domains`` group of its package's metadata, e.g. in ``pyproject.toml``::

    [project.entry-points."fieldrl.domains"]
    rail = "fieldrl.domains.rail:DOMAIN [rail]"

The bracketed extra names the optional dependencies the domain needs. They are checked from the
package metadata before the domain is imported, so a missing simulator is reported in one line
("pip install 'fieldrl[rail]'") instead of an ImportError from deep inside a run. Nothing is
registered by importing a module, and one domain's heavy dependencies (Flatland, SUMO, cvxpy)
never load for another.

A broken third-party package never breaks the others: a domain whose module is missing or does not
parse, whose import fails, whose entry point is not a Domain, or whose name two packages register
is refused in one line naming the package (:class:`BrokenDomainError`), only where it is used.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import traceback
from importlib import metadata
from pathlib import Path

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError

#: the entry-point group domains are registered in
ENTRY_POINT_GROUP = "fieldrl.domains"


class DomainUnavailableError(FieldrlError):
    """A registered domain that cannot be used here.

    :param advice: what is wrong and what to do, in words that follow the domain's name (a scenario's
        ``domain`` field is refused with them).
    """

    def __init__(self, domain: str, advice: str):
        self.domain, self.advice = domain, advice
        super().__init__(f"domain {domain!r}: {advice}")


class MissingExtraError(DomainUnavailableError):
    """A domain whose optional dependencies (its package extra) are not installed."""

    def __init__(self, domain: str, extras: list[str], missing: list[str], package: str):
        self.extras, self.missing = extras, missing
        install = " ".join(f"'{package}[{extra}]'" for extra in extras)
        super().__init__(
            domain, f"needs packages that are not installed ({', '.join(missing)}): pip install {install}"
        )


class BrokenDomainError(DomainUnavailableError):
    """A registered domain whose package is broken, or whose name two packages claim.

    :param packages: the package(s) registering it, named in ``advice``.
    """

    def __init__(self, domain: str, packages: list[str], advice: str):
        self.packages = packages
        super().__init__(domain, advice)


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def package_of(entry: metadata.EntryPoint) -> str:
    """The distribution that registers ``entry`` (its top-level module where metadata has no name)."""
    return entry.dist.name if entry.dist is not None else entry.module.partition(".")[0]


@functools.cache
def _entry_points() -> dict[str, tuple[metadata.EntryPoint, ...]]:
    """Name -> the entry points registering it, one per distribution, in discovery order.

    One distribution found twice on ``sys.path`` (an editable install and a leftover copy) counts
    once, as ``importlib.metadata`` imports it once; two distributions make a clash.
    """
    found: dict[str, list[metadata.EntryPoint]] = {}
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        same = found.setdefault(entry.name, [])
        if all(_normalized(package_of(e)) != _normalized(package_of(entry)) for e in same):
            same.append(entry)
    return {name: tuple(entries) for name, entries in found.items()}


def domain_names() -> list[str]:
    """Names of every registered domain, installed extras or not, broken or not."""
    return sorted(_entry_points())


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def clash(name: str) -> BrokenDomainError | None:
    """The refusal of domain ``name`` when more than one package registers it, else None."""
    entries = _entry_points()[name]
    if len(entries) == 1:
        return None
    packages = [package_of(e) for e in entries]
    listed = ", ".join(packages[:-1]) + " and " + packages[-1]
    which = "one" if len(packages) == 2 else "all but one"
    return BrokenDomainError(
        name, packages, f"registered by {len(packages)} packages, {listed}: uninstall {which} of them"
    )


def entry_point(name: str) -> metadata.EntryPoint:
    """The entry point that registers domain ``name`` (KeyError if none does).

    :raises BrokenDomainError: more than one package registers ``name``.
    """
    problem = clash(name)
    if problem is not None:
        raise problem
    return _entry_points()[name][0]


def missing_requirements(name: str) -> list[str]:
    """Distributions that domain ``name``'s extra requires and that are not installed ([] if none).

    Read from the package metadata (``Requires-Dist: flatland-rl; extra == "rail"``), so nothing of
    the domain is imported.
    """
    entry = _entry_points()[name][0]
    if not entry.extras or entry.dist is None:
        return []
    missing = []
    for requirement in entry.dist.requires or []:
        requirement_part, _, marker = requirement.partition(";")
        extra = _EXTRA_MARKER.search(marker)
        if extra is None or extra.group(1) not in entry.extras:
            continue
        match = _NAME.match(requirement_part)
        if match and not _installed(match.group(1)) and match.group(1) not in missing:
            missing.append(match.group(1))
    return missing


def missing_extra(name: str) -> MissingExtraError | None:
    """Why domain ``name`` cannot load here (its extra is not installed), or None if it can."""
    entry = _entry_points()[name][0]
    missing = missing_requirements(name)
    if not missing:
        return None
    package = entry.dist.name if entry.dist is not None else "fieldrl"
    return MissingExtraError(name, list(entry.extras), missing, package)


def unavailable(name: str) -> DomainUnavailableError | None:
    """Why domain ``name`` cannot be used here, as far as is known without importing it; None if
    nothing is known against it: a clash, a module that is missing or does not parse, a missing extra.

    Cheap (package metadata and one parse of the module's file), for ``fieldrl list``; an import
    that fails, or an object that is not a Domain, shows only in :func:`get_domain`.
    """
    try:
        module_docstring(name)  # also refuses a clash
    except BrokenDomainError as exc:
        return exc
    return missing_extra(name)


def module_docstring(name: str) -> str:
    """The docstring of the module domain ``name`` is registered in, read without importing it.

    :raises BrokenDomainError: the module cannot be found or does not parse.
    """
    entry = entry_point(name)
    try:
        spec = importlib.util.find_spec(entry.module)  # imports its parent packages, if any
        if spec is None:
            raise ModuleNotFoundError(f"No module named {entry.module!r}")
        if spec.origin is None or not spec.has_location or not spec.origin.endswith(".py"):
            return ""  # a namespace package or a compiled module: no source to read
        tree = ast.parse(Path(spec.origin).read_bytes(), spec.origin)
    except Exception as exc:
        raise _cannot_load(name, entry, exc) from exc
    return ast.get_docstring(tree) or ""


def _where(exc: BaseException) -> str:
    """`` at FILE:LINE`` of ``exc``: where a SyntaxError is, or the innermost frame outside the import
    machinery ("" if there is none)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" at {exc.filename}:{exc.lineno}"
    machinery = (str(Path(importlib.__file__).parent), __file__)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and not f.filename.startswith(machinery)
    ]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _cannot_load(name: str, entry: metadata.EntryPoint, exc: BaseException) -> BrokenDomainError:
    if isinstance(exc, SyntaxError):
        what = f"SyntaxError ({exc.msg})"
    else:
        what = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return _refused(name, entry, f"{entry.value} cannot be loaded: {what}{_where(exc)}")


def _refused(name: str, entry: metadata.EntryPoint, problem: str) -> BrokenDomainError:
    package = package_of(entry)
    return BrokenDomainError(name, [package], f"registered by package {package}, but {problem}")


def get_domain(name: str) -> Domain:
    """Return the domain registered as ``name``.

    :raises KeyError: no domain has that name.
    :raises MissingExtraError: its optional dependencies are not installed.
    :raises BrokenDomainError: two packages register ``name``, its module
        does not import, or its entry point is not a Domain named ``name``.
    """
    entry = entry_point(name)
    problem = missing_extra(name)
    if problem is not None:
        raise problem
    try:
        domain = entry.load()
    except Exception as exc:
        raise _cannot_load(name, entry, exc) from exc
    if not isinstance(domain, Domain):
        what = f"{type(domain).__module__}.{type(domain).__qualname__}"
        raise _refused(name, entry, f"{entry.value} is a {what}, not a fieldrl Domain")
    if getattr(domain, "name", None) != name:
        raise _refused(name, entry, f"{entry.value} is the domain named {getattr(domain, 'name', None)!r}")
    return domain


__all__ = [
    "ENTRY_POINT_GROUP",
    "BrokenDomainError",
    "Domain",
    "DomainUnavailableError",
    "MissingExtraError",
    "clash",
    "domain_names",
    "entry_point",
    "get_domain",
    "missing_extra",
    "missing_requirements",
    "module_docstring",
    "package_of",
    "unavailable",
]
