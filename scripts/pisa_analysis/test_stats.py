"""Tests of the statistics' edge cases (standard library only):
`python3 -m unittest discover -s scripts` from the repository root."""

import importlib
import pkgutil
import random
import sys
import unittest

import pisa_analysis
from pisa_analysis import stats


class Median(unittest.TestCase):
    def test_empty_is_none(self):
        self.assertIsNone(stats.median([]))

    def test_one_value(self):
        self.assertEqual(stats.median([7]), 7)

    def test_odd_and_even_counts(self):
        self.assertEqual(stats.median([3, 1, 2]), 2)
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)


class Quantile(unittest.TestCase):
    def test_empty_is_none(self):
        self.assertIsNone(stats.quantile([], 0.99))

    def test_one_value_is_every_quantile(self):
        for q in (0.0, 0.01, 0.5, 0.99, 1.0):
            self.assertEqual(stats.quantile([5.0], q), 5.0)

    def test_nearest_rank(self):
        xs = list(range(1, 101))  # 1..100, shuffled below
        random.Random(0).shuffle(xs)
        self.assertEqual(stats.quantile(xs, 0.99), 99)
        self.assertEqual(stats.quantile(xs, 0.5), 50)  # rank ceil(50) = 50, not the median 50.5
        self.assertEqual(stats.quantile(xs, 0.001), 1)  # rank ceil(0.1) = 1
        self.assertEqual(stats.quantile(xs, 0.0), 1)  # clamped to rank 1
        self.assertEqual(stats.quantile(xs, 1.0), 100)
        self.assertEqual(stats.quantile([1, 2, 3], 0.99), 3)


class MeanStdCv(unittest.TestCase):
    def test_empty_is_none(self):
        self.assertIsNone(stats.mean([]))
        self.assertIsNone(stats.pstd([]))
        self.assertIsNone(stats.cv([]))
        self.assertIsNone(stats.mean_cv([]))

    def test_values(self):
        self.assertEqual(stats.mean([1, 2, 3, 6]), 3)
        self.assertEqual(stats.pstd([2, 4, 4, 4, 5, 5, 7, 9]), 2)
        self.assertAlmostEqual(stats.cv([2, 4, 4, 4, 5, 5, 7, 9]), 0.4)
        self.assertEqual(stats.cv([5]), 0)

    def test_cv_of_nothing_sent_is_none(self):
        self.assertIsNone(stats.cv([0, 0, 0]))

    def test_mean_cv_leaves_out_single_and_idle_groups(self):
        self.assertAlmostEqual(stats.mean_cv([[1, 3], [7], [0, 0], [2, 2]]), 0.25)
        self.assertIsNone(stats.mean_cv([[7], [0, 0]]))


class BootstrapCi(unittest.TestCase):
    def test_empty_is_none(self):
        self.assertIsNone(stats.bootstrap_ci([]))

    def test_one_value(self):
        self.assertEqual(stats.bootstrap_ci([4.5]), (4.5, 4.5))

    def test_equal_values(self):
        self.assertEqual(stats.bootstrap_ci([2.0, 2.0, 2.0]), (2.0, 2.0))

    def test_deterministic(self):
        xs = [10.0, 12.5, 9.0, 30.0, 11.0]
        first = stats.bootstrap_ci(xs)
        random.seed(12345)  # the global generator plays no part
        random.random()
        self.assertEqual(stats.bootstrap_ci(xs), first)
        self.assertEqual(stats.bootstrap_ci(list(xs)), first)

    def test_within_the_values_and_around_the_median(self):
        xs = [10.0, 12.5, 9.0, 30.0, 11.0]
        lo, hi = stats.bootstrap_ci(xs)
        self.assertLessEqual(min(xs), lo)
        self.assertLessEqual(lo, stats.median(xs))
        self.assertLessEqual(stats.median(xs), hi)
        self.assertLessEqual(hi, max(xs))
        self.assertLess(lo, hi)

    def test_other_statistic(self):
        lo, hi = stats.bootstrap_ci([1.0, 2.0, 3.0, 4.0], stat=stats.mean)
        self.assertTrue(1.0 <= lo < hi <= 4.0)


class OverReps(unittest.TestCase):
    def test_absent_reps_are_left_out(self):
        s = stats.over_reps([None, 3.0, None, 5.0, 4.0])
        self.assertEqual((s.n, s.median), (3, 4.0))
        self.assertEqual(s.ci, stats.bootstrap_ci([3.0, 5.0, 4.0]))

    def test_no_reps(self):
        self.assertEqual(stats.over_reps([None]), stats.RepSummary(0, None, None))


class NoMatplotlibNeeded(unittest.TestCase):
    def test_modules_import_without_it(self):
        for m in pkgutil.iter_modules(pisa_analysis.__path__):
            importlib.import_module(f"pisa_analysis.{m.name}")
        self.assertNotIn("matplotlib", sys.modules)


if __name__ == "__main__":
    unittest.main()
