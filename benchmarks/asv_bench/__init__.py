"""asv suites for tdmcore (see ../asv.conf.json and docs/benchmarks.md)."""
