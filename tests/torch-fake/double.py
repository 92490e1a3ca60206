# double.py: the body of tests/torch-fake/test_double.sh (the double's fidelity where real torch
# relies on it), run by build/torch-python. One "key=value" line per checked fact.
import os
import sys

import torch
import torch.nn.functional as F

what = sys.argv[1]
if what == "events":
    # Work in flight is not done yet: the first query says so (cudaErrorNotReady, which torch
    # clears with cudaGetLastError), a later one, or a synchronisation, finds it done.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.ones(1 << 16, device="cuda")
        e = torch.cuda.Event()
        e.record()
    print(f"event_query={e.query()},{e.query()}")
    with torch.cuda.stream(s):
        y = x * 2
    print(f"stream_query={s.query()},{s.query()}")
    with torch.cuda.stream(s):
        y = x * 3
    e.record(s)
    e.synchronize()
    print(f"after_sync={e.query()}")
    idle = torch.cuda.Event()
    idle.record(torch.cuda.Stream())
    print(f"idle_query={idle.query()}")
    free, total = torch.cuda.mem_get_info()
    print(f"mem_total={total} free_le_total={free <= total}")
elif what == "pinned":
    # Pinned staging and non_blocking copies in both directions keep the bytes and stream order.
    src = torch.arange(1000, dtype=torch.int64)
    p = src.pin_memory()
    print(f"pinned={p.is_pinned()}")
    d = p.to("cuda", non_blocking=True)
    back = torch.empty_like(p).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    print(f"roundtrip={torch.equal(back, src)}")
    reg = torch.arange(64, dtype=torch.float32)
    cudart = torch.cuda.cudart()
    print(f"host_register={int(cudart.cudaHostRegister(reg.data_ptr(), reg.numel() * 4, 0))}")
    print(f"registered_copy={torch.equal(reg.to('cuda', non_blocking=True).cpu(), reg)}")
    print(f"host_unregister={int(cudart.cudaHostUnregister(reg.data_ptr()))}")
    for i in range(50):  # the caching host allocator reuses blocks once their events are done
        q = torch.full((256,), i, dtype=torch.int64).pin_memory().to("cuda", non_blocking=True)
    print(f"reuse_last={q.cpu()[0].item()}")
elif what == "graph":
    logits = torch.randn(8, 10).cuda()
    labels = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7]).cuda()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = F.nll_loss(logits, labels)
    g.replay(); g.replay()
    torch.cuda.synchronize()
    print("replays=ok")
    labels.copy_(torch.tensor([0, 1, 2, 3, 11, 5, 6, 7]))  # the captured kernel reads it at replay
    g.replay()
    try:
        torch.cuda.synchronize()
        print("replay_bad=no error")
    except RuntimeError as e:
        print("replay_bad=" + str(e).splitlines()[0])
elif what == "capture_rules":
    g = torch.cuda.CUDAGraph()
    x = torch.ones(4, device="cuda")
    try:
        with torch.cuda.graph(g):
            y = x * 2
            torch.cuda.synchronize()  # not allowed while a global-mode capture runs
        print("sync_in_capture=allowed")
    except RuntimeError as e:
        # The sync's error, then capture_end's (raised by the with statement's exit).
        first = e.__context__ if e.__context__ is not None else e
        print("sync_in_capture=" + str(first).splitlines()[0])
        print("end_capture=" + str(e).splitlines()[0])
