"""graphs.py: a training step captured with torch.cuda.graph (static input and target), then
replayed with one batch after another copied into the static target, the way
torch.compile(mode="reduce-overhead") and hand-written CUDA-graph loops train. Run by
tests/torch-fake/test_graphs.sh through build/torch-python (real torch on the runtime test
double), with labelguard preloaded in raise, mask or log.

  build/torch-python tests/torch-fake/graphs.py

Batch BAD_STEP has label 3 = N_CLASSES (out of range). The NLL loss reads log-probabilities made
on the CPU (under the double only the NLL kernels compute), so each replay's loss can be
compared with the CPU's. Prints one JSON object per line: {"step", "loss"} or {"step",
"error_type", "is_runtime_error", "message"}, then {"after": ...} with what still works.
"""
import json
import sys

import torch
import torch.nn.functional as F

N, C, BAD_STEP, STEPS = 16, 5, 3, 6


def batch(step):
    y = torch.arange(N) % C
    if step == BAD_STEP:
        y[3] = C
    return y


def out(**kw):
    print(json.dumps(kw), flush=True)


torch.manual_seed(0)
logp_cpu = torch.log_softmax(torch.randn(N, C), dim=1)
logp = logp_cpu.cuda().requires_grad_(True)
opt = torch.optim.SGD([logp], lr=0.0)  # lr 0: the loss stays comparable with the CPU's
static_y = batch(0).cuda()

# Warm-up on a side stream, as torch's docs do before capturing.
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        F.nll_loss(logp, static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(s)

g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    static_loss = F.nll_loss(logp, static_y)
    static_loss.backward()
    opt.step()
out(captured=True)

for step in range(STEPS):
    y = batch(step)
    static_y.copy_(y.cuda())
    try:
        g.replay()
        loss = static_loss.item()  # cudaMemcpyAsync + cudaStreamSynchronize
        masked = y.clone()
        masked[masked >= C] = -100
        out(step=step, loss=loss, cpu_loss=F.nll_loss(logp_cpu, masked).item())
    except Exception as e:  # noqa: BLE001  (the type is what is reported)
        out(step=step, error_type=type(e).__name__, is_runtime_error=isinstance(e, RuntimeError),
            message=str(e))
        try:
            out(after="labels_cpu", value=static_y.cpu().tolist())
        except Exception as e2:  # noqa: BLE001
            out(after="labels_cpu", error=str(e2).splitlines()[0])
            sys.exit(0)
out(done=True)
