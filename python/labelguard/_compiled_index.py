"""labelguard/_compiled_index.py: labelguard::check_index in front of the index ops that
torch.compile lowers into Inductor's own kernels.

Inductor lowers embedding, x[idx], gather, the scatters... into kernels of its own, whose
indirect loads carry an assert of Inductor's (tl.device_assert, TORCH_CHECK in C++) that says
neither the id nor where it is, and that lets some ids eager rejects through (an embedding id
of -2 on torch 2.10, an index_add index of -1). So each such op gets an entry in Inductor's
decomposition table (patch): the op's ids go through labelguard::check_index (kind:
LABELGUARD_INDEX_* of include/labelguard.h; the library knows each op's eager rule for negative
ids, src/hooks/api_index.c), with the bound as the tracer has it (a SymInt under dynamic=True)
and the model's line from the FX node's stack_trace; then the op itself is traced on the
checked copy (its entry answers NotImplemented to its own call) or, where Inductor decomposes it
(index_add, index_select, embedding_dense_backward, put, index_reduce, max_unpool2d, BCE), the
decomposition runs on it. The ops that a decomposition emits (index_add's index_put,
index_select's index) are not checked again: the outer op's rule is eager's. merge_checks, from
_compiled.py's post-grad pass, keeps one check per ids tensor in a graph.

one_hot and multi_margin_loss never reach the table: a Python kernel decomposes them while
AOTAutograd traces (py_impl at CompositeImplicitAutograd / Autograd; 2.10's one_hot has none,
and ATen's composite traces it as eq(labels, arange(num_classes)), which gives a zero row for a
bad label), so _PY_IMPL wraps that kernel instead: one_hot's labels against num_classes,
multi_margin_loss's against the input's last dimension (its gather is then not checked again).
Those kernels run in every trace (torch.export too): the check goes in Inductor's only.
binary_cross_entropy's input and target are probabilities (float): their checks (kinds 33 and
34) are the library's range check of eager's BCE kernel, [0, 1] and NaN bad; Inductor's
decomposition asserts nothing, so without them a bad probability gives a loss silently.

Not covered, because Inductor falls back to ATen's kernel (make_fallback, or the decomposition
answers NotImplemented), which the launch hooks check on the GPU: embedding_bag, and
index_reduce with prod / amax / amin (only its mean is decomposed, into index_add).

Loaded by _compiled.py (by path, like it); the check op and its body live there. Tested by
tests/torch-fake/test_compiled_index.sh, test_compiled_index_more.sh and test_compiled_index_210.sh.
"""
import threading

def _dim_bound(self, dim):
    """The size of dimension `dim` of self (a SymInt under dynamic=True); 1 for a 0-dim tensor."""
    if self.dim() == 0:
        return 1
    return self.shape[dim % self.dim()]


def _ids_on_dim(b):
    return [("index", _dim_bound(b["self"], b["dim"]), -1)]


def _tensor_indices(b):
    """x[idx] and index_put: one check per integer index tensor, against the dimension it indexes
    (a None skips one dimension, a bool or uint8 mask as many as it has: masks become integer
    indices that cannot be out of range)."""
    import torch

    out, d = [], 0
    for k, idx in enumerate(b["indices"]):
        if idx is None:
            d += 1
        elif idx.dtype in (torch.bool, torch.uint8):
            d += idx.dim()
        else:
            out.append((("indices", k), b["self"].shape[d], -1))
            d += 1
    return out


# aten op -> (overloads, LABELGUARD_INDEX_* kind, the ids to check: [(argument, bound, padding_idx
# [, a kind of its own])])
_INDEX = {
    "embedding": (("default",), 16, lambda b: [("indices", b["weight"].shape[0], b.get("padding_idx", -1))]),
    "embedding_dense_backward": (("default",), 17, lambda b: [("indices", b["num_weights"], b["padding_idx"])]),
    "index": (("Tensor",), 18, _tensor_indices),
    "index_put": (("default",), 19, _tensor_indices),
    "gather": (("default",), 20, _ids_on_dim),
    "index_select": (("default",), 21, _ids_on_dim),
    "index_add": (("default",), 22, _ids_on_dim),
    "index_copy": (("default",), 23, _ids_on_dim),
    "index_fill": (("int_Scalar", "int_Tensor"), 24, _ids_on_dim),
    "scatter": (("src", "value", "reduce", "value_reduce"), 25, _ids_on_dim),
    "scatter_add": (("default",), 26, _ids_on_dim),
    "scatter_reduce": (("two",), 27, _ids_on_dim),
    "take": (("default",), 28, lambda b: [("index", b["self"].numel(), -1)]),
    "put": (("default",), 29, lambda b: [("index", b["self"].numel(), -1)]),
    # Only the mean is decomposed (into index_add / index_fill); the others fall back to ATen.
    "index_reduce": (("default",), 30, lambda b: _ids_on_dim(b) if b["reduce"] == "mean" else []),
    # Probabilities, not ids: the input and the target each in [0, 1], NaN bad, as eager's kernel
    # asserts (the bound is unused); the target's check is a kind of its own (operand 1).
    "binary_cross_entropy": (("default",), 33, lambda b: [("self", 1, -1), ("target", 1, -1, 34)]),
    # Each index a position in its output plane (eager's kernel: 0 <= index < height * width).
    "max_unpool2d": (("default",), 35, lambda b: [("indices", b["output_size"][0] * b["output_size"][1], -1)]),
}


def _one_hot_ids(b):
    """one_hot's labels against num_classes; -1 (the default) asks for the labels' max, which
    Dynamo cannot trace: the op runs eagerly, where ATen's scatter is checked."""
    n = b["num_classes"]
    return [] if isinstance(n, int) and n < 0 else [("self", n, -1)]


# Ops that a Python kernel decomposes at a dispatch key of its own while AOTAutograd traces
# (py_impl), so that Inductor's table never sees them: aten op -> (dispatch key, kind, the ids).
# Their inner gather / comparisons are then checked by this rule, not the inner op's.
_PY_IMPL = {
    "one_hot": ("CompositeImplicitAutograd", 31, _one_hot_ids),
    "multi_margin_loss": ("Autograd", 32, lambda b: [("target", _dim_bound(b["self"], -1), -1)]),
}
# Kinds whose eager op wraps negative ids: a check of one kind does not stand in for the other's.
_NEGATIVE_OK = {18, 19, 24, 28, 29}
_RANGE = {33, 34}  # BCE's input and target: probabilities, each reported as its operand
_tls = threading.local()


class nested:
    """Within it, the index ops traced are not checked: they come from a decomposition whose own
    op was checked by its rule (a loss's gather and scatter, with its target checked by
    check_target; index_add's index_put)."""

    def __enter__(self):
        _tls.depth = getattr(_tls, "depth", 0) + 1

    def __exit__(self, *exc):
        _tls.depth -= 1


def _inside_decomposition():
    """True when the op being traced comes from another op's decomposition (the proxy mode
    counts the decompositions it is in; ours is one): its ids are computed by that op (an
    upsample's, a pooling backward's) or already checked with the outer op's rule."""
    try:
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        mode = get_proxy_mode()
    except Exception:
        return False
    return mode is not None and getattr(mode, "decomp_layers", 0) > 1


def _inductor_tracing():
    """The trace running is Inductor's: its decomposition table is the one patched here. The
    Python kernels of _PY_IMPL also run in other traces (torch.export, make_fx, functorch),
    whose graphs must not hold a check op that only a process with labelguard can run."""
    try:
        import torch
        from torch.fx.experimental import proxy_tensor

        mode = proxy_tensor.get_proxy_mode()
        table = getattr(mode, "decomposition_table", None)  # the mode's own (2.15)
        if not table:
            table = getattr(proxy_tensor, "CURRENT_DECOMPOSITION_TABLE", None)  # a global (2.10)
        entry = table.get(torch.ops.aten.embedding.default) if table else None
    except Exception:
        return False
    return getattr(entry, "labelguard_wrapped", None) is not None


def _site():
    """The model's line behind the node being traced, from its stack_trace (innermost frame):
    "file:line in fn: code"; "" when the tracer keeps no stack."""
    try:
        from torch.fx.traceback import get_current_meta
        trace = (get_current_meta() or {}).get("stack_trace") or ""
    except Exception:
        return ""
    lines = [l for l in trace.splitlines() if l.strip()]
    for i in range(len(lines) - 1, -1, -1):
        l = lines[i].strip()
        if l.startswith('File "'):
            try:
                path, rest = l[6:].split('", line ', 1)
                line, fn = rest.split(", in ", 1)
            except ValueError:
                return l
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith('File "') else ""
            return "%s:%s in %s%s" % (path, line.strip(), fn.strip(), ": " + code if code else "")
    return ""


def _wrap(name, orig, op, core, kind, ids, py_impl=False):
    """The decomposition-table entry of aten.<name>.<overload> (see _INDEX), or its Python kernel
    (_PY_IMPL, py_impl: checked in Inductor's traces only); core: _compiled."""
    names = [a.name for a in op._schema.arguments]
    lib = core._library()
    _state = core._state

    def through(args, kwargs):
        if orig is not None:
            return orig(*args, **kwargs)
        return NotImplemented  # traced as the op itself

    def decomposition(*args, **kwargs):
        if getattr(_tls, "depth", 0) or _inside_decomposition() or core._aot_compiling() or \
                (py_impl and not _inductor_tracing()):
            return through(args, kwargs)
        if not _state["on"]:
            lib.labelguard_compiled(name.encode())
            return through(args, kwargs)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        for a in op._schema.arguments:
            if a.name not in bound and a.has_default_value():
                bound[a.name] = a.default_value
        site = _site()
        args, kwargs = list(args), dict(kwargs)
        check_op = core._register_op() and _state["index_op"]
        for entry in ids(bound):
            where, size, padding = entry[:3]
            arg, k = where if isinstance(where, tuple) else (where, None)
            value = bound[arg]
            ids_tensor = value if k is None else value[k]
            checked = check_op(ids_tensor, size, padding if padding is not None else -1,
                               entry[3] if len(entry) > 3 else kind, site)
            if k is not None:
                value = list(value)
                value[k] = checked
                checked = value
            bound[arg] = checked
            pos = names.index(arg)
            if pos < len(args):
                args[pos] = checked
            else:
                kwargs[arg] = checked
        with nested():
            r = through(tuple(args), kwargs)
            if r is NotImplemented:  # the op on the checked ids (its own entry answers NotImplemented)
                r = op(*args, **kwargs)
        return r

    decomposition.labelguard_wrapped = orig if orig is not None else op
    decomposition.__name__ = "labelguard_checked_" + name
    return decomposition


def merge_checks(graph, core):
    """One check_index per distinct ids tensor in a post-grad graph: a later check of the same
    node against the same bound and padding_idx, under the same rule for negative ids, reads the
    first one's output instead (an embedding's backward check goes into its forward's, which the
    partitioner put in the forward graph, as for the losses)."""
    op = core._state.get("index_op")
    if op is None:
        return
    kept = {}
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not op or len(n.args) != 5 or n.kwargs:
            continue
        rule = n.args[3] if n.args[3] in _RANGE else n.args[3] in _NEGATIVE_OK  # BCE: input != target
        key = (n.args[0], n.args[1], n.args[2], rule)
        try:
            first = kept.setdefault(key, n)
        except TypeError:  # an argument that does not hash
            continue
        if first is not n:
            n.replace_all_uses_with(first)
            graph.erase_node(n)


def patch(table, core):
    """Puts the entries of _INDEX into Inductor's decomposition table (core: _compiled)."""
    import torch

    aten = torch.ops.aten
    for name, (overloads, kind, ids) in _INDEX.items():
        for overload in overloads:
            op = getattr(getattr(aten, name), overload, None)
            if op is None:
                continue
            orig = table.get(op)
            if orig is not None and getattr(orig, "labelguard_wrapped", None) is not None:
                continue
            table[op] = _wrap(name, orig, op, core, kind, ids)
    from torch._C import DispatchKey

    for name, (key, kind, ids) in _PY_IMPL.items():
        op = getattr(getattr(aten, name, None), "default", None)
        dk = getattr(DispatchKey, key)
        if op is None:
            continue
        orig = op.py_kernels.get(dk)
        if orig is None and key == "CompositeImplicitAutograd" and hasattr(op, "_op_dk") \
                and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), dk):
            # No Python kernel (2.10's one_hot): ATen's composite, which traces fake ids as
            # eq(ids, arange(num_classes)), silent on a bad label, runs behind the check instead.
            def orig(*args, _op=op, _dk=dk, **kwargs):
                return _op._op_dk(_dk, *args, **kwargs)
        if orig is None or getattr(orig, "labelguard_wrapped", None) is not None:
            continue
        op.py_kernels[dk] = _wrap(name, orig, op, core, kind, ids, py_impl=True)
        op._dispatch_cache.clear()
