"""``pluto log export --csv``: one CSV file per channel of a log, for spreadsheets and scripts.

Each row is one message: ``log_time`` and ``publish_time`` (s), then the message's fields in order. A list of
numbers is spread over one column per element (``ranges_0``, ``ranges_1``, ...; as many as its longest value in the
channel, empty where a value is shorter); anything nested deeper is written as JSON in one column.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from pluto.record.format import LogError
from pluto.record.logfile import LogFile, LoggedMessage

__all__ = ["csv_name", "export_csv", "flatten_rows"]


def csv_name(interface: str) -> str:
    """The CSV file name of an interface: ``Base/Drive/State`` -> ``Base_Drive_State.csv``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", interface) + ".csv"


def _is_number_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def flatten_rows(messages: list[LoggedMessage]) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of one channel's messages (see the module docstring)."""
    if not messages:
        return ["log_time", "publish_time"], []
    fields = [f for f in messages[0].message.__struct_fields__]
    widths: dict[str, int] = {}
    for m in messages:
        for f in fields:
            value = getattr(m.message, f)
            if _is_number_list(value):
                widths[f] = max(widths.get(f, 0), len(value))
    header = ["log_time", "publish_time"]
    for f in fields:
        header += [f"{f}_{i}" for i in range(widths[f])] if f in widths else [f]
    rows = []
    for m in messages:
        row: list[Any] = [repr(m.log_time), repr(m.publish_time)]
        for f in fields:
            value = getattr(m.message, f)
            if f in widths:
                items = list(value) if isinstance(value, list) else []
                row += [repr(float(v)) if isinstance(v, float) else v for v in items]
                row += [""] * (widths[f] - len(items))
            elif isinstance(value, float):
                row.append(repr(value))
            elif isinstance(value, str | int | bool):
                row.append(value)
            else:
                row.append(msgspec.json.encode(value).decode())
        rows.append(row)
    return header, rows


def export_csv(
    log: LogFile, folder: str | os.PathLike[str], names: Iterable[str] | None = None, *, force: bool = False
) -> dict[str, Path]:
    """Write one CSV file per channel of ``log`` into ``folder`` (created if needed).

    Args:
        names: only these interfaces (globs allowed); all if None.
        force: overwrite CSV files that exist.

    Returns:
        The file written for each interface.

    Raises:
        LogError: a file exists (and not ``force``), or the folder or a file cannot be written.
    """
    out = Path(folder)
    chosen = [n for n in log.names(names) if log.channels[n].type is not None]
    targets = {n: out / csv_name(n) for n in chosen}
    if not force:
        taken = [p for p in targets.values() if p.exists()]
        if taken:
            raise LogError(f"{taken[0]} exists; choose another folder or overwrite with --force")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, path in targets.items():
            header, rows = flatten_rows(log.series(name))
            with open(path, "w", newline="") as file:
                writer = csv.writer(file)
                writer.writerow(header)
                writer.writerows(rows)
    except OSError as err:
        raise LogError(f"cannot write CSV files in {out}: {err.strerror or err}") from None
    return targets
