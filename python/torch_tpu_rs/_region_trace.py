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
fresh tensor objects for the outputs it saved. Ops on CPU tensors alone
(AdamW's step counts, a data loader's collation) ran already and are not
the device's work: they are not recorded, and a CPU tensor becomes an
input where a device op reads it.
"""
from __future__ import annotations

import operator
import weakref
from typing import NamedTuple

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

# Ops that only mark profiler ranges: no values flow through them.
_SKIPPED_NAMESPACES = {"profiler"}


class Output(NamedTuple):
    """A storage a region created, through the tensor that created it:
    its node, that tensor (weakly: it may be gone while its storage lives
    on), the storage (weakly), its handle, and the tensor's geometry."""
    node: fx.Node
    tensor: weakref.ref
    storage: StorageWeakRef
    handle: int
    shape: tuple
    stride: tuple
    offset: int
    dtype: torch.dtype
    device: torch.device
    nbytes: int

    def strong_storage(self):
        """The storage itself (held while a caller writes it), or None if gone."""
        return None if self.storage.expired() else torch.UntypedStorage._new_with_weak_ptr(self.storage.cdata)


def _place(t: torch.Tensor):
    """Where a tensor's values live."""
    return (t.device, t.untyped_storage().data_ptr(), t.dtype, tuple(t.shape), t.stride(), t.storage_offset())


def _storage(t: torch.Tensor):
    return (t.device, t.untyped_storage().data_ptr())


class Region:
    """One region's graph and what it was traced from.

    `keep_inputs=True` keeps a copy of each placeholder's value from just
    before the region first touched it, so a test can rerun the graph from
    the same start (`input_values`). `hold_inputs=True` keeps the
    placeholders' tensors themselves until `release()`, and a copy of each
    CPU one: CPU ops ran eagerly as they were traced (AdamW's step counter
    is already one up), so a rerun must start from their old values."""

    def __init__(self, keep_inputs: bool = False, hold_inputs: bool = False):
        self.graph = fx.Graph()
        self.keep_inputs, self.hold_inputs = keep_inputs, hold_inputs
        self.input_values: list = []
        self.inputs: list = []  # weak references to the placeholders' tensors
        self.input_tensors: list = []  # with hold_inputs: (tensor, CPU copy or None)
        self._input_shapes: list = []
        self.input_devices: list = []
        self.ops: list = []  # each recorded op, in order: its signature for matching regions
        self.output_nodes: list = []
        self.outputs: list = []  # an Output per output node, from finish()
        self._node_at: dict = {}  # _place -> node
        self._created: dict = {}  # _storage -> Output: the tensor that created the storage

    # -- mapping tensors to nodes ------------------------------------------
    def node_of(self, t: torch.Tensor) -> fx.Node:
        place = _place(t)
        node = self._node_at.get(place)
        if node is not None:
            return node
        created = self._created.get(_storage(t))
        if created is not None and not created.storage.expired():
            # A view of a region tensor made outside any recorded op (a
            # shallow copy autograd made with other sizes): same storage,
            # so it is a strided view of the tensor that created it.
            base = created.node
            node = self.graph.call_function(
                torch.ops.aten.as_strided.default, (base, list(t.shape), list(t.stride()), t.storage_offset()))
        else:
            node = self.graph.placeholder(f"input_{len(self.inputs)}")
            self.inputs.append(weakref.ref(t))
            self._input_shapes.append(tuple(t.shape))
            self.input_devices.append(t.device)
            if self.keep_inputs:
                self.input_values.append(t.detach().clone())
            if self.hold_inputs:
                self.input_tensors.append((t, t.detach().clone() if t.device.type == "cpu" else None))
        self._node_at[place] = node
        return node

    def forget_written(self, func, args):
        """After a CPU op updated tensors in place: their next use reads
        their new values."""
        for arg, a in zip(func._schema.arguments, args):
            if isinstance(a, torch.Tensor) and arg.alias_info is not None and arg.alias_info.is_write:
                self._node_at.pop(_place(a), None)

    def record(self, func, node_args, node_kwargs, out):
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        self.ops.append(str(func))
        self._map_outputs(func, node, out)

    def _map_outputs(self, func, node: fx.Node, out):
        returns = func._schema.returns
        one_list = len(returns) == 1 and isinstance(returns[0].type, torch.ListType)
        outs = out if one_list and isinstance(out, (tuple, list)) else None
        if outs is not None:  # one Tensor[] return: the node is the list
            items = [(_getitem(node, i), o) for i, o in enumerate(outs)]
            aliases = [returns[0].alias_info] * len(outs)
        elif len(returns) > 1:
            items = [(_getitem(node, i), o) for i, o in enumerate(out)]
            aliases = [r.alias_info for r in returns]
        else:
            items = [(node, out)]
            aliases = [returns[0].alias_info if returns else None]
        for (n, o), alias in zip(items, aliases):
            if not isinstance(o, torch.Tensor) or (alias is not None and alias.is_write):
                # An updated argument keeps its node: later uses run after
                # this op, so they see the update.
                continue
            self._node_at[_place(o)] = n
            if alias is not None:
                continue  # a view: its storage is its base's
            key = _storage(o)
            known = self._created.get(key)
            if known is None or known.storage.expired():
                self._created[key] = Output(n, weakref.ref(o), StorageWeakRef(o.untyped_storage()),
                                            o.untyped_storage().data_ptr(), tuple(o.shape), o.stride(),
                                            o.storage_offset(), o.dtype, o.device, o.untyped_storage().nbytes())

    def finish(self):
        """Ends the region: what it hands on is what is alive now."""
        self.outputs = self.live_outputs()
        self.output_nodes = [o.node for o in self.outputs]

    def release(self):
        """Drops the tensors held for a rerun; the graph stays."""
        self.input_tensors = []

    # -- the finished graph ------------------------------------------------
    def input_shapes(self) -> list:
        """The sizes of each placeholder's tensor, as the region found it."""
        return list(self._input_shapes)

    def live_outputs(self) -> list:
        """An Output for each storage the region created that is still
        alive (autograd or `.grad` may hold it through other tensor objects
        than the one that created it), in graph order."""
        found = [o for o in self._created.values() if not o.storage.expired()]
        position = {n: i for i, n in enumerate(self.graph.nodes)}
        return sorted(found, key=lambda o: position[o.node])

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


class RegionTrace(TorchDispatchMode):
    """Records the ops run inside `with RegionTrace() as trace:` into a
    `Region` (`trace.graph`, `trace.graph_module()`, ...). `cut()` ends the
    region so far and goes on recording into a new one."""

    def __init__(self, keep_inputs: bool = False, hold_inputs: bool = False):
        super().__init__()
        self.region = Region(keep_inputs, hold_inputs)

    def __getattr__(self, name):
        region = self.__dict__.get("region")
        if region is None:
            raise AttributeError(name)
        return getattr(region, name)

    def cut(self) -> Region:
        done = self.region
        done.finish()
        self.region = Region(done.keep_inputs, done.hold_inputs)
        return done

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace in _SKIPPED_NAMESPACES:
            return func(*args, **kwargs)
        region = self.region
        # Arguments first: the op may update them in place. (A CPU-only op
        # maps none: its tensors only become inputs where a device op reads them.)
        to_nodes = lambda: tree_map(lambda a: region.node_of(a) if isinstance(a, torch.Tensor) else a,  # noqa: E731
                                    (args, kwargs))
        device_args = _touches_device((args, kwargs))
        if device_args:
            node_args, node_kwargs = to_nodes()
        out = func(*args, **kwargs)
        if not device_args and _touches_device(out) and self.region is region:
            node_args, node_kwargs = to_nodes()  # CPU values moved to the device: inputs as they are now
            device_args = True
        if not device_args:
            # CPU work ran already and is not the device's: the region reads
            # its results (a batch, a step count) as inputs where a device op
            # takes them. What it updates is read afresh at the next use.
            region.forget_written(func, args)
        elif self.region is region:
            region.record(func, node_args, node_kwargs, out)
        # Else the region was cut while the op ran (a flush inside it): the
        # op belongs to neither trace, and the next region reads its results
        # as inputs.
        return out

    def __exit__(self, *exc):
        self.region.finish()
        return super().__exit__(*exc)


def _touches_device(value) -> bool:
    return any(isinstance(v, torch.Tensor) and v.device.type != "cpu" for v in tree_flatten(value)[0])


def _getitem(node: fx.Node, i: int) -> fx.Node:
    return node.graph.call_function(operator.getitem, (node, i))
