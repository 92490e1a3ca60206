"""cond_capture.py: torch.cond inside torch.cuda.graph capture, as torch 2.15 captures it: each
branch into an IF conditional node's body (torch._higher_order_ops.cudagraph_conditional_nodes,
cudaStreamBeginCaptureToGraph), with an NLL forward in the true branch. Run by
tests/torch-fake/test_cond_capture.sh under build/torch-python (CUDA 13), with and without
labelguard preloaded; prints "captured", "replayed" or "failed: <error>"."""
import torch
import torch.nn.functional as F
from torch._higher_order_ops.cudagraph_conditional_nodes import CUDAGraphCaptureControlFlowOpDispatchMode

torch.manual_seed(0)
logp = torch.log_softmax(torch.randn(4, 5), 1).cuda()  # made on the CPU: the double computes no softmax
y = torch.tensor([0, 1, 2, 3]).cuda()
pred = torch.tensor(True).cuda()


def true_fn(logp, y):
    return F.nll_loss(logp, y)


def false_fn(logp, y):
    return logp.sum() * 0


s = torch.cuda.Stream()
with torch.cuda.stream(s):  # warm-up outside the capture, as torch.cuda.graph's docs ask
    true_fn(logp, y)
    false_fn(logp, y)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        with CUDAGraphCaptureControlFlowOpDispatchMode():
            out = torch.cond(pred, true_fn, false_fn, (logp, y))
    print("captured", flush=True)
    g.replay()
    torch.cuda.synchronize()
    print("replayed", flush=True)
except Exception as e:  # noqa: BLE001  (the failure is the observation)
    print("failed: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:300]), flush=True)
