"""The one presentation style: figure sizes, a colour and marker per scheme (fixed by name, so a
scheme looks the same in every plot), the subtitle that says what a plot shows, and how a
table cell prints an absent value ("-") or an interval.

matplotlib is imported only by `pyplot()`, so the tables and the tests run without it.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any, Iterable, Optional, Sequence

#: Figure sizes (inches): one panel, a row of panels (per panel), a 2 x 2 grid, two stacked.
ONE = (8.0, 4.5)
PANEL = (5.0, 4.0)
GRID = (10.0, 7.5)
STACKED = (9.0, 7.0)
DPI = 120

#: Colours of the schemes the runner, `pisa-fabric dbb` and E11 know (tab10 and tab20 shades).
SCHEME_COLOURS = {
    "ecmp": "#1f77b4",
    "hula": "#ff7f0e",
    "kernel": "#7f7f7f",
    "p4te": "#2ca02c",
    "p4te-nra": "#98df8a",
    "spray-random": "#d62728",
    "spray-counter": "#9467bd",
    "spray-rr": "#8c564b",
    "dbb-shared": "#e377c2",
    "dbb-independent": "#f7b6d2",
    "INT": "#1f77b4",
    "PINT p=1": "#ff7f0e",
    "PINT p=1, INT-sized shim": "#ffbb78",
    "PINT p=1/16": "#2ca02c",
    "PINT p=1/256": "#d62728",
}
#: Colours for names not above, picked by a hash of the name (stable across runs).
OTHER_COLOURS = ["#17becf", "#bcbd22", "#aec7e8", "#c5b0d5", "#c49c94", "#dbdb8d", "#9edae5"]
#: Colours of series that are not schemes (spines, flowlet gaps, ...), by their position.
SERIES_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]


def cell(v: Optional[float], spec: str) -> str:
    """A table cell: v formatted with spec, "-" when absent."""
    return "-" if v is None else format(v, spec)


def ci_cell(ci: Optional[tuple[float, float]], spec: str) -> str:
    """A table cell of an interval, "lo-hi", "-" when absent."""
    return "-" if ci is None else f"{ci[0]:{spec}}-{ci[1]:{spec}}"


def _hash(name: str) -> int:
    return zlib.crc32(name.encode())


def colour(name: str) -> str:
    """The colour of a scheme (or any series name), the same in every plot."""
    return SCHEME_COLOURS.get(name) or OTHER_COLOURS[_hash(name) % len(OTHER_COLOURS)]


def series_colour(i: int) -> str:
    """The colour of the i-th series of a plot whose series are not schemes."""
    return SERIES_COLOURS[i % len(SERIES_COLOURS)]


def marker(name: str) -> str:
    """The marker of a scheme, the same in every plot."""
    known = list(SCHEME_COLOURS)
    i = known.index(name) if name in known else _hash(name)
    return MARKERS[i % len(MARKERS)]


def reps_phrase(counts: Iterable[int]) -> str:
    """"3 reps", "2-3 reps" or "1 rep" for the numbers of reps behind a plot's points (0s, the
    points not drawn, left out)."""
    c = sorted(set(counts) - {0})
    if not c:
        return "no reps"
    n = f"{c[0]}" if len(c) == 1 else f"{c[0]}-{c[-1]}"
    return f"{n} rep" + ("" if c == [1] else "s")


def subtitle(stat: str, counts: Iterable[int], what: str = "points",
             bars: Optional[str] = "bars", extra: Sequence[str] = ()) -> str:
    """What a plot shows, from its data, e.g. "points: median of 3 reps; bars: 95% bootstrap CI
    of the median". `stat` is "median" or "mean", `counts` the number of reps behind each
    point, `what` the marks that show the statistic, `bars` the marks that show its interval
    (None: none drawn; named only when some point has 2 or more reps), `extra` further parts."""
    counts = list(counts)
    parts = [f"{what}: {stat} of {reps_phrase(counts)}"]
    if bars and any(c > 1 for c in counts):
        parts.append(f"{bars}: 95% bootstrap CI of the {stat}")
    return "; ".join(parts + list(extra))


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; exits with a hint when it is missing."""
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"{sys.executable} has no matplotlib: use the plot venv of scripts/py-clients.sh "
                 "(scripts/analysis does when it exists)")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8})
    return plt


def titled(fig: Any, title: str, sub: str) -> None:
    """The figure's title and, below it in smaller type, what it shows."""
    fig.suptitle(f"{title}\n{sub}", fontsize=10)


def save(fig: Any, path: str) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def yerr(values: list[tuple[float, Optional[tuple[float, float]]]]) -> list[list[float]]:
    """matplotlib's asymmetric yerr from (centre, interval) pairs (no interval: no bar)."""
    lo = [c - ci[0] if ci else 0.0 for c, ci in values]
    hi = [ci[1] - c if ci else 0.0 for c, ci in values]
    return [lo, hi]
