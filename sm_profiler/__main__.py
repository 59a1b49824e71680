"""`python -m sm_profiler ...`: the same command line as the `sm-profiler` console script."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
