"""pisa-switch's analysis package: the tables and plots of the experiments' CSV and JSON files.

Run as `scripts/analysis SUBCOMMAND ...` (the plot venv's python when there is one), or
`cd scripts && python3 -m pisa_analysis SUBCOMMAND ...`; `--help` lists the subcommands and
each one's `--help` says what it reads and writes:

  fct-table         the FCT table of a `pisa-fabric experiment` run, with intervals and paired ratios
  experiment-plots  fct_vs_load.png, fct_cdf.png, uplink_balance.png of a `pisa-fabric experiment` run
  uplinks-plot      per-uplink load of a `pisa-fabric demo` run
  dbb-plot          goodput and reordering of `pisa-fabric dbb` (E8, E9)
  pint-plot         PINT's E13, E12 and E11 figures
  qcn-plot          P4QCN's Fig. 12 (a reaction point's rates)
  qcn-fbps          P4QCN's feedback packets in a capture
  p4te-table        P4TE's reproduction tables (E2-E4, E6)
  p4te-e5           P4TE's flowlet-gap sweep (E5)
  splitting-table   the packet-splitting tables (E14, E15)
  e14-fig2          E14's Fig. 2 arrangement

Modules: `data` (the one CSV/JSON reader), `stats` (the one definition of each statistic),
`style` (the one plotting style), one module per family. Tables need only the standard
library; plots need matplotlib, imported only when a plot is drawn.
"""
