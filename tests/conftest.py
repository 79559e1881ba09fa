from __future__ import annotations

import sys
from pathlib import Path

# The oracle and instance generator live beside the tests, importable as modules.
sys.path.insert(0, str(Path(__file__).parent))
