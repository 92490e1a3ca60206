"""`labelguard run [--action A] [--log DIR] [--mode M] [--hooks H] [--quiet] [--kernels FILE]
-- CMD ARGS...`: runs CMD with liblabelguard.so preloaded, so that its children inherit it
(torchrun workers, DataLoader workers, SLURM steps).

Two stages, in this process: parse the options into LABELGUARD_* variables, check every
LABELGUARD_* value with the library's own parser (a throwaway `true` under the library exits 2
with the message), put the library first in LD_PRELOAD, then os.execvpe CMD: no parent is left
behind, signals reach CMD directly and the exit status is CMD's own. The library is the one
_lib.library_path() returns: $LABELGUARD_LIB, the wheel's own, or a checkout's build/.
PYTHONPATH is left as it is: the library's constructor gives each of the job's Python
interpreters the torch.compile check's bootstrap (labelguard/_bootstrap) and the bootstrap puts
PYTHONPATH back before any user code runs (src/hooks/pyboot.c), so the job and its children see
the environment they were given. prepare() is the first stage alone; `labelguard demo` uses it to run its programs as children.
preload_value() is the LD_PRELOAD rule, a pure function tested on its own.
Tested by tests/cli/test_run.sh and tests/cli/test_quoting.sh.
"""
import os
import signal
import subprocess
import shutil

from labelguard.commands._common import Fail, ShowUsage, require_library

NAME = "run"
USAGE = """\
  run [--action A] [--log DIR] [--mode sync|async] [--hooks H] [--quiet] [--kernels FILE]
      -- CMD ARGS...          run CMD with the guard preloaded (children inherit it);
                              exit status is CMD's
"""
OPTIONS_HINT = ("hint: labelguard run [--action A] [--log DIR] [--mode sync|async] [--hooks H] [--quiet] "
                "[--kernels FILE] -- CMD ARGS...")

# ld.so splits LD_PRELOAD on spaces and colons (and the shell's IFS whitespace: tabs, newlines).
PRELOAD_SEPARATORS = " :\t\n"
SANITIZER_PREFIXES = ("libasan.so", "libtsan.so", "libubsan.so", "libhwasan.so", "liblsan.so")
SPACE = " \t\n\v\f\r"      # [[:space:]]: characters LD_PRELOAD cannot hold in a path


def is_sanitizer_runtime(entry):
    base = entry.rsplit("/", 1)[-1]
    return base.startswith(SANITIZER_PREFIXES) or (base.startswith("libclang_rt.") and "san" in base[12:])


def preload_value(lib, old):
    """The new LD_PRELOAD: lib first, except that sanitizer runtimes already in the list stay in
    front (ASan/TSan refuse to start otherwise); an entry equal to lib is dropped, so a nested
    `labelguard run` does not load it twice. Entries are split as ld.so splits them and joined
    with single spaces."""
    entries = old or ""
    for sep in PRELOAD_SEPARATORS[1:]:
        entries = entries.replace(sep, " ")
    front, back = [], []
    for e in entries.split(" "):
        if not e or e == lib:
            continue
        (front if is_sanitizer_runtime(e) else back).append(e)
    return " ".join(front + [lib] + back)


def parse(argv):
    """Options -> (dict of LABELGUARD_* to set, whether --quiet, list of --kernels files,
    the command). Raises Fail with today's messages; --help returns None."""
    env, kernels, quiet = {}, [], False
    i = 0
    while i < len(argv):
        opt = argv[i]
        if opt == "--":
            i += 1
            break
        if opt in ("--quiet", "-q"):
            quiet = True
            i += 1
            continue
        if opt in ("--help", "-h"):
            return None
        name = opt.split("=", 1)[0]
        if name in ("--action", "--log", "--mode", "--hooks", "--kernels") and "=" in opt:
            val = opt.split("=", 1)[1]
            opt = name
            i += 1
        elif opt in ("--action", "--log", "--mode", "--hooks", "--kernels"):
            if i + 1 >= len(argv):
                raise Fail(2, "%s needs a value" % opt, "hint: labelguard run %s VALUE -- CMD" % opt)
            val = argv[i + 1]
            i += 2
        elif opt.startswith("-"):
            raise Fail(2, "run: unknown option '%s'" % opt, OPTIONS_HINT)
        else:
            break   # the command starts here (the `--` is optional when CMD does not start with -)
        if opt == "--action":
            env["LABELGUARD_ACTION"] = val
        elif opt == "--mode":
            env["LABELGUARD_MODE"] = val
        elif opt == "--hooks":
            env["LABELGUARD_HOOKS"] = val
        elif opt == "--log":
            if not val:
                raise Fail(2, "--log needs a directory")
            if os.path.exists(val) and not os.path.isdir(val):
                raise Fail(2, "--log '%s' exists and is not a directory" % val,
                           "hint: choose a directory; it is created on the first event")
            # Absolute, so children that change directory still log to the same place.
            env["LABELGUARD_LOG"] = val if val.startswith("/") else os.path.join(os.getcwd(), val)
        elif opt == "--kernels":
            if not (os.path.isfile(val) and os.access(val, os.R_OK)):
                raise Fail(2, "--kernels '%s': no such readable file" % val,
                           "hint: a kernel spec file in the format of specs/pytorch.conf")
            if not val.startswith("/"):
                val = os.path.join(os.getcwd(), val)
            if ":" in val:
                raise Fail(2, "--kernels '%s': the path contains ':', which separates files in LABELGUARD_KERNELS" % val,
                           "hint: rename or link the file to a path without ':'")
            kernels.append(val)
    return env, quiet, kernels, argv[i:]


def check_config(lib, env):
    """The library's own parser (config.c) judges every LABELGUARD_* value of env, set by an
    option or already there (set but empty is a bad value): the library runs in a throwaway
    `true`, whose constructor stops it with status 2 and one message naming the variable and
    its allowed values. So a typo fails here, before a long job starts, by the same rules.
    Raises Fail(2) with no text of ours (the library's message is already printed)."""
    true = shutil.which("true", path=env.get("PATH")) or "true"
    try:
        p = subprocess.run([true], env=dict(env, LD_PRELOAD=lib), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError:
        return   # no `true` to run: the library checks again when the command starts
    if p.returncode == 2:
        os.write(2, p.stderr)
        raise Fail(2)


def prepare(argv, environ=None):
    """Stage one of `run`: returns (environment, command) with the library preloaded, or None
    for --help. Raises Fail for a bad option, a bad LABELGUARD_* value or a missing library."""
    parsed = parse(argv)
    if parsed is None:
        return None
    opts, quiet, kernels, cmd = parsed
    if not cmd:
        raise Fail(2, "run: no command given", "hint: labelguard run -- python train.py")
    lib = require_library()
    if any(c in SPACE or c == ":" for c in lib):
        raise Fail(2, "library path '%s' contains a space or ':'; LD_PRELOAD cannot hold it" % lib,
                   "hint: install it (make install) or copy it to a path without spaces, then set LABELGUARD_LIB")
    env = dict(os.environ if environ is None else environ)
    env.update(opts)
    # The library's default (labelguard-logs) is relative to each process's working directory;
    # made absolute here so that children that change directory log next to their parent.
    if "LABELGUARD_LOG" not in opts and "LABELGUARD_LOG" not in env:
        env["LABELGUARD_LOG"] = os.path.join(os.getcwd(), "labelguard-logs")
    if quiet:
        env["LABELGUARD_QUIET"] = "1"
    if kernels:
        env["LABELGUARD_KERNELS"] = ":".join(([env["LABELGUARD_KERNELS"]] if env.get("LABELGUARD_KERNELS") else [])
                                             + kernels)
    check_config(lib, env)
    env["LD_PRELOAD"] = preload_value(lib, env.get("LD_PRELOAD", ""))
    return env, cmd


def main(argv):
    prepared = prepare(argv)
    if prepared is None:
        raise ShowUsage()
    env, cmd = prepared
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec, so give
    # the command the default dispositions a shell's exec would have given it.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(cmd[0], cmd, env)
    except FileNotFoundError:
        if "/" in cmd[0]:
            raise Fail(127, "run: %s: no such file" % cmd[0], "hint: check the path of the command")
        raise Fail(127, "run: %s: command not found" % cmd[0], "hint: give the command as you would run it")
    except PermissionError:
        raise Fail(126, "run: %s: permission denied" % cmd[0], "hint: check that the file is an executable")
    except OSError as e:
        raise Fail(126, "run: %s: cannot execute: %s" % (cmd[0], e.strerror))
