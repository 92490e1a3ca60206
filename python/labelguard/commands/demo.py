"""`labelguard demo` / `make demo` (DESIGN.md §2): one short training loop with a bad label at
step 37, run without the guard, then with it (action raise, then action mask), each run
explained in plain words, then a side-by-side table and `labelguard report` of the logs.

Real PyTorch on a GPU when torch and a GPU are present (labelguard/demo_torch.py, run with this
interpreter); otherwise, in a checkout, the GPU-free program build/demo/demo_train (built here
if missing, with the checkout's make) under the runtime test double build/fakecuda, labelled
SIMULATED. The simulated demo is not part of the installed package: without a GPU and outside
a checkout the command says where it lives and exits 2. LG_DEMO_SIMULATED=1 forces it;
LG_BUILD names the checkout's build directory. The guarded runs go through this command line's
own `run` (a child: commands/_common.self_command), the report through its own `report`.
Exit 0 when every run behaved as described, 2 when something is missing or the guard did not
do its job. Tested by tests/cli/test_demo.sh.
"""
import os
import re
import subprocess
import sys
import tempfile

from labelguard import _lib
from labelguard.commands._common import Fail, self_command

NAME = "demo"
USAGE = """\
  demo                        a short training run with a bad label, without and with the guard
"""
WIDTH = 78          # columns of the explanations (fold -s -w 78)
SIMULATED = ("SIMULATED (no GPU or no PyTorch here): a small CUDA program runs PyTorch's own loss kernel "
             "(nll_loss_forward_reduce_cuda_kernel_2d, declared exactly as in PyTorch) on a stand-in CUDA runtime "
             "that executes kernels on the CPU and fails the way a GPU does (device-side assert).")


class Out:
    """The demo's text: bold headings between dim rules on a terminal (unless NO_COLOR),
    explanations folded at spaces to WIDTH columns."""

    def __init__(self, stream):
        self.w = stream.write
        color = stream.isatty() and not os.environ.get("NO_COLOR")
        self.bold, self.dim, self.reset = ("\033[1m", "\033[2m", "\033[0m") if color else ("", "", "")

    def rule(self):
        self.w("%s%s%s\n" % (self.dim, "\u2500" * 76, self.reset))

    def heading(self, text):
        self.w("\n")
        self.rule()
        self.w("%s%s%s\n" % (self.bold, text, self.reset))
        self.rule()

    def say(self, text):
        for line in fold(text, WIDTH):
            self.w(line + "\n")

    def blank(self):
        self.w("\n")


def fold(text, width):
    """Lines of text broken after the last space that fits in width, as `fold -s` does."""
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", 0, width)
            cut = width if cut < 0 else cut + 1
            out.append(line[:cut])
            line = line[cut:]
        out.append(line)
    return out


def torch_on_gpu(python):
    """(True, "torch X on DEVICE") when python imports torch and sees a GPU, else (False, "")."""
    if os.environ.get("LG_DEMO_SIMULATED", "0") == "1":
        return False, ""
    code = ("import sys, torch\n"
            "if not torch.cuda.is_available(): sys.exit(1)\n"
            "print(torch.__version__, 'on', torch.cuda.get_device_name(0))\n")
    try:
        p = subprocess.run([python, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False, ""
    if p.returncode != 0:
        return False, ""
    return True, (p.stdout.strip().splitlines() or [""])[-1]


def simulated_program():
    """(argv, environment additions) of the GPU-free demo in this checkout, built if needed."""
    root = _lib.checkout_root()
    if root is None:
        raise Fail(2, "demo: no GPU with PyTorch here, and the GPU-free (SIMULATED) demo is not part of the "
                   "installed package: it lives in the labelguard source tree (the program build/demo/demo_train "
                   "on the stand-in CUDA runtime build/fakecuda)",
                   "hint: run `make demo` in a checkout of the labelguard source, or run labelguard demo on a "
                   "machine with a GPU and a CUDA build of torch")
    build_name = os.environ.get("LG_BUILD") or "build"
    build = os.path.join(root, build_name)
    fake = os.path.join(build, "fakecuda")
    prog = os.path.join(build, "demo", "demo_train")
    if not (os.access(prog, os.X_OK) and os.path.exists(os.path.join(fake, "libcudart.so.13"))):
        try:
            rc = subprocess.call(["make", "-s", "-C", root, "--no-print-directory",
                                  build_name + "/demo/demo_train", build_name + "/fakecuda/libcudart.so.13"],
                                 stdout=sys.stderr.fileno())
        except OSError:
            rc = None
        if rc is None:
            raise Fail(2, "the GPU-free demo needs the source tree (build/demo/demo_train, build/fakecuda)",
                       "hint: run `make demo` in the labelguard source tree")
        if rc != 0:
            raise Fail(2, "could not build the GPU-free demo", "hint: run `make demo` in the source tree and read the error")
    old = os.environ.get("LD_LIBRARY_PATH")
    return [prog], {"LD_LIBRARY_PATH": fake + (":" + old if old else "")}


class Runs:
    """The three runs' outputs (one file each under DIR/out) and what the table reads in them."""

    def __init__(self, out, outdir, extra_env):
        self.out, self.dir, self.env = out, outdir, dict(os.environ, **extra_env)
        self.rc = {}

    def run(self, name, argv):
        """Runs argv, stdout and stderr into one file, prints it indented; returns its status."""
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            try:
                rc = subprocess.call(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
            except OSError as e:
                f.write(("%s: %s\n" % (argv[0], e.strerror)).encode())
                rc = 127
        if rc < 0:
            rc = 128 - rc      # killed by a signal: as a shell reports it
        for line in self.text(name).splitlines():
            self.out.w("  \u2502 %s\n" % line)
        self.out.w("  \u2514\u2500 exit status %d\n" % rc)
        self.rc[name] = rc
        return rc

    def text(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def alive(self, name):
        return "yes" if "the CUDA context is alive" in self.text(name) else "no"

    def steps(self, name):
        """From "finished: N of 60", or "... after N of 60 steps" (then it died); the last one."""
        found = ""
        for line in self.text(name).splitlines():
            m = re.match(r"finished: ([0-9]*) of", line)
            if m:
                found = m.group(1)
                continue
            m = re.match(r".*after ([0-9]*) of [0-9]* steps", line)
            if m:
                found = m.group(1) + ", then died"
        return found

    def named(self, name):
        return "yes" if re.search(r"target\[[0-9]*\] = 10", self.text(name)) else "no"


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print("usage: labelguard demo")
        return 0
    python = sys.executable
    real, kind = torch_on_gpu(python)
    if real:
        prog, extra = [python, os.path.join(_lib.package_dir(), "demo_torch.py")], {}
        kind = "real PyTorch " + kind
    else:
        prog, extra = simulated_program()
        kind = SIMULATED
    try:
        logs = tempfile.mkdtemp(prefix="labelguard-demo.")
    except OSError:
        raise Fail(2, "cannot create a temporary directory", "hint: check TMPDIR")
    os.makedirs(os.path.join(logs, "out"))
    out = Out(sys.stdout)
    runs = Runs(out, os.path.join(logs, "out"), extra)
    lg = self_command()

    out.heading("labelguard demo")
    out.say("A classifier trains for 60 steps on batches of 64 labels with 10 classes (valid labels: 0..9). At step 37 "
            "the batch comes from a label file numbered from 1: its labels are 1..10 instead of 0..9, so the samples "
            "of the last class carry the label 10, which is out of range. The same program runs three times.")
    out.blank()
    out.say("Running: " + kind)
    sys.stdout.flush()

    out.heading("Run 1 of 3: without labelguard")
    out.say("What to expect: PyTorch's loss kernel hits its device-side assert. The error surfaces later, at "
            "loss.item(), and it poisons the CUDA context: every later CUDA call fails, so the bad labels cannot even "
            "be copied back to look at them. The job dies.")
    out.blank()
    rc1 = runs.run("plain", prog)
    out.blank()
    if rc1 != 0:
        out.say("What happened: the job died (exit status %d) with 'device-side assert triggered'. It does not say "
                "which labels were wrong or where they came from, and nothing on the GPU could be read afterwards." % rc1)
    else:
        out.say("What happened: unexpectedly, the job did not fail (exit status 0).")

    out.heading("Run 2 of 3: with labelguard, action raise (the default)")
    out.say("labelguard checks the labels before the loss kernel runs. It blocks the launch, prints a report (below, on "
            "stderr) and turns it into an ordinary CUDA error, so PyTorch raises a RuntimeError at the loss call itself. "
            "The context stays alive: the training loop can catch the exception, look at the batch, skip it, and go on.")
    out.blank()
    rc2 = runs.run("raise", lg + ["run", "--action", "raise", "--log", os.path.join(logs, "raise"), "--"] + prog)
    out.blank()
    if rc2 == 0 and runs.alive("raise") == "yes":
        out.say("What happened: the report named the kernel, the offending label (index and value), the likely cause "
                "and the fix; the exception came at the loss call; the labels could be read back; the loop skipped the "
                "batch and finished (exit status %d)." % rc2)
        if not real:
            out.blank()
            out.say("The report's \"at\" line is the call site. In a PyTorch job it names your Python file, line and "
                    "function (e.g. \"at train.py:52 in train_step (python)\"); this simulated program has no Python, "
                    "so it names the native function that launched the kernel.")
    else:
        out.say("What happened: NOT what was expected: the guard did not keep the job alive (exit status %d). See the "
                "output above." % rc2)

    out.heading("Run 3 of 3: with labelguard, action mask")
    out.say("labelguard replaces each bad label by ignore_index in a copy, so the loss skips those samples; every masked "
            "sample is reported and logged. No exception: training goes on.")
    out.blank()
    rc3 = runs.run("mask", lg + ["run", "--action", "mask", "--log", os.path.join(logs, "mask"), "--"] + prog)
    out.blank()
    if rc3 == 0 and runs.steps("mask") == "60":
        out.say("What happened: at step 37 the out-of-range labels were left out of the loss, the report says which "
                "ones, and all 60 steps ran (exit status %d)." % rc3)
    else:
        out.say("What happened: NOT what was expected: the run did not train all 60 steps (exit status %d). See the "
                "output above." % rc3)

    out.heading("Side by side")
    row = "  %-34s %-14s %-14s %-14s\n"
    out.w(row % ("", "without", "raise", "mask"))
    out.w(row % ("exit status", rc1, rc2, rc3))
    out.w(row % ("steps trained (of 60)", runs.steps("plain"), runs.steps("raise"), runs.steps("mask")))
    out.w(row % ("bad labels named (index, value)", runs.named("plain"), runs.named("raise"), runs.named("mask")))
    out.w(row % ("context alive after the error", runs.alive("plain"), runs.alive("raise"),
                 runs.alive("mask") if "RuntimeError" in runs.text("mask") else "n/a (no error)"))

    out.heading("labelguard report: the logs of runs 2 and 3, merged")
    out.say("Every process writes one JSON line per event under --log DIR; `labelguard report DIR` merges them, across "
            "processes and ranks, into one entry per distinct problem (exit status 1: problems found).")
    out.blank()
    sys.stdout.flush()
    p = subprocess.run(lg + ["report", logs], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        out.w("  %s\n" % line)
    if not real and cupti_warned(logs):
        out.blank()
        out.say("(The cupti_unavailable warning is expected here: without a GPU driver CUPTI cannot start, and "
                "labelguard uses its LD_PRELOAD hooks alone, which is all this program needs.)")
    out.w("\nThe logs stay in %s (try: labelguard report %s).\n" % (logs, logs))

    # The demo is also a check: say so when the guard did not do what the text above claims.
    bad = ""
    if rc1 == 0:
        bad += "; run 1 did not fail (is the stand-in runtime emulating the device assert?)"
    if not (rc2 == 0 and runs.alive("raise") == "yes"):
        bad += "; run 2 did not survive the bad batch"
    if not (rc3 == 0 and runs.steps("mask") == "60"):
        bad += "; run 3 did not train all 60 steps"
    if bad:
        out.blank()
        raise Fail(2, "the demo did not go as described" + bad,
                   "hint: run `make test` to see which part of labelguard is failing")
    return 0


def cupti_warned(logs):
    """Whether a log of runs 2 and 3 holds the cupti_unavailable warning."""
    for sub in ("raise", "mask"):
        d = os.path.join(logs, sub)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".jsonl"):
                try:
                    with open(os.path.join(d, name), "rb") as f:
                        if b'"what":"cupti_unavailable"' in f.read():
                            return True
                except OSError:
                    pass
    return False
