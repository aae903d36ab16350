"""The one definition of each statistic the tables and plots use (standard library only).

Every function takes plain numbers and returns None for empty input: a statistic of nothing
is absent, never 0 or NaN, so a table prints "-" and a plot leaves the point out.

- `mean`, `median`, `pstd` are the `statistics` module's (exact arithmetic; the median of an
  even count is the mean of the middle two).
- `quantile` is the nearest-rank quantile, as the Rust side's
  `sim::traffic::quantile_nearest_rank` (the p99 FCTs of summary.csv): the value at rank
  ceil(q n), clamped to 1..n.
- `cv` is std / mean (population std), comparable across link rates; None when the mean is 0;
  `mean_cv` averages it over groups (the uplink balance of the tables).
- `bootstrap_ci` is a percentile bootstrap interval over repetitions with a fixed seed, so the
  same reps always give the same interval.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

#: Resamples and seed of `bootstrap_ci` (fixed: tables and plots must be reproducible).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 1


def known(xs: Iterable[Optional[float]]) -> list[float]:
    """The values of `xs` that are not None (the reps that have the statistic)."""
    return [x for x in xs if x is not None]


def mean(xs: Sequence[float]) -> Optional[float]:
    """The arithmetic mean; None for no values."""
    return statistics.mean(xs) if len(xs) else None


def median(xs: Sequence[float]) -> Optional[float]:
    """The median (the mean of the middle two for an even count); None for no values."""
    return statistics.median(xs) if len(xs) else None


def quantile(xs: Sequence[float], q: float) -> Optional[float]:
    """The nearest-rank q-quantile (q in (0, 1]): the value of rank ceil(q n), clamped to
    1..n, of the sorted values; None for no values. quantile(xs, 0.99) is "p99"."""
    if not len(xs):
        return None
    v = sorted(xs)
    return v[min(len(v), max(1, math.ceil(q * len(v)))) - 1]


def pstd(xs: Sequence[float]) -> Optional[float]:
    """The population standard deviation (divides by n, as the runner's uplink std-dev);
    None for no values."""
    return statistics.pstdev(xs) if len(xs) else None


def cv(xs: Sequence[float]) -> Optional[float]:
    """The coefficient of variation, pstd / mean; None for no values or a mean of 0 (an idle
    switch is not "perfectly even", it has no spread to speak of)."""
    m = mean(xs)
    if m is None or m == 0:
        return None
    return statistics.pstdev(xs) / m


def mean_cv(groups: Iterable[Sequence[float]]) -> Optional[float]:
    """The mean over groups (e.g. switches) of each group's CV (e.g. of the packets of its
    upward ports); groups of fewer than 2 values or without a CV are left out; None if none is
    left."""
    cvs = known(cv(g) for g in groups if len(g) > 1)
    return mean(cvs)


def bootstrap_ci(
    xs: Sequence[float],
    stat: Callable[[Sequence[float]], Optional[float]] = median,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Optional[tuple[float, float]]:
    """The percentile bootstrap `level` interval of `stat` (default: the median) over the
    values (one per repetition): `resamples` resamples with replacement drawn from a generator
    seeded with `seed`, and the nearest-rank (1 - level)/2 and (1 + level)/2 quantiles of their
    statistics. One value gives (x, x); no values give None. Deterministic: the same values in
    the same order always give the same interval."""
    if not len(xs):
        return None
    if len(xs) == 1:
        return (xs[0], xs[0])
    rng = random.Random(seed)
    boot = [stat(rng.choices(xs, k=len(xs))) for _ in range(resamples)]
    tail = (1.0 - level) / 2.0
    return quantile(boot, tail), quantile(boot, 1.0 - tail)


@dataclass(frozen=True)
class RepSummary:
    """A statistic over repetitions: how many reps had it, their median and its 95% CI."""

    n: int
    median: Optional[float]
    ci: Optional[tuple[float, float]]


def over_reps(values: Iterable[Optional[float]]) -> RepSummary:
    """The median over the reps that have a value (None ones are left out) and the bootstrap
    95% CI of that median."""
    v = known(values)
    return RepSummary(len(v), median(v), bootstrap_ci(v))


def geomean(xs: Sequence[float]) -> Optional[float]:
    """The geometric mean of positive values; None for no values or any value <= 0."""
    if not len(xs) or any(x <= 0 for x in xs):
        return None
    return math.exp(statistics.fmean(math.log(x) for x in xs))


@dataclass(frozen=True)
class Summary:
    """A statistic over repetitions as a table row states it: how many reps, their mean and
    median, and the 95% bootstrap CI of the mean."""

    n: int
    mean: Optional[float]
    median: Optional[float]
    ci: Optional[tuple[float, float]]


def summarise(values: Iterable[Optional[float]]) -> Summary:
    """Mean, median and the 95% bootstrap CI of the mean over the reps that have a value."""
    v = known(values)
    return Summary(len(v), mean(v), median(v), bootstrap_ci(v, stat=mean))


@dataclass(frozen=True)
class Paired:
    """Two schemes compared on the same seeds: the ratio a/b per seed, their geometric mean and
    its 95% bootstrap CI. `verdict` is "lower" or "higher" when the interval lies below or above
    1.0, "no difference" when it spans 1.0, and "one pair" when there is nothing to resample."""

    n: int
    ratio: Optional[float]
    ci: Optional[tuple[float, float]]
    verdict: Optional[str]


def paired_ratio(pairs: Iterable[tuple[Optional[float], Optional[float]]]) -> Paired:
    """The paired ratio of (a, b) values measured on the same seed (pairs where either is
    missing or b is not positive are left out)."""
    r = [a / b for a, b in pairs if a is not None and b is not None and b > 0 and a > 0]
    g = geomean(r)
    if g is None:
        return Paired(0, None, None, None)
    if len(r) == 1:
        return Paired(1, g, None, "one pair")
    ci = bootstrap_ci(r, stat=geomean)
    assert ci is not None
    verdict = "lower" if ci[1] < 1.0 else "higher" if ci[0] > 1.0 else "no difference"
    return Paired(len(r), g, ci, verdict)
