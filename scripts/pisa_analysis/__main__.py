"""The command line: `python3 -m pisa_analysis SUBCOMMAND ...` (see the package's doc)."""

from __future__ import annotations

import argparse

from . import (compare, dbb, experiment, fct_table, p4te, p4te_figures, pint, qcn, splitting,
               uplinks)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="pisa_analysis",
        description="The tables and plots of pisa-switch's experiments; each subcommand's --help "
        "says what it reads and writes.",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    for module in (fct_table, compare, experiment, uplinks, dbb, pint, qcn, p4te, p4te_figures,
                   splitting):
        module.register(sub)
    a = ap.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
