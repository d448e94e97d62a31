"""Where jobs run: in this process, in a local process pool, or as Ray tasks.

Every job is ``func(*args, events)``: a plain function of plain data that seeds itself
and writes only under its own run-folder paths, so the backend changes wall time, never
results. ``events`` carries progress tuples back to the caller; ``on_result`` hears about
each job as soon as it finishes (the caller records it, so an interrupted run can resume
without redoing it).

Ray: with no address a local Ray instance is started for the call (``num_cpus = jobs``);
with an address (``ray start --head`` printed it) the jobs run on that cluster. Workers
then read and write the run folder by its path, so on a multi-machine cluster the run
folder must be on storage every machine mounts at the same path (NFS or similar).
"""

from __future__ import annotations

import importlib.util
import os
import queue as queue_module
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.managers import SyncManager
from pathlib import Path
from typing import Any

from fieldrl.errors import FieldrlError, Terminated
from fieldrl.processes import die_with_parent

BACKENDS = ("local", "ray")

Event = tuple[Any, ...]


class _Inline:
    """Queue stand-in for in-process jobs: events go straight to the handler."""

    def __init__(self, handler: Callable[[Event], None]):
        self.handler = handler

    def put(self, event: Event) -> None:
        self.handler(event)


def execute(
    func: Callable[..., Any],
    calls: Iterable[tuple[Any, ...]],
    jobs: int,
    on_event: Callable[[Event], None],
    on_result: Callable[[int, Any], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> list[Any]:
    """Run ``func(*args, events)`` for each args tuple; results in input order.

    ``backend="local"``: ``jobs == 1`` runs in this process; more uses a spawn-based process
    pool (fork is unsafe once torch has started threads). ``backend="ray"``: Ray tasks.
    """
    calls = list(calls)
    notify = on_result or (lambda index, result: None)
    if backend == "ray":
        return _execute_ray(func, calls, jobs, on_event, notify, address)
    if backend != "local":
        raise FieldrlError(f"--backend = {backend!r}: allowed: {', '.join(BACKENDS)}")
    if jobs <= 1 or len(calls) <= 1:
        inline = _Inline(on_event)
        results = []
        for index, args in enumerate(calls):
            results.append(func(*args, inline))
            notify(index, results[-1])
        return results
    ctx = _ShieldedSpawnContext()  # spawn, not fork: fork is unsafe once torch has started threads
    pressed: list[int] = []
    # the manager's start-up must not be cut short either: note a Ctrl-C or SIGTERM, act on it after
    with _signals_deferred(pressed):
        manager = SyncManager(ctx=ctx)
        manager.start(_worker_init, (os.getpid(),))
    with manager:
        if pressed:
            raise Terminated if signal.SIGTERM in pressed else KeyboardInterrupt
        events = manager.Queue()
        pool = ProcessPoolExecutor(
            max_workers=min(jobs, len(calls)),
            mp_context=ctx,
            initializer=_worker_init,
            initargs=(os.getpid(),),
        )
        try:
            futures: dict[Future[Any], int] = {
                pool.submit(func, *args, events): i for i, args in enumerate(calls)
            }
            results: list[Any] = [None] * len(calls)
            pending = set(futures)
            while pending:
                _drain(events, on_event)
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[futures[fut]] = fut.result()
                    notify(futures[fut], results[futures[fut]])
            _drain(events, on_event)
        except BaseException:
            _stop_workers(pool)  # Ctrl-C or a failed job: don't wait for the others to finish
            raise
        pool.shutdown()
    return results


@contextmanager
def _sigint_handled_by(handler: Any) -> Iterator[None]:
    """SIGINT goes to ``handler`` inside the block.

    Only the main thread may change signal handling; elsewhere, and where SIGINT is already
    ignored (e.g. a run started in the background by a script), the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    ):
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _ShieldedSpawnProcess(SpawnProcess):
    """A spawned process that ignores Ctrl-C from its first instruction.

    Only an ignored SIGINT survives into an exec'd child (a blocked one does not: the child
    starts with an empty signal mask), and Python then leaves it ignored. Without this, a
    Ctrl-C that arrives while a worker is still importing kills it half-started: a traceback
    per worker and, on Python 3.11, a broken pool that can hang on exit. This process ignores
    Ctrl-C only for the milliseconds of the fork and exec, not while the child starts up.
    """

    def start(self) -> None:
        with _sigint_handled_by(signal.SIG_IGN):
            super().start()


class _ShieldedSpawnContext(SpawnContext):
    Process = _ShieldedSpawnProcess


@contextmanager
def _signals_deferred(pressed: list[int]) -> Iterator[None]:
    """Ctrl-C, and SIGTERM where fieldrl handles it (the CLI), are noted in ``pressed`` inside the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    note = lambda signum, frame: pressed.append(signum)  # noqa: E731
    previous_term = signal.getsignal(signal.SIGTERM)
    handles_term = callable(previous_term)  # a Python handler: the CLI turns SIGTERM into Terminated
    with _sigint_handled_by(note):
        if handles_term:
            signal.signal(signal.SIGTERM, note)
        try:
            yield
        finally:
            if handles_term:
                signal.signal(signal.SIGTERM, previous_term)


def _worker_init(parent_pid: int) -> None:
    """Workers (and the manager) leave Ctrl-C to the main process, which stops them (no traceback from
    each), and end as soon as the main process is gone (``kill -9`` included)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    # Python < 3.14 has no public way to terminate a pool's workers.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _drain(events: Any, on_event: Callable[[Event], None]) -> None:
    while True:
        try:
            on_event(events.get_nowait())
        except queue_module.Empty:
            return


# ----------------------------------------------------------------------------- Ray


def _ray_job(func: Callable[..., Any], args: tuple[Any, ...], events: Any) -> Any:
    import torch

    torch.set_num_threads(1)
    return func(*args, events)


def _execute_ray(
    func: Callable[..., Any],
    calls: list[tuple[Any, ...]],
    jobs: int,
    on_event: Callable[[Event], None],
    notify: Callable[[int, Any], None],
    address: str | None,
) -> list[Any]:
    try:
        import ray
        from ray.util.queue import Queue
    except ImportError:  # check_address refused this before anything was written
        raise FieldrlError(RAY_MISSING) from None
    started_here = not ray.is_initialized()
    saved_auth_mode = os.environ.get("RAY_AUTH_MODE")
    try:
        if started_here:
            _init_ray(ray, jobs, address)
        events = Queue()
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_job)
        refs = {remote.remote(func, args, events): i for i, args in enumerate(calls)}
        results: list[Any] = [None] * len(calls)
        pending = list(refs)
        try:
            while pending:
                _drain_ray(events, on_event)
                done, pending = ray.wait(pending, num_returns=1, timeout=0.2)
                for ref in done:
                    results[refs[ref]] = _ray_result(ray, ref)
                    notify(refs[ref], results[refs[ref]])
            _drain_ray(events, on_event)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results
    finally:
        if started_here:
            ray.shutdown()
            if os.environ.get("RAY_AUTH_MODE") != saved_auth_mode:
                _set_ray_auth_mode(saved_auth_mode)


class BackendUnavailable(FieldrlError):
    """The Ray cluster named by ``--address`` cannot be joined (raised before any job runs)."""


#: the HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS) answers with SETTINGS
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4


#: the one line a core install (no ``ray`` extra) answers ``--backend ray`` with
RAY_MISSING = "--backend = 'ray': Ray is not installed: pip install 'fieldrl[ray]'"


def check_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Fail fast, before anything is written, when Ray is missing or ``address`` cannot be a Ray cluster.

    Ray itself keeps retrying a dead address for minutes, and hangs on one that accepts TCP but
    does not speak its protocol. So: the address must read ``auto``, ``host:port`` or
    ``ray://host:port``; something must answer there within ``timeout_s``; and it must answer an
    HTTP/2 greeting as a gRPC server does (skipped where Ray uses TLS, ``RAY_USE_TLS=1``).
    """
    if importlib.util.find_spec("ray") is None:
        raise BackendUnavailable(RAY_MISSING)
    if address is None or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in host):
        raise BackendUnavailable(
            f"--address = {address!r}: not a Ray address; allowed: host:port (as 'ray start --head' "
            "prints it, e.g. 10.0.0.5:6379), ray://host:port or auto"
        )
    where = f"--address = {address!r}: cannot join a Ray cluster there"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            conn.sendall(_HTTP2_HELLO)
            reply = _read_at_most(conn, 9, timeout_s)
    except OSError as exc:
        raise BackendUnavailable(
            f"{where} (nothing answers: {exc.strerror or exc}); start one with "
            "'ray start --head --port PORT' or leave --address out for a local Ray instance"
        ) from None
    if len(reply) < 9 or reply[3] != _HTTP2_SETTINGS:
        raise BackendUnavailable(
            f"{where}: something answers but not as Ray does (no gRPC reply within {timeout_s:g} s); "
            "check the host and port 'ray start --head' printed"
        )


def _read_at_most(conn: socket.socket, n: int, timeout_s: float) -> bytes:
    """Up to ``n`` bytes from ``conn`` within ``timeout_s`` seconds in all (fewer if it closes or stalls)."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(n - len(data))
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _init_ray(ray: Any, jobs: int, address: str | None) -> None:
    """Start a local Ray instance, or join the cluster at ``address``.

    Ray 2.59+ starts local clusters (``ray start --head`` included) with token authentication and keeps
    the token in ``~/.ray/auth_token``, but a driver joining by address only sends it in token mode
    (the default for all clusters from Ray 2.61). Where a token is at hand the join uses token mode, as
    Ray's own local start does; a head without authentication accepts it too. The caller restores the
    mode when the session ends.
    """
    if address is None:
        # "local": a new instance of our own, even where `ray start` left a cluster running here
        ray.init(
            address="local",
            num_cpus=jobs,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        return
    check_address(address)
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode == "token" or (mode is None and _ray_token_at_hand()):
        _set_ray_auth_mode("token")  # also drops a token Ray cached earlier (another home's)
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError and its own kinds
        ray.shutdown()
        reason = " ".join(str(exc).split())[:200]
        raise BackendUnavailable(
            f"--address = {address!r}: cannot join a Ray cluster there ({reason})"
        ) from None


def _ray_token_at_hand() -> bool:
    """Whether Ray would find a token: ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or the default file."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def _set_ray_auth_mode(mode: str | None) -> None:
    """Set (``None``: unset) ``RAY_AUTH_MODE`` for this process and its children.

    Ray reads the variable into a cached config when it is imported, and the token into a cached
    loader when it first sends one; refreshing both is what Ray's own ``_enable_token_auth`` and
    ``ensure_token_if_auth_enabled`` do (private APIs: without them only child processes would see the
    change, and a token read from another home, by an earlier local run, would still be sent).
    """
    if mode is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = mode
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # pragma: no cover - a Ray without the cached config
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _ray_result(ray: Any, ref: Any) -> Any:
    """``ray.get``, raising a job's own error (e.g. a FieldrlError) rather than Ray's wrapper."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise


def _drain_ray(events: Any, on_event: Callable[[Event], None]) -> None:
    from ray.util.queue import Empty

    while True:
        try:
            on_event(events.get_nowait())
        except Empty:
            return


@dataclass(frozen=True)
class Backend:
    """Where jobs run: ``jobs`` local worker processes, or Ray (``address`` of a cluster, or a
    local Ray instance with ``jobs`` CPUs when None). Ray's availability and the address are
    checked when it is made, before anything is written."""

    jobs: int = 1
    name: str = "local"
    address: str | None = None

    def __post_init__(self) -> None:
        if self.name == "ray":
            check_address(self.address)

    def execute(self, func: Any, calls: list[Any], progress: Any, on_result: Any) -> list[Any]:
        return execute(func, calls, self.jobs, progress, on_result, self.name, self.address)
