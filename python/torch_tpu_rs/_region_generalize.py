"""Two traces of one region at different sizes, made into one graph whose
sizes follow its inputs.

A region traced by `RegionTrace` holds the numbers its ops were called
with: `x.view(2, 37, 64)` records 37, a loss's mean divides by 74. Traced
again at another length, the same ops carry other numbers. Where the two
traces differ, the number is a size of the inputs: this module finds
which, as `k * size + c` or a product of two sizes, and writes it into the
graph as that expression of the inputs' sizes. An int that follows no
input size (`torch.randn(n, 8, device="tpu")` inside the region) becomes
an input, as a changing float does. The inputs' dims that
differ are the dynamic ones; `torch.compile` then traces the graph with
those dims marked dynamic, and its bucketing (`_bucketing.py`) runs it at
one program per bucket of sizes.

Floats that differ between the traces (AdamW's bias corrections, which
follow its step count) become inputs of the graph: a later run passes its
own. Dynamo would compile again for every new value of a float passed to
an op as a number, so where an op has a form that takes tensors instead
(`_foreach_div_.ScalarList` -> `.List`, `mul.Scalar` -> `.Tensor`), the
floats arrive as one tensor (`numbers`) and the op reads them from it.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx


aten = torch.ops.aten


class NotGeneralizable(Exception):
    """The traces are not one region at two sizes, or a later trace does
    not fit the graph made from them."""


class _Size:
    """An input's dim whose size differs between the traces."""

    def __init__(self, input_at: int, dim: int, first: int, second: int):
        self.input_at, self.dim, self.first, self.second = input_at, dim, first, second


def _fit(sizes: list, first: int, second: int):
    """How a number that is `first` in one trace and `second` in the other
    follows the sizes: ("linear", size, k, c) for k * size + c, or
    ("product", size, size); None if no way fits."""
    for s in sizes:  # the size itself, or a multiple / offset of it
        if s.first == s.second:
            continue
        k, rem = divmod(first - second, s.first - s.second)
        if rem == 0 and k != 0:
            return ("linear", s, k, first - k * s.first)
    for i, s in enumerate(sizes):
        for t in sizes[i:]:
            if s.first * t.first == first and s.second * t.second == second:
                return ("product", s, t)
    return None


class Generalized:
    """The region's graph over symbolic sizes.

    `gm` takes the traced inputs, then the numbers that differ between
    traces and are passed as numbers (floats, and ints that follow no
    size), then (if any) the tensor of the floats read from a tensor. `dynamic` maps an input's position to its dims that
    change size. `numbers_for(trace)` checks that another trace of the
    region fits this graph and returns its numbers for `gm`."""

    def __init__(self, gm: fx.GraphModule, dynamic: dict, expected: list, ops: list, numbers_device):
        self.gm, self.dynamic, self._expected, self._ops = gm, dynamic, expected, ops
        self._numbers_device = numbers_device

    def numbers_for(self, trace) -> list:
        if trace.ops != self._ops:
            raise NotGeneralizable("the trace ran other ops")
        shapes = trace.input_shapes()
        found = list(_numbers(trace.graph_module().graph))
        if len(found) != len(self._expected):
            raise NotGeneralizable("the trace's ops take other arguments")
        passed, in_tensor = [], []
        for (where, value), expect in zip(found, self._expected):
            if expect in ("input", "tensor"):
                (passed if expect == "input" else in_tensor).append(value)
                continue
            want = expect(shapes)
            if type(want) is not type(value) or want != value:  # 2 and 2.0 promote differently
                raise NotGeneralizable(f"{where}: {value!r} where the graph has {want!r}")
        if self._numbers_device is not None:
            passed.append(torch.tensor(in_tensor, dtype=torch.float64, device=self._numbers_device))
        return passed


def _numbers(graph: fx.Graph):
    """(where, number) for every number in the ops' arguments, in the
    order `generalize` visits them."""
    def walk(a, where):
        if isinstance(a, (list, tuple)):
            for x in a:
                yield from walk(x, where)
        elif isinstance(a, dict):
            for x in a.values():
                yield from walk(x, where)
        elif isinstance(a, (int, float, bool)):
            yield where, a
    for n in graph.nodes:
        if n.op not in ("placeholder", "output"):
            yield from walk((n.args, n.kwargs), f"{n.target} ({n.name})")


def _floats_vary(a, b) -> bool:
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and any(_floats_vary(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return any(_floats_vary(a[k], b.get(k)) for k in a)
    return isinstance(a, float) and isinstance(b, float) and a != b


def _tensor_form(target, args: tuple, kwargs: dict):
    """How `target(*args)` reads its number from a 0-dim tensor instead,
    as (rewrite(graph, args with numbers as tensor nodes) -> node), or
    None. Only the last argument may be the number(s) (a foreach op's
    `Scalar[]` or `Scalar`, or a binary op's `other`)."""
    if not isinstance(target, torch._ops.OpOverload) or kwargs:
        return None
    packet, overload = target.overloadpacket, target._overloadname
    name = packet.__name__
    if name.startswith("_foreach_") and overload in ("Scalar", "ScalarList"):
        base = name[len("_foreach_"):].rstrip("_")
        inplace = name.endswith("_")
        if base in ("addcdiv", "addcmul") and len(args) == 4:
            # self + value * t1 / t2, in the CPU kernel's order: (value * t1) / t2
            combine = aten._foreach_div.List if base == "addcdiv" else aten._foreach_mul.List
            add = aten._foreach_add_.List if inplace else aten._foreach_add.List

            def rewrite(g, a):
                scaled = g.call_function(aten._foreach_mul.List, (a[1], _per_tensor(a[3], len(a[0]))))
                return g.call_function(add, (a[0], g.call_function(combine, (scaled, a[2]))))
            return rewrite
        if len(args) == 2 and hasattr(packet, "List"):
            return lambda g, a: g.call_function(packet.List, (a[0], _per_tensor(a[1], len(a[0]))))
        return None
    if overload == "Scalar" and len(args) == 2 and hasattr(packet, "Tensor"):
        return lambda g, a: g.call_function(packet.Tensor, tuple(a))
    return None


def _per_tensor(numbers, n: int) -> list:
    return list(numbers) if isinstance(numbers, (list, tuple)) else [numbers] * n


def generalize(first, second) -> Generalized:
    """One graph for two `RegionTrace`s of the same ops at other sizes."""
    if first.ops != second.ops:
        raise NotGeneralizable("the two traces ran different ops")
    g1, g2 = first.graph_module().graph, second.graph_module().graph
    nodes1, nodes2 = list(g1.nodes), list(g2.nodes)
    if len(nodes1) != len(nodes2):
        raise NotGeneralizable("the two traces have different graphs")
    index1 = {n: i for i, n in enumerate(nodes1)}
    index2 = {n: i for i, n in enumerate(nodes2)}

    out = fx.Graph()
    env: dict = {}
    sizes: list = []
    size_nodes: dict = {}
    float_nodes: list = []
    numbers: list = []  # the `numbers` placeholder, once made
    n_numbers = [0]
    expected: list = []  # per number, in _numbers order: shapes -> value, "input" or "tensor"
    placeholders = [n for n in nodes1 if n.op == "placeholder"]
    inputs1, inputs2 = first.input_shapes(), second.input_shapes()
    if len(inputs1) != len(inputs2):
        raise NotGeneralizable("the two traces read different numbers of tensors")
    dynamic: dict = {}
    for i, (a, b) in enumerate(zip(inputs1, inputs2)):
        if len(a) != len(b):
            raise NotGeneralizable(f"input {i} has rank {len(a)} in one trace and {len(b)} in the other")
        for d, (x, y) in enumerate(zip(a, b)):
            if x != y:
                sizes.append(_Size(i, d, x, y))
                dynamic.setdefault(i, []).append(d)
    for n in placeholders:
        env[n] = out.placeholder(n.name)
    # Numbers read from a tensor live with the device's tensors.
    numbers_device = next((d for d in first.input_devices if d.type != "cpu"), torch.device("cpu"))

    def size_node(s: _Size) -> fx.Node:
        if (s.input_at, s.dim) not in size_nodes:
            size_nodes[(s.input_at, s.dim)] = out.call_method("size", (env[placeholders[s.input_at]], s.dim))
        return size_nodes[(s.input_at, s.dim)]

    def number(a, b, where: str, floats_as_tensors: bool):
        if type(a) is not type(b):
            raise NotGeneralizable(f"{where}: {a!r} in one trace, {b!r} in the other")
        if a == b or isinstance(a, bool):
            expected.append(lambda shapes, a=a: a)
            if floats_as_tensors and isinstance(a, float):  # beside numbers that vary
                return out.call_function(aten.scalar_tensor.default, (a,),
                                         {"dtype": torch.float64, "device": numbers_device})
            return a
        fit = _fit(sizes, a, b) if isinstance(a, int) else None
        if fit is not None:
            if fit[0] == "product":
                _, s, t = fit
                expected.append(lambda shapes: shapes[s.input_at][s.dim] * shapes[t.input_at][t.dim])
                return out.call_function(operator.mul, (size_node(s), size_node(t)))
            _, s, k, c = fit
            expected.append(lambda shapes: k * shapes[s.input_at][s.dim] + c)
            e = size_node(s)
            if k != 1:
                e = out.call_function(operator.mul, (e, k))
            return out.call_function(operator.add, (e, c)) if c else e
        if isinstance(a, float) and floats_as_tensors:
            expected.append("tensor")
            if not numbers:
                numbers.append(out.placeholder("numbers"))
            n_numbers[0] += 1
            return out.call_function(aten.select.int, (numbers[0], 0, n_numbers[0] - 1))
        if isinstance(a, (int, float)):
            # Passed in by each run: a float, or an int that follows no
            # input size (a tensor made in the region with a size from Python)
            expected.append("input")
            node = out.placeholder(f"number_{len(float_nodes)}")
            float_nodes.append(node)
            return node
        raise NotGeneralizable(f"{where}: {a!r} in one trace, {b!r} in the other")

    def merge(a, b, where: str, floats_as_tensors: bool = False):
        if isinstance(a, fx.Node):
            if not isinstance(b, fx.Node) or index2[b] != index1[a]:
                raise NotGeneralizable(f"{where}: the traces' arguments come from different ops")
            return env[a]
        if isinstance(a, (list, tuple)):
            if not isinstance(b, (list, tuple)) or len(a) != len(b):
                raise NotGeneralizable(f"{where}: lists of different lengths")
            return type(a)(merge(x, y, where, floats_as_tensors) for x, y in zip(a, b))
        if isinstance(a, dict):
            return {k: merge(a[k], b[k], where, floats_as_tensors) for k in a}
        if isinstance(a, (int, float, bool)):
            return number(a, b, where, floats_as_tensors)
        if a != b:
            raise NotGeneralizable(f"{where}: {a!r} in one trace, {b!r} in the other")
        return a

    for n1, n2 in zip(nodes1, nodes2):
        if n1.op == "placeholder":
            continue
        if n1.op != n2.op or n1.target != n2.target:
            raise NotGeneralizable(f"the traces differ at {n1.format_node()}")
        where = f"{n1.target} ({n1.name})"
        if n1.op == "output":
            out.output(merge(n1.args[0], n2.args[0], where))
            continue
        rewrite = None
        if n1.args and _floats_vary(n1.args[-1], n2.args[-1]) and not _floats_vary(n1.args[:-1], n2.args[:-1]):
            rewrite = _tensor_form(n1.target, n1.args, n1.kwargs)
        if rewrite is not None:
            head = merge(n1.args[:-1], n2.args[:-1], where)
            tail = merge(n1.args[-1], n2.args[-1], where, floats_as_tensors=True)
            env[n1] = rewrite(out, list(head) + [tail])
            continue
        args, kwargs = merge((n1.args, n1.kwargs), (n2.args, n2.kwargs), where)
        env[n1] = out.create_node(n1.op, n1.target, args, kwargs, n1.name)
    # Extra inputs come after the tensors: floats passed as numbers, then `numbers`.
    last = env[placeholders[-1]] if placeholders else None
    for node in float_nodes + numbers:
        if last is not None:
            last.append(node)
        last = node
    out.lint()
    return Generalized(fx.GraphModule(torch.nn.Module(), out), dynamic, expected, list(first.ops),
                       numbers_device if numbers else None)
