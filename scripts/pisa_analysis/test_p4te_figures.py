"""Tests of P4TE's figure arithmetic (standard library only; the drawing needs matplotlib):
`python3 -m unittest discover -s scripts` from the repository root."""

import unittest

from pisa_analysis import p4te, p4te_figures
from pisa_analysis.data import Point


def point(scheme, load, rep, short_us):
    s = {"scheme": scheme, "load": str(load), "rep": str(rep), "workload": "websearch",
         "seconds": "10", "flows": "10", "finished": "10", "short_n": "9",
         "short_avg_fct_us": str(short_us), "short_p99_fct_us": str(short_us), "large_n": "1",
         "large_avg_fct_us": "1000", "large_p99_fct_us": "1000", "uplink_pkts_std_mean": "0",
         "tm_drops": "0"}
    return Point(s, None, None)


class Paired(unittest.TestCase):
    def test_a_baseline_is_compared_with_p4te_on_its_own_seed(self):
        # ecmp is 1.5x p4te on every seed, though the seeds differ 3x among themselves.
        pts = [point("p4te", 0.8, r, 100 * r) for r in (1, 2, 3)]
        pts += [point("ecmp", 0.8, r, 150 * r) for r in (1, 2, 3)]
        pts += [point("hula", 0.8, 1, 50)]
        paired = p4te_figures._paired(pts, "ecmp", "short_avg")
        self.assertAlmostEqual(paired[0.8].ratio, 1.5)
        self.assertEqual((paired[0.8].n, paired[0.8].verdict), (3, "higher"))
        # One seed of hula: a ratio without an interval.
        one = p4te_figures._paired(pts, "hula", "short_avg")[0.8]
        self.assertAlmostEqual(one.ratio, 0.5)
        self.assertIsNone(one.ci)


class PaperRanges(unittest.TestCase):
    def test_the_table_reads_the_ranges_the_figures_shade(self):
        self.assertEqual(p4te.paper_text(("websearch", "hula", "short")),
                         "+2 to +60% (+23 to +40% at 60-80%)")
        self.assertEqual(p4te.paper_text(("datamining", "ecmp", "large")),
                         "+6 to +24% at 40-80%")
        self.assertIsNone(p4te.paper_text(("websearch", "p4te-nra", "short")))


if __name__ == "__main__":
    unittest.main()
