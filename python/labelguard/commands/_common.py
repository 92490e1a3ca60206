"""What the subcommands share: the error that ends a command with a message and an exit status,
the request for the usage, where the library is (run, attach), and how a command runs this same
command line again as a child process (demo).

Used by labelguard/cli.py and every module of labelguard/commands/; standard library only.
"""
import os
import sys


class Fail(Exception):
    """Ends a command: cli.main prints each line as `labelguard: LINE` on stderr and returns
    code (2: usage or environment error, DESIGN.md §5). The last line is usually a hint."""

    def __init__(self, code, *lines):
        Exception.__init__(self, "\n".join(lines))
        self.code = code
        self.lines = lines


class ShowUsage(Exception):
    """A command asked for help (`run` with no command): cli.main prints the usage on stdout and
    returns 0. Raised rather than printed here, so that no command reaches back into cli."""


def require_library():
    """The library's absolute path, or Fail(2) saying what to do."""
    from labelguard import _lib
    try:
        lib = _lib.library_path()
    except _lib.LibraryNotFound as e:
        raise Fail(2, *str(e).split("\n"))
    if not os.access(lib, os.R_OK):
        raise Fail(2, "%s: not readable" % lib, "hint: check its permissions")
    return lib


def say_error(*lines):
    """The lines on stderr, each prefixed `labelguard: ` (a line may hold several)."""
    for text in lines:
        for line in str(text).split("\n"):
            sys.stderr.write("labelguard: %s\n" % line)
    sys.stderr.flush()


def package_parent():
    """The directory that holds the labelguard package (python/ in a checkout, site-packages
    when installed)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def self_command():
    """argv that runs this command line again in a child, from the same package and interpreter,
    without putting anything on the child's PYTHONPATH (which the commands it runs would inherit).
    -I: neither the working directory nor PYTHON* variables shape the child's sys.path."""
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from labelguard.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-I", "-c", code, package_parent()]
