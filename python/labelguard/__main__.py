"""`python -m labelguard ...`: the same command line as the `labelguard` console script
(labelguard.cli:main), which scripts/labelguard, the checkout's shim, runs this way."""
import os
import sys

# `python -m` puts the working directory first on sys.path: a json.py or signal.py there (beside
# the user's train.py) would replace the standard library's in the modules imported below.
# Python 3.11+ leaves it out under PYTHONSAFEPATH=1, which the shim sets; older ones here.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from labelguard.cli import main  # noqa: E402  (after the sys.path fix above)

if __name__ == "__main__":
    sys.exit(main())
