"""Tests of `compare` (standard library only): `python3 -m unittest discover -s scripts`."""

import csv
import os
import tempfile
import unittest

from pisa_analysis import compare

FIELDS = ["scheme", "load", "rep", "id", "class", "finished", "fct_us", "retransmits",
          "size_bytes"]


def write_run(d, flows):
    with open(os.path.join(d, "flows.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for i, (fct_us, retx) in enumerate(flows):
            w.writerow({"scheme": "spray-rr", "load": "0.2", "rep": "1", "id": str(i),
                        "class": "short", "finished": "true" if fct_us else "false",
                        "fct_us": fct_us or "", "retransmits": retx,
                        "size_bytes": 5000 if i < 3 else 100_000})


class ByRecovery(unittest.TestCase):
    def test_a_gap_in_the_flows_only_the_reference_recovered_shows_in_that_group(self):
        with tempfile.TemporaryDirectory() as ref, tempfile.TemporaryDirectory() as other:
            # Flows 0-1 clean in both and equal; 2-3 retransmitted in ref only, twice as slow
            # there; 4 retransmitted in both; 5 unfinished in ref, so in no group.
            write_run(ref, [(1000, 0), (2000, 0), (4000, 2), (8000, 1), (3000, 1), (None, 0)])
            write_run(other, [(1000, 0), (2000, 0), (2000, 0), (4000, 0), (3000, 3), (500, 0)])
            text = compare.by_recovery(ref, other)
        row = [l for l in text.splitlines() if l.startswith("| spray-rr")]
        self.assertEqual(row, ["| spray-rr | 0.2 | short | 2, 1.00 | 2, 0.50 | 0, - | 1, 1.00 |"])


class BySize(unittest.TestCase):
    def test_each_size_bucket_has_the_medians_of_the_flows_finished_in_both(self):
        with tempfile.TemporaryDirectory() as ref, tempfile.TemporaryDirectory() as other:
            # Flows 0-2 of 5 KB, 3-5 of 100 KB; flow 5 unfinished in ref.
            write_run(ref, [(1000, 0), (2000, 0), (3000, 0), (8000, 0), (10000, 0), (None, 0)])
            write_run(other, [(1000, 0), (2000, 0), (3000, 0), (4000, 0), (5000, 0), (500, 0)])
            text = compare.by_size(ref, other)
        row = [l for l in text.splitlines() if l.startswith("| spray-rr")]
        self.assertEqual(row, ["| spray-rr | 0.2 | 3: 2.0 / 2.0 (1.00) | 0: - / - (-) | "
                               "0: - / - (-) | 2: 9.0 / 4.5 (0.50) | 0: - / - (-) |"])


SUMMARY = ["scheme", "load", "rep", "short_n", "short_avg_fct_us", "large_n", "large_avg_fct_us"]


def write_summary(d, rows):
    with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, SUMMARY)
        w.writeheader()
        for scheme, rep, short_us in rows:
            w.writerow({"scheme": scheme, "load": "0.4", "rep": str(rep), "short_n": "5",
                        "short_avg_fct_us": str(short_us), "large_n": "0",
                        "large_avg_fct_us": "0"})


class SettledPairs(unittest.TestCase):
    def test_only_pairs_the_reference_separates_are_judged_and_each_gets_a_verdict(self):
        with tempfile.TemporaryDirectory() as ref, tempfile.TemporaryDirectory() as other:
            # ref: a twice as fast as b in every rep (settled); c level with a (not settled)
            # and half of b; other: a/b reversed, c faster than b, a/c anything.
            write_summary(ref, [(s, r, v) for r in range(1, 6) for s, v in
                                (("a", 1000 + r), ("b", 2000 + 2 * r), ("c", 1000 + r + 10 * (-1) ** r))])
            write_summary(other, [(s, r, v) for r in range(1, 6) for s, v in
                                  (("a", 3000 + r), ("b", 2000 + r), ("c", 1000 + r))])
            rows, settled, same = compare.settled_pairs(ref, other)
        self.assertEqual((settled, same), (2, 1))
        self.assertIn("| 0.4 | short | a / b | 0.50 [0.50, 0.50] | 1.50 [1.50, 1.50] | reversed |",
                      rows)
        self.assertTrue(any(r.startswith("| 0.4 | short | b / c |") and r.endswith("| same |")
                            for r in rows), rows)


if __name__ == "__main__":
    unittest.main()
