"""labelguard/_bootstrap/sitecustomize.py: how `labelguard run` gets the torch.compile check
(labelguard/_compiled.py) into the Python interpreters it starts.

The library's constructor puts this directory first on PYTHONPATH in each Python interpreter it
is preloaded into, before the interpreter starts (src/hooks/pyboot.c), so every Python process
of a job (the script, torchrun's workers, under `labelguard run` or a bare LD_PRELOAD) imports
this file at start. First, before any user code, it gives the program back what it was given:
PYTHONPATH as it was (the constructor kept it in LABELGUARD_PYTHONPATH_WAS, dropped here too)
and sys.path without this directory, so os.environ, sys.path and every child's environment are
unchanged (a child interpreter gets the bootstrap from the preload again). Then it installs _compiled.bootstrap() where the library is preloaded
(a meta path entry that waits for Inductor: nothing else is imported or loaded), then runs the
sitecustomize this one shadows, if there is one. _compiled.py is loaded by its path, so an
interpreter that cannot import the labelguard package is still covered. Never raises: a
failure is one line on stderr and the job runs as it would have.
Tested by tests/torch-fake/test_compiled.sh, test_compiled_bare.sh, tests/cli/test_run.sh and
tests/e2e/test_untouched.sh (the environment and sys.path with and without the preload).
"""
import os
import sys


def _labelguard_restore():
    was = os.environ.pop("LABELGUARD_PYTHONPATH_WAS", None)
    if was == "unset":
        os.environ.pop("PYTHONPATH", None)
    elif was is not None and was.startswith("set:"):
        os.environ["PYTHONPATH"] = was[4:]


def _labelguard_bootstrap():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        _labelguard_restore()
    except Exception as e:  # a read-only environment: the job runs as it would have
        sys.stderr.write("labelguard: could not restore PYTHONPATH: %s: %s\n" % (type(e).__name__, e))
    try:
        if "liblabelguard" in os.environ.get("LD_PRELOAD", ""):
            module = sys.modules.get("labelguard._compiled")
            if module is None:
                import importlib.util

                spec = importlib.util.spec_from_file_location(
                    "labelguard._compiled", os.path.join(os.path.dirname(here), "_compiled.py"))
                module = importlib.util.module_from_spec(spec)
                sys.modules["labelguard._compiled"] = module
                spec.loader.exec_module(module)
            module.bootstrap()
    except Exception as e:  # the job runs as it would have
        sys.stderr.write("labelguard: torch.compile'd losses stay unchecked: %s: %s\n" % (type(e).__name__, e))
    # The sitecustomize this one shadows (a distribution's, a virtualenv's), as Python would
    # have run it. The import that runs this file takes sys.modules["sitecustomize"] back when
    # it ends: it finds the shadowed module there, or this one.
    me = sys.modules.get("sitecustomize")
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
    except Exception as e:
        sys.modules["sitecustomize"] = me
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(e).__name__, e))


_labelguard_bootstrap()
del _labelguard_bootstrap
