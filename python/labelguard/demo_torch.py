#!/usr/bin/env python3
"""labelguard/demo_torch.py: the real-GPU half of `labelguard demo` (commands/demo.py runs this
file as a script, with the command line's interpreter).

A tiny classifier (nearest prototype) trained for 60 steps on batches of 64 labels of 10 classes with PyTorch on
the GPU; step 37's batch comes from a 1-based label file (labels 1..10). On a RuntimeError it tries to read the batch's
labels back (labels.cpu()), which shows whether the CUDA context survived, then skips the batch
as `except RuntimeError: continue` would, or stops when the context is dead. The same story and
the same output lines as scripts/demo/demo_train.cu, the GPU-free version.
Run by commands/demo.py only when torch and a GPU are present; tested on a GPU by tests/cli/test_demo.sh's
GPU half (skips without one), and GPU-free with real torch on the runtime test double by
tests/torch-fake/test_*.sh (cases.py runs it as its `demo` case).
"""
import sys

import torch

STEPS, BATCH, CLASSES, BAD_STEP = 60, 64, 10, 37


def inspect(labels):
    try:
        host = labels.cpu()
    except RuntimeError as e:
        print("    inspecting the batch: labels.cpu() -> %s" % str(e).splitlines()[0])
        print("    => the CUDA context is dead: nothing on the GPU can be read any more.")
        return False
    print("    inspecting the batch: labels.cpu() works, the CUDA context is alive:")
    for i, v in enumerate(host.tolist()):
        if v < 0 or v >= CLASSES:
            print("      labels[%d] = %d  (n_classes = %d)" % (i, v, CLASSES))
    return True


def logits_of(prototypes, x):
    """A nearest-prototype classifier: elementwise ops and a reduction only, no matmul, so the
    script also runs on the runtime test double (tests/torch-fake), which has no cuBLAS."""
    return -((x[:, None, :] - prototypes[None, :, :]) ** 2).sum(-1)


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    prototypes = torch.nn.Parameter(torch.randn(CLASSES, 32).to(dev))
    opt = torch.optim.SGD([prototypes], lr=0.01)
    # The data is made on the CPU and copied, as a data loader's batches are.
    centers = torch.randn(CLASSES, 32)
    done = skipped = 0
    for step in range(STEPS):
        labels = torch.randint(0, CLASSES, (BATCH,))
        x = (centers[labels] + 0.5 * torch.randn(BATCH, 32)).to(dev)
        if step == BAD_STEP:
            labels = labels + 1                  # a batch read with 1-based labels: 1..10
        labels = labels.to(dev)
        where = "at the loss call, F.cross_entropy"
        try:
            loss = torch.nn.functional.cross_entropy(logits_of(prototypes, x), labels)
            where = "at loss.item(), long after the kernel that failed"
            value = loss.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
        except RuntimeError as e:
            print("step %2d: RuntimeError: %s\n    (raised %s)" % (step, str(e).splitlines()[0], where))
            if not inspect(labels):
                print("    => the job ends here, after %d of %d steps." % (done, STEPS))
                return 1
            print("    => the training loop catches the exception, skips this batch and goes on.")
            skipped += 1
            continue
        done += 1
        if step % 10 == 0 or BAD_STEP - 1 <= step <= BAD_STEP + 1 or step == STEPS - 1:
            print("step %2d: loss %.4f" % (step, value))
    print("finished: %d of %d steps trained, %d skipped." % (done, STEPS, skipped))
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
