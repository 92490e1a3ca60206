"""bad_label.py: one bad-label NLL loss on real torch (on the CUDA test double), guarded by the
installed labelguard in one of three ways, and what came of it as one `RESULT {json}` line.

  python bad_label.py run      under `labelguard run` (the library preloaded)
  python bad_label.py after    labelguard.enable() after import torch and a first CUDA tensor
  python bad_label.py before   labelguard.enable() before import torch (a notebook's first cell)

Run by tests/pip/test_wheel.sh from a directory outside the checkout, which judges the line: the
error's text, labelguard.last_violation()'s samples, that the context still works afterwards
(labels.cpu(), a new copy), and which liblabelguard.so the process mapped. The log-probabilities
and labels are made on the CPU and copied: under the double only the NLL kernel computes.
"""
import json
import sys

way = sys.argv[1]
res = {"way": way}
if way == "before":
    import labelguard
    res["config"] = labelguard.enable()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.zeros(4, device="cuda")  # CUDA has started
if way == "after":
    import labelguard
    res["config"] = labelguard.enable()
import labelguard  # noqa: E402,F811  (under `run`: the API finds the preloaded library)

logp = torch.log_softmax(torch.linspace(-1, 1, 40).reshape(8, 5), 1).cuda()
labels = torch.tensor([0, 1, 5, 2, 7, 3, 4, 0]).cuda()  # 5 and 7 are outside [0, 5)
try:
    res["loss"] = F.nll_loss(logp, labels).item()
    res["raised"] = None
except RuntimeError as e:
    res["raised"] = type(e).__name__
    res["text"] = str(e)
v = labelguard.last_violation()
res["samples"] = [[s["index"], s["value"]] for s in v["bad"]["samples"]] if v else None
res["kernel"] = v.get("kernel") if v else None
res["labels_after"] = labels.cpu().tolist()
res["copy_after"] = torch.tensor([3, 1, 2]).cuda().cpu().tolist()
with open("/proc/self/maps") as f:
    res["maps"] = sorted({ln.split()[-1] for ln in f if ln.rstrip().endswith("/liblabelguard.so")})
print("RESULT " + json.dumps(res))
