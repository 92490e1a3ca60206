"""dead_context.py: the Python API's refusals, on real torch (on the CUDA test double).

enable(); a bad loss raises labelguard's error; disable(); the same loss now reaches the kernel,
whose device-side assert kills the context as on a GPU; enable() again must raise
LabelguardError naming the dead context (nothing can guard a process whose context is gone).
Prints `STEP name outcome` lines; run by tests/pip/test_wheel.sh."""
import labelguard
import torch
import torch.nn.functional as F

labelguard.enable()
logp = torch.log_softmax(torch.linspace(-1, 1, 40).reshape(8, 5), 1).cuda()
labels = torch.tensor([0, 1, 5, 2, 7, 3, 4, 0]).cuda()


def attempt(name, fn):
    try:
        fn()
        print("STEP", name, "ok")
    except labelguard.LabelguardError as e:
        print("STEP", name, "LabelguardError", str(e).replace("\n", " "))
    except RuntimeError as e:
        print("STEP", name, "RuntimeError", str(e).replace("\n", " ")[:300])


attempt("guarded", lambda: F.nll_loss(logp, labels).item())
labelguard.disable()
attempt("disabled", lambda: (F.nll_loss(logp, labels).item(), torch.cuda.synchronize()))
attempt("enable_again", labelguard.enable)
