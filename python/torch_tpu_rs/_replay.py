"""Compiled graphs run as one recorded program, replayed on later calls.

The first call of an ATen graph records it through Fused Eager (each op
dispatched, lowered and added to one pending graph) and flushes it as one
program. Recording costs tens of microseconds per op on the host, so later
calls with arguments of the same layout skip it: the engine feeds the new
arguments' buffers to the same program and writes its results into fresh
output storages and into the arguments it updates (engine/src/replay.rs).

CPU work in a graph (AdamW's step counters with default arguments) does not
belong to the program: such nodes are split into a small CPU graph that runs
in eager PyTorch on every call, and the CPU values the device ops read are
handed to them as 0-dim tpu tensors, which is what the glue does for CPU
scalars anyway. Pure math on those scalars (AdamW's bias corrections) is
left in the device program, so the CPU graph keeps only the updates. A graph
whose device ops feed CPU work, or that records something a replay cannot
reproduce, is recorded on every call, as before.
"""
from __future__ import annotations

import contextlib
import operator
import threading

import torch
import torch.fx as fx

from . import _C, _rng_recompute


def _device_type(val):
    if isinstance(val, torch.Tensor):
        return val.device.type
    if isinstance(val, (list, tuple)) and val and all(isinstance(v, torch.Tensor) for v in val):
        kinds = {v.device.type for v in val}
        return kinds.pop() if len(kinds) == 1 else "mixed"
    return None


class _Split:
    """`gm` as a CPU graph (all placeholders -> the CPU values device ops
    read) and a device graph (device placeholders, then those values)."""

    def __init__(self, cpu_gm, tpu_gm, tpu_args, n_boundary):
        self.cpu_gm, self.tpu_gm, self.tpu_args, self.n_boundary = cpu_gm, tpu_gm, tpu_args, n_boundary


def _written_args(n: fx.Node):
    """The nodes an op node updates in place (per its schema)."""
    schema = getattr(n.target, "_schema", None)
    if n.op != "call_function" or schema is None:
        return []
    return [a for arg, a in zip(schema.arguments, n.args)
            if isinstance(a, fx.Node) and arg.alias_info is not None and arg.alias_info.is_write]


def _lowered(op) -> bool:
    """Whether the device runs `op`: it has a lowering, or decomposes into ops."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return False
    global _LOWERED
    if _LOWERED is None:
        _LOWERED = frozenset(_C.lowered_ops())
    return schema.name.split("::")[-1] in _LOWERED or torch._C._dispatch_has_kernel_for_dispatch_key(
        op.name(), "CompositeImplicitAutograd")


_LOWERED = None


def _pure_scalar_math(n: fx.Node) -> bool:
    """An op on CPU 0-dim tensors that computes 0-dim tensors from them and
    nothing else: no writes, no device or randomness of its own."""
    if n.op != "call_function" or not n.all_input_nodes or "device" in n.kwargs or _written_args(n):
        return False
    if torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()):
        return False
    if n.target is not operator.getitem and not _lowered(n.target):
        return False  # it stays on the CPU, where it worked
    val = n.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in vals)


def _split_cpu(gm: fx.GraphModule):
    """A _Split, or a string saying why the graph cannot be split."""
    if _rng_recompute.holds_rng_recompute(gm):
        return "it saves or restores the RNG state for a recompute (activation checkpointing)"
    cpu = set()
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        kind = _device_type(n.meta.get("val"))
        if n.op == "placeholder":
            if kind not in ("tpu", "cpu"):
                return f"input {n.name} is not a tensor"
            if kind == "cpu":
                cpu.add(n)
            continue
        ins = n.all_input_nodes
        if kind == "cpu" or (kind is None and ins and all(i in cpu for i in ins)):
            if not all(i in cpu for i in ins):
                return f"{n.name} computes a CPU value from device values"
            cpu.add(n)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    # Pure scalar math on CPU values that only device ops read (AdamW's bias
    # corrections from its step counters) joins the device program, where
    # it fuses for free; as eager CPU ops it cost microseconds per op on
    # every call, and each result was one more upload.
    for n in reversed(gm.graph.nodes):
        if n in cpu and _pure_scalar_math(n) and n.users and \
                all(u is not output and u not in cpu for u in n.users):
            cpu.discard(n)
    if not cpu:
        return _Split(None, gm, None, 0)
    if any(i in cpu for i in output.all_input_nodes):
        return "it returns a CPU value"
    boundary = [n for n in gm.graph.nodes if n in cpu and any(u not in cpu for u in n.users)]
    if any(not isinstance(n.meta.get("val"), torch.Tensor) for n in boundary):
        return "device ops read a CPU list"

    # The CPU graph runs whole before the device ops, so a value they read
    # that CPU work later updates in place (n.add_(1) after x * n) is
    # snapshotted where it is defined.
    mutated = {a for n in cpu for a in _written_args(n)}
    cg, env, out = fx.Graph(), {}, {}

    def define(n, value):
        env[n] = value
        if n in boundary:
            out[n] = cg.call_function(torch.ops.aten.clone.default, (value,)) if n in mutated else value

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n in placeholders:
        env[n] = cg.placeholder(n.name)
    for n in placeholders:
        define(n, env[n])
    for n in gm.graph.nodes:
        if n.op != "placeholder" and n in cpu:
            define(n, cg.node_copy(n, lambda x: env[x]))
    cg.output(tuple(out[b] for b in boundary))

    tg, env2, tpu_args = fx.Graph(), {}, []
    for i, n in enumerate(placeholders):
        if n not in cpu:
            env2[n] = tg.placeholder(n.name)
            tpu_args.append(i)
    for b in boundary:
        env2[b] = tg.placeholder(f"{b.name}_on_device")
    for n in gm.graph.nodes:
        if n.op == "placeholder" or n in cpu:
            continue
        if n.op == "output":
            tg.output(fx.map_arg(n.args[0], lambda x: env2[x]))
        else:
            env2[n] = tg.node_copy(n, lambda x: env2[x])
    return _Split(fx.GraphModule(gm, cg), fx.GraphModule(gm, tg), tpu_args, len(boundary))


@contextlib.contextmanager
def _recording():
    """Fused Eager with the caller marking the graph's end (the repeat
    detector must not cut a compiled graph in two); the mode is restored."""
    previous = _C.get_eager_mode()
    if previous != "fused":
        _C.set_eager_mode("fused")
    explicit = _C.set_explicit_graph_boundaries(True)
    try:
        yield
    finally:
        _C.set_explicit_graph_boundaries(explicit)
        if previous != "fused":
            _C.set_eager_mode(previous)


# Recording switches the process-wide eager mode and fills the one pending
# graph, and a replay reads a graph's capture state, so compiled graphs called
# from several threads run one at a time (re-entrant: __call__ -> _record).
_LOCK = threading.RLock()


def _record(gm, args, reason):
    """Runs `gm` through the Fused Eager recorder as one program."""
    with _LOCK, _recording():
        out = gm(*args)
        _C.flush(reason)
    return out


def _to_device(values, device):
    """CPU values for the device ops. Many scalars of one dtype (AdamW's step
    counters) go up as one tensor, viewed per value: one upload, not many."""
    if len(values) > 1 and all(v.dim() == 0 and v.dtype == values[0].dtype for v in values):
        return list(torch.stack(values).to(device).unbind())
    return [v.to(device) for v in values]


def _storage(t):
    return t.untyped_storage().data_ptr()


def _layout(t):
    return (t.dtype, t.device, tuple(t.shape), t.stride(), t.storage_offset())


class ReplayedGraph:
    """Callable for one ATen graph: recorded on the first call, replayed after."""

    def __init__(self, gm: fx.GraphModule, kind: str):
        self.gm, self.kind = gm, kind
        self.reason = f"end of a compiled {kind} graph"
        split = _split_cpu(gm)
        self.split = split if isinstance(split, _Split) else None
        self.why_not = None if self.split else split
        self.plan = -1
        # Device tensors the graph holds as attributes are inputs too.
        self.consts = []
        if self.split is not None:
            for n in self.split.tpu_gm.graph.nodes:
                if n.op == "get_attr":
                    v = getattr(self.split.tpu_gm, n.target, None)
                    if isinstance(v, torch.Tensor) and v.device.type == "tpu":
                        self.consts.append(v)

    def __call__(self, *args):
        with _LOCK:
            out = self._call(args)
        if _C.get_eager_mode() == "debug":
            # Debug Eager raises at the call that failed (an index out of
            # range in the graph), not at some later read.
            _C.synchronize()
        return out

    def _call(self, args):
        if self.split is None:
            return _record(self.gm, args, self.reason)
        s = self.split
        if s.cpu_gm is None:
            targs = list(args)
        else:
            device = next((args[i].device for i in s.tpu_args), None)
            if device is None:
                return _record(self.gm, args, self.reason)
            boundary = s.cpu_gm(*args)
            targs = [args[i] for i in s.tpu_args] + _to_device(boundary, device)
        if self.plan >= 0:
            out = self._replay(targs)
            if out is not None:
                return out
        elif self.why_not is not None:
            # Captured once and found unreplayable: just record.
            return _record(s.tpu_gm, targs, self.reason)
        return self._capture(targs)

    def _capture(self, targs):
        with _recording():
            try:
                mark = _C.capture_begin()
                outs = self.split.tpu_gm(*targs)
                plan, why, updated, specs = self._describe(mark, targs, outs)
            finally:
                _C.capture_cancel()
        self._drop_plan()
        self.plan, self.why_not = plan, why
        if plan >= 0:
            self.layouts = [_layout(t) for t in targs]
            self.updated, self.specs = updated, specs
            self.device = next(t.device for t in targs)
        return outs

    def _drop_plan(self):
        if self.plan >= 0:
            _C.drop_plan(self.plan)
            self.plan = -1

    def __del__(self):
        try:
            self._drop_plan()
        except Exception:  # interpreter shutdown: the module may be gone
            pass

    def _describe(self, mark, targs, outs):
        """Flushes the recording; returns (plan, why not, updated args, output specs)."""
        args = list(targs) + self.consts
        no_plan = None
        if not args or not all(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in args):
            no_plan = "an input is not a tpu tensor"
        arg_of, groups, specs = {}, {}, []
        if no_plan is None:
            for k, t in enumerate(args):
                arg_of.setdefault(_storage(t), k)
            for o in outs if isinstance(outs, (list, tuple)) else ():
                if o is None:
                    specs.append(None)
                    continue
                if not isinstance(o, torch.Tensor) or o.device.type != "tpu":
                    no_plan = "an output is not a tpu tensor"
                    break
                p, view = _storage(o), (tuple(o.shape), o.stride(), o.storage_offset())
                if p in arg_of:
                    k = arg_of[p]
                    specs.append(("arg", k, view, o is args[k]))
                    continue
                if p not in groups:
                    nbytes = o.untyped_storage().nbytes()
                    if nbytes % o.element_size():
                        no_plan = "an output storage is not a whole number of elements"
                        break
                    groups[p] = (len(groups), o.dtype, nbytes // o.element_size(), o.device)
                j, dtype = groups[p][0], groups[p][1]
                if dtype != o.dtype:
                    no_plan = "two outputs view one storage with different dtypes"
                    break
                specs.append(("new", j, view, o.is_contiguous() and o.storage_offset() == 0 and o.numel() == groups[p][2]))
            if not isinstance(outs, (list, tuple)):
                no_plan = "it does not return a list"
        if no_plan is not None:
            _C.flush(self.reason)
            return -1, no_plan, [], []
        handles = [_storage(t) for t in args]
        plan, why, updated = _C.capture_end(mark, handles, list(groups), self.reason)
        self.groups = [g[1:] for g in sorted(groups.values())]
        # A group with one plain output is allocated as that output itself.
        self.single = [sum(1 for sp in specs if sp and sp[0] == "new" and sp[1] == j) == 1 for j in range(len(groups))]
        return plan, (why or None), [k for k in updated if k < len(targs)], specs

    def _replay(self, targs):
        layouts = self.layouts
        if len(targs) != len(layouts):
            return None
        for t, lay in zip(targs, layouts):
            if _layout(t) != lay:
                return None
        args = targs + self.consts
        bases = []
        grad = torch.is_grad_enabled()
        if grad:
            torch.set_grad_enabled(False)
        try:
            outs = [None] * len(self.specs)
            for i, spec in enumerate(self.specs):
                if spec is not None and spec[0] == "new" and spec[3] and self.single[spec[1]]:
                    outs[i] = torch.empty(spec[2][0], dtype=self.groups[spec[1]][0], device=self.device)
            plain = {spec[1]: outs[i] for i, spec in enumerate(self.specs) if outs[i] is not None}
            for j, (dtype, numel, device) in enumerate(self.groups):
                bases.append(plain[j] if j in plain else torch.empty(numel, dtype=dtype, device=device))
            if not _C.replay(self.plan, [_storage(t) for t in args], [_storage(b) for b in bases]):
                return None
            for i, spec in enumerate(self.specs):
                if spec is None or outs[i] is not None:
                    continue
                kind, k, (size, stride, offset), same = spec
                if kind == "arg":
                    outs[i] = args[k] if same else args[k].as_strided(size, stride, offset)
                else:
                    outs[i] = bases[k].as_strided(size, stride, offset)
        finally:
            if grad:
                torch.set_grad_enabled(True)
        if self.updated:
            # What the recorded in-place ops did: autograd sees the update.
            torch.autograd.graph.increment_version([targs[k] for k in self.updated])
        return outs
