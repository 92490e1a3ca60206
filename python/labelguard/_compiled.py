"""labelguard/_compiled.py: torch.compile'd losses checked inside the compiled graph.

Under torch.compile, Inductor decomposes nll_loss (and cross_entropy, which is log_softmax +
nll_loss) into gathers that it fuses with the log_softmax into one Triton kernel. That kernel is
launched by Triton's own launcher through the driver, and its parameters name no target: the
launch hooks cannot check it, and a bad label makes its device assert kill the CUDA context.

So, when labelguard is armed in this interpreter, Inductor's decompositions of
aten.nll_loss_forward / nll_loss_backward / nll_loss2d_forward (and nll_loss2d_backward where a
release decomposes it) are wrapped: each first calls the custom op

    labelguard::check_target(Tensor target, SymInt n_classes, SymInt ignore_index, int loss) -> Tensor

and the decomposition then reads the op's output instead of the target. The op (a
torch.library definition, an extern kernel call in Inductor's output code) hands the target's
buffer to liblabelguard's labelguard_check_target (include/labelguard.h), which runs the check
an ATen NLL launch gets: validator, LABELGUARD_ACTION, report. Its output is a copy of the labels
(masked with ignore_index under mask); reading it is what orders the check before the fused
kernel and keeps it from being removed as dead code, also inside CUDA graphs
(mode="reduce-overhead": the check is captured and runs at every replay). raise and hold raise
RuntimeError with labelguard's usual text from the op. It costs one pass over the target and a
copy of B labels per loss; the other way, falling back to ATen's NLL kernels, would make Inductor
keep the B x C log-probabilities, gigabytes for a large vocabulary.

The index ops that Inductor lowers into its own kernels (embedding, x[idx], gather, the
scatters...) get the same treatment from _compiled_index.py: labelguard::check_index on their
ids, whose body (check_index below) is this file's check with the model's line (FX stack_trace)
for the report; the post-grad pass below keeps one check per ids tensor there too. The asserts
Inductor writes into its own kernels are read as each output module loads (_generated.py), so
that the report of one that fires anyway names the kernel and where it is.

LABELGUARD_COMPILED=off (read by the library, src/base/config.c): the decompositions stay as they
are, and the first traced loss gets one unchecked_loss_kernel warning.

A graph compiled before labelguard was armed stays unchecked (Dynamo keeps it); the
decompositions are patched when torch._inductor.decomposition is imported (a meta path hook, so
a process that never compiles pays nothing) or at install() when it already is. AOTAutograd's
cache key is the graph before decomposition, so a post-grad custom pass with a uuid (on/off)
also puts labelguard into Inductor's and AOTAutograd's cache keys: entries made with another
decomposition table never stand in for each other.

Installed by labelguard.enable() and, under `labelguard run` or a bare LD_PRELOAD of the library
(whose constructor puts labelguard/_bootstrap/ on PYTHONPATH, src/hooks/pyboot.c), by the bootstrap
sitecustomize. This file uses the standard library and torch only, so the bootstrap
can load it by path in an interpreter that cannot import the labelguard package.
Tested by tests/torch-fake/test_compiled.sh (real torch on the test double: CPU compiled graphs,
the op on the double's CUDA memory, a captured graph) and tests/torch/compiled_gpu.py (GPU).
"""
import os
import sys
import threading

_lock = threading.RLock()
_state = {"lib": None, "finder": None, "patched": False, "op": None, "on": None}

DECOMP_MODULE = "torch._inductor.decomposition"
# aten op -> (loss code of labelguard_check_target, where n_classes is in `self`)
LOSSES = {
    "nll_loss_forward": (0, -1),
    "nll_loss_backward": (1, -1),
    "nll_loss2d_forward": (2, 1),
    "nll_loss2d_backward": (3, 1),
}
# labelguard::check_index kinds whose tensor is BCE's input or target (float): range checks
_RANGE_KINDS = (33, 34)
NOT_A_CUDA_FAULT = " (ignore the cudaErrorNotPermitted and CUDA_LAUNCH_BLOCKING hints below)"


def _library():
    """liblabelguard's entry points from this process's global scope (preloaded, or loaded by
    enable() with RTLD_GLOBAL), or None when labelguard is not in this process."""
    if _state["lib"] is None:
        import ctypes

        try:
            lib = ctypes.CDLL(None)
            check = lib.labelguard_check_target
            compiled = lib.labelguard_compiled
        except (OSError, AttributeError):
            return None
        check.restype = ctypes.c_int
        check.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        compiled.restype = ctypes.c_int
        compiled.argtypes = [ctypes.c_char_p]
        _state["lib"] = lib
    return _state["lib"]


def _struct():
    import ctypes

    class Check(ctypes.Structure):  # labelguard_target_check_t
        _fields_ = [("target", ctypes.c_void_p), ("out", ctypes.c_void_p), ("count", ctypes.c_int64),
                    ("sizes", ctypes.c_int64 * 3), ("ndim", ctypes.c_int), ("dtype", ctypes.c_int),
                    ("n_classes", ctypes.c_int64), ("ignore_index", ctypes.c_int64), ("stream", ctypes.c_void_p),
                    ("on_host", ctypes.c_int), ("loss", ctypes.c_int), ("site", ctypes.c_char_p)]
    return Check


def check(target, n_classes, ignore_index, loss, site=""):
    """The ops' body: the checked copy of `target` (see labelguard_check_target); site: the
    model's line, for the report and the raised error."""
    import ctypes
    import torch

    t = target.contiguous()
    out = torch.empty_like(t, memory_format=torch.contiguous_format)
    dtypes = {torch.int64: 0, torch.uint8: 1, torch.int32: 2}
    if loss in _RANGE_KINDS:  # probabilities: the library checks them against [0, 1]
        dtypes = {torch.float32: 3, torch.float64: 4, torch.float16: 5, torch.bfloat16: 6}
    lib = _library()
    if lib is None or t.dtype not in dtypes or t.device.type not in ("cuda", "cpu"):
        out.copy_(t)
        return out
    if "struct" not in _state:
        _state["struct"] = _struct()
    c = _state["struct"]()
    c.target, c.out, c.count = t.data_ptr(), out.data_ptr(), t.numel()
    c.ndim = min(t.dim(), 3)
    for i in range(c.ndim):
        c.sizes[i] = t.shape[i]
    if t.dim() > 3:
        c.ndim = 0
    c.dtype, c.n_classes, c.ignore_index, c.loss = dtypes[t.dtype], int(n_classes), int(ignore_index), int(loss)
    site_bytes = site.encode("utf-8", "replace") if site else None
    c.site = site_bytes
    msg = ctypes.create_string_buffer(2048)
    if t.is_cuda:
        with torch.cuda.device(t.device):
            c.stream, c.on_host = torch.cuda.current_stream(t.device).cuda_stream, 0
            rc = lib.labelguard_check_target(ctypes.byref(c), msg, 2048)
    else:
        c.stream, c.on_host = None, 1
        rc = lib.labelguard_check_target(ctypes.byref(c), msg, 2048)
    if rc == -1:
        text = msg.value.decode("utf-8", "replace").replace(NOT_A_CUDA_FAULT, "", 1)
        raise RuntimeError(text + ("\nlabelguard: model line: " + site if site else ""))
    return out


def check_index(index, bound, padding_idx, kind, site):
    """labelguard::check_index's body: the ids of an index op, checked (see _INDEX)."""
    return check(index, bound, padding_idx, kind, site)


def _register_op():
    """labelguard::check_target, once per process: a plain torch.library definition with CPU and
    CUDA kernels (an eager call costs a dispatch, not custom_op's wrappers) and a fake kernel for
    tracing. Functional (no alias, no mutation): its output is a new tensor."""
    if _state["op"] is not None:
        return _state["op"]
    import torch

    lib = torch.library.Library("labelguard", "DEF")
    # `after`: the previous check of the graph (_chain_checks), read by nothing: a dependency
    # that keeps Inductor's scheduler from running the checks in another order than eager's.
    lib.define("check_target(Tensor target, SymInt n_classes, SymInt ignore_index, int loss, *, Tensor? after=None)"
               " -> Tensor")

    def target_impl(target, n_classes, ignore_index, loss, after=None):
        return check(target, n_classes, ignore_index, loss)

    lib.impl("check_target", target_impl, "CPU")
    lib.impl("check_target", target_impl, "CUDA")

    def fake(target, n_classes, ignore_index, loss, after=None):
        return torch.empty_like(target, memory_format=torch.contiguous_format)

    torch.library.register_fake("labelguard::check_target", fake, lib=lib)
    lib.define("check_index(Tensor index, SymInt bound, SymInt padding_idx, int kind, str site, *, Tensor? after=None)"
               " -> Tensor")

    def index_impl(index, bound, padding_idx, kind, site, after=None):
        return check_index(index, bound, padding_idx, kind, site)

    lib.impl("check_index", index_impl, "CPU")
    lib.impl("check_index", index_impl, "CUDA")

    def fake_index(index, bound, padding_idx, kind, site, after=None):
        return torch.empty_like(index, memory_format=torch.contiguous_format)

    torch.library.register_fake("labelguard::check_index", fake_index, lib=lib)
    _state["library"] = lib  # the registration lives as long as this object
    _state["index_op"] = torch.ops.labelguard.check_index.default
    _state["op"] = torch.ops.labelguard.check_target.default
    return _state["op"]


def _sibling(name):
    """labelguard/<name>.py, loaded by its path beside this file: the bootstrap loads this one
    that way too, where the labelguard package may not import."""
    full = "labelguard." + name
    mod = sys.modules.get(full)
    if mod is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            full, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        spec.loader.exec_module(mod)
    return mod


def _index_module():
    """labelguard/_compiled_index.py: the index ops."""
    return _sibling("_compiled_index")


def _aot_compiling():
    """Inside AOTInductor's compile (torch._inductor.aot_compile, torch._export.aot_compile):
    the package it writes is loaded elsewhere, where no labelguard::check_target exists."""
    try:
        from torch._inductor.virtualized import V
        return V.aot_compilation is True
    except Exception:
        return False


def _wrap(name, orig, op):
    """The decomposition of aten.<name> with the check op on its target first."""
    loss, class_dim = LOSSES[name]
    names = [a.name for a in op._schema.arguments]
    pos = names.index("target")
    lib = _library()

    def decomposition(*args, **kwargs):
        if _aot_compiling():
            return orig(*args, **kwargs)  # an AOTInductor artifact must load without labelguard
        if not _state["on"]:
            lib.labelguard_compiled(name.encode())  # off: the one unchecked_loss_kernel warning
            return orig(*args, **kwargs)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        self = bound["self"]
        n_classes = self.shape[class_dim] if self.dim() > 0 else 1
        checked = _register_op()(bound["target"], n_classes, bound.get("ignore_index", -100), loss)
        if pos < len(args):
            args = args[:pos] + (checked,) + args[pos + 1:]
        else:
            kwargs = dict(kwargs, target=checked)
        with _index_module().nested():  # its gather / scatter read the checked target
            return orig(*args, **kwargs)

    decomposition.labelguard_wrapped = orig
    decomposition.__name__ = "labelguard_checked_" + name
    return decomposition


# A backward loss's check -> the forward loss's check of the same target.
FORWARD_OF = {1: 0, 3: 2}


def _merge_checks(graph):
    """In one post-grad graph, the backward loss's check op on the same target, n_classes and
    ignore_index as a forward loss's check reads the forward's output instead, and goes. Its only
    input is the target, so AOTAutograd's partitioner puts it into the forward graph (its output
    saved for the backward), where Inductor may schedule it first: a bad label would then be
    reported as nll_loss_backward in the step's forward. One check per target also scans the
    labels once; both ops return the same copy (masked alike under mask)."""
    op = _state["op"]
    checks = [n for n in graph.nodes if n.op == "call_function" and n.target is op and len(n.args) == 4
              and not n.kwargs]
    forward = {}
    for n in checks:
        if n.args[3] in FORWARD_OF.values():
            forward.setdefault(tuple(n.args), n)
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in checks:
        if n.args[3] not in FORWARD_OF:
            continue
        f = forward.get(tuple(n.args[:3]) + (FORWARD_OF[n.args[3]],))
        if f is None:
            continue
        if order[f] > order[n]:
            n.prepend(f)  # same inputs as n: still after them, now before n's users
        n.replace_all_uses_with(f)
        graph.erase_node(n)
        order = {m: i for i, m in enumerate(graph.nodes)}


def _chain_checks(graph):
    """Gives each check op of a post-grad graph the previous one (in the graph's order, which is
    eager's) as its `after` input. Checks read different tensors, so without it Inductor's
    scheduler may run a later op's check first: a token id equal to the vocabulary size, both an
    embedding's id and a shifted target of the loss, was then reported as the loss's bad label
    (with a loss's cause), not as eager reports it, the embedding's id (vocab_too_small)."""
    ops = [op for op in (_state["op"], _state.get("index_op")) if op is not None]
    prev = None
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in ops:
            continue
        if prev is not None and "after" not in n.kwargs:
            n.kwargs = dict(n.kwargs, after=prev)
        prev = n


def _hoist_checks(graph):
    """Moves each check op of a post-grad graph up to just after its inputs (the graph's inputs,
    in practice, and the check before it: _chain_checks). The decomposition emits it in the
    middle of the loss, after the log_softmax's nodes; left there, Inductor's scheduler splits
    the log_softmax and the NLL into two kernels around the extern call instead of fusing them."""
    op = _state["op"]
    if op is None:
        return
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    placeholders = [n for n in nodes if n.op == "placeholder"]
    for n in nodes:
        if n.op != "call_function" or (n.target is not op and n.target is not _state.get("index_op")):
            continue
        deps = list(n.all_input_nodes) + placeholders[-1:]
        anchor = max(deps, key=lambda d: order[d])
        if order[anchor] + 1 < order[n]:
            anchor.append(n)
            order = {m: i for i, m in enumerate(graph.nodes)}


def _cache_pass(inductor_config):
    """The post-grad pass: one check per target (_merge_checks), run in eager's order
    (_chain_checks), moved up (_hoist_checks), and a uuid, which Inductor's FX graph cache and
    AOTAutograd's cache hash, so graphs compiled with and without the check never share an entry.
    A pass the user installed still runs, after it."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError:
        return
    user = inductor_config.post_grad_custom_post_pass
    if getattr(user, "labelguard", False):
        return

    class LabelguardCachePass(CustomGraphPass):
        labelguard = True

        def __call__(self, graph):
            if _state["op"] is not None:
                _merge_checks(graph)
                _index_module().merge_checks(graph, sys.modules[__name__])
                _chain_checks(graph)
            _hoist_checks(graph)
            if user is not None:
                user(graph)

        def uuid(self):
            inner = user.uuid() if user is not None and hasattr(user, "uuid") else None
            if user is not None and inner is None:
                return None  # the user's pass is uncacheable: so is the graph
            # -6: the checks chained in eager's order (_chain_checks); an entry of a release
            # whose checks ran in the scheduler's order, or that checked fewer ops, is not one of
            # these
            return ("labelguard-check-op-6", "on" if _state["on"] else "off", inner)

    inductor_config.post_grad_custom_post_pass = LabelguardCachePass()


def _patch(module):
    """Wraps the NLL entries of Inductor's decomposition table (module: torch._inductor.decomposition)."""
    with _lock:
        if _state["patched"]:
            return
        _state["patched"] = True
        import torch

        aten = torch.ops.aten
        table = module.decompositions
        for name in LOSSES:
            op = getattr(getattr(aten, name), "default")
            orig = table.get(op)
            if orig is None or getattr(orig, "labelguard_wrapped", None) is not None:
                continue  # not decomposed: ATen's kernel runs, and the launch hooks check it
            table[op] = _wrap(name, orig, op)
        _index_module().patch(table, sys.modules[__name__])
        cached = getattr(module, "fast_random_decomps", None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()
        if _state["on"]:
            _register_op()
        from torch._inductor import config as inductor_config
        _cache_pass(inductor_config)
        try:  # the device asserts of the kernels Inductor generates, for the report of one that fires
            _sibling("_generated").install()
        except Exception as e:
            sys.stderr.write("labelguard: torch.compile's own device asserts will not be listed: %s: %s\n"
                             % (type(e).__name__, e))


class _Loader:
    """Runs the real loader of torch._inductor.decomposition, then patches the module."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):  # get_source, is_package...: the real loader's
        return getattr(self.real, name)

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        try:
            _patch(module)
        except Exception as e:  # the guard never breaks the job
            sys.stderr.write("labelguard: torch.compile'd losses stay unchecked: %s: %s\n" % (type(e).__name__, e))


class _Finder:
    """sys.meta_path entry that waits for torch._inductor.decomposition (imported by the first
    torch.compile that uses Inductor), then steps aside."""

    def find_spec(self, name, path=None, target=None):
        if name != DECOMP_MODULE:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install():
    """Arms the torch.compile check in this interpreter. Returns "check_op" (on), "off"
    (LABELGUARD_COMPILED=off: the decompositions only warn), or None when labelguard is not
    loaded in this process. Idempotent; safe before or after `import torch`."""
    with _lock:
        lib = _library()
        if lib is None:
            return None
        _state["on"] = bool(lib.labelguard_compiled(None))
        module = sys.modules.get(DECOMP_MODULE)
        if module is not None:
            _patch(module)
        elif _state["finder"] is None:
            _state["finder"] = _Finder()
            sys.meta_path.insert(0, _state["finder"])
        return "check_op" if _state["on"] else "off"


def bootstrap():
    """From the bootstrap sitecustomize: install() only where the library is preloaded, and
    without loading ctypes until then (a Python process that never compiles pays one finder)."""
    if "liblabelguard" not in os.environ.get("LD_PRELOAD", ""):
        return None
    with _lock:
        if _state["finder"] is None and DECOMP_MODULE not in sys.modules:
            _state["finder"] = _DeferredFinder()
            sys.meta_path.insert(0, _state["finder"])
            return "deferred"
    return install()


class _DeferredFinder(_Finder):
    """The bootstrap's finder: asks the library (ctypes) only when Inductor is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != DECOMP_MODULE:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _state["finder"] = None
            if _library() is None:
                return None
            _state["on"] = bool(_state["lib"].labelguard_compiled(None))
        return _Finder.find_spec(self, name, path, target)
