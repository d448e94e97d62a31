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
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError

#: the entry-point group domains are registered in
ENTRY_POINT_GROUP = "fieldrl.domains"


class MissingExtraError(FieldrlError):
    """A domain whose optional dependencies (its package extra) are not installed."""

    def __init__(self, domain: str, extras: list[str], missing: list[str], package: str):
        self.domain, self.extras, self.missing = domain, extras, missing
        install = " ".join(f"'{package}[{extra}]'" for extra in extras)
        #: what to do, in words that follow the domain's name
        self.advice = f"needs packages that are not installed ({', '.join(missing)}): pip install {install}"
        super().__init__(f"domain {domain!r} {self.advice}")


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def domain_names() -> list[str]:
    """Names of every registered domain, installed extras or not."""
    return sorted(_entry_points())


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_requirements(name: str) -> list[str]:
    """Distributions that domain ``name``'s extra requires and that are not installed ([] if none).

    Read from the package metadata (``Requires-Dist: flatland-rl; extra == "rail"``), so nothing of
    the domain is imported.
    """
    entry = _entry_points()[name]
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


def entry_point(name: str) -> metadata.EntryPoint:
    """The entry point that registers domain ``name`` (KeyError if none does)."""
    return _entry_points()[name]


def missing_extra(name: str) -> MissingExtraError | None:
    """Why domain ``name`` cannot load here (its extra is not installed), or None if it can."""
    entry = _entry_points()[name]
    missing = missing_requirements(name)
    if not missing:
        return None
    package = entry.dist.name if entry.dist is not None else "fieldrl"
    return MissingExtraError(name, list(entry.extras), missing, package)


def get_domain(name: str) -> Domain:
    """Return the domain registered as ``name``.

    :raises KeyError: no domain has that name.
    :raises MissingExtraError: its optional dependencies are not installed.
    """
    entry = _entry_points()[name]
    problem = missing_extra(name)
    if problem is not None:
        raise problem
    domain = entry.load()
    if not isinstance(domain, Domain) or domain.name != name:
        raise TypeError(f"entry point {entry.value!r} ({ENTRY_POINT_GROUP}) is not a Domain named {name!r}")
    return domain


__all__ = [
    "ENTRY_POINT_GROUP",
    "Domain",
    "MissingExtraError",
    "domain_names",
    "entry_point",
    "get_domain",
    "missing_extra",
    "missing_requirements",
]
