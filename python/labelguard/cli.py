"""The `labelguard` command line (DESIGN.md §2): `labelguard COMMAND [ARGS]`.

Entry point of the console script (labelguard.cli:main), of `python -m labelguard` and of the
checkout's shim scripts/labelguard. main(argv) parses only the first word and hands the rest to
the subcommand's module in labelguard/commands/ (the registry in commands/__init__.py):
  run      preload liblabelguard.so into a command and its children, exec it (commands/run.py)
  report   merge JSONL logs of many processes and ranks (commands/report.py)
  doctor   what the library will see in this environment, each line ✓/✗ with a hint
  audit    which of a torch build's loss kernels the spec table covers (torch_audit.py)
  attach   load the library into a running process (gdb, or the ptrace injector inject.py)
  demo     a training loop with a bad label at step 37, without and with labelguard
Exit status (DESIGN.md §5): `run` exec's the command, so its status is the command's own;
otherwise 0 ok, 1 problems found (report, audit), 2 usage or environment error, with a message
that says what to do. Quoting rule: no value from the environment or the arguments is ever
evaluated by a shell: every child is run as an argument vector (subprocess lists, os.execvpe).
Python 3.8+, standard library only. Tested by tests/cli/test_*.sh (`LG_TESTS=cli make test`).
"""
import os
import sys

from labelguard import __version__
from labelguard.commands import COMMANDS
from labelguard.commands._common import Fail, ShowUsage, say_error


# The shim scripts/labelguard runs us with the checkout's python/ first on PYTHONPATH, and with
# PYTHONSAFEPATH=1 (Python 3.11+: the working directory not on sys.path, so a json.py or
# signal.py beside the user's train.py cannot stand in for the standard library's). It records
# the values it found in LG_SHIM_<NAME> ("unset", or "set:" and the value); they are restored at
# once, so the commands that `run` exec's and the probes doctor starts see the user's own.
SHIM_VARIABLES = ("PYTHONPATH", "PYTHONSAFEPATH")


def restore_shim_environment(environ=os.environ):
    for name in SHIM_VARIABLES:
        saved = environ.pop("LG_SHIM_" + name, None)
        if saved is None:
            continue
        if saved.startswith("set:"):
            environ[name] = saved[4:]
        else:
            environ.pop(name, None)


def usage():
    lines = ["usage: labelguard COMMAND [ARGS]", ""]
    for m in COMMANDS.values():
        lines += m.USAGE.rstrip("\n").split("\n")
    lines += ["",
              "  actions: raise (default), hold, mask, log, abort      modes: sync (default), async",
              "  environment: LABELGUARD_LIB=/path/liblabelguard.so overrides where the library is found"]
    return "\n".join(lines) + "\n"


def dispatch(argv):
    if not argv:
        sys.stderr.write(usage())
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd in COMMANDS:
        return COMMANDS[cmd].main(rest)
    if cmd in ("help", "--help", "-h"):
        sys.stdout.write(usage())
        return 0
    if cmd in ("version", "--version"):
        sys.stdout.write("labelguard %s\n" % __version__)
        return 0
    sys.stderr.write(usage())
    raise Fail(2, "unknown command '%s'" % cmd)


def main(argv=None):
    """Runs one command line (argv without the program name; default sys.argv[1:]) and returns
    its exit status; `run` does not return when it exec's the command."""
    restore_shim_environment()
    if argv is None:
        argv = sys.argv[1:]
    try:
        rc = dispatch(list(argv))
        sys.stdout.flush()   # here, where a closed pipe is caught, not at interpreter exit
        return rc
    except ShowUsage:
        sys.stdout.write(usage())
        sys.stdout.flush()
        return 0
    except Fail as e:
        sys.stdout.flush()
        say_error(*e.lines)
        return e.code
    except BrokenPipeError:
        # The reader went away (`labelguard report ... | head`): not an error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not complain again.
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.stdout.fileno())
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        return 130
