"""Where SUMO lives and how fieldrl talks to it (libsumo in-process, or TraCI over a socket).

``SUMO_HOME`` is taken from the ``eclipse-sumo`` PyPI package before ``libsumo``/``traci`` are
imported, so the tools (``netgenerate``, ``tlsCycleAdaptation.py``) and the simulator always come
from the same install. libsumo runs one simulation per process; :func:`start` enforces that with a
clear error instead of SUMO's own crash.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import sumo as _sumo_pkg

SUMO_HOME = Path(_sumo_pkg.SUMO_HOME)
os.environ.setdefault("SUMO_HOME", str(SUMO_HOME))
BIN = SUMO_HOME / "bin"
TOOLS = SUMO_HOME / "tools"

#: the env whose simulation libsumo runs (a weak reference: an env dropped unclosed frees the slot)
_libsumo_owner: weakref.ref[Any] | None = None
_labels = itertools.count()


def _owner() -> object | None:
    return None if _libsumo_owner is None else _libsumo_owner()


def binary(name: str) -> str:
    """Path of a SUMO executable (``sumo``, ``sumo-gui``, ``netgenerate``, ...)."""
    path = BIN / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is the eclipse-sumo package installed?")
    return str(path)


def tool(name: str) -> str:
    return str(TOOLS / name)


def python_tool_cmd(name: str) -> list[str]:
    return [sys.executable, tool(name)]


def start(cmd: list[str], owner: object, use_traci: bool) -> Any:
    """Start a simulation and return its handle (the ``libsumo`` module or a TraCI connection).

    :param cmd: SUMO command line without the binary name.
    :param owner: the object that will ``close`` this simulation (the libsumo slot is per process).
    :param use_traci: TraCI over a socket (several per process, GUI possible) instead of libsumo.
    """
    global _libsumo_owner
    if use_traci:
        import traci

        label = f"fieldrl-{os.getpid()}-{next(_labels)}"
        traci.start([binary("sumo"), *cmd], label=label)
        return traci.getConnection(label)
    holder = _owner()
    if holder is not None and holder is not owner:
        raise RuntimeError(
            "libsumo runs one simulation per process and another traffic env holds it; "
            "close that env, use one env per process (subprocess vector envs) or set traci: true"
        )
    import libsumo

    if _libsumo_owner is not None:  # this owner's last simulation, or one of an env dropped unclosed
        _release(libsumo)
    libsumo.start([binary("sumo"), *cmd])
    _libsumo_owner = weakref.ref(owner)
    return libsumo


def libsumo_in_use() -> bool:
    """Whether an env of this process holds the libsumo simulation now."""
    return _owner() is not None


def _release(libsumo: Any) -> None:
    """Close libsumo's simulation and free the slot, even if SUMO fails while closing."""
    global _libsumo_owner
    try:
        libsumo.close()
    except Exception:  # a simulation that raised mid-step may refuse to close cleanly; it is gone anyway
        pass
    finally:
        _libsumo_owner = None


def close(handle: Any, owner: object) -> None:
    """Close the simulation ``owner`` started (no-op when it has none)."""
    if handle is None:
        return
    if getattr(handle, "__name__", "") == "libsumo":
        if _owner() is owner:
            _release(handle)
        return
    with contextlib.suppress(Exception):  # a TraCI connection whose SUMO died: nothing left to close
        handle.close()
