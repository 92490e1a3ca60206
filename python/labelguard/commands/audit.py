"""`labelguard audit [WHEEL|PYTHON|TABLE.tsv]` (DESIGN.md §2): reads a torch build's loss kernels
from its binaries (default: the torch of python3) and prints which the spec table covers.
`labelguard audit --asserts [WHEEL|PYTHON]`: the census of the build's device asserts, each site
checked, partial or unchecked before the launch (labelguard._audit_asserts; exit 1 when a site
is in no classification, tests/wheels/asserts/sites.tsv).

The reading and matching are labelguard.torch_audit's (coverage_main): the kernels come from
the cubins' own metadata, the verdict from the library's registry (its labelguard_coverage(),
so an installed wheel answers as a checkout does; or $LG_SPECMATCH), the committed tables
and known gaps from _lib.data_path("wheels/..."). Exit 0 all covered (or known gaps), 1 some
loss kernel not covered, 2 bad input or missing tool, with a one-line message.
Tested by tests/cli/test_audit.sh and tests/cli/test_asserts.sh.
"""
from labelguard import _audit_asserts, torch_audit
from labelguard.commands._common import Fail

NAME = "audit"
USAGE = """\
  audit [WHEEL|PYTHON|TABLE]  read a torch build's loss kernels from its binaries (default:
                              the torch of python3) and show which the spec table covers;
                              exit 1 when some are not covered
  audit --asserts [WHEEL|PYTHON]
                              every device assert site of a torch build, and whether
                              labelguard checks it before the launch (takes minutes)
"""
USAGE_LINE = "usage: labelguard audit [WHEEL|PYTHON|TABLE.tsv] | audit --asserts [WHEEL|PYTHON]"


def main(argv):
    if argv and argv[0] == "--asserts":
        if len(argv) > 2:
            raise Fail(2, USAGE_LINE)
        arg = argv[1] if len(argv) > 1 else "python3"
        if arg.startswith("-"):
            raise Fail(2, "audit: unknown option '%s'" % arg, "hint: labelguard audit --asserts [WHEEL|PYTHON]")
        return _audit_asserts.guarded(_audit_asserts.census_main, arg, False)
    if len(argv) > 1:
        raise Fail(2, USAGE_LINE)
    arg = argv[0] if argv else "python3"
    if arg in ("-h", "--help"):
        print(USAGE_LINE)
        return 0
    if arg.startswith("-"):
        raise Fail(2, "audit: unknown option '%s'" % arg,
                   "hint: labelguard audit [WHEEL|PYTHON|TABLE.tsv], or audit --asserts [WHEEL|PYTHON]")
    return torch_audit.guarded(torch_audit.coverage_main, arg, False)
