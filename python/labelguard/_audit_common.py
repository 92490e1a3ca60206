"""labelguard._audit_common: what the modules of labelguard.torch_audit share: the error a reader
raises for a problem the user can act on, and the cache directory the decompressors' pip packages
go to.

Imported by labelguard.torch_audit and its readers (_audit_compress, _audit_elf, _audit_source,
_audit_coverage); standard library only. Tested through them by tests/cli/test_audit.sh.
"""
import os


class AuditError(Exception):
    """A user-facing problem: printed as one line with a hint, exit status 2."""


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "labelguard")

