"""`python -m benchmarks list | run [--out DIR] NAME [ARGS...] | run all` (benchmarks/runner.py)."""

import sys

from benchmarks.runner import main

sys.exit(main())
