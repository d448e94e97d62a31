"""A user's own patient cohort: a CSV of Ahn-de Pillis model parameters, one row per patient.

The header names model parameters (:data:`~fieldrl.simulators.chemo.PARAM_NAMES`) and,
optionally, the initial state ``N0``, ``T0``, ``I0``; a column left out takes its nominal value.
Data row ``i`` (the first row after the header is row 0) is the patient of the ``i``-th
held-out seed. Every problem is a ``ValueError`` with one line naming the file, the line and
column, the bad value and what is allowed; the params model turns it into a scenario error.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fieldrl.simulators.chemo import NOMINAL_PARAMS, NOMINAL_STATE

#: most patients a cohort file may hold (the most held-out seeds a scenario may have)
MAX_COHORT_ROWS = 100_000
#: largest cohort file read: 100,000 rows of 19 numbers written with full precision fit
MAX_COHORT_BYTES = 32 << 20
#: initial-state columns, in ``[N, T, I]`` order (the drug level starts at 0)
STATE_COLUMNS: tuple[str, ...] = ("N0", "T0", "I0")
NOMINAL_INITIAL: dict[str, float] = dict(zip(STATE_COLUMNS, NOMINAL_STATE[:3].tolist(), strict=True))

#: largest value of any model parameter: nominal values are at most 1.5 /day, and the fixed-step
#: RK4 (0.125-day substeps) stays accurate only for rates of a few per day, so beyond 100 is a typo
MAX_PARAM = 100.0
#: largest initial cell count (carrying capacities are ~1 at nominal parameters)
MAX_INITIAL = 10.0
#: columns that must be > 0: the immune threshold divides, the inverse carrying capacities keep
#: cell counts bounded, and the reward and death test divide by N0 and T0
POSITIVE: frozenset[str] = frozenset({"alpha", "b1", "b2", "N0", "T0"})


@dataclass(frozen=True)
class Cohort:
    """The patients of a cohort file (arrays are read-only; shared between callers).

    :param params: ``(n, 16)`` parameters in ``PARAM_NAMES`` order.
    :param centres: ``(n, 3)`` initial ``[N, T, I]`` (before the preset's initial-state spread).
    :param columns: the columns the file gives, in its order.
    :param sha256: hex digest of the file's bytes.
    """

    params: np.ndarray
    centres: np.ndarray
    columns: tuple[str, ...]
    sha256: str

    @property
    def size(self) -> int:
        return len(self.params)


def allowed(column: str) -> str:
    """What a value in ``column`` may be, in words."""
    low = "> 0" if column in POSITIVE else ">= 0"
    high = MAX_INITIAL if column in STATE_COLUMNS else MAX_PARAM
    return f"a finite number {low} and <= {high:g}"


def load_cohort(path: str | Path) -> Cohort:
    """Read and check a cohort file; cached while the file's size and modification time stay."""
    path = Path(path)
    name = path.name
    if path.suffix.lower() != ".csv":
        raise ValueError(f"{name}: a cohort file must end in .csv")
    try:
        info = path.stat()
    except OSError:
        raise ValueError(f"{name}: no such file") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{name}: not a regular file")
    if info.st_size > MAX_COHORT_BYTES:
        raise ValueError(
            f"{name}: {info.st_size:,} bytes; cohort files are limited to {MAX_COHORT_BYTES:,} bytes"
        )
    return _read(str(path.absolute()), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=4)
def _read(path: str, _mtime_ns: int, _size: int) -> Cohort:
    name = Path(path).name
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_COHORT_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_COHORT_BYTES:
        raise ValueError(f"{name}: cohort files are limited to {MAX_COHORT_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8-sig")  # a spreadsheet's byte-order mark is not part of the header
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    params, centres, columns = _parse(text, name)
    for array in (params, centres):
        array.flags.writeable = False
    return Cohort(params, centres, columns, hashlib.sha256(raw).hexdigest())


def _parse(text: str, name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    known = [*NOMINAL_PARAMS, *STATE_COLUMNS]
    nominal = {**NOMINAL_PARAMS, **NOMINAL_INITIAL}
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[float]] = []
    columns: list[str] = []
    try:
        for fields in reader:
            line = reader.line_num
            if not any(f.strip() for f in fields):
                continue  # blank lines (a trailing one, say) hold no patient
            if not columns:
                columns = _header(fields, known, name, line)
                continue
            if len(fields) != len(columns):
                raise ValueError(
                    f"{name} line {line}: {len(fields)} values for {len(columns)} columns; "
                    "give one value per header column"
                )
            if len(rows) == MAX_COHORT_ROWS:
                raise ValueError(f"{name}: more than {MAX_COHORT_ROWS:,} patients; allowed at most that many")
            rows.append([_number(f, col, name, line) for f, col in zip(fields, columns, strict=True)])
    except csv.Error as exc:
        raise ValueError(f"{name} line {reader.line_num}: not CSV ({exc})") from None
    if not columns:
        raise ValueError(f"{name}: empty; give a header of parameter names and one row per patient")
    if not rows:
        raise ValueError(f"{name}: no patients after the header; give one row per patient")
    table = np.tile(np.array([nominal[c] for c in known], dtype=np.float64), (len(rows), 1))
    table[:, [known.index(c) for c in columns]] = np.array(rows, dtype=np.float64)
    n_params = len(NOMINAL_PARAMS)
    return table[:, :n_params].copy(), table[:, n_params:].copy(), tuple(columns)


def _header(fields: list[str], known: list[str], name: str, line: int) -> list[str]:
    columns = [f.strip() for f in fields]
    for column in columns:
        if column not in known:
            raise ValueError(
                f"{name} line {line}: unknown column {column!r}; allowed (any of them, in any order): "
                + ", ".join(known)
            )
        if columns.count(column) > 1:
            raise ValueError(f"{name} line {line}: column {column!r} appears more than once")
    return columns


def _number(field: str, column: str, name: str, line: int) -> float:
    where = f"{name} line {line}, column {column}"
    try:
        value = float(field)
    except ValueError:
        raise ValueError(
            f"{where}: {field.strip()[:40]!r} is not a number; allowed: {allowed(column)}"
        ) from None
    high = MAX_INITIAL if column in STATE_COLUMNS else MAX_PARAM
    too_low = value <= 0.0 if column in POSITIVE else value < 0.0
    if not math.isfinite(value) or too_low or value > high:
        raise ValueError(f"{where}: {field.strip()[:40]!r} is out of range; allowed: {allowed(column)}")
    return value
