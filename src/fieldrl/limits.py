"""Limits on what a scenario file may make fieldrl hold in memory, checked before it is held.

A scenario is read with a YAML loader that refuses deep nesting and alias expansion beyond a
size ("billion laughs"), from a file of bounded size; every number in it must be finite. Counts
that size the run (seeds, episodes, jobs, bootstrap draws) have their own caps in
:mod:`fieldrl.scenario`. Each refusal is one :class:`~fieldrl.errors.ScenarioError`.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fieldrl.errors import MISSING, ScenarioError

#: largest scenario file read (built-in scenarios are a few kB)
MAX_SCENARIO_BYTES = 1 << 20
#: deepest nesting of lists and mappings, aliases expanded (scenarios need about 10)
MAX_DEPTH = 32
#: most YAML nodes once every alias is expanded (a few thousand in real scenarios)
MAX_NODES = 200_000
#: most held-out seeds and most training seeds a scenario may list or generate
MAX_EVAL_SEEDS = 100_000
MAX_TRAIN_SEEDS = 1_000
#: most variants, and most heuristic (or learned) policies, a scenario may list
MAX_VARIANTS = 1_000
MAX_POLICIES = 100
#: most evaluation episodes a run may hold: eval seeds x episodes x policy runs x variants
MAX_EVAL_EPISODES = 1_000_000
#: most training jobs: variants x learned policies x training seeds
MAX_TRAIN_JOBS = 10_000
#: most bootstrap draws of held-out seeds (bootstrap samples x eval seeds; 8 bytes each)
MAX_BOOTSTRAP_DRAWS = 200_000_000


class _Refused(Exception):
    def __init__(self, mark: Any, problem: str):
        super().__init__(problem)
        self.mark, self.problem = mark, problem


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a nesting limit while composing (before recursion can overflow)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark, f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _unique_keys(node: MappingNode) -> None:
    """PyYAML keeps the last of two equal keys without a word; a scenario refuses the second."""
    seen: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, ScalarNode) and key.value != "<<":
            if key.value in seen:
                raise _Refused(
                    key.start_mark, f"key {key.value!r} is given twice in one mapping; give it once"
                )
            seen.add(key.value)


def _expanded_size(root: Node) -> None:
    """Refuse a document whose aliases expand beyond ``MAX_NODES`` nodes or ``MAX_DEPTH`` levels.

    Aliases are shared, so composing is cheap; what would explode is everything that walks the
    data afterwards (validation, the snapshot written to the run folder). Sizes are memoised per
    node, so this walk is linear in the file.
    """
    sizes: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()

    def walk(node: Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            size, height = sizes[key]
        else:
            if key in open_nodes:
                raise _Refused(node.start_mark, "an alias refers to a node that contains it (recursive)")
            if depth > MAX_DEPTH:
                raise _Refused(
                    node.start_mark, f"nested more than {MAX_DEPTH} levels deep (aliases expanded)"
                )
            open_nodes.add(key)
            children: list[Node] = []
            if isinstance(node, SequenceNode):
                children = list(node.value)
            elif isinstance(node, MappingNode):
                children = [part for pair in node.value for part in pair]
                _unique_keys(node)
            size, height = 1, 0
            for child in children:
                child_size, child_height = walk(child, depth + 1)
                size, height = size + child_size, max(height, child_height + 1)
                if size > MAX_NODES:
                    raise _Refused(
                        node.start_mark,
                        f"expands to more than {MAX_NODES:,} values (aliases expanded); "
                        "use {start, count} for long seed lists",
                    )
            open_nodes.discard(key)
            sizes[key] = (size, height)
        if depth + height > MAX_DEPTH:
            raise _Refused(node.start_mark, f"nested more than {MAX_DEPTH} levels deep (aliases expanded)")
        return size, height

    walk(root, 0)


def load_yaml(text: str, source: str, max_chars: int = MAX_SCENARIO_BYTES) -> Any:
    """Parse YAML within the limits above; every problem is one ``ScenarioError``."""
    if len(text) > max_chars:
        raise ScenarioError(
            source, "", MISSING, f"file is {len(text):,} characters; the limit is {max_chars:,}"
        )
    loader = _LimitedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise ScenarioError(source, _where(exc.mark), MISSING, f"YAML refused: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(source, _where(mark), MISSING, f"YAML syntax error: {problem}") from None
    finally:
        loader.dispose()


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def non_finite(data: Any, path: str = "") -> tuple[str, float] | None:
    """``(field path, value)`` of the first NaN or infinite number in nested data, or None."""
    if isinstance(data, float) and not math.isfinite(data):
        return path, data
    if isinstance(data, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in data.items())
    elif isinstance(data, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    for where, value in items:
        found = non_finite(value, where)
        if found:
            return found
    return None


def check_finite(data: Any, source: str, prefix: str = "") -> None:
    """Refuse NaN and infinity anywhere in ``data``, naming the field."""
    found = non_finite(data, prefix)
    if found:
        field, value = found
        raise ScenarioError(
            source, field, value, "must be a finite number (NaN and infinity are not allowed)"
        )
