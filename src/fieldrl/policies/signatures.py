"""What each learned-policy algorithm accepts, read from its installed source without importing it.

``fieldrl validate`` answers in about a second because it never imports torch or
Stable-Baselines3. The constructor arguments of each algorithm of the table
(:mod:`~fieldrl.policies.algorithms`), what a scenario may write for each and the defaults the
budget checks read come from the class's own source file, parsed with :mod:`ast`: the file is
found with :mod:`importlib`'s finders (which import nothing), the class is followed through
re-exports (``from stable_baselines3.ppo import PPO``) and, where it defines no ``__init__`` or
passes ``**kwargs`` on, through its first base class. So an upgrade of SB3 that adds or renames an
argument changes what a scenario may write, with nothing to copy by hand;
``tests/test_fast_validate.py`` compares what is read here with the live classes.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fieldrl.policies.algorithms import BY_NAME, FINE_TUNABLE, IMITABLE, NAMES, PULLABLE

__all__ = [
    "FINE_TUNABLE",
    "IMITABLE",
    "PULLABLE",
    "RESERVED",
    "SIGNATURES",
    "SIGNATURE_DEFAULT_KEYS",
    "AlgorithmSignature",
    "AlgorithmSourceError",
    "algorithm_parameters",
    "parameter_kind",
]

#: constructor arguments fieldrl sets itself (a scenario may not)
RESERVED = frozenset({"env", "policy", "seed", "tensorboard_log", "verbose", "device", "_init_setup_model"})

#: the defaults the budget checks read
SIGNATURE_DEFAULT_KEYS = (
    "n_steps",
    "learning_starts",
    "train_freq",
    "gradient_steps",
    "target_update_interval",
    "buffer_size",
)


class AlgorithmSourceError(RuntimeError):
    """An algorithm's class cannot be found or read in its installed source (a broken install)."""


@dataclass(frozen=True)
class AlgorithmSignature:
    """One algorithm: on- or off-policy, its settable constructor arguments, and some defaults.

    :param kinds: what a scenario may write for each argument: ``int``, ``float``, ``bool``,
        ``mapping``, ``class`` (a class cannot be named in YAML: only null), ``auto|float`` ("auto",
        "auto_<x>" or a number), ``train_freq`` (n, or [n, "step"|"episode"]), ``noise`` (fieldrl's
        {type, sigma}) and ``floats`` (a list of numbers); a trailing ``?`` also allows null. A
        schedule (a callable, where SB3 takes ``float | Schedule``) cannot be written in YAML
        either: those take a number.
    """

    kind: Literal["on", "off"]
    parameters: tuple[str, ...]
    defaults: dict[str, Any]
    kinds: dict[str, str] = field(default_factory=dict)


#: (text in a constructor annotation, the kind it allows), first match wins; a ``None`` in the
#: annotation adds ``?``. ``tests/test_input_bounds.py`` reads the live annotations the same way.
_ANNOTATION_KINDS = (
    ("Sequence[float]", "floats"),
    ("tuple[int, str]", "train_freq"),
    ("str | float", "auto|float"),
    ("type[", "class"),
    ("dict[", "mapping"),
    ("ActionNoise", "noise"),
    ("bool", "bool"),
    ("float", "float"),
    ("int", "int"),
)


@dataclass(frozen=True)
class _Parameter:
    name: str
    annotation: str | None
    default: ast.expr | None


def _module_file(module: str) -> Path:
    """The source file of ``module``, found without importing it or its parent packages.

    ``importlib.util.find_spec("a.b")`` imports ``a``, and ``stable_baselines3/__init__.py`` imports
    torch: so only the top-level name goes through ``find_spec``, and each submodule is looked up by
    the path finder in its parent's folder.
    """
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    for i in range(len(rest)):
        locations = None if spec is None else spec.submodule_search_locations
        if locations is None:
            spec = None
            break
        spec = importlib.machinery.PathFinder.find_spec(".".join([top, *rest[: i + 1]]), list(locations))
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise AlgorithmSourceError(f"cannot find the Python source of module {module} (is it installed?)")
    return Path(spec.origin)


@functools.cache
def _parsed(module: str) -> tuple[ast.Module, bool]:
    """``(syntax tree, is a package)`` of ``module``'s source."""
    path = _module_file(module)
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), path.name == "__init__.py"


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those inside ``if`` and ``try`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try):
            for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", []))):
                yield from _statements(block)


def absolute_module(module: str, package: bool, target: str | None, level: int) -> str:
    """The module a ``from <level dots><target> import`` in ``module`` names."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _find_class(module: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef]:
    """``(module that defines it, its definition)`` of class ``name`` as seen from ``module``."""
    if depth > 20:
        raise AlgorithmSourceError(f"cannot follow {name} from {module}: imports go round in a circle")
    tree, package = _parsed(module)
    statements = list(_statements(tree.body))
    for node in statements:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = absolute_module(module, package, node.module, node.level)
                    return _find_class(source, alias.name, depth + 1)
    raise AlgorithmSourceError(f"cannot find class {name} in the source of {module}")


def _base(module: str, cls: ast.ClassDef) -> tuple[str, ast.ClassDef]:
    """The first base class of ``cls`` (defined in ``module``)."""
    if not cls.bases:
        raise AlgorithmSourceError(f"{module}.{cls.name} has no __init__ and no base class to take one from")
    base = cls.bases[0]
    if isinstance(base, ast.Name):
        return _find_class(module, base.id)
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):  # module alias: sb3.PPO
        tree, _ = _parsed(module)
        for node in _statements(tree.body):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name) == base.value.id:
                        return _find_class(alias.name, base.attr)
    raise AlgorithmSourceError(f"cannot follow base class {ast.unparse(base)} of {module}.{cls.name}")


def _own_parameters(init: ast.FunctionDef) -> list[_Parameter]:
    """Named parameters of ``__init__`` (not ``self``, ``*args`` or ``**kwargs``), in order."""
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    return [
        _Parameter(a.arg, None if a.annotation is None else ast.unparse(a.annotation), d)
        for a, d in pairs
        if a.arg != "self"
    ]


def _constructor(module: str, cls: ast.ClassDef) -> list[_Parameter]:
    """Parameters of ``cls``'s constructor as ``inspect.signature`` shows them: its own ``__init__``;
    none: its base's; one that passes ``**kwargs`` on: its base's, then its own that the base lacks."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return _constructor(*_base(module, cls))
    own = _own_parameters(init)
    if init.args.kwarg is None:
        return own
    inherited = _constructor(*_base(module, cls))
    known = {p.name for p in inherited}
    return [*inherited, *(p for p in own if p.name not in known)]


def _kind(algorithm: str, parameter: _Parameter) -> str:
    """What a scenario may write for ``parameter`` (see :class:`AlgorithmSignature`)."""
    text = parameter.annotation
    if text is None:  # no annotation: the default's type says it
        default = _literal(parameter.default)
        if isinstance(default, tuple | list) and all(isinstance(x, int | float) for x in default):
            return "floats"
        for kind in (bool, int, float):
            if isinstance(default, kind):
                return kind.__name__
    else:
        for marker, kind in _ANNOTATION_KINDS:
            if marker in text:
                return kind + ("?" if "None" in text else "")
    raise AlgorithmSourceError(
        f"cannot tell what a scenario may write for {parameter.name} of {algorithm} "
        f"(annotation {text}): give the constructor a plain annotation (int, float, bool, dict[...], ...)"
    )


_NO_LITERAL = object()


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return _NO_LITERAL
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return _NO_LITERAL


@functools.cache
def signature(algorithm: str) -> AlgorithmSignature:
    """What ``algorithm`` (a name of the table) accepts, read from its class's source.

    :raises KeyError: ``algorithm`` is not in the table.
    :raises AlgorithmSourceError: its class or a base cannot be found or read.
    """
    row = BY_NAME[algorithm]
    parameters = [p for p in _constructor(*_find_class(row.module, row.class_name)) if p.name not in RESERVED]
    defaults = {}
    for p in parameters:
        value = _literal(p.default)
        if p.name in SIGNATURE_DEFAULT_KEYS and value is not _NO_LITERAL:
            defaults[p.name] = value
    return AlgorithmSignature(
        row.policy,
        tuple(p.name for p in parameters),
        defaults,
        kinds={p.name: _kind(algorithm, p) for p in parameters},
    )


class _Signatures(Mapping[str, AlgorithmSignature]):
    """Registry name -> signature, each read on first use (same keys as ``registry.ALGORITHMS``)."""

    def __getitem__(self, algorithm: str) -> AlgorithmSignature:
        return signature(algorithm)

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


#: registry name -> signature (same keys as ``fieldrl.policies.registry.ALGORITHMS``)
SIGNATURES: Mapping[str, AlgorithmSignature] = _Signatures()


def parameter_kind(algorithm: str, parameter: str) -> str:
    """What a scenario may write for ``parameter`` of ``algorithm`` (see :class:`AlgorithmSignature`)."""
    return signature(algorithm).kinds[parameter]


def algorithm_parameters(algorithm: str) -> list[str]:
    """Constructor arguments a scenario may set for ``algorithm``."""
    return list(signature(algorithm).parameters)


@functools.cache
def whole_number_parameters() -> frozenset[str]:
    """Arguments that take a whole number (or ``train_freq``) in some algorithm of the table."""
    return frozenset(
        name
        for algorithm in NAMES
        for name, kind in signature(algorithm).kinds.items()
        if kind.rstrip("?") in ("int", "train_freq")
    )
