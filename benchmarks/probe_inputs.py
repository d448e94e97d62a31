"""Probe how the ``fieldrl`` command line handles bad input, tampering and interruption.

The project's standard: a wrong scenario file, parameter or CLI argument ends with one message
naming the field, the bad value and what is allowed, exit status 2, no traceback, and nothing
(no folder, no partial file) left behind; nothing from a run folder is unpickled; names from a
scenario never lead out of the run folder; run-folder files edited after the run are refused.

Each case runs one ``fieldrl`` command in a subprocess (its own session, a timeout and a memory
watchdog, the process group killed on either) inside a temporary folder, and records the exit
status, whether the output holds a traceback, its non-empty lines, whether the message names the
field or the bad value (the mutated key or value appears in it), whether a failed command left
files behind (watched folders are compared before and after), whether a planted pickle ran (its
payload would create a marker file), the wall time and an outcome class:

``clear-error``     exit 2, one line, no traceback, nothing left behind
``accepted``        exit 0 (``reasonable`` says whether that is right for the input)
``traceback``       a Python traceback in the output
``hang``            killed at the timeout (or above the memory limit)
``left-output``     failed, and a folder or file was left behind or changed
``pickle-executed`` a planted pickle's payload ran
``interrupted-clean``  (interruption cases) the documented exit status, no traceback, no survivors
``other``           anything else (another exit status, several lines, surviving processes)

Categories: ``baseline`` (the real runs the other cases need), ``scenario`` (one field of a built-in
scenario mutated), ``scenario-files`` (files a scenario refers to: missing, malformed, hostile),
``yaml`` (attacks on the YAML reader), ``cli`` (arguments), ``tamper`` (a finished run folder edited)
and ``interrupt`` (SIGTERM and kill -9 during a run, then ``--resume``).

Run from the checkout (about 20 minutes on 2 cores; commands run one at a time)::

    .venv/bin/python benchmarks/probe_inputs.py [--out-dir benchmarks/results] [--only CATEGORY[,...]]

Writes ``probe_inputs.csv`` (one row per case) and ``probe_inputs.md`` (outcomes by category, then
every case that is not a clear error or a reasonable acceptance, with its command and output).
Progress goes to stderr. Temporary folders are removed at the end (``--keep-temp`` keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import datetime as dt
import fcntl
import hashlib
import json
import math
import os
import pickle
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "src" / "fieldrl" / "scenarios"
FIELDRL = Path(sys.executable).with_name("fieldrl")
if not FIELDRL.exists():  # pragma: no cover - run with another interpreter
    FIELDRL = ROOT / ".venv" / "bin" / "fieldrl"

CATEGORIES = ("baseline", "scenario", "scenario-files", "yaml", "cli", "tamper", "interrupt")
#: categories whose cases need real runs (the baseline runs, training, interruption): minutes each;
#: ``tests/test_probe_inputs.py`` marks them ``probe_slow`` (not run by default)
SLOW_CATEGORIES = ("baseline", "tamper", "interrupt")
OUTCOMES = (
    "clear-error",
    "accepted",
    "traceback",
    "hang",
    "left-output",
    "pickle-executed",
    "interrupted-clean",
    "other",
)
COLUMNS = (
    "id",
    "category",
    "what",
    "setup",
    "command",
    "expect",
    "exit",
    "traceback",
    "lines",
    "names_field",
    "names_value",
    "left_behind",
    "pickle_marker",
    "wall_s",
    "outcome",
    "reasonable",
    "note",
    "output_head",
)
MEMORY_LIMIT = 6 << 30  # bytes of RSS summed over the command's session before it is killed
RUN_TIMEOUT = 300.0  # seconds for commands that train (a quick chemo run takes 25-70 s)
MAX_MUTATION_RUNS = 6  # full runs of mutated scenarios that validated
FAST_DOMAINS = ("chemo", "memory", "wealth")  # quick runs of well under a minute

#: the domains' built-in scenarios probed (a quick one where the domain has one)
DOMAINS: dict[str, dict[str, Any]] = {
    "chemo": {"scenario": "chemo/quick", "float": "obs_noise", "bad": ("preset", "s9")},
    "memory": {"scenario": "memory/cue", "float": "noise", "bad": ("delay", -1)},
    "wealth": {"scenario": "wealth/single-goal", "float": "W0", "bad": ("T", 0)},
    "rail": {"scenario": "rail/quick", "float": "wait_cost", "bad": ("level", 9)},
    "traffic": {"scenario": "traffic/quick", "float": "arm_m", "bad": ("decision_s", 0)},
    "taxiway": {"scenario": "taxiway/quick", "float": "movements_per_hour", "bad": ("density", "extreme")},
    "uav": {"scenario": "uav/quick", "float": "load", "bad": ("n_uavs", 0)},
}
OFF_POLICY = ("sac", "td3", "ddpg", "dqn", "tqc", "lstm-td3")
#: mutations probed on every domain (its own parameters, heuristics, KPIs and learners' budgets);
#: the others exercise shared code and are probed on chemo only
DOMAIN_SPECIFIC = (
    "param-inf",
    "param-bad",
    "param-unknown",
    "heuristic-unknown",
    "kpi-unknown",
    "learning-starts",
    "n-steps-over-budget",
)


# ------------------------------------------------------------------------------------------ processes
@dataclass
class Exec:
    rc: int
    stdout: str
    stderr: str
    wall: float
    killed: str = ""  # "timeout" or "memory" when the probe killed it
    survivors: list[str] = dc_field(default_factory=list)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.strip()]


def _proc_stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def session_members(sid: int) -> list[int]:
    """Live processes of session ``sid`` (every command runs in a session of its own)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _proc_stat(entry.name)
            if fields and int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120]


def session_rss(sid: int) -> int:
    total = 0
    for pid in session_members(sid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The probe's environment without terminal sizes (output as in a pipe or CI log)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(extra or {})
    return env


def start(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Any, Any]:
    out = tempfile.TemporaryFile()  # noqa: SIM115 - closed by finish()
    err = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        start_new_session=True,
        env=env or child_env(),
    )
    return proc, out, err


def finish(proc: subprocess.Popen, out: Any, err: Any, t0: float, timeout: float) -> Exec:
    """Wait for ``proc`` (killing its group at the timeout or memory limit); collect its output."""
    killed = ""
    last_rss = 0.0
    while True:
        try:
            rc = proc.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now - t0 > timeout:
            killed = f"timeout after {timeout:g} s"
        elif now - last_rss > 1.0:
            last_rss = now
            rss = session_rss(proc.pid)
            if rss > MEMORY_LIMIT:
                killed = f"memory above {MEMORY_LIMIT >> 30} GiB"
        if killed:
            _killpg(proc.pid)
            rc = proc.wait()
            break
    wall = time.monotonic() - t0
    survivors = reap_session(proc.pid)
    texts = []
    for handle in (out, err):
        handle.seek(0)
        texts.append(handle.read().decode("utf-8", "replace"))
        handle.close()
    return Exec(rc, texts[0], texts[1], wall, killed, survivors)


def reap_session(sid: int, grace: float = 2.0) -> list[str]:
    """Processes of session ``sid`` still alive ``grace`` seconds after its leader ended (then killed)."""
    deadline = time.monotonic() + grace
    members = session_members(sid)
    while members and time.monotonic() < deadline:
        time.sleep(0.2)
        members = session_members(sid)
    described = [f"{pid}: {_cmdline(pid)}" for pid in members]
    if members:
        _killpg(sid)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return described


def run_command(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> Exec:
    t0 = time.monotonic()
    proc, out, err = start(cmd, cwd, env)
    return finish(proc, out, err, t0, timeout)


# ------------------------------------------------------------------------------------------ snapshots
def snapshot(roots: list[Path]) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``roots`` (symbolic links not followed): kind, size and content digest.

    Contents, not modification times: a file rewritten with the same bytes is not a change."""
    entries: dict[str, tuple[str, int, str]] = {}
    for root in roots:
        if not os.path.lexists(root):
            continue
        stack = [root]
        while stack:
            path = stack.pop()
            try:
                st = path.lstat()
            except OSError:
                continue
            if path.is_symlink():
                entries[str(path)] = ("link", 0, os.readlink(path))
            elif path.is_dir():
                entries[str(path)] = ("dir", 0, "")
                with contextlib.suppress(OSError):
                    stack.extend(path.iterdir())
            else:
                digest = str(st.st_mtime_ns)
                if stat.S_ISREG(st.st_mode) and st.st_size <= 64 << 20:
                    with contextlib.suppress(OSError):
                        digest = sha256(path)
                entries[str(path)] = ("file", st.st_size, digest)
    return entries


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What appeared, disappeared or changed; an existing lock file being rewritten is not counted."""
    found = []
    for path, entry in after.items():
        if path not in before:
            found.append(f"+{path}")
        elif before[path] != entry and not (path.endswith("/.fieldrl.lock") or entry[0] == "dir"):
            found.append(f"~{path}")
    found += [f"-{path}" for path in before if path not in after]
    return sorted(found)


# ------------------------------------------------------------------------------------------ payloads
class Boom:
    """A pickle whose loading runs ``touch MARKER``: if the marker appears, a pickle was executed."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def boom_bytes(marker: Path) -> bytes:
    return pickle.dumps(Boom(marker), protocol=2)


def billion_laughs_yaml(levels: int = 9) -> str:
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"lol{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


def xml_bomb(root: str = "net") -> str:
    entities = ['<!ENTITY lol0 "lol">']
    for i in range(1, 10):
        entities.append(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">')
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE {root} [\n{chr(10).join(entities)}\n]>\n<{root}>&lol9;</{root}>\n'
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rehash(run: Path, rel: str) -> None:
    """Write the manifest entry of ``rel`` as if fieldrl had written the file (an attacker can)."""
    manifest = json.loads((run / "manifest.json").read_text())
    target = run / rel
    manifest["files"][rel] = {"sha256": sha256(target), "bytes": target.stat().st_size}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def unrecord(run: Path, prefix: str) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith(prefix)}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


# ------------------------------------------------------------------------------------------ scenario edits
def tokens(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        if name:
            out.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            out.append(int(index))
            rest = rest.lstrip("[")
    return out


def set_path(data: Any, path: str, value: Any) -> None:
    keys = tokens(path)
    node = data
    for key, nxt in zip(keys, keys[1:], strict=False):
        if isinstance(key, str) and key not in node:
            node[key] = [] if isinstance(nxt, int) else {}
        node = node[key]
    node[keys[-1]] = value


def del_path(data: Any, path: str) -> None:
    keys = tokens(path)
    node = data
    for key in keys[:-1]:
        node = node[key]
    del node[keys[-1]]


def fill(data: Any, folder: str) -> Any:
    """``{here}`` in every string of ``data`` replaced by ``folder`` (absolute paths beside the YAML)."""
    if isinstance(data, str):
        return data.replace("{here}", folder)
    if isinstance(data, dict):
        return {k: fill(v, folder) for k, v in data.items()}
    if isinstance(data, list):
        return [fill(v, folder) for v in data]
    return data


def label(entry: dict[str, Any]) -> str:
    return entry.get("name") or (entry.get("use") or entry["algorithm"].upper())


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


@dataclass
class Mutation:
    key: str
    what: str
    apply: Callable[[dict[str, Any]], None]
    field: tuple[str, ...] = ()
    value: tuple[str, ...] = ()
    expect: str = "error"  # "error", "ok" or "either" (valid but odd)
    try_run: bool = False  # run it if it validates (fast domains only, up to MAX_MUTATION_RUNS)
    files: dict[str, Callable[[Path], bytes | str]] = dc_field(default_factory=dict)  # beside the YAML
    links: dict[str, str] = dc_field(default_factory=dict)  # name -> target, beside the YAML
    timeout: float | None = None


def setter(path: str, value: Any, drop_tuned: bool = False) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        if drop_tuned:  # a tuned file's values would override the mutated hyperparameter
            entry = data
            for key in tokens(path)[:3]:
                entry = entry[key]
            entry.pop("tuned", None)
        set_path(data, path, value)

    return apply


def env_file_setter(name: str) -> Callable[[dict[str, Any]], None]:
    """``params.env_file = name``, and the scenario's stress section dropped: an env file fixes the
    network, trains and breakdowns, which rail/quick's stress axes would move (refused, rightly)."""

    def apply(data: dict[str, Any]) -> None:
        set_path(data, "params.env_file", name)
        data.pop("stress", None)

    return apply


def variants_setter(name: str) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        data.setdefault("variants", {})[name] = {}

    return apply


def net_arch_zero(index: int) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        entry = data["policies"]["learned"][index]
        entry.pop("tuned", None)
        entry.setdefault("hyperparameters", {}).setdefault("policy_kwargs", {})["net_arch"] = [0]

    return apply


def deleter(path: str) -> Callable[[dict[str, Any]], None]:
    return lambda data: del_path(data, path)


def numbers(value: int) -> tuple[str, ...]:
    return (str(value), f"{value:,}", f"{value:_}")


def domain_mutations(domain: str, data: dict[str, Any]) -> list[Mutation]:
    """Mutations applied to every domain's built-in scenario."""
    info = DOMAINS[domain]
    learned = data["policies"]["learned"]
    first = label(learned[0])
    bad_key, bad_value = info["bad"]
    muts = [
        Mutation(
            "param-inf",
            f"params.{info['float']} = .inf",
            setter(f"params.{info['float']}", math.inf),
            (info["float"],),
            ("inf",),
        ),
        Mutation(
            "param-bad",
            f"params.{bad_key} = {bad_value!r}",
            setter(f"params.{bad_key}", bad_value),
            (bad_key,),
            (str(bad_value),),
        ),
        Mutation(
            "param-unknown",
            "params.no_such_param = 1 (unknown key)",
            setter("params.no_such_param", 1),
            ("no_such_param",),
        ),
        Mutation(
            "heuristic-unknown",
            "policies.heuristics[0].use = no-such-rule",
            setter("policies.heuristics[0].use", "no-such-rule"),
            ("use",),
            ("no-such-rule",),
        ),
        Mutation(
            "algorithm-unknown",
            "policies.learned[0].algorithm = ppo2000",
            setter("policies.learned[0].algorithm", "ppo2000"),
            ("algorithm",),
            ("ppo2000",),
        ),
        Mutation(
            "name-dotdot",
            "policies.heuristics[0].name = '..'",
            setter("policies.heuristics[0].name", ".."),
            ("name",),
            ("'..'", '".."'),
        ),
        Mutation(
            "gamma-7.5",
            "policies.learned[0].hyperparameters.gamma = 7.5",
            setter("policies.learned[0].hyperparameters.gamma", 7.5, drop_tuned=True),
            ("gamma",),
            ("7.5",),
        ),
        Mutation(
            "net-arch-0",
            "policies.learned[0].hyperparameters.policy_kwargs.net_arch = [0]",
            net_arch_zero(0),
            ("net_arch",),
            ("[0]",),
        ),
        Mutation(
            "kpi-unknown",
            "report.primary_kpi = no_such_kpi",
            setter("report.primary_kpi", "no_such_kpi"),
            ("primary_kpi",),
            ("no_such_kpi",),
        ),
    ]
    off = [i for i, e in enumerate(learned) if e["algorithm"] in OFF_POLICY]
    if off:
        i = off[0]
        steps = int(learned[i]["train_steps"])
        muts.append(
            Mutation(
                "learning-starts",
                f"policies.learned[{i}].hyperparameters.learning_starts = {steps} (= train_steps, "
                f"{learned[i]['algorithm']})",
                setter(f"policies.learned[{i}].hyperparameters.learning_starts", steps, drop_tuned=True),
                ("learning_starts",),
                numbers(steps),
            )
        )
    else:
        steps = int(learned[0]["train_steps"])
        n = steps if int(learned[0].get("n_envs", 8)) > 1 else steps + 1
        muts.append(
            Mutation(
                "n-steps-over-budget",
                f"policies.learned[0].hyperparameters.n_steps = {n} (first rollout longer than "
                f"train_steps {steps}; on-policy {learned[0]['algorithm']})",
                setter("policies.learned[0].hyperparameters.n_steps", n, drop_tuned=True),
                ("n_steps",),
                numbers(n),
            )
        )
    if data.get("report", {}).get("comparisons") or domain == "chemo":
        muts.append(
            Mutation(
                "compare-self",
                f"report.comparisons = [{{policy: {first}, baseline: {first}}}]",
                setter("report.comparisons", [{"policy": first, "baseline": first}]),
                ("comparisons", "baseline", "policy"),
                (first,),
            )
        )
    return muts


def chemo_extra_mutations(data: dict[str, Any]) -> list[Mutation]:
    """Scenario-level mutations (shared code): on chemo/quick only."""
    learned = data["policies"]["learned"]
    first = label(learned[0])
    off = next(i for i, e in enumerate(learned) if e["algorithm"] in OFF_POLICY)
    eval_start = data["seeds"]["eval"]["start"]
    return [
        Mutation(
            "wrong-type",
            "episodes_per_seed = 'many'",
            setter("episodes_per_seed", "many"),
            ("episodes_per_seed",),
            ("many",),
        ),
        Mutation(
            "negative-count",
            "seeds.eval.count = -5",
            setter("seeds.eval.count", -5),
            ("count", "seeds.eval"),
            ("-5",),
        ),
        Mutation(
            "nan-lr",
            "policies.learned[0].hyperparameters.learning_rate = .nan",
            setter("policies.learned[0].hyperparameters.learning_rate", math.nan),
            ("learning_rate",),
            ("nan",),
        ),
        Mutation("unknown-key", "top-level colour: blue", setter("colour", "blue"), ("colour",), ("blue",)),
        Mutation(
            "empty-policies",
            "policies = {heuristics: [], learned: []}",
            setter("policies", {"heuristics": [], "learned": []}),
            ("policies", "heuristics", "learned"),
        ),
        Mutation(
            "name-slash",
            "policies.learned[0].name = 'a/b'",
            setter("policies.learned[0].name", "a/b"),
            ("name",),
            ("a/b",),
        ),
        Mutation("variant-dotdot", "variants = {'..': {}}", variants_setter(".."), ("variant",), ("..",)),
        Mutation(
            "scenario-name-escape",
            "name = '../../escape'",
            setter("name", "../../escape"),
            ("name",),
            ("../../escape",),
        ),
        Mutation(
            "eval-seeds-1e9",
            "seeds.eval = {start: 0, count: 10**9}",
            setter("seeds.eval", {"start": 0, "count": 10**9}),
            ("eval", "count"),
            numbers(10**9),
        ),
        Mutation(
            "train-seeds-1e9",
            "seeds.train = {start: 0, count: 10**9}",
            setter("seeds.train", {"start": 0, "count": 10**9}),
            ("train", "count"),
            numbers(10**9),
        ),
        Mutation(
            "seeds-overlap",
            f"seeds.train = [{eval_start}] (also a held-out seed)",
            setter("seeds.train", [eval_start]),
            ("train", "eval"),
            (str(eval_start),),
        ),
        Mutation(
            "eval-seeds-duplicate",
            f"seeds.eval = [{eval_start}, {eval_start}, {eval_start}, {eval_start + 1}] (repeated seed)",
            setter("seeds.eval", [eval_start, eval_start, eval_start, eval_start + 1]),
            ("eval",),
            (str(eval_start),),
            try_run=True,
        ),
        Mutation(
            "hyperparameter-unknown",
            "policies.learned[0].hyperparameters.no_such_hp = 1",
            setter("policies.learned[0].hyperparameters.no_such_hp", 1),
            ("no_such_hp",),
        ),
        Mutation(
            "buffer-1e12",
            f"policies.learned[{off}].hyperparameters.buffer_size = 10**12",
            setter(f"policies.learned[{off}].hyperparameters.buffer_size", 10**12),
            ("buffer_size",),
            numbers(10**12),
        ),
        Mutation(
            "bool-as-string",
            "policies.learned[0].normalize_reward = 'yes'",
            setter("policies.learned[0].normalize_reward", "yes"),
            ("normalize_reward",),
            ("yes",),
        ),
        Mutation(
            "heuristic-setting-bad",
            "policies.heuristics[1].settings.dose = -1 (constant dose)",
            setter("policies.heuristics[1].settings.dose", -1),
            ("dose",),
            ("-1",),
        ),
        Mutation(
            "imitate-unknown",
            "policies.learned[0].imitate = {heuristic: no such rule}",
            setter("policies.learned[0].imitate", {"heuristic": "no such rule"}),
            ("imitate", "heuristic"),
            ("no such rule",),
        ),
        Mutation(
            "episodes-overflow",
            "episodes_per_seed = 10000 (x 30 seeds x 7 policies > 1,000,000 episodes)",
            setter("episodes_per_seed", 10_000),
            ("episodes_per_seed", "episodes"),
            numbers(10_000),
        ),
        Mutation(
            "cnn-policy",
            "policies.learned[0].policy = CnnPolicy (vector observations)",
            setter("policies.learned[0].policy", "CnnPolicy"),
            ("policy",),
            ("CnnPolicy",),
            try_run=True,
        ),
        Mutation(
            "max-t-1",
            "params.max_t = 1 (one-step episodes; valid but odd)",
            setter("params.max_t", 1),
            ("max_t",),
            ("1",),
            expect="either",
            try_run=True,
        ),
        Mutation(
            "learned-only",
            "policies.heuristics = [] (learned policies only; valid)",
            setter("policies.heuristics", []),
            expect="ok",
            try_run=True,
        ),
        Mutation(
            "self-compare-name",
            f"policies.heuristics[0].name = {first} (same label as a learned policy)",
            setter("policies.heuristics[0].name", first),
            ("name", "unique"),
            (first,),
        ),
    ]


def file_mutations() -> list[tuple[str, Mutation]]:
    """Files a scenario refers to: (domain, mutation)."""

    def text(value: str) -> Callable[[Path], str]:
        return lambda _case: value

    def pickled(case: Path) -> bytes:
        return boom_bytes(case / "MARKER")

    return [
        (
            "chemo",
            Mutation(
                "cohort-missing",
                "params.cohort_file = missing.csv (no such file)",
                setter("params.cohort_file", "missing.csv"),
                ("cohort_file",),
                ("missing.csv",),
            ),
        ),
        (
            "chemo",
            Mutation(
                "cohort-columns",
                "params.cohort_file = bad.csv with unknown columns (r1,zz)",
                setter("params.cohort_file", "bad.csv"),
                ("cohort_file", "bad.csv"),
                ("zz",),
                files={"bad.csv": text("r1,zz\n1.0,2.0\n1.1,2.0\n1.2,2.0\n1.3,2.0\n")},
            ),
        ),
        (
            "chemo",
            Mutation(
                "cohort-nan",
                "params.cohort_file = nan.csv with a NaN value",
                setter("params.cohort_file", "nan.csv"),
                ("cohort_file", "nan.csv"),
                ("nan",),
                files={"nan.csv": text("r1\n1.0\nnan\n1.2\n1.3\n")},
            ),
        ),
        (
            "chemo",
            Mutation(
                "cohort-dev-zero",
                "params.cohort_file = zero.csv, a symbolic link to /dev/zero",
                setter("params.cohort_file", "zero.csv"),
                ("cohort_file", "zero.csv"),
                links={"zero.csv": "/dev/zero"},
            ),
        ),
        (
            "taxiway",
            Mutation(
                "layout-missing",
                "params.layout_file = missing.yaml",
                setter("params.layout_file", "missing.yaml"),
                ("layout_file",),
                ("missing.yaml",),
            ),
        ),
        (
            "taxiway",
            Mutation(
                "layout-garbage",
                "params.layout_file = bad.yaml containing 'nodes: 5'",
                setter("params.layout_file", "bad.yaml"),
                ("layout_file",),
                ("bad.yaml",),
                files={"bad.yaml": text("nodes: 5\nedges: hello\n")},
            ),
        ),
        (
            "taxiway",
            Mutation(
                "layout-alias-bomb",
                "params.layout_file = bomb.yaml (billion-laughs aliases)",
                setter("params.layout_file", "bomb.yaml"),
                ("layout_file",),
                ("bomb.yaml",),
                files={"bomb.yaml": text(billion_laughs_yaml())},
            ),
        ),
        (
            "taxiway",
            Mutation(
                "layout-binary",
                "params.layout_file = bin.json with random bytes",
                setter("params.layout_file", "bin.json"),
                ("layout_file",),
                ("bin.json",),
                files={"bin.json": lambda _case: os.urandom(4096)},
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-missing",
                "params.net_file = missing.net.xml",
                setter("params.net_file", "missing.net.xml"),
                ("net_file",),
                ("missing.net.xml",),
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-malformed",
                "params.net_file = <absolute path>/bad.net.xml (unclosed XML)",
                setter("params.net_file", "{here}/bad.net.xml"),
                ("net_file",),
                ("bad.net.xml",),
                files={"bad.net.xml": text('<?xml version="1.0"?>\n<net version="1.9"><edge id="a">\n')},
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-xml-bomb",
                "params.net_file = <absolute path>/bomb.net.xml (XML entity expansion bomb)",
                setter("params.net_file", "{here}/bomb.net.xml"),
                ("net_file",),
                ("bomb.net.xml",),
                files={"bomb.net.xml": text(xml_bomb())},
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-wrong-root",
                "params.net_file = <absolute path>/routes.net.xml whose root is <routes>",
                setter("params.net_file", "{here}/routes.net.xml"),
                ("net_file",),
                ("routes.net.xml",),
                files={"routes.net.xml": text('<?xml version="1.0"?>\n<routes></routes>\n')},
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-empty",
                "params.net_file = <absolute path>/empty.net.xml: just <net/> (well-formed, no network)",
                setter("params.net_file", "{here}/empty.net.xml"),
                ("net_file",),
                ("empty.net.xml",),
                files={"empty.net.xml": text('<?xml version="1.0"?>\n<net version="1.20"/>\n')},
            ),
        ),
        (
            "traffic",
            Mutation(
                "net-relative-valid",
                "params.net_file = single.net.xml, sumo-rl's single-intersection network copied beside the "
                "scenario, named relative to it (as cohort_file and layout_file are)",
                setter("params.net_file", "single.net.xml"),
                ("net_file",),
                ("single.net.xml",),
                expect="ok",
                files={"single.net.xml": lambda _case: sumo_rl_net().read_bytes()},
            ),
        ),
        (
            "traffic",
            Mutation(
                "route-missing",
                "params.route_file = missing.rou.xml",
                setter("params.route_file", "missing.rou.xml"),
                ("route_file",),
                ("missing.rou.xml",),
            ),
        ),
        (
            "rail",
            Mutation(
                "env-missing",
                "params.env_file = missing.pkl",
                setter("params.env_file", "missing.pkl"),
                ("env_file",),
                ("missing.pkl",),
            ),
        ),
        (
            "rail",
            Mutation(
                "env-pickle-payload",
                "params.env_file = <absolute path>/evil.pkl, a pickle whose loading would run `touch MARKER`",
                setter("params.env_file", "{here}/evil.pkl"),
                ("env_file",),
                ("evil.pkl",),
                files={"evil.pkl": pickled},
            ),
        ),
        (
            "rail",
            Mutation(
                "env-relative-valid",
                "params.env_file = level0.pkl, a Flatland level-0 environment saved with RailEnvPersister "
                "beside the scenario, named relative to it (as cohort_file and layout_file are); the "
                "stress section dropped (its axes move what an env file fixes)",
                env_file_setter("level0.pkl"),
                ("env_file",),
                ("level0.pkl",),
                expect="ok",
                files={"level0.pkl": flatland_env_bytes},
            ),
        ),
        (
            "rail",
            Mutation(
                "env-garbage",
                "params.env_file = <absolute path>/junk.pkl (random bytes)",
                setter("params.env_file", "{here}/junk.pkl"),
                ("env_file",),
                ("junk.pkl",),
                files={"junk.pkl": lambda _case: os.urandom(2048)},
            ),
        ),
        (
            "wealth",
            Mutation(
                "tuned-missing",
                "policies.learned[0].tuned = tuned/missing.yaml",
                setter("policies.learned[0].tuned", "tuned/missing.yaml"),
                ("tuned",),
                ("missing.yaml",),
            ),
        ),
        (
            "wealth",
            Mutation(
                "tuned-malformed",
                "policies.learned[0].tuned = tuned/bad.yaml holding a YAML list",
                setter("policies.learned[0].tuned", "tuned/bad.yaml"),
                ("tuned",),
                ("bad.yaml",),
                files={"tuned/bad.yaml": text("- just\n- a list\n")},
            ),
        ),
    ]


def sumo_rl_net() -> Path:
    """sumo-rl's single-intersection network (found without importing sumo-rl, which needs SUMO_HOME)."""
    import importlib.util

    spec = importlib.util.find_spec("sumo_rl")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sumo-rl is not installed")
    return (
        Path(next(iter(spec.submodule_search_locations)))
        / "nets/single-intersection/single-intersection.net.xml"
    )


def flatland_env_bytes(case: Path) -> bytes:
    """A genuine saved Flatland environment (level 0), written by Flatland's own persister."""
    target = case / "level0-source.pkl"
    code = (
        "import sys\n"
        "from fieldrl.domains.rail.levels import LEVELS, make_rail_env\n"
        "from flatland.envs.persistence import RailEnvPersister\n"
        "RailEnvPersister.save(make_rail_env(LEVELS[0], 0), sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(target)], check=True, capture_output=True, timeout=300)
    data = target.read_bytes()
    target.unlink()
    return data


# ------------------------------------------------------------------------------------------ cases
@dataclass
class Spec:
    """One command to run and what to check around it."""

    cmd: list[str]
    cwd: Path
    expect: str = "error"
    field: tuple[str, ...] = ()
    value: tuple[str, ...] = ()
    watch: list[Path] = dc_field(default_factory=list)  # must not change if the command fails
    must_not_exist: list[Path] = dc_field(default_factory=list)  # e.g. the --out folder of a failure
    marker: Path | None = None
    timeout: float = 120.0
    env: dict[str, str] | None = None
    setup: str = ""
    note: str = ""
    check: Callable[[Exec, dict[str, Any]], None] | None = None  # extra checks on the row
    followups: Callable[[Exec, dict[str, Any]], list[Case]] | None = None


@dataclass
class Case:
    cid: str
    category: str
    what: str
    make: Callable[[Path], Spec | dict[str, Any] | None]  # a Spec, or a finished row (custom flows)
    slow: bool = False  # needs a real run (a baseline fixture) although its category is quick
    try_run: bool = False  # a scenario mutation that is run for real when it validates

    @property
    def heavy(self) -> bool:
        """Whether the case itself needs real runs (minutes, not seconds); a scenario case's
        follow-up run of a validated mutation is not counted (``Probe.max_mutation_runs`` = 0 skips it)."""
        return self.slow or self.category in SLOW_CATEGORIES


class Probe:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.budget = args.budget
        self.timeout = args.timeout
        self.tmp = Path(tempfile.mkdtemp(prefix="probe_inputs-"))
        self.tmp.chmod(0o755)  # the read-only-folder case runs as another user when the probe is root
        self.rows: list[dict[str, Any]] = []
        self.mutation_runs = 0
        self.max_mutation_runs = MAX_MUTATION_RUNS  # 0: validated mutations are not run for real
        self.fixtures: dict[str, Path | None] = {}
        self.servers: list[socket.socket] = []
        self.started = time.monotonic()
        self.done = 0

    # -- bookkeeping ---------------------------------------------------------------------------
    def case_dir(self, cid: str) -> Path:
        path = self.tmp / "cases" / cid
        path.mkdir(parents=True, exist_ok=True)
        return path

    def shown(self, text: str) -> str:
        return text.replace(str(FIELDRL), "fieldrl").replace(str(self.tmp), "$TMP")

    def say(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed / 60:5.1f} min] {message}", file=sys.stderr, flush=True)

    def fieldrl(self, *args: str) -> list[str]:
        return [str(FIELDRL), *args]

    # -- running -------------------------------------------------------------------------------
    def run_case(self, case: Case) -> None:
        cdir = self.case_dir(case.cid)
        try:
            made = case.make(cdir)
        except Exception as exc:  # a probe set-up problem is recorded, not fatal
            made = self.row(case, note=f"probe set-up failed: {type(exc).__name__}: {exc}", outcome="other")
        if made is None:
            return
        row = made if isinstance(made, dict) else self.execute(case, made)
        self.rows.append(row)
        self.done += 1
        flag = "" if not problem(row) else "  <-- " + (row["note"][:80] or row["outcome"])
        self.say(
            f"{self.done:3d} {row['id']:<34} {row['category']:<14} {row['outcome']:<17} "
            f"exit {row['exit']:>4} {float(row['wall_s'] or 0):6.1f} s{flag}"
        )

    def row(self, case: Case, **values: Any) -> dict[str, Any]:
        row = dict.fromkeys(COLUMNS, "")
        row.update(id=case.cid, category=case.category, what=case.what)
        row.update(values)
        return row

    def execute(self, case: Case, spec: Spec) -> dict[str, Any]:
        roots = [spec.cwd, *spec.watch]
        before = snapshot(roots)
        existed = {p: os.path.lexists(p) for p in spec.must_not_exist}
        ex = run_command(spec.cmd, spec.cwd, spec.timeout, spec.env)
        after = snapshot(roots)
        marker_fired = bool(spec.marker and spec.marker.exists())
        left = [c for c in changes(before, after) if not (spec.marker and c.endswith(str(spec.marker)))]
        left += [
            f"+{p}" for p, was in existed.items() if not was and os.path.lexists(p) and f"+{p}" not in left
        ]
        left_text = "; ".join(self.shown(c) for c in left[:4]) + (
            f" (+{len(left) - 4} more)" if len(left) > 4 else ""
        )
        hay = ex.output.replace(str(spec.cwd), "CASE").lower()  # the case folder's name holds its id
        row = self.row(
            case,
            setup=spec.setup,
            command=self.shown(shlex.join(spec.cmd)),
            expect=spec.expect,
            exit=ex.rc,
            traceback="yes" if "Traceback" in ex.output else "no",
            lines=len(ex.lines),
            names_field=("yes" if any(h.lower() in hay for h in spec.field) else "no") if spec.field else "",
            names_value=("yes" if any(h.lower() in hay for h in spec.value) else "no") if spec.value else "",
            left_behind=left_text if ex.rc != 0 else "",
            pickle_marker=("FIRED" if marker_fired else "no") if spec.marker else "",
            wall_s=f"{ex.wall:.1f}",
            note=spec.note,
            output_head=self.shown(" | ".join(line.strip()[:300] for line in ex.lines[:6])),
        )
        notes = [spec.note] if spec.note else []
        if ex.killed:
            notes.append(f"killed: {ex.killed}")
        if ex.survivors:
            notes.append("processes survived 2 s after exit: " + "; ".join(ex.survivors[:3]))
        row["note"] = "; ".join(notes)
        row["outcome"] = classify(ex, bool(left) and ex.rc != 0, marker_fired)
        if row["outcome"] == "accepted":
            row["reasonable"] = {"ok": "yes", "either": "yes (odd input)"}.get(spec.expect, "no")
        if spec.check:
            spec.check(ex, row)
        if spec.followups:
            for follow in reversed(spec.followups(ex, row)):
                self.queue.appendleft(follow)
        return row

    def cases(self, category: str) -> list[Case]:
        """The cases of one category (nothing runs until a case's ``make``)."""
        return list(getattr(self, "cases_" + category.replace("-", "_"))())

    def run_all(self, categories: list[str]) -> None:
        self.queue: deque[Case] = deque()
        for category in categories:
            self.queue.extend(self.cases(category))
            while self.queue:
                self.run_case(self.queue.popleft())

    def run_one(self, case: Case) -> list[dict[str, Any]]:
        """Run one case and the follow-ups it queues; its rows (with any baseline runs it needed)."""
        first = len(self.rows)
        self.queue = deque([case])
        while self.queue:
            self.run_case(self.queue.popleft())
        return self.rows[first:]

    # -- fixtures: real runs that the tamper, CLI and interruption cases need -----------------------
    def fixture(self, name: str, scenario: str) -> Path | None:
        if name not in self.fixtures:
            out = self.tmp / "fixtures" / name
            out.parent.mkdir(parents=True, exist_ok=True)

            def make(cdir: Path) -> Spec:
                return Spec(
                    self.fieldrl("run", scenario, "--budget", self.budget, "--out", str(out), "--quiet"),
                    cdir,
                    expect="ok",
                    timeout=RUN_TIMEOUT,
                    setup=f"a real finished run of {scenario} (used by other cases)",
                )

            self.run_case(Case(f"B-{name}", "baseline", f"run {scenario} --budget {self.budget}", make))
            ok = self.rows[-1]["exit"] == 0 and (out / "report.pdf").is_file()
            self.fixtures[name] = out if ok else None
        return self.fixtures[name]

    def base(self) -> Path:
        path = self.fixture("chemo", "chemo/quick")
        if path is None:
            raise RuntimeError("the baseline run of chemo/quick failed")
        return path

    def copy_base(self, cdir: Path, name: str = "run") -> Path:
        target = cdir / name
        shutil.copytree(self.base(), target, symlinks=True)
        return target

    # -- category: baseline --------------------------------------------------------------------------
    def cases_baseline(self) -> Iterator[Case]:
        def chemo(_cdir: Path) -> None:
            self.base()

        def wealth(_cdir: Path) -> None:
            self.fixture("wealth", "wealth/single-goal")

        yield Case("baseline-chemo", "baseline", "", chemo)
        yield Case("baseline-wealth", "baseline", "", wealth)

    # -- category: scenario ----------------------------------------------------------------------------
    def scenario_case(self, domain: str, mut: Mutation, category: str) -> Case:
        scenario = DOMAINS[domain]["scenario"]
        cid = f"S-{domain}-{mut.key}" if category == "scenario" else f"F-{domain}-{mut.key}"

        def make(cdir: Path) -> Spec:
            folder = cdir / "scn"
            shutil.copytree(SCENARIOS / domain, folder)  # tuned/ files beside the YAML, as shipped
            name = scenario.split("/", 1)[1]
            data = yaml.safe_load((SCENARIOS / domain / f"{name}.yaml").read_text("utf-8"))
            mut.apply(data)
            data = fill(data, str(folder))
            for rel, content in mut.files.items():
                path = folder / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                produced = content(cdir)
                if isinstance(produced, str):
                    path.write_text(produced, "utf-8")
                else:
                    path.write_bytes(produced)
            for rel, target in mut.links.items():
                (folder / rel).symlink_to(target)
            path = folder / "mutated.yaml"
            path.write_text(dump(data), "utf-8")
            marker = cdir / "MARKER"
            setup = f"copy of {scenario} ({domain}/{name}.yaml) with {mut.what}"
            return Spec(
                self.fieldrl("validate", str(path), "--budget", self.budget),
                cdir,
                expect=mut.expect,
                field=mut.field,
                value=mut.value,
                marker=marker if "MARKER" in mut.what else None,
                timeout=mut.timeout or self.timeout,
                setup=setup,
                followups=self.run_followup(domain, mut, path, cid, setup, category),
            )

        return Case(
            cid, category, f"{scenario}: {mut.what}", make, try_run=mut.try_run and domain in FAST_DOMAINS
        )

    def run_followup(
        self, domain: str, mut: Mutation, path: Path, cid: str, setup: str, category: str
    ) -> Callable[[Exec, dict[str, Any]], list[Case]]:
        """If the mutated scenario validated: run it for real (a few, on fast domains)."""

        def follow(ex: Exec, _row: dict[str, Any]) -> list[Case]:
            wanted = mut.try_run or mut.expect == "error"
            if ex.rc != 0 or not wanted:
                return []

            def build(cdir: Path) -> Spec:
                return Spec(
                    self.fieldrl("validate", str(path), "--budget", self.budget, "--build"),
                    cdir,
                    expect=mut.expect,
                    field=mut.field,
                    value=mut.value,
                    watch=[path.parent],
                    timeout=self.timeout,
                    setup=setup + " (plain validate accepted it: validate --build)",
                )

            follows = []
            if mut.expect == "error":  # does the deeper check catch what plain validate let through?
                follows.append(Case(cid + "-build", category, f"validate --build of: {mut.what}", build))
            if domain not in FAST_DOMAINS or self.mutation_runs >= self.max_mutation_runs:
                return follows
            self.mutation_runs += 1

            def make(cdir: Path) -> Spec:
                out = cdir / "out"
                return Spec(
                    self.fieldrl("run", str(path), "--budget", self.budget, "--out", str(out)),
                    cdir,
                    expect=mut.expect,
                    field=mut.field,
                    value=mut.value,
                    watch=[path.parent],
                    must_not_exist=[out],
                    timeout=RUN_TIMEOUT,
                    setup=setup + " (it validated: run for real)",
                )

            return [*follows, Case(cid + "-run", category, f"run of: {mut.what}", make)]

        return follow

    def cases_scenario(self) -> Iterator[Case]:
        for domain, info in DOMAINS.items():
            name = info["scenario"].split("/", 1)[1]
            data = yaml.safe_load((SCENARIOS / domain / f"{name}.yaml").read_text("utf-8"))
            muts = domain_mutations(domain, data)
            if domain == "chemo":
                muts += chemo_extra_mutations(data)
            else:  # the shared checks are probed on chemo; here what each domain checks itself
                muts = [m for m in muts if m.key in DOMAIN_SPECIFIC]
            for mut in muts:
                yield self.scenario_case(domain, copy.deepcopy(mut), "scenario")

    def cases_scenario_files(self) -> Iterator[Case]:
        for domain, mut in file_mutations():
            yield self.scenario_case(domain, mut, "scenario-files")

    # -- category: yaml --------------------------------------------------------------------------------
    def cases_yaml(self) -> Iterator[Case]:
        base_text = (SCENARIOS / "chemo" / "quick.yaml").read_text("utf-8")
        base_data = yaml.safe_load(base_text)

        def case(
            key: str,
            what: str,
            content: Callable[[Path], bytes | str | None],
            expect: str = "error",
            field_: tuple[str, ...] = (),
            value: tuple[str, ...] = (),
            timeout: float | None = None,
            target: str = "scenario.yaml",
        ) -> Case:
            def make(cdir: Path) -> Spec:
                path = cdir / target
                produced = content(cdir)
                if isinstance(produced, str):
                    path.write_text(produced, "utf-8")
                elif isinstance(produced, bytes):
                    path.write_bytes(produced)
                marker = cdir / "MARKER"
                return Spec(
                    self.fieldrl("validate", str(path), "--budget", self.budget),
                    cdir,
                    expect=expect,
                    field=field_,
                    value=value,
                    marker=marker,
                    timeout=timeout or self.timeout,
                    setup=f"{target}: {what}",
                )

            return Case(f"Y-{key}", "yaml", what, make)

        def fifo(cdir: Path) -> None:
            os.mkfifo(cdir / "fifo.yaml")

        def directory(cdir: Path) -> None:
            (cdir / "dir.yaml").mkdir()

        def devzero(cdir: Path) -> None:
            (cdir / "zero.yaml").symlink_to("/dev/zero")

        def big(_cdir: Path) -> str:
            return base_text + "\n# " + "x" * (50 << 20) + "\n"

        def bomb(_cdir: Path) -> str:
            return billion_laughs_yaml() + base_text

        def deep(_cdir: Path) -> str:
            return base_text + "\nextra: " + "[" * 1000 + "1" + "]" * 1000 + "\n"

        def tag_apply(cdir: Path) -> str:
            cmd = json.dumps(f"touch {cdir / 'MARKER'}")
            return base_text.replace("name: chemo-quick", f"name: !!python/object/apply:os.system [{cmd}]", 1)

        def tag_new(cdir: Path) -> str:
            argv = json.dumps(["touch", str(cdir / "MARKER")])
            return base_text + f"\nx: !!python/object/apply:subprocess.check_call [{argv}]\n"

        def non_utf8(_cdir: Path) -> bytes:
            return base_text.replace("name: chemo-quick", "name: chemo-\udcff", 1).encode(
                "utf-8", "surrogateescape"
            )

        def duplicate(_cdir: Path) -> str:
            return base_text + "\nepisodes_per_seed: 3\n"

        def huge_int(_cdir: Path) -> str:
            data = copy.deepcopy(base_data)
            data["policies"]["learned"][0]["train_steps"] = 10**400
            return dump(data)

        yield case(
            "alias-bomb",
            "billion laughs: 9 levels of 9 aliases (10^9 nodes) before a valid scenario",
            bomb,
            value=("alias", "200,000", "nodes"),
        )
        yield case(
            "50MB", "a valid scenario padded to 50 MB with a comment", big, value=("bytes", "1,048,576")
        )
        yield case("nesting-1000", "a value nested 1000 lists deep", deep, value=("nested", "32"))
        yield case(
            "python-apply-tag",
            "name: !!python/object/apply:os.system ['touch MARKER']",
            tag_apply,
            value=("python/object", "tag"),
        )
        yield case("non-utf8", "byte 0xFF inside the name", non_utf8, value=("utf-8", "utf8", "0xff"))
        yield case("empty", "an empty file", lambda _c: "", value=("empty", "mapping"))
        yield case("list", "a YAML list instead of a mapping", lambda _c: "- a\n- b\n", value=("mapping",))
        yield case(
            "two-documents",
            "two YAML documents (--- separator)",
            lambda _c: base_text + "\n---\nname: second\n",
            value=("document",),
        )
        yield case(
            "duplicate-key",
            "episodes_per_seed given twice (1 then 3): YAML forbids duplicate keys",
            duplicate,
            field_=("episodes_per_seed", "duplicate"),
        )
        yield case(
            "syntax-error",
            "an unclosed flow list",
            lambda _c: base_text + "\nextra: [1, 2\n",
            field_=("line",),
            value=("syntax",),
        )
        yield case("binary", "4 KiB of random bytes", lambda _c: os.urandom(4096))
        yield case("huge-int", "train_steps = 10**400", huge_int, field_=("train_steps",))
        yield case(
            "directory", "the scenario path is a folder", directory, target="dir.yaml", value=("dir.yaml",)
        )
        yield case(
            "fifo", "the scenario path is a named pipe nobody writes", fifo, target="fifo.yaml", timeout=30.0
        )
        yield case(
            "dev-zero", "the scenario path is a link to /dev/zero", devzero, target="zero.yaml", timeout=60.0
        )

    # -- category: cli ---------------------------------------------------------------------------------
    def server(self, mode: str) -> int:
        """A local TCP server that accepts and says nothing (``silent``) or answers HTTP (``http``)."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.servers.append(sock)
        held: list[socket.socket] = []

        def loop() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                if mode == "silent":
                    held.append(conn)  # open, never a byte
                    continue
                with contextlib.suppress(OSError):
                    conn.settimeout(2)
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request")
                conn.close()

        threading.Thread(target=loop, daemon=True).start()
        return sock.getsockname()[1]

    def cases_cli(self) -> Iterator[Case]:
        run = ("run", "chemo/quick", "--budget")

        def simple(
            key: str,
            what: str,
            args: Callable[[Path], list[str]],
            expect: str = "error",
            field_: tuple[str, ...] = (),
            value: tuple[str, ...] = (),
            out: bool = True,
            watch: Callable[[Path], list[Path]] | None = None,
            env: dict[str, str] | None = None,
            timeout: float | None = None,
            slow: bool = False,
        ) -> Case:
            def make(cdir: Path) -> Spec:
                argv = args(cdir)
                return Spec(
                    [str(FIELDRL), *argv] if argv[0] != "setpriv" else argv,
                    cdir,
                    expect=expect,
                    field=field_,
                    value=value,
                    must_not_exist=[cdir / "out"] if out else [],
                    watch=watch(cdir) if watch else [],
                    env=env,
                    timeout=timeout or self.timeout,
                    setup=what,
                )

            return Case(f"C-{key}", "cli", what, make, slow=slow)

        b = self.budget
        yield simple(
            "unknown-scenario",
            "validate an unknown built-in name",
            lambda c: ["validate", "chemo/nope"],
            field_=("scenario",),
            value=("chemo/nope",),
        )
        for jobs in ("0", "-1"):
            yield simple(
                f"jobs-{jobs}",
                f"run --jobs {jobs}",
                lambda c, j=jobs: [*run, b, "--jobs", j, "--out", str(c / "out")],
                field_=("--jobs",),
                value=(jobs,),
            )
        yield simple(
            "budget-nope",
            "run --budget nope",
            lambda c: [*run, "nope", "--out", str(c / "out")],
            field_=("--budget",),
            value=("nope",),
        )
        yield simple(
            "budget-undefined",
            "validate chemo/quick --budget medium (not defined by the scenario)",
            lambda c: ["validate", "chemo/quick", "--budget", "medium"],
            field_=("budget",),
            value=("medium",),
        )

        def out_file(c: Path) -> list[str]:
            (c / "taken").write_text("a file\n")
            return [*run, b, "--out", str(c / "taken")]

        def out_full(c: Path) -> list[str]:
            (c / "full").mkdir()
            (c / "full" / "keep.txt").write_text("precious\n")
            return [*run, b, "--out", str(c / "full")]

        yield simple("out-file", "run --out an existing file", out_file, field_=("--out",), value=("taken",))
        yield simple(
            "out-nonempty",
            "run --out an existing non-empty folder",
            out_full,
            field_=("--out",),
            value=("full",),
        )

        def read_only(c: Path) -> list[str]:
            c.chmod(0o755)
            (c / "ro").mkdir()
            (c / "ro").chmod(0o555)
            target = str(c / "ro" / "new")
            if os.geteuid() != 0:
                return [*run, b, "--out", target]
            home = c / "home"
            home.mkdir()
            home.chmod(0o777)
            return [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                str(FIELDRL),
                *run,
                b,
                "--out",
                target,
            ]

        yield simple(
            "out-read-only",
            "run --out a path under a read-only folder" + (" (as user nobody)" if os.geteuid() == 0 else ""),
            read_only,
            field_=("--out", "ro/new"),
            value=("permission", "read-only"),
            env=child_env({"HOME": str(self.tmp / "cases" / "C-out-read-only" / "home")})
            if os.geteuid() == 0
            else None,
            timeout=RUN_TIMEOUT,
        )
        yield simple(
            "ray-closed-port",
            "run --backend ray --address 127.0.0.1:1 (nothing listening)",
            lambda c: [*run, b, "--backend", "ray", "--address", "127.0.0.1:1", "--out", str(c / "out")],
            field_=("--address",),
            value=("127.0.0.1:1",),
            timeout=RUN_TIMEOUT,
        )
        yield simple(
            "ray-silent-port",
            "run --backend ray --address at a TCP server that accepts and sends nothing",
            lambda c: [
                *run,
                b,
                "--backend",
                "ray",
                "--address",
                f"127.0.0.1:{self.server('silent')}",
                "--out",
                str(c / "out"),
            ],
            field_=("--address",),
            value=("127.0.0.1",),
            timeout=RUN_TIMEOUT,
        )
        yield simple(
            "ray-http-port",
            "run --backend ray --address at a TCP server that answers HTTP 400",
            lambda c: [
                *run,
                b,
                "--backend",
                "ray",
                "--address",
                f"127.0.0.1:{self.server('http')}",
                "--out",
                str(c / "out"),
            ],
            field_=("--address",),
            value=("127.0.0.1",),
            timeout=RUN_TIMEOUT,
        )
        yield simple(
            "address-without-ray",
            "run --address 127.0.0.1:1 without --backend ray",
            lambda c: [*run, b, "--address", "127.0.0.1:1", "--out", str(c / "out")],
            field_=("--address",),
            value=("127.0.0.1:1",),
        )
        yield simple(
            "ray-garbage-address",
            "run --backend ray --address 'not an address'",
            lambda c: [*run, b, "--backend", "ray", "--address", "not an address", "--out", str(c / "out")],
            field_=("--address",),
            value=("not an address",),
            timeout=RUN_TIMEOUT,
        )

        def empty(c: Path) -> Path:
            (c / "empty").mkdir(exist_ok=True)
            return c / "empty"

        def junk(c: Path) -> Path:
            (c / "junk").mkdir(exist_ok=True)
            (c / "junk" / "scenario.yaml").write_text("name: x\n")
            (c / "junk" / "summary.json").write_text("{}\n")
            return c / "junk"

        def watch_empty(c: Path) -> list[Path]:
            return [c / "empty", c / "junk"]

        yield simple(
            "compare-domains",
            "compare runs of two domains (chemo and wealth)",
            lambda c: ["compare", str(self.base()), str(self.fixture("wealth", "wealth/single-goal"))],
            expect="ok",
            out=False,
            slow=True,  # needs the baseline run
        )
        yield simple(
            "compare-empty-dir",
            "compare a run with an empty folder",
            lambda c: ["compare", str(self.base()), str(empty(c))],
            value=("empty",),
            out=False,
            watch=watch_empty,
            slow=True,  # needs the baseline run
        )
        yield simple(
            "compare-junk-dir",
            "compare a folder with a scenario.yaml and summary.json not written by fieldrl",
            lambda c: ["compare", str(junk(c))],
            value=("junk", "manifest"),
            out=False,
            watch=watch_empty,
        )
        yield simple("compare-none", "compare with no folder", lambda c: ["compare"], out=False)
        for command in ("evaluate", "report"):
            yield simple(
                f"{command}-missing",
                f"{command} a folder that does not exist",
                lambda c, cmd=command: [cmd, str(c / "nope")],
                field_=("RUN_DIR",),
                value=("nope",),
                out=False,
            )
            yield simple(
                f"{command}-empty-dir",
                f"{command} an existing empty folder (not a run)",
                lambda c, cmd=command: [cmd, str(empty(c))],
                value=("empty",),
                out=False,
                watch=watch_empty,
            )
        yield simple(
            "resume-missing",
            "run --resume a folder that does not exist",
            lambda c: ["run", "--resume", str(c / "nope")],
            field_=("--resume", "RUN_DIR"),
            value=("nope",),
            out=False,
        )
        yield simple(
            "resume-empty-dir",
            "run --resume an existing empty folder",
            lambda c: ["run", "--resume", str(empty(c))],
            value=("empty",),
            out=False,
            watch=watch_empty,
        )

        def a_file(c: Path) -> list[str]:
            (c / "file.txt").write_text("not a folder\n")
            return ["run", "--resume", str(c / "file.txt")]

        def both(c: Path) -> list[str]:
            run_dir = self.copy_base(c)
            return ["run", "chemo/quick", "--resume", str(run_dir)]

        yield simple(
            "scenario-and-resume",
            "run SCENARIO --resume RUN_DIR (both given)",
            both,
            field_=("--resume", "scenario"),
            out=False,
            watch=lambda c: [c / "run"],
            slow=True,  # needs the baseline run
        )
        yield simple("run-nothing", "run without a scenario or --resume", lambda c: ["run"], out=False)

        def resume_budget(c: Path) -> list[str]:
            run_dir = self.copy_base(c)
            (run_dir / "report.pdf").unlink()  # unfinished: --resume has something to do
            unrecord(run_dir, "report.pdf")
            return ["run", "--resume", str(run_dir), "--budget", "full", "--jobs", "1"]

        yield simple(
            "resume-with-budget",
            "run --resume RUN_DIR --budget full (a budget the run was not made with)",
            resume_budget,
            field_=("--budget",),
            value=("full",),
            out=False,
            timeout=RUN_TIMEOUT,
            watch=lambda c: [c / "run"],
            slow=True,  # needs the baseline run
        )
        yield simple(
            "tune-trials-0",
            "tune chemo/quick --trials 0",
            lambda c: ["tune", "chemo/quick", "--trials", "0"],
            field_=("--trials",),
            value=("0",),
            out=False,
        )
        yield simple(
            "list-unknown-domain",
            "list nodomain",
            lambda c: ["list", "nodomain"],
            value=("nodomain",),
            out=False,
        )
        yield simple(
            "unknown-command",
            "fieldrl frobnicate",
            lambda c: ["frobnicate"],
            value=("frobnicate",),
            out=False,
        )

        def eval_jobs0(c: Path) -> list[str]:
            return ["evaluate", str(self.copy_base(c)), "--jobs", "0"]

        yield simple(
            "evaluate-jobs-0",
            "evaluate RUN_DIR --jobs 0",
            eval_jobs0,
            field_=("--jobs",),
            value=("0",),
            out=False,
            watch=lambda c: [c / "run"],
            slow=True,  # needs the baseline run
        )

    # -- category: tamper ------------------------------------------------------------------------------
    def cases_tamper(self) -> Iterator[Case]:
        def case(
            key: str,
            what: str,
            tamper: Callable[[Path, Path], None],
            command: Callable[[Path, Path], list[str]],
            expect: str = "error",
            field_: tuple[str, ...] = (),
            value: tuple[str, ...] = (),
            marker: bool = False,
            outside: bool = False,
            timeout: float | None = None,
            note: str = "",
        ) -> Case:
            def make(cdir: Path) -> Spec:
                run_dir = self.copy_base(cdir)
                tamper(run_dir, cdir)
                return Spec(
                    [str(FIELDRL), *command(run_dir, cdir)],
                    cdir,
                    expect=expect,
                    field=field_,
                    value=value,
                    watch=[cdir / "outside"] if outside else [],
                    marker=cdir / "MARKER" if marker else None,
                    timeout=timeout or self.timeout,
                    setup=f"copy of a finished chemo/quick run; {what}",
                    note=note,
                )

            return Case(f"T-{key}", "tamper", what, make)

        def report(r: Path, _c: Path) -> list[str]:
            return ["report", str(r)]

        def evaluate(r: Path, _c: Path) -> list[str]:
            return ["evaluate", str(r), "--quiet"]

        def evaluate_trust(r: Path, _c: Path) -> list[str]:
            return ["evaluate", str(r), "--trust", "--quiet"]

        def compare(r: Path, _c: Path) -> list[str]:
            return ["compare", str(r), str(self.base())]

        def resume(r: Path, _c: Path) -> list[str]:
            return ["run", "--resume", str(r)]

        def nothing(_r: Path, _c: Path) -> None:
            pass

        def truncate(rel: str) -> Callable[[Path, Path], None]:
            def apply(r: Path, _c: Path) -> None:
                data = (r / rel).read_bytes()
                (r / rel).write_bytes(data[: len(data) // 2])

            return apply

        def corrupt_json(r: Path, _c: Path) -> None:
            with open(r / "summary.json", "a") as fh:
                fh.write("}} not json\n")

        def corrupt_json_rehash(r: Path, c: Path) -> None:
            corrupt_json(r, c)
            rehash(r, "summary.json")

        def edit_results(r: Path, _c: Path) -> None:
            import pandas as pd

            frame = pd.read_parquet(r / "results.parquet")
            frame.loc[frame.index[0], "value"] = 12345.0
            frame.to_parquet(r / "results.parquet", index=False)

        def edit_results_rehash(r: Path, c: Path) -> None:
            edit_results(r, c)
            rehash(r, "results.parquet")

        ppo = "models/default/PPO/seed-0/policy.safetensors"
        sac = "models/default/SAC/seed-0/policy.safetensors"

        def weights_random(r: Path, _c: Path) -> None:
            (r / ppo).write_bytes(os.urandom((r / ppo).stat().st_size))

        def weights_pickle(r: Path, c: Path) -> None:
            (r / ppo).write_bytes(boom_bytes(c / "MARKER"))

        def weights_pickle_rehash(r: Path, c: Path) -> None:
            weights_pickle(r, c)
            rehash(r, ppo)

        def weights_torch_pickle_rehash(r: Path, c: Path) -> None:
            import torch

            torch.save({"policy": Boom(c / "MARKER")}, r / ppo)
            rehash(r, ppo)

        def weights_swapped(r: Path, _c: Path) -> None:
            shutil.copyfile(r / sac, r / ppo)
            rehash(r, ppo)

        def edit_scenario(r: Path, _c: Path) -> None:
            text = (r / "scenario.yaml").read_text()
            (r / "scenario.yaml").write_text(text.replace("episodes_per_seed: 1", "episodes_per_seed: 2", 1))

        def scenario_escape(r: Path, _c: Path) -> None:
            data = yaml.safe_load((r / "scenario.yaml").read_text())
            data["policies"]["learned"][0]["name"] = "../../../escaped"
            (r / "scenario.yaml").write_text(dump(data))
            rehash(r, "scenario.yaml")

        def scenario_tag(r: Path, c: Path) -> None:
            text = (r / "scenario.yaml").read_text()
            cmd = json.dumps(f"touch {c / 'MARKER'}")
            (r / "scenario.yaml").write_text(text + f"\nx: !!python/object/apply:os.system [{cmd}]\n")
            rehash(r, "scenario.yaml")

        def no_manifest(r: Path, _c: Path) -> None:
            (r / "manifest.json").unlink()

        def bad_manifest(r: Path, _c: Path) -> None:
            (r / "manifest.json").write_text("[1, 2, 3\n")

        def edit_run_json(r: Path, _c: Path) -> None:
            data = json.loads((r / "run.json").read_text())
            data["budget"] = "full"
            (r / "run.json").write_text(json.dumps(data))

        def edit_curve(r: Path, _c: Path) -> None:
            path = r / "models/default/PPO/seed-0/learning_curve.csv"
            path.write_text(path.read_text() + "999999,1e9\n")

        def figures_outside(r: Path, c: Path) -> None:
            (c / "outside").mkdir()
            shutil.rmtree(r / "figures")
            (r / "figures").symlink_to(c / "outside")

        def models_outside(r: Path, c: Path) -> None:
            shutil.copytree(r / "models", c / "outside")
            shutil.rmtree(r / "models")
            (r / "models").symlink_to(c / "outside")

        def results_outside(r: Path, c: Path) -> None:
            (c / "outside").mkdir()
            shutil.move(r / "results.parquet", c / "outside" / "results.parquet")
            (r / "results.parquet").symlink_to(c / "outside" / "results.parquet")

        def delete_results(r: Path, _c: Path) -> None:
            (r / "results.parquet").unlink()

        yield case("control-report", "no change (control)", nothing, report, expect="ok")
        yield case(
            "results-truncated-report",
            "results.parquet cut to half its size",
            truncate("results.parquet"),
            report,
            field_=("results.parquet",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "results-truncated-evaluate",
            "results.parquet cut to half its size; evaluate rebuilds it",
            truncate("results.parquet"),
            evaluate,
            expect="ok",
            timeout=RUN_TIMEOUT,
        )
        yield case(
            "summary-corrupt-report",
            "summary.json with garbage appended",
            corrupt_json,
            report,
            field_=("summary.json",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "summary-corrupt-compare",
            "summary.json with garbage appended",
            corrupt_json,
            compare,
            field_=("summary.json",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "summary-corrupt-rehashed-compare",
            "summary.json not JSON, manifest hash rewritten to match",
            corrupt_json_rehash,
            compare,
            field_=("summary.json",),
            value=("JSON",),
        )
        yield case(
            "results-edited-report",
            "one value of results.parquet changed (rewritten with pandas)",
            edit_results,
            report,
            field_=("results.parquet",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "results-edited-rehashed-report",
            "results.parquet value changed, manifest hash rewritten",
            edit_results_rehash,
            report,
            expect="either",
            note="by design the manifest detects accidents, not a forger who rewrites it",
        )
        yield case(
            "weights-random-evaluate",
            "PPO policy.safetensors replaced by random bytes",
            weights_random,
            evaluate,
            field_=("policy.safetensors",),
            value=("manifest", "SHA-256"),
        )
        yield case(
            "weights-pickle-rehashed-evaluate",
            "PPO policy.safetensors = pickle payload, manifest rewritten",
            weights_pickle_rehash,
            evaluate,
            field_=("policy.safetensors",),
            marker=True,
        )
        yield case(
            "weights-pickle-trust",
            "PPO policy.safetensors = pickle payload; evaluate --trust",
            weights_pickle,
            evaluate_trust,
            field_=("policy.safetensors",),
            marker=True,
        )
        yield case(
            "weights-torch-pickle-rehashed",
            "PPO policy.safetensors = torch.save() of a payload, manifest rewritten",
            weights_torch_pickle_rehash,
            evaluate,
            field_=("policy.safetensors",),
            marker=True,
        )
        yield case(
            "weights-swapped-rehashed",
            "PPO's weights file replaced by SAC's, manifest rewritten",
            weights_swapped,
            evaluate,
            field_=("policy.safetensors", "PPO"),
            value=("fit",),
        )
        yield case(
            "scenario-edited-report",
            "scenario.yaml edited (episodes_per_seed 1 -> 2)",
            edit_scenario,
            report,
            field_=("scenario.yaml",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "scenario-escape-evaluate",
            "scenario.yaml: learned policy renamed '../../../escaped', manifest rewritten",
            scenario_escape,
            evaluate,
            field_=("name",),
            value=("../../../escaped",),
            outside=True,
        )
        yield case(
            "scenario-python-tag-report",
            "scenario.yaml with a !!python/object/apply:os.system tag, manifest rewritten",
            scenario_tag,
            report,
            value=("python/object", "tag"),
            marker=True,
        )
        yield case(
            "manifest-deleted-report", "manifest.json deleted", no_manifest, report, field_=("manifest",)
        )
        yield case(
            "manifest-garbage-report", "manifest.json not JSON", bad_manifest, report, field_=("manifest",)
        )
        yield case(
            "run-json-edited-report",
            "run.json edited (budget -> full)",
            edit_run_json,
            report,
            field_=("run.json",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "traces-truncated-report",
            "traces.parquet cut to half",
            truncate("traces.parquet"),
            report,
            field_=("traces.parquet",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "curve-edited-report",
            "PPO learning_curve.csv with a row appended",
            edit_curve,
            report,
            field_=("learning_curve.csv",),
            value=("manifest", "SHA-256", "changed"),
        )
        yield case(
            "figures-symlink-out-report",
            "figures/ replaced by a symbolic link to a folder outside the run",
            figures_outside,
            report,
            field_=("figures",),
            value=("outside",),
            outside=True,
        )
        yield case(
            "models-symlink-out-evaluate",
            "models/ replaced by a symbolic link to a copy outside the run",
            models_outside,
            evaluate,
            field_=("models",),
            value=("outside",),
            outside=True,
        )
        yield case(
            "results-symlink-out-report",
            "results.parquet replaced by a symbolic link to the same bytes outside the run",
            results_outside,
            report,
            field_=("results.parquet",),
            value=("outside",),
            outside=True,
        )
        yield case("resume-complete", "run --resume of a complete run", nothing, resume, value=("complete",))

        def locked(cdir: Path) -> dict[str, Any]:
            run_dir = self.copy_base(cdir)
            fd = os.open(run_dir / ".fieldrl.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                spec = Spec(
                    self.fieldrl("report", str(run_dir)),
                    cdir,
                    field=(str(os.getpid()),),
                    value=("another fieldrl", "writing"),
                    setup="copy of a finished run whose lock another process (the probe) holds",
                )
                return self.execute(lock_case, spec)
            finally:
                os.close(fd)

        lock_case = Case(
            "T-lock-held-report", "tamper", "report while another process holds the run's lock", locked
        )
        yield lock_case
        yield Case(
            "T-checkpoint-state-pickle-resume",
            "tamper",
            "killed run: SAC checkpoint state.pt = torch.save() of a payload (checkpoint.json "
            "rehashed); run --resume",
            lambda c: self.checkpoint_case(c, "state"),
        )
        yield Case(
            "T-checkpoint-buffer-pickle-resume",
            "tamper",
            "killed run: SAC replay_buffer.npz holds pickled object arrays (checkpoint.json "
            "rehashed); run --resume",
            lambda c: self.checkpoint_case(c, "buffer"),
        )

    def killed_run(self, cdir: Path) -> Path:
        """A copy of a chemo/quick run killed (-9, whole group) once SAC has a checkpoint with its
        replay buffer (one killed run, copied for each case)."""
        if "killed" not in self.fixtures:
            self.fixtures["killed"] = self.kill_a_run(self.tmp / "fixtures")
        target = cdir / "run"
        shutil.copytree(self.fixtures["killed"], target, symlinks=True)
        return target

    def kill_a_run(self, where: Path) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        out = where / "killed"
        scenario = checkpointed_scenario(where)
        proc, o, e = start(
            self.fieldrl("run", str(scenario), "--budget", self.budget, "--out", str(out), "--quiet"), where
        )
        meta_path = out / "checkpoints/default/SAC/seed-0/checkpoint.json"
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 120 and proc.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    if "replay_buffer.npz" in json.loads(meta_path.read_text())["files"]:
                        break
                time.sleep(0.1)
        finally:
            _killpg(proc.pid)
            proc.wait()
            reap_session(proc.pid)
            o.close()
            e.close()
        if not meta_path.is_file():
            raise RuntimeError("the run ended before SAC wrote a checkpoint with its replay buffer")
        return out

    def checkpoint_case(self, cdir: Path, what: str) -> Spec:
        import numpy as np

        run_dir = self.killed_run(cdir)
        folder = run_dir / "checkpoints/default/SAC/seed-0"
        meta = json.loads((folder / "checkpoint.json").read_text())
        marker = cdir / "MARKER"
        if what == "state":
            import torch

            torch.save({"state_dicts": Boom(marker)}, folder / "state.pt")
            name = "state.pt"
        else:
            with np.load(folder / "replay_buffer.npz", allow_pickle=False) as data:
                keys = list(data.files)
            arrays = {k: np.array([Boom(marker)], dtype=object) for k in keys}
            np.savez(folder / "replay_buffer.npz", **arrays)
            name = "replay_buffer.npz"
        meta["files"][name] = sha256(folder / name)
        (folder / "checkpoint.json").write_text(json.dumps(meta, indent=2))
        return Spec(
            self.fieldrl("run", "--resume", str(run_dir)),
            cdir,
            expect="ok",
            marker=marker,
            timeout=RUN_TIMEOUT,
            setup=f"chemo/quick run killed -9 in SAC training; its checkpoint's {name} replaced by a pickle "
            "payload and checkpoint.json's hash updated to match",
            note="expected: the checkpoint is refused and SAC retrains from scratch; the payload never runs",
        )

    # -- category: interrupt ---------------------------------------------------------------------------
    def cases_interrupt(self) -> Iterator[Case]:
        plans = [
            ("sigterm-3s-jobs1", 1, signal.SIGTERM, "3s", "group"),
            ("sigterm-training-jobs1", 1, signal.SIGTERM, "checkpoint", "leader"),
            ("sigterm-training-jobs2", 2, signal.SIGTERM, "checkpoint", "leader"),
            ("kill9-group-jobs2", 2, signal.SIGKILL, "checkpoint", "group"),
            ("kill9-leader-jobs2", 2, signal.SIGKILL, "checkpoint", "leader"),
        ]
        for key, jobs, sig, when, target in plans:
            what = (
                f"run chemo/quick --jobs {jobs}: {signal.Signals(sig).name} to the "
                f"{'process group' if target == 'group' else 'main process'} "
                + ("3 s after start" if when == "3s" else "once training has written a checkpoint")
            )
            yield Case(
                f"I-{key}",
                "interrupt",
                what,
                lambda c, j=jobs, s=sig, w=when, t=target, k=key, wh=what: self.interrupt(
                    c, k, wh, j, s, w, t
                ),
            )

    def interrupt(
        self, cdir: Path, key: str, what: str, jobs: int, sig: int, when: str, target: str
    ) -> dict[str, Any]:
        out = cdir / "run"
        scenario = checkpointed_scenario(cdir)
        cmd = self.fieldrl(
            "run", str(scenario), "--budget", self.budget, "--out", str(out), "--jobs", str(jobs)
        )
        t0 = time.monotonic()
        proc, o, e = start(cmd, cdir)
        if when == "3s":
            time.sleep(3.0)
        else:
            while time.monotonic() - t0 < 120 and proc.poll() is None:
                if any(out.glob("checkpoints/*/*/*/checkpoint.json")):
                    break
                time.sleep(0.1)
            time.sleep(0.5)
        sent = proc.poll() is None
        if sent:
            if target == "group":
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        ex = finish(proc, o, e, t0, 60.0)  # collects survivors 2 s after the main process ended
        tmp_files = [str(p.relative_to(out)) for p in out.rglob("*.tmp")] if out.exists() else []
        expected_rc = 143 if sig == signal.SIGTERM else -signal.SIGKILL
        lines = terminate_lines(ex)
        notes = []
        if not sent:
            notes.append("the run ended before the signal was sent")
        if ex.survivors:
            notes.append("survivors 2 s after the main process ended: " + "; ".join(ex.survivors[:3]))
        if tmp_files:
            notes.append(f"temporary files left: {tmp_files[:3]}")
        if lines:
            notes.append("output other than progress bars: " + " / ".join(line.strip() for line in lines[:4]))
        notes.append("run folder exists" if out.exists() else "no run folder was created")
        if "Traceback" in ex.output:
            outcome = "traceback"
        elif ex.killed:
            outcome = "hang"
        elif ex.rc != expected_rc or ex.survivors or not sent:
            outcome = "other"
        elif sig == signal.SIGTERM and len(terminate_lines(ex)) != 1:
            outcome = "other"
            notes.insert(0, f"SIGTERM message is {len(terminate_lines(ex))} lines, not 1")
        else:
            outcome = "interrupted-clean"
        case = Case(f"I-{key}", "interrupt", what, lambda c: None)
        row = self.row(
            case,
            setup=f"expect exit {expected_rc}, "
            + ("one line, " if sig == signal.SIGTERM else "")
            + "no process of the run alive 2 s later",
            command=self.shown(shlex.join(cmd)) + f"  # then {signal.Signals(sig).name} after {when}",
            expect=f"exit {expected_rc}",
            exit=ex.rc,
            traceback="yes" if "Traceback" in ex.output else "no",
            lines=len(lines),
            left_behind="; ".join(tmp_files[:3]),
            wall_s=f"{ex.wall:.1f}",
            outcome=outcome,
            note="; ".join(notes),
            output_head=self.shown(" | ".join(line.strip()[:300] for line in ex.lines[-4:])),
        )
        if out.exists() and key in ("sigterm-training-jobs2", "kill9-group-jobs2"):
            self.queue.appendleft(self.resume_case(key, out))
        return row

    def resume_case(self, key: str, out: Path) -> Case:
        def make(cdir: Path) -> Spec:
            def check(ex: Exec, row: dict[str, Any]) -> None:
                if ex.rc != 0:
                    return
                same = same_results(out, self.base())
                row["note"] = "; ".join(
                    filter(None, [row["note"], f"results.parquet equal to the uninterrupted run's: {same}"])
                )
                if same != "yes":
                    row["outcome"] = "other"

            return Spec(
                self.fieldrl("run", "--resume", str(out)),
                cdir,
                expect="ok",
                timeout=RUN_TIMEOUT,
                setup=f"the run folder interrupted in I-{key}",
                check=check,
            )

        return Case(f"I-{key}-resume", "interrupt", "run --resume of the interrupted run", make)

    # -- the end ---------------------------------------------------------------------------------------
    def close(self) -> None:
        for sock in self.servers:
            with contextlib.suppress(OSError):
                sock.close()
        if self.args.keep_temp:
            self.say(f"temporary folders kept: {self.tmp}")
            return

        def writable(func: Any, path: str, _exc: Any) -> None:
            os.chmod(os.path.dirname(path), 0o755)
            with contextlib.suppress(OSError):
                os.chmod(path, 0o755)
            func(path)

        for ro in self.tmp.glob("cases/*/ro"):
            with contextlib.suppress(OSError):
                ro.chmod(0o755)
        shutil.rmtree(self.tmp, onerror=writable)


PROGRESS = re.compile(r"(━|^(training|evaluation) \[|\d+/\d+\s+\d+:\d\d:\d\d\s*$)")


def terminate_lines(ex: Exec) -> list[str]:
    """Lines of the output that are not progress bars or their job lines."""
    return [line for line in ex.stderr.splitlines() if line.strip() and not PROGRESS.search(line)]


def same_results(a: Path, b: Path) -> str:
    import pandas as pd

    try:
        left = pd.read_parquet(a / "results.parquet")
        right = pd.read_parquet(b / "results.parquet")
    except Exception as exc:  # a missing or damaged file is an answer too
        return f"unreadable ({type(exc).__name__})"
    keys = [c for c in left.columns if c != "value"]
    if list(left.columns) != list(right.columns) or len(left) != len(right):
        return "no (different shape)"
    left = left.sort_values(keys).reset_index(drop=True)
    right = right.sort_values(keys).reset_index(drop=True)
    if not left[keys].equals(right[keys]):
        return "no (different rows)"
    diff = (left["value"] - right["value"]).abs()
    return "yes" if bool((diff.fillna(0) == 0).all()) else f"no (max |difference| {diff.max():.3g})"


def classify(ex: Exec, left: bool, marker_fired: bool) -> str:
    if marker_fired:
        return "pickle-executed"
    if ex.killed:
        return "hang"
    if "Traceback" in ex.output:
        return "traceback"
    if left:
        return "left-output"
    if ex.survivors:
        return "other"
    if ex.rc == 0:
        return "accepted"
    if ex.rc == 2 and len(ex.lines) == 1:
        return "clear-error"
    return "other"


def outcome_label(row: dict[str, Any]) -> str:
    """The report's column for a row: the outcome, with acceptances split into reasonable and nonsense."""
    if row["outcome"] == "accepted":
        return "accepted (nonsense)" if row["reasonable"] == "no" else "accepted (reasonable)"
    return row["outcome"]


def problem(row: dict[str, Any]) -> str:
    """Why a row needs a look ('' if it does not)."""
    outcome = row["outcome"]
    if outcome == "accepted":
        return "accepted nonsense" if row["reasonable"] == "no" else ""
    if outcome == "interrupted-clean":
        return ""
    if outcome == "clear-error":
        if row["expect"] == "ok":
            return "refused valid input"
        if row["names_field"] == "no" and row["names_value"] in ("no", ""):
            return "unclear message (names neither the field nor the value)"
        if row["names_field"] == "" and row["names_value"] == "no":
            return "unclear message (does not name the value)"
        return ""
    return outcome


# ------------------------------------------------------------------------------------------ report
def write_outputs(probe: Probe, out_dir: Path, wall: float) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "probe_inputs.csv"
    md_path = out_dir / "probe_inputs.md"
    rows = probe.rows
    tmp = csv_path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, csv_path)

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
    columns = [
        "clear-error",
        "accepted (reasonable)",
        "accepted (nonsense)",
        "traceback",
        "hang",
        "left-output",
        "pickle-executed",
        "interrupted-clean",
        "other",
    ]

    counts: Counter[tuple[str, str]] = Counter((r["category"], outcome_label(r)) for r in rows)
    lines = [
        "# fieldrl input probe",
        "",
        f"{dt.datetime.now():%Y-%m-%d %H:%M}, commit {head.stdout.strip() or '?'}"
        + (" (working tree has uncommitted changes)" if dirty.stdout.strip() else "")
        + f", {len(rows)} cases in {wall / 60:.1f} min, budget `{probe.budget}`, "
        f"{os.cpu_count()} cores, run as {'root' if os.geteuid() == 0 else 'a normal user'}. "
        "Written by `benchmarks/probe_inputs.py`; one row per case in `probe_inputs.csv`.",
        "",
        "Standard: a bad scenario, parameter or argument ends with one line naming the field, the bad "
        "value and what is allowed, exit 2, no traceback, nothing left behind. `clear-error` = exit 2, one "
        "line, no traceback, nothing left; `accepted (nonsense)` = exit 0 on input that should be refused; "
        "`interrupted-clean` = the documented exit status (143 for SIGTERM, with one line), no traceback, "
        "no process alive 2 s later.",
        "",
        "## Outcomes by category",
        "",
        "| category | " + " | ".join(columns) + " | total |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for category in CATEGORIES:
        n = sum(1 for r in rows if r["category"] == category)
        if n:
            cells = [str(counts.get((category, c), "")) for c in columns]
            lines.append(f"| {category} | " + " | ".join(cells) + f" | {n} |")
    totals = [str(sum(counts.get((cat, c), 0) for cat in CATEGORIES) or "") for c in columns]
    lines.append("| **all** | " + " | ".join(totals) + f" | {len(rows)} |")

    flagged = [(r, problem(r)) for r in rows if problem(r)]
    lines += ["", f"## Cases that need a look ({len(flagged)})", ""]
    if not flagged:
        lines.append("None.")
    by_kind: Counter[str] = Counter(p for _, p in flagged)
    if flagged:
        lines.append(", ".join(f"{kind}: {n}" for kind, n in by_kind.most_common()) + ".")
        lines.append("")
    for row, why in flagged:
        lines += [
            f"### {row['id']} — {why}",
            "",
            f"- what: {row['what']}",
            f"- setup: {row['setup']}" if row["setup"] else "- setup: -",
            f"- command: `{row['command']}`",
            f"- exit {row['exit']}, {row['lines']} line(s), traceback: {row['traceback']}, "
            f"names field: {row['names_field'] or '-'}, names value: {row['names_value'] or '-'}, "
            f"{row['wall_s']} s",
        ]
        if row["left_behind"]:
            lines.append(f"- left behind: {row['left_behind']}")
        if row["pickle_marker"]:
            lines.append(f"- pickle marker: {row['pickle_marker']}")
        if row["note"]:
            lines.append(f"- note: {row['note']}")
        output = row["output_head"].split(" | ") if row["output_head"] else ["(no output)"]
        lines += ["", "```", *[o[:240] for o in output[:6]], "```", ""]
    tmp = md_path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, md_path)
    return csv_path, md_path


def checkpointed_scenario(where: Path) -> Path:
    """chemo/quick with checkpoints (opt-in: ``checkpoint_every``), beside a copy of its tuned files,
    so that a run can be interrupted once a checkpoint exists."""
    from importlib import resources

    chemo = resources.files("fieldrl") / "scenarios" / "chemo"
    data = yaml.safe_load((chemo / "quick.yaml").read_text())
    for entry in data["policies"]["learned"]:
        entry["checkpoint_every"] = 600
    where.mkdir(parents=True, exist_ok=True)
    (where / "tuned").mkdir(exist_ok=True)
    for file in (chemo / "tuned").iterdir():
        (where / "tuned" / file.name).write_bytes(file.read_bytes())
    scenario = where / "checkpointed.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    return scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--only", default="", help=f"comma-separated categories: {', '.join(CATEGORIES)}")
    parser.add_argument("--budget", default="demo", help="budget of the real runs (default demo)")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per command that does not train"
    )
    parser.add_argument("--keep-temp", action="store_true", help="keep the temporary folders (for debugging)")
    args = parser.parse_args()
    categories = [c.strip() for c in args.only.split(",") if c.strip()] or list(CATEGORIES)
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        parser.error(f"--only {','.join(unknown)}: allowed: {', '.join(CATEGORIES)}")
    probe = Probe(args)
    probe.say(f"probing {FIELDRL} ({', '.join(categories)}); temporary folder {probe.tmp}")
    t0 = time.monotonic()
    try:
        probe.run_all(categories)
    except KeyboardInterrupt:
        probe.say("interrupted: writing what was measured")
    finally:
        probe.close()
        if probe.rows:
            csv_path, md_path = write_outputs(probe, args.out_dir, time.monotonic() - t0)
            probe.say(f"wrote {csv_path} and {md_path}")
        flagged = sum(1 for r in probe.rows if problem(r))
        probe.say(f"{len(probe.rows)} cases, {flagged} need a look")


if __name__ == "__main__":
    main()
