"""The one reader of the CSV and JSON files the tables and plots take, and their numeric parsing.

An experiment directory (`pisa-fabric experiment --out DIR`) holds, one row per point
(scheme, load, rep) or per flow / uplink / counter of a point:
- summary.csv: required; the runner's per-point summary (FCT averages and p99s per class,
  flows, finished, TM drops, queues, the per-leaf uplink std-dev);
- flows.csv: one row per flow (class, finished, fct_us, start_ns, size_bytes, TCP_INFO counts);
- uplinks.csv: packets per upward port of every switch ("leaf" is the switch, "spine" the
  neighbour above);
- counters.csv: program counters kept with --record-counter (read by p4te-e5).
Only summary.csv is required: a column that needs a missing file comes out absent (None).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional

Row = dict[str, str]
#: A point of a sweep, as the runner writes it: (scheme, load, rep), strings.
Key = tuple[str, str, str]


def read_csv(path: str) -> list[Row]:
    """The rows of a CSV file with a header, as dicts of strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_csv_if_present(path: str) -> Optional[list[Row]]:
    """read_csv, or None when the file does not exist."""
    return read_csv(path) if os.path.exists(path) else None


def read_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def write_json(path: str, value: Any) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=1)


def num(v: Optional[str]) -> Optional[float]:
    """A CSV cell as a float; None for an empty, missing or non-numeric cell."""
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def count(v: Optional[str]) -> int:
    """A CSV cell that counts something (retransmits, packets) as an int; empty is 0."""
    return int(v or 0)


def labelled(arg: str) -> tuple[str, str]:
    """LABEL=DIR as (LABEL, DIR)."""
    label, sep, d = arg.partition("=")
    if not sep or not label or not d:
        sys.exit(f"{arg}: expected LABEL=DIR")
    return label, d


def finished(flow: Row) -> bool:
    """Whether a flows.csv row finished (it then has an FCT)."""
    return flow["finished"] == "true" and bool(flow["fct_us"])


def fct_ms(flow: Row) -> float:
    """A finished flow's FCT in ms."""
    return float(flow["fct_us"]) / 1e3


def degraded(s: Row) -> bool:
    """Whether a summary row's point did not keep fidelity (the runner's `fidelity` column says
    `degraded: ...`; rows from before the column count as not degraded)."""
    return s.get("fidelity", "ok").startswith("degraded")


def summary_fct_ms(s: Row, cls: str, which: str) -> Optional[float]:
    """A summary row's `which` ("avg" or "p99") FCT of class `cls` ("short", "large") in ms;
    None when the point had no flow of that class (the runner writes 0 for it)."""
    if num(s.get(f"{cls}_n")) == 0:
        return None
    v = num(s.get(f"{cls}_{which}_fct_us"))
    return None if v is None else v / 1e3


@dataclass
class Point:
    """One point of an experiment directory: its summary row and, where the directory has
    them, its flows and uplink rows (None: the file is missing; []: no rows for this point)."""

    summary: Row
    flows: Optional[list[Row]]
    uplinks: Optional[list[Row]]

    @property
    def scheme(self) -> str:
        return self.summary["scheme"]

    @property
    def load(self) -> float:
        return float(self.summary["load"])

    @property
    def workload(self) -> str:
        return self.summary["workload"]

    def packets_by_switch(self) -> Optional[dict[str, list[int]]]:
        """switch -> packets of each of its upward ports, in file order."""
        if self.uplinks is None:
            return None
        out: dict[str, list[int]] = defaultdict(list)
        for r in self.uplinks:
            out[r["leaf"]].append(count(r["packets"]))
        return dict(out)


EXPERIMENT_FILES = ("summary.csv", "flows.csv", "uplinks.csv")


def read_experiment(d: str) -> dict[str, Optional[list[Row]]]:
    """The files of an experiment directory by name (None for a missing one); exits when
    summary.csv is missing."""
    if not os.path.exists(os.path.join(d, "summary.csv")):
        sys.exit(f"{d}: no summary.csv (not a `pisa-fabric experiment --out` directory?)")
    return {name: read_csv_if_present(os.path.join(d, name)) for name in EXPERIMENT_FILES}


def points(tables: dict[str, Optional[list[Row]]]) -> list[Point]:
    """The points of one directory's files, in summary.csv's order."""

    def by_key(rows: Optional[list[Row]]) -> Optional[dict[Key, list[Row]]]:
        if rows is None:
            return None
        out: dict[Key, list[Row]] = defaultdict(list)
        for r in rows:
            out[(r["scheme"], r["load"], r["rep"])].append(r)
        return out

    flows, ups = by_key(tables["flows.csv"]), by_key(tables["uplinks.csv"])
    out = []
    for s in tables["summary.csv"] or []:
        k = (s["scheme"], s["load"], s["rep"])
        out.append(
            Point(
                s,
                None if flows is None else flows.get(k, []),
                None if ups is None else ups.get(k, []),
            )
        )
    return out


def experiment_points(d: str) -> list[Point]:
    """The points of experiment directory `d`."""
    return points(read_experiment(d))


def write_merged(tables: list[dict[str, Optional[list[Row]]]], out: str) -> None:
    """Writes summary.csv, flows.csv and uplinks.csv of several directories into `out`, each
    concatenated (the union of their columns, in first-seen order), for `experiment-plots out`."""
    os.makedirs(out, exist_ok=True)
    for name in EXPERIMENT_FILES:
        rows = [r for t in tables for r in (t[name] or [])]
        if not rows:
            continue
        fields = list(rows[0].keys())
        for r in rows[1:]:
            fields += [k for k in r if k not in fields]
        with open(os.path.join(out, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
