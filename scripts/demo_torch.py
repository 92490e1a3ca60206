#!/usr/bin/env python3
"""demo_torch.py: the real-GPU half of `labelguard demo` (scripts/lg_demo.sh runs it).

A tiny classifier trained for 60 steps on batches of 64 labels of 10 classes with PyTorch on
the GPU; step 37's batch comes from a 1-based label file (labels 1..10). On a RuntimeError it tries to read the batch's
labels back (labels.cpu()), which shows whether the CUDA context survived, then skips the batch
as `except RuntimeError: continue` would, or stops when the context is dead. The same story and
the same output lines as scripts/demo/demo_train.cu, the GPU-free version.
Run only when torch and a GPU are present; tested on a GPU by tests/cli/test_demo.sh's GPU half
(skips without one).
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


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Linear(32, CLASSES).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    centers = torch.randn(CLASSES, 32, device=dev)
    done = skipped = 0
    for step in range(STEPS):
        labels = torch.randint(0, CLASSES, (BATCH,), device=dev)
        x = centers[labels] + 0.5 * torch.randn(BATCH, 32, device=dev)
        if step == BAD_STEP:
            labels = labels + 1                  # a batch read with 1-based labels: 1..10
        where = "at the loss call, F.cross_entropy"
        try:
            loss = torch.nn.functional.cross_entropy(model(x), labels)
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
