"""Names that become path components: policy names, variant keys and scenario names.

Every folder a run writes under (``models/<variant>/<policy>/seed-<n>``, ``checkpoints/...``,
``partial/...``, figures) is built from these names, so they are validated against one pattern
and turned into path components by :func:`slug`, which never yields ``.``, ``..`` or a separator.
The run folder checks every path again before it writes or deletes (``RunFolder.inside``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: letters, digits, space and ``_ . , + ( ) -``, starting with a letter or digit
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.,+()-]*$"
NAME_RULE = (
    f"letters, digits, space and _ . , + ( ) -, starting with a letter or digit (pattern {NAME_PATTERN})"
)
_NAME = re.compile(NAME_PATTERN)


def check_name(value: str) -> str:
    """Return ``value`` if it is a safe name; raise ``ValueError`` saying what is allowed otherwise."""
    if not _NAME.fullmatch(value):
        raise ValueError(f"not a usable name; allowed: {NAME_RULE}")
    return value


def slug(text: str) -> str:
    """The path component of a name: runs of other characters become ``-``; never ``.``/``..``/empty."""
    component = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    if not component:
        return "policy"
    return "_" + component if component.startswith(".") else component


def slug_clash(names: Iterable[str]) -> tuple[str, str] | None:
    """Two different names that share a folder (same slug, ignoring case), or None."""
    seen: dict[str, str] = {}
    for name in names:
        key = slug(name).casefold()
        if key in seen and seen[key] != name:
            return seen[key], name
        seen.setdefault(key, name)
    return None
