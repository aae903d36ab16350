"""Tests of `compare` (standard library only): `python3 -m unittest discover -s scripts`."""

import csv
import os
import tempfile
import unittest

from pisa_analysis import compare

FIELDS = ["scheme", "load", "rep", "id", "class", "finished", "fct_us", "retransmits"]


def write_run(d, flows):
    with open(os.path.join(d, "flows.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for i, (fct_us, retx) in enumerate(flows):
            w.writerow({"scheme": "spray-rr", "load": "0.2", "rep": "1", "id": str(i),
                        "class": "short", "finished": "true" if fct_us else "false",
                        "fct_us": fct_us or "", "retransmits": retx})


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


if __name__ == "__main__":
    unittest.main()
