"""Tests of the paired ratios and the FCT table (standard library only):
`python3 -m unittest discover -s scripts` from the repository root."""

import unittest

from pisa_analysis import fct_table, stats


class PairedRatio(unittest.TestCase):
    def test_a_consistent_halving_is_lower_with_a_tight_interval(self):
        p = stats.paired_ratio([(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)])
        self.assertEqual((p.n, p.verdict), (3, "lower"))
        self.assertAlmostEqual(p.ratio, 0.5)
        self.assertAlmostEqual(p.ci[0], 0.5)
        self.assertAlmostEqual(p.ci[1], 0.5)

    def test_an_interval_spanning_one_is_no_difference(self):
        p = stats.paired_ratio([(0.9, 1.0), (1.1, 1.0), (1.0, 1.0), (0.95, 1.0), (1.05, 1.0)])
        self.assertEqual(p.verdict, "no difference")
        self.assertLess(p.ci[0], 1.0)
        self.assertGreater(p.ci[1], 1.0)

    def test_higher_one_pair_and_missing_values(self):
        self.assertEqual(stats.paired_ratio([(2.0, 1.0), (2.2, 1.0), (1.9, 1.0)]).verdict,
                         "higher")
        self.assertEqual(stats.paired_ratio([(2.0, 1.0), (None, 1.0), (1.0, 0.0)]).verdict,
                         "one pair")
        self.assertIsNone(stats.paired_ratio([(None, 1.0)]).ratio)


def row(scheme, load, rep, short_us, large_us, fidelity=None):
    r = {"scheme": scheme, "load": load, "rep": str(rep), "flows": "10", "finished": "10",
         "short_n": "8", "short_avg_fct_us": str(short_us), "short_p99_fct_us": str(short_us * 3),
         "large_n": "2", "large_avg_fct_us": str(large_us), "large_p99_fct_us": str(large_us),
         "retransmits": "1", "tm_drops": "0"}
    if fidelity:
        r["fidelity"] = fidelity
    return r


class Table(unittest.TestCase):
    def test_rows_carry_reps_intervals_and_paired_verdicts(self):
        rows = [row("ecmp", "0.2", k, 1000 * k, 10_000 * k) for k in (1, 2, 3)]
        # Half the short FCT of ecmp on every seed; the same large FCT.
        rows += [row("hula", "0.2", k, 500 * k, 10_000 * k) for k in (1, 2, 3)]
        t = fct_table.table(rows).splitlines()
        ecmp = next(l for l in t if l.startswith("| ecmp |"))
        hula = next(l for l in t if l.startswith("| hula |"))
        # Mean 2 ms (median 2 ms) with its interval inside the reps' range.
        self.assertIn("| 3 | - | 10/10 | 2.0 (2.0) [", ecmp)
        self.assertIn("0.50 [0.50, 0.50]", hula)
        self.assertIn("no difference: 1.00 [1.00, 1.00]", hula)

    def test_fidelity_is_counted_and_the_baseline_can_be_named(self):
        rows = [row("ecmp", "0.2", 1, 1000, 10_000, "ok"),
                row("ecmp", "0.2", 2, 1000, 10_000, "degraded: late links"),
                row("p4te", "0.2", 1, 2000, 10_000, "ok"),
                row("p4te", "0.2", 2, 2000, 10_000, "ok")]
        t = fct_table.table(rows, baseline="p4te")
        self.assertIn("vs p4te", t)
        self.assertIn("| ecmp | 0.2 | 2 | 1/2 |", t)
        self.assertIn("| p4te | 0.2 | 2 | 2/2 |", t)
        self.assertIn("0.50 [0.50, 0.50]", t)


class Degraded(unittest.TestCase):
    def test_only_a_degraded_verdict_counts_and_old_rows_are_not(self):
        from pisa_analysis import data
        self.assertTrue(data.degraded({"fidelity": "degraded: CPU 100% busy"}))
        self.assertFalse(data.degraded({"fidelity": "ok"}))
        self.assertFalse(data.degraded({}))


if __name__ == "__main__":
    unittest.main()
