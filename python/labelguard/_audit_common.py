"""labelguard._audit_common: what the modules of labelguard.torch_audit share: the error a reader
raises for a problem the user can act on, the cache directory the decompressors' pip packages
go to, and the guard that turns a reader's failures into one line and status 2 (guarded, run_main).

Imported by labelguard.torch_audit and its readers (_audit_compress, _audit_elf, _audit_source,
_audit_coverage, _audit_asserts); standard library only. Tested through them by tests/cli/test_audit.sh.
"""
import os
import sys
import zipfile


class AuditError(Exception):
    """A user-facing problem: printed as one line with a hint, exit status 2."""


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "labelguard")


def guarded(fn, *args):
    """fn(*args)'s exit status, with the user-facing failures as one line and status 2 (never a
    traceback): the audit's own errors, unreadable files, a broken zip."""
    try:
        return fn(*args)
    except AuditError as e:
        print("lg_audit: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        print("lg_audit: %s: %s" % (e.filename or "", e.strerror or e), file=sys.stderr)
        return 2
    except zipfile.BadZipFile as e:
        print("lg_audit: not a readable wheel: %s" % e, file=sys.stderr)
        return 2


def run_main(main):
    """A reader module's `python -m` entry: guarded(main, argv), ^C as 130, a closed pipe as 0."""
    try:
        sys.exit(guarded(main, sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
