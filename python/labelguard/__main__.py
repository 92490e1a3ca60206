"""`python -m labelguard ...`: the same command line as the `labelguard` console script
(labelguard.cli:main), which scripts/labelguard, the checkout's shim, runs this way."""
import sys

from labelguard.cli import main

if __name__ == "__main__":
    sys.exit(main())
