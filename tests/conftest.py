from __future__ import annotations

import sys
from pathlib import Path

# The oracle and instance generator live beside the tests, importable as modules;
# the benchmarks' cluster generator and brute-force cycle check are shared too.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
