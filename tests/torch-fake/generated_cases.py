"""generated_cases.py MODE CACHE [LIB]: the device asserts torch.compile writes into its own
kernels, read as Inductor loads each output module (python/labelguard/_generated.py), on real
torch on the runtime test double under the preloaded library (tests/torch-fake/test_generated.sh).
CACHE is this run's TORCHINDUCTOR_CACHE_DIR.

Every MODE compiles a CPU function with real Inductor (the double has no Triton, so compiled
graphs are CPU graphs) and checks that the hook read the output module Inductor loaded, and that a
reader installed after the compile reads it too (labelguard.enable() called late); MODE
`again` runs on the cache the `first` run filled, and checks that the graph came from Inductor's
FX graph cache and was read all the same. Then an output module in Inductor's GPU format
(data/inductor_gpu_module.py.in: the embedding and x[idx] kernels as Inductor 2.15 writes them,
each with its own file in the cache, and a user's Triton kernel) is loaded the way Inductor loads
one, through PyCodeCache.load_by_key_path (its body cannot run here: no Triton); its three asserts
must be noted with kernel, file, line, text and origin, and the commented-out one must not. With
LIB (build/progs/libassertpy.so, CUDA 13 wheel), an extension's kernel then asserts on the device
and the device_assert event in the log must list the three (the driver checks its stderr block).
Prints "ok: ..." / "FAIL: ..." and exits 1 on a failure.
"""
import os
import re
import sys

import torch

mode, cache = sys.argv[1], os.path.realpath(sys.argv[2])
ok = True


def check(what, cond):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)


f = torch.compile(lambda t: torch.sin(t) + 1)
y = f(torch.ones(8))
check("the compiled CPU function runs", float(y[0]) > 1.8)
gen = sys.modules.get("labelguard._generated")
check("labelguard's reader is installed with the decompositions", gen is not None and gen._state["installed"])
if gen is None:
    sys.exit(1)
mods = [p for p in gen.seen() if os.path.realpath(p).startswith(cache + os.sep)]
check("the output module Inductor loaded was read (%d in this run's cache)" % len(mods), len(mods) >= 1)
# Armed after a compile (labelguard.enable() late): a second instance of the reader, installed
# now, reads the modules Inductor loaded before.
import importlib.util

spec = importlib.util.spec_from_file_location("lg_generated_late", gen.__file__)
late = importlib.util.module_from_spec(spec)
spec.loader.exec_module(late)
check("installed late, it reads the modules loaded before",
      late.install() and any(p in late.seen() for p in mods))
if mode == "again":
    from torch._dynamo.utils import counters

    check("this graph came from Inductor's FX graph cache", counters["inductor"]["fxgraph_cache_hit"] >= 1)

# An output module in Inductor's GPU format, with its kernels' own files, loaded as Inductor does.
here = os.path.dirname(os.path.abspath(__file__))
text = open(os.path.join(here, "data", "inductor_gpu_module.py.in")).read().replace("@CACHE@", cache)
lines = text.split("\n")
for i, line in enumerate(lines):
    m = re.match(r"# kernel path: (.+)$", line)
    if not m:
        continue
    start = next(j for j in range(i, len(lines)) if lines[j].endswith("'''")) + 1
    end = next(j for j in range(start, len(lines)) if lines[j].startswith("'''"))
    os.makedirs(os.path.dirname(m.group(1)), exist_ok=True)
    with open(m.group(1), "w") as out:  # as Inductor writes a kernel's file: its source alone
        out.write("\n".join(lines[start:end]) + "\n")
module = os.path.join(cache, "zz", "czzlabelguardgpumodule.py")
os.makedirs(os.path.dirname(module), exist_ok=True)
with open(module, "w") as out:
    out.write(text)
from torch._inductor.codecache import PyCodeCache

try:
    PyCodeCache.load_by_key_path("czzlabelguardgpumodule", module)
    print("the GPU module loaded")
except Exception as e:  # no Triton on the double: its body cannot run, its text was read first
    print("the GPU module cannot run here: %s" % type(e).__name__)
mine = [k for k in gen.kept() if k["file"].startswith(cache + os.sep)]
names = [k["kernel"] for k in mine]
check("three asserts noted, the commented-out one not: %s" % names,
      names == ["triton_poi_fused_embedding_0", "triton_poi_fused_index_mul_1", "mask_mod_kernel"])
emb = os.path.join(cache, "5v", "c5vq2lrtnbd3mvf6brcmzawdhbzfw7kvnbbgpmq3r2hq3x7aaqza.py")
idx = os.path.join(cache, "q7", "cq7dgnhtj4xvzmyb7msh3xq2wzkjmqdk7cqrkfhyxqbn5drzjlqm.py")
if len(mine) == 3:
    e, x, u = mine
    check("the embedding's assert: its own file, its text, its origin",
          (e["file"], e["message"], e["source_nodes"], e["aten_ops"]) ==
          (emb, "index out of bounds: 0 <= tmp4 < 32000", "h", "aten.embedding"))
    check("x[idx]'s: its own file, two source nodes and ATen ops",
          (x["file"], x["message"], x["source_nodes"], x["aten_ops"]) ==
          (idx, "index out of bounds: 0 <= tmp4 < 6", "getitem, mul", "aten.index, aten.mul"))
    check("the user's kernel: the module itself (no kernel file named), its own text, no origin",
          (u["file"], u["message"], u["source_nodes"], u["aten_ops"]) ==
          (module, "document id past the block table", "", ""))
    for k in mine:
        at = open(k["file"]).read().split("\n")[k["line"] - 1]
        check("%s: line %d of its file is the assert" % (k["kernel"], k["line"]),
              "tl.device_assert(" in at and k["message"] in at)
    check("the kernel's own line differs from the module's (the device names the kernel's file)",
          e["line"] != e["module_line"])
n = gen.note(module)
check("a module is read once", n == 0 and len([k for k in gen.kept() if k["file"].startswith(cache + os.sep)]) == 3)

if len(sys.argv) > 3:
    import ctypes

    lib = ctypes.CDLL(sys.argv[3])
    bins = (ctypes.c_int * 8)(0, 1, 2, 3, 4, 5, 6, 9)
    lib.lgas_histogram(bins, 8, 8, 0)
    try:
        torch.cuda.synchronize()
        raised = "no error"
    except RuntimeError as e:
        raised = str(e).strip().splitlines()[0]
    check("torch raises CUDA's own error at the synchronize: %s" % raised,
          raised == "CUDA error: device-side assert triggered")
    import glob
    import json

    # the library wrote and flushed its device_assert event before the call returned
    events = [json.loads(l) for f in glob.glob(os.path.join(os.environ["LABELGUARD_LOG"], "*.jsonl")) for l in open(f)]
    d = [e for e in events if e["event"] == "device_assert"]
    check("one device_assert event", len(d) == 1)
    if d:
        g = d[0].get("generated_kernels", [])
        check("it lists the three generated kernels, newest first: %s" % [k["kernel"] for k in g],
              [k["kernel"] for k in g] == ["mask_mod_kernel", "triton_poi_fused_index_mul_1",
                                           "triton_poi_fused_embedding_0"])
        if len(g) == 3:
            check("the embedding's: its file and line, text, source nodes, ATen ops",
                  (g[2]["file"], g[2]["line"], g[2]["message"], g[2]["source_nodes"], g[2]["aten_ops"]) ==
                  (emb, mine[0]["line"], "index out of bounds: 0 <= tmp4 < 32000", "h", "aten.embedding"))
            check("none among the candidates (no Triton launch here)", not any(k["among_candidates"] for k in g))
            check("the user's kernel has no origin fields", "source_nodes" not in g[0] and "aten_ops" not in g[0])
        check("the extension's histogram is still the candidate",
              any(c["kernel"] == "lgas_histogram" for c in d[0]["candidates"]))
sys.exit(0 if ok else 1)
