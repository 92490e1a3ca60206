"""The IPython / Jupyter extension: `%load_ext labelguard` arms the kernel's own process.

Usually the notebook's first cell, before torch is imported: enable() then arms torch as it
loads. From then on a cell whose loss gets a bad label fails with labelguard's text (a
RuntimeError, torch.AcceleratorError on recent PyTorch) and the CUDA context stays alive, so the
next cell can still use CUDA (`labels.cpu()`, another training step). The options are the
environment's (LABELGUARD_ACTION, ...): set them, or call labelguard.enable(...) with keywords,
before loading the extension. It says what it did in one line; where it cannot arm, it raises
IPython's UsageError with the reason instead of running unguarded.

Called by IPython through labelguard.load_ipython_extension; IPython is imported only then.
Tested by tests/pip/test_wheel.sh (a real Jupyter kernel runs a three-cell notebook on real torch
under the CUDA test double).
"""


def _describe(cfg):
    return "action=%s, mode=%s; log: %s" % (cfg.get("action", "?"), cfg.get("mode", "?"), cfg.get("log", "?"))


def load(ipython):
    from IPython.core.error import UsageError

    from . import LabelguardError, enable

    try:
        cfg = enable()
    except (LabelguardError, ValueError, TypeError) as e:
        raise UsageError("labelguard: not enabled: %s" % e)
    print("labelguard: enabled in this kernel (%s); a bad label now raises RuntimeError and the CUDA "
          "context stays alive" % _describe(cfg))


def unload(ipython):
    from . import disable

    disable()
    print("labelguard: disabled in this kernel (new launches are no longer checked)")
