"""The coverage verdict of `labelguard audit` and doctor: labelguard_coverage() of the library.

    python3 -m labelguard._coverage TABLE.tsv GAPS|"" 0|1

loads _lib.library_path() with ctypes and calls labelguard_coverage(TABLE, GAPS or NULL, QUIET,
1): the report lines on stdout, its exit status (0 all covered or known gaps, 1 some loss kernel
not, 2 bad input) as ours. Run only as a child process by torch_audit.run_coverage, with a
clean environment: loading the library runs its constructor, which stops the process with
status 2 on a bad LABELGUARD_* value, and that must not take the command's own interpreter
with it. A library that cannot be found or loaded, or that predates labelguard_coverage, is
exit 2 with one line and a hint on stderr.
Tested by tests/cli/test_audit.sh.
"""
import ctypes
import os
import sys

from labelguard import _lib


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: python3 -m labelguard._coverage TABLE.tsv GAPS|'' 0|1\n")
        return 2
    table, gaps, quiet = argv
    try:
        path = _lib.library_path()
    except _lib.LibraryNotFound as e:
        sys.stderr.write("%s\n" % e)
        return 2
    try:
        lib = ctypes.CDLL(path)
        fn = lib.labelguard_coverage
    except (OSError, AttributeError) as e:
        sys.stderr.write("%s: no labelguard_coverage (%s)\nhint: point LABELGUARD_LIB at a liblabelguard.so of "
                         "this version, or rebuild it with `make`\n" % (path, e))
        return 2
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    sys.stdout.flush()  # nothing of ours may follow the library's lines on fd 1
    return fn(os.fsencode(table), os.fsencode(gaps) if gaps else None, 1 if quiet == "1" else 0, 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
