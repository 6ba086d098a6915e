"""A stretch of eager work, traced into an ATen FX graph.

Fused Eager compiles the ops between two flushes as one program, at the
sizes they ran at. Bucketing those sizes, as `torch.compile` does
(`_bucketing.py`), needs the work as a graph of ATen ops over the tensors
it found when it began. `RegionTrace` records it: a dispatch mode sees
every op below autograd (the forward, the backward on autograd's thread,
the optimizer), and adds a node for it after mapping its tensor arguments
to nodes:
- a tensor an earlier op of the region returned is that op's node;
- any other tensor (weights, inputs, optimizer state) is a placeholder.

The graph keeps PyTorch's own ops as they ran: views stay views and
in-place ops stay in place, so running it on the region's inputs redoes
its work, updates included, and AOTAutograd can functionalize it like any
traced graph. Its outputs are the storages the region created that are
still alive at its end (what a caller may still read).

Tensors are matched by where their values live (storage, dtype, sizes,
strides, offset), not by Python identity: autograd hands the backward
fresh tensor objects for the outputs it saved.
"""
from __future__ import annotations

import operator
import weakref

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

# Ops that only mark profiler ranges: no values flow through them.
_SKIPPED_NAMESPACES = {"profiler"}


def _place(t: torch.Tensor):
    """Where a tensor's values live."""
    return (t.device, t.untyped_storage().data_ptr(), t.dtype, tuple(t.shape), t.stride(), t.storage_offset())


def _storage(t: torch.Tensor):
    return (t.device, t.untyped_storage().data_ptr())


class RegionTrace(TorchDispatchMode):
    """Records the ops run inside `with RegionTrace() as trace:` into
    `trace.graph`; `trace.graph_module()` closes it with its outputs.

    `keep_inputs=True` keeps a copy of each placeholder's value from just
    before the region first touched it, so a test can rerun the graph from
    the same start (`trace.input_values`)."""

    def __init__(self, keep_inputs: bool = False):
        super().__init__()
        self.graph = fx.Graph()
        self.keep_inputs = keep_inputs
        self.input_values: list = []
        self.inputs: list = []  # weak references to the placeholders' tensors
        self._input_shapes: list = []
        self.input_devices: list = []
        self.ops: list = []  # each recorded op, in order: its signature for matching regions
        self._node_at: dict = {}  # _place -> node
        self._created: dict = {}  # _storage -> (node that created it, weakref to its tensor, storage weakref)

    # -- mapping tensors to nodes ------------------------------------------
    def _node_of(self, t: torch.Tensor) -> fx.Node:
        place = _place(t)
        node = self._node_at.get(place)
        if node is not None:
            return node
        created = self._created.get(_storage(t))
        if created is not None and not created[2].expired():
            # A view of a region tensor made outside any recorded op (a
            # shallow copy autograd made with other sizes): same storage,
            # so it is a strided view of the tensor that created it.
            base = created[0]
            node = self.graph.call_function(
                torch.ops.aten.as_strided.default, (base, list(t.shape), list(t.stride()), t.storage_offset()))
        else:
            node = self.graph.placeholder(f"input_{len(self.inputs)}")
            self.inputs.append(weakref.ref(t))
            self._input_shapes.append(tuple(t.shape))
            self.input_devices.append(t.device)
            if self.keep_inputs:
                self.input_values.append(t.detach().clone())
        self._node_at[place] = node
        return node

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace in _SKIPPED_NAMESPACES:
            return func(*args, **kwargs)
        # Arguments first: the op may update them in place.
        node_args, node_kwargs = tree_map(
            lambda a: self._node_of(a) if isinstance(a, torch.Tensor) else a, (args, kwargs))
        out = func(*args, **kwargs)
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        self.ops.append(str(func))
        self._map_outputs(func, node, out)
        return out

    def _map_outputs(self, func, node: fx.Node, out):
        returns = func._schema.returns
        outs = out if isinstance(out, (tuple, list)) and len(returns) == 1 and str(returns[0].type).endswith("[]") \
            else None
        if outs is not None:  # one Tensor[] return: the node is the list
            items = [(_getitem(node, i), o) for i, o in enumerate(outs)]
            writes = [returns[0].alias_info is not None and returns[0].alias_info.is_write] * len(outs)
        elif len(returns) > 1:
            items = [(_getitem(node, i), o) for i, o in enumerate(out)]
            writes = [r.alias_info is not None and r.alias_info.is_write for r in returns]
        else:
            items = [(node, out)]
            writes = [bool(returns) and returns[0].alias_info is not None and returns[0].alias_info.is_write]
        for (n, o), written in zip(items, writes):
            if not isinstance(o, torch.Tensor) or written:
                # An updated argument keeps its node: later uses run after
                # this op, so they see the update.
                continue
            self._node_at[_place(o)] = n
            key = _storage(o)
            known = self._created.get(key)
            if known is None or known[2].expired():
                self._created[key] = (n, weakref.ref(o), StorageWeakRef(o.untyped_storage()))

    def __exit__(self, *exc):
        # What the region hands on is what is alive at its end.
        self.output_nodes = [n for n, _ in self.live_outputs()]
        return super().__exit__(*exc)

    # -- the finished graph ------------------------------------------------
    def input_shapes(self) -> list:
        """The sizes of each placeholder's tensor, as the region found it."""
        return list(self._input_shapes)

    def live_outputs(self):
        """(node, tensor) for each storage the region created that is
        still alive, through the tensor that created it, in graph order."""
        found = []
        for n, ref, storage in self._created.values():
            if storage.expired():
                continue
            t = ref()
            if t is not None:
                found.append((n, t))
        position = {n: i for i, n in enumerate(self.graph.nodes)}
        return sorted(found, key=lambda f: position[f[0]])

    def graph_module(self) -> fx.GraphModule:
        """The region as a module: placeholders in, what was alive at its
        end out."""
        g = fx.Graph()
        env: dict = {}
        for n in self.graph.nodes:
            env[n] = g.node_copy(n, lambda a: env[a])
        g.output(tuple(env[n] for n in self.output_nodes))
        g.eliminate_dead_code()  # keeps ops that update their arguments (impure)
        return fx.GraphModule(torch.nn.Module(), g)


def _getitem(node: fx.Node, i: int) -> fx.Node:
    return node.graph.call_function(operator.getitem, (node, i))
