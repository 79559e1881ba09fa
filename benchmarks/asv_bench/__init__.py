"""asv suites for tdmcore (see ../asv.conf.json and the README's Benchmarks section)."""
