"""Dynamic shapes without a compile per size: bucketing with masks.

A graph that Dynamo traced with symbolic sizes (`dynamic=True`,
`torch._dynamo.mark_dynamic`, or automatic dynamic after a size changed) is
run at a *bucket* size instead of its real size: every symbol is rounded up
to the next power of two, inputs are zero-padded to it, and the outputs are
narrowed back. XLA then compiles one program per bucket, so sizes 1..512 need
at most ceil(log2(512)) + 1 = 10 programs.

Padding is only correct when padded positions never flow into real ones.
`plan()` proves that per graph, from the symbolic shapes in the FX node
metadata, by tracking each dimension's *factors* (the sizes it was built
from, outermost first: a flattened `[batch, seq]` is `(s0, s1)`). A factor
is a symbol, a symbol plus a constant (`x[:, 1:]` of a padded `s` has
`s - 1` real positions, still a prefix), or a sum of symbols (`s0 + s1`, a
cat of a cache and new keys, padded to the sum of their buckets):

- ops that keep positions apart (pointwise, views, matmuls over static
  dimensions, embedding, slices that cut a constant off a padded
  dimension, tril/triu, convolutions over a padded batch, scans such as
  cumsum that only look back) just carry the factors along; a constant
  position or run of them (`x[:, 0]`, `x[:, :1]`, `x[:, -1]`) leaves the
  dimension unpadded: counted from the start it is the same element at
  either size, counted from the end it is passed as the real size minus it;
- a run of a static dimension as long as a padded size (`pos[:, :S]` of a
  learned position table) caps the bucket so that it fits, and its
  backward zeroes the gradient's padding; a cat along a padded dimension
  (a learned token before or after a sequence, a cache and new keys)
  writes each operand after a padded one at its real start, and so does a
  constant padding after a padded dimension with its fill, while operands
  all of one padded size (`cat([h, h * 2])`) lie as blocks of it; their
  backward cuts a prefix ending at a size, a block, or a run from a size
  taken at its real value; every k-th position (`x[:, ::2]`) reads real
  ones first, and its backward puts the gradient's padding past the real
  end; max's backward scatters at the positions the forward's max found,
  which are in range at either size; a flip gathers at (real size - 1 - k) mod the
  padded size, real positions first (so cumsum's backward, flip -> cumsum
  -> flip, scans them first); a sort or a topk fills the padding with
  what sorts after every real value;
- ops that combine positions along a padded dimension (sum, mean, amax,
  softmax, log_softmax, logsumexp, argmax, matmuls contracting it, and the
  backward ops of softmax and embedding) get a mask inserted before them
  that replaces the padding with the reduction's identity (0 for sums and
  contractions, -inf for maxima); a merged dimension checks each factor's
  own index; `mean` divides by the real count, a runtime scalar; nll_loss
  masks padded targets to its ignore_index, so a mean divides by the real
  count there too, and mse_loss's mean is its sum over the real count;
  layer_norm's and convolution's backward zero the padding before summing
  their weight gradients over it; a convolution or a pooling along a
  padded dimension (any stride, not transposed) fills its input's padding
  with what the real one reads in its own padding (0, or -inf for a max
  pooling), so its real outputs are a prefix, `(s + c) // stride + 1` of
  them at either size, and its backward zeroes the gradient's padding;
- a broadcast or a fill along a merged padded dimension (a sum's backward
  over flattened rows) is the same at every position, so it takes the
  layout of what it meets (`_Uniform`);
- a size used as a number (a mean's backward divides by the count, `x *
  x.shape[1]`, a `full` of the length) is passed at its real value;
- anything else touching a padded dimension (a sort or a flip of a merged
  dimension, a cat of a sequence and a shorter copy of it, a transposed
  convolution, a max pooling's indices over a padded width, a size in
  other than arithmetic, ...) makes the graph `Unpaddable`: it then runs
  at its exact sizes, which is always correct but compiles once per size.

Why bucketing rather than XLA's bounded dynamic dimensions: bounded shapes
need every lowering to handle dynamic dimensions and rely on the plugin's
dynamic padder, which not every PJRT backend implements; buckets are static
shapes that every plugin compiles, and the proof above keeps them exact.
Inputs whose sizes change are staged through host memory to be padded (a
transfer, not a compile).

Running a plan at bucket sizes (padding inputs, narrowing outputs, keeping
a training step's saved tensors padded) is `_padded_call.py`.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import sympy
import torch
from torch.fx import Graph, GraphModule, Node
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

aten = torch.ops.aten
prims = torch.ops.prims

Factors = tuple  # ints and sympy Symbols, outermost first
Struct = list  # one Factors per dimension


class Unpaddable(Exception):
    """The graph cannot run at a padded size (the message says which op)."""


@dataclass
class Plan:
    gm: GraphModule  # the graph with masks inserted; takes the real, then the padded sizes as extra inputs
    symbols: list  # sympy Symbols, in the order of the extra inputs
    # per original placeholder: [(dim, factors)] of padded dims (tensors), or a size expression (SymInt)
    input_dims: list
    output_dims: list  # per output leaf: [(dim, factors)] to narrow, a size expression, or None
    caps: dict = field(default_factory=dict)  # symbol -> largest allowed bucket
    # Outputs from this index on are saved for the backward graph: they stay
    # padded (the backward pads alike), so they need no narrowing copy.
    saved_from: int | None = None


def bucket(n: int, cap: int | None = None) -> int:
    b = 1 << max(0, math.ceil(math.log2(max(n, 1))))
    return max(n, min(b, cap)) if cap is not None else b


# ---------------------------------------------------------------- factors


def _expr(d) -> sympy.Expr:
    return sympy.Integer(d) if isinstance(d, int) else d.node.expr


def _is_atom(e) -> bool:
    """A padded size whose real positions are a prefix of its padded ones:
    a symbol, plus a constant (`s - 1` after `x[:, 1:]`), plus other
    symbols (`s0 + s1`, a cat of a cache and new keys), or divided down
    (`(s + 1) // 2` after `x[:, ::2]` or a strided convolution). It grows
    with each symbol, and its padded size is itself at the buckets."""
    if isinstance(e, int):
        return False
    if e.is_Symbol:
        return True
    if isinstance(e, FloorDiv):
        return _is_atom(e.args[0]) and e.args[1].is_Integer and e.args[1] > 0
    return e.is_Add and any(not a.is_Integer for a in e.args) and all(
        a.is_Integer or a.is_Symbol or isinstance(a, FloorDiv) and _is_atom(a) for a in e.args)


def _linear(atom) -> bool:
    """One symbol plus a constant: its symbol's real size can be read off it."""
    return len(atom.free_symbols) == 1 and (atom - _symbol(atom)).is_Integer


def _symbol(atom) -> sympy.Symbol:
    """The symbol of an atom that has one (a cap needs one); a sum of
    symbols has none."""
    syms = atom.free_symbols
    if len(syms) != 1:
        raise Unpaddable(f"size {atom} is a sum of sizes")
    return next(iter(syms))


def _value(e: sympy.Expr, values: dict) -> int:
    """An atom's size, where `values` maps each symbol to its size (per
    call, so kept cheap: no sympy substitution)."""
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return values[e]
    if isinstance(e, FloorDiv):
        return _value(e.args[0], values) // _value(e.args[1], values)
    if e.is_Add:
        return sum(_value(a, values) for a in e.args)
    raise Unpaddable(f"size {e} is not an atom")


def _grows_with_padding(e: sympy.Expr) -> bool:
    """`e` is a sum of symbols with coefficients >= 0 and a constant: at the
    padded sizes it is at least as large as at the real ones."""
    return all(t.is_Integer or t.is_Symbol or isinstance(t, FloorDiv) and _is_atom(t)
               or t.is_Mul and len(t.args) == 2 and t.args[0].is_Integer and t.args[0] > 0 and _is_atom(t.args[1])
               for t in sympy.Add.make_args(sympy.expand(e)))


def _split(e: sympy.Expr) -> tuple[int, list]:
    """An expression that is a product of integers and atoms, as
    (integer coefficient, atoms)."""
    coeff, syms = 1, []
    for a in sympy.Mul.make_args(sympy.factor(e) if e.is_Add else e):
        if a.is_Integer:
            coeff *= int(a)
        elif _is_atom(a):
            syms.append(a)
        elif a.is_Pow and a.base.is_Symbol and a.exp.is_Integer and a.exp > 0:
            syms += [a.base] * int(a.exp)
        else:
            raise Unpaddable(f"size {e} is not a product of sizes")
    return coeff, syms


def _normalize(factors) -> Factors:
    out: list = []
    for f in factors:
        if isinstance(f, int):
            if f == 1:
                continue
            if out and isinstance(out[-1], int):
                out[-1] *= f
                continue
        out.append(f)
    return tuple(out)


def _atomic(e: sympy.Expr) -> Factors:
    if e.is_Integer:
        return _normalize((int(e),))
    if _is_atom(e):
        return (e,)
    raise Unpaddable(f"size {e} has no known layout")


def _guessed(e: sympy.Expr) -> Factors:
    """Factors of an input size that is a product (`2*s0`, a flattened
    [batch, seq]) that its forward graph did not lay out
    (`_forward_layouts`): the layout is not in the expression, so this
    guesses constants outermost and symbols by name; `_padded_call` only
    trusts the guess when the tensor comes from a padded graph that
    recorded the same factors."""
    if e.is_Integer or _is_atom(e):
        return _atomic(e)
    coeff, atoms = _split(e)
    return _normalize((coeff, *sorted(atoms, key=str)))


def _forward_layouts(gm: GraphModule, saved: dict) -> dict:
    """{placeholder name: (factors, (dim, kept) or None)} for the inputs
    this backward graph gets from its own forward graph, whose plan recorded
    its outputs in `saved` as {node name: (sizes, factors, (dim, kept) or
    None)}. The names are the forward's node names; their factors (a
    flattened [batch, heads] is (s0, 2), not (2, s0)) cannot be read from
    sizes alone. (dim, kept) is set on the positions a masked max found
    along a padded dim (`_argmax_dim`), which max's backward scatters at."""
    out = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.name in saved and isinstance(_val(n), torch.Tensor):
            sizes, factors, dim = saved[n.name]
            if tuple(_shape(n)) != sizes:
                raise Unpaddable(f"input {n.name} has sizes {tuple(_shape(n))}, its forward saved {sizes}")
            out[n.name] = (factors, dim)
    return out


def _regroup(struct: Struct, out_exprs) -> Struct:
    """Factors of a view's output dimensions. Fails when the view mixes
    padded positions with others (e.g. splits a merged [s0*s1] as [s1, s0])."""
    atoms = list(_normalize(f for dim in struct for f in dim))
    out = []
    for e in out_exprs:
        coeff, syms = _split(e)
        got = []
        while coeff != 1 or syms:
            if not atoms:
                raise Unpaddable("view changes the number of elements")
            a = atoms[0]
            if isinstance(a, int):
                if coeff % a == 0:
                    got.append(atoms.pop(0))
                    coeff //= a
                elif coeff > 1 and a % coeff == 0:
                    got.append(coeff)
                    atoms[0] = a // coeff
                    coeff = 1
                else:
                    raise Unpaddable("view interleaves a padded dimension")
            elif a in syms:
                syms.remove(a)
                got.append(atoms.pop(0))
            else:
                raise Unpaddable("view interleaves a padded dimension")
        out.append(_normalize(got))
    if atoms:
        raise Unpaddable("view changes the number of elements")
    return out


class _Uniform(tuple):
    """The factors of a dimension whose values are all the same (a
    broadcast, a fill). Its size may be a product (`2*s0`) whose layout
    nothing tells, but any layout describes it: its padded positions hold
    the same value as the real ones, and every run of as many positions as
    the real size holds the same values. So these are guessed factors that
    give way to the layout of whatever it meets in a pointwise op."""


def _uniform(e: sympy.Expr) -> Factors:
    return _Uniform(_guessed(e))


def _settled(struct):
    """A result's factors with its uniform dims taken at their guessed
    layouts: an op other than a pointwise one (a scatter into zeros) may
    leave the values along them different."""
    if isinstance(struct, tuple) and not isinstance(struct, _Uniform):
        return tuple(_settled(s) for s in struct)
    if isinstance(struct, list):
        return [_settled(s) for s in struct]
    return tuple(struct) if isinstance(struct, _Uniform) else struct


def _padded(f: Factors) -> bool:
    return any(not isinstance(x, int) for x in f)


# ---------------------------------------------------------------- analysis

_LAYOUT = {aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default,
           aten.lift_fresh_copy.default, prims.convert_element_type.default, aten.contiguous.default,
           # values at padded positions are never read unmasked, so these may fill them too
           aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
           aten.fill.Scalar, aten.fill.Tensor, aten.zero.default}
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
_SIZE_ARGS = _VIEWS | {aten.expand.default, aten.slice.Tensor, aten.arange.default, aten.arange.start,
                       aten.full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
                       aten.sym_size.int, aten.slice_backward.default, aten.select_backward.default,
                       aten.new_zeros.default}
# reduction -> (identity used to mask padding, dims argument index or None for "all")
_REDUCE = {
    aten.sum.dim_IntList: (0, 1), aten.sum.default: (0, None),
    aten.mean.dim: (0, 1), aten.mean.default: (0, None),
    aten.amax.default: (-math.inf, 1), aten.amin.default: (math.inf, 1),
    aten.logsumexp.default: (-math.inf, 1),
    aten._softmax.default: (-math.inf, 1), aten._log_softmax.default: (-math.inf, 1),
    aten._safe_softmax.default: (-math.inf, 1),
    aten.max.dim: (-math.inf, 1), aten.min.dim: (math.inf, 1),
    aten.argmax.default: (-math.inf, 1), aten.argmin.default: (math.inf, 1),
}
_KEEPS_DIMS = {aten._softmax.default, aten._log_softmax.default, aten._safe_softmax.default}


def _op_name(t) -> str:
    """An op for a message and a metrics key: `aten.mm.default`, or a Python
    function's qualified name (its repr carries an address that changes
    from run to run)."""
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    return f"{getattr(t, '__module__', '') or ''}.{getattr(t, '__qualname__', getattr(t, '__name__', t))}".lstrip(".")


def _val(n):
    return n.meta.get("val") if isinstance(n, Node) else n


def _shape(n) -> list:
    return [_expr(d) for d in _val(n).shape]


def _is_tensor_node(a) -> bool:
    return isinstance(a, Node) and isinstance(_val(a), torch.Tensor)


def _is_sym_node(a) -> bool:
    return isinstance(a, Node) and isinstance(_val(a), (torch.SymInt, torch.SymFloat, torch.SymBool))


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


# Arguments that are positions, not sizes: op -> (index of the start or
# index argument, index of the end argument or None, what the length cut
# along the dim is read from: "out" or "grad" (argument 0), dim index).
_POSITION_ARGS = {
    aten.slice.Tensor: (2, 3, "out", 1),
    aten.slice_backward.default: (3, 4, "grad", 2),
    aten.arange.start: (0, 1, "out", None),
    aten.select_backward.default: (3, None, None, None),
}


class _Analysis:
    def __init__(self, gm: GraphModule, layouts: dict):
        self.gm, self.layouts = gm, layouts
        self.struct: dict[Node, object] = {}
        self.masks: list = []  # (node, arg index, dim, factors, fill)
        self.means: list = []  # (node, [(dim, factors or None)], input shape)
        self.caps: dict = {}
        # (node, arg index, size expression or the node of a float computed
        # from sizes) to pass at its real value
        self.real_values: list = []
        self.variances: list = []  # (node, [(dim, factors or None)], input shape)
        self.flips: list = []  # (flip node, its padded dims, their factors): gathers instead (`_flip`)
        self.argmax_dims: dict = {}  # input -> (dim, kept): positions a max found along it (`_argmax_dim`)
        # (node, [(dim, real position, (g, node so far) -> the node of what
        # belongs there, its length along dim or None for its padded size)]):
        # written there in order (`_cat`, `_constant_pad`)
        self.moves: list = []
        # (slice node, its start, the atom of its length): a run from a
        # position that is a size (`_run_from_a_size`)
        self.runs: list = []

    def run(self):
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                v = _val(n)
                if isinstance(v, torch.Tensor):
                    known = self.layouts.get(n.name)
                    self.struct[n] = list(known[0]) if known is not None else [_guessed(e) for e in _shape(n)]
                    if known is not None and known[1] is not None:
                        self.argmax_dims[n] = known[1]
            elif n.op == "call_function":
                self.struct[n] = self.node(n)
            elif n.op == "output":
                for leaf in _flat(n.args):
                    if _is_sym_node(leaf) and not isinstance(_val(leaf), torch.SymInt):
                        raise Unpaddable("a float or bool size is a graph output")
            else:
                raise Unpaddable(f"{n.op} nodes")

    def s(self, a) -> Struct:
        return self.struct[a]

    def node(self, n: Node):
        t = n.target
        tensors = [a for a in _flat(n.args) if _is_tensor_node(a)]
        if t is operator.getitem:
            return self.s(n.args[0])[n.args[1]]
        if isinstance(_val(n), (torch.SymInt, torch.SymFloat, int, float)) and not tensors or t is aten.sym_size.int:
            return None  # size arithmetic: evaluated at the padded sizes, which is what views need
        if any(_is_sym_node(a) for a in _flat(n.args)) and t not in _SIZE_ARGS:
            # (scalar_tensor: pow's backward by a size-valued exponent)
            if not (isinstance(t, torch._ops.OpOverload) and torch.Tag.pointwise in t.tags
                    or t is aten.scalar_tensor.default):
                raise Unpaddable(f"{_op_name(t)} uses a size as a value")
            # A size as a number (a mean's backward divides by the count):
            # the program must see the real size, not the padded one.
            for i, a in enumerate(n.args):
                if _is_sym_node(a):
                    # A float (var's backward scales by 2 / (n - 1)) is recomputed from
                    # the real sizes by the same arithmetic nodes; an int is an expression.
                    self.real_values.append((n, i, a if isinstance(_val(a), torch.SymFloat) else _expr(_val(a))))
        if t is aten.full.default and _is_sym_node(n.args[1]):
            self.real_values.append((n, 1, _expr(_val(n.args[1]))))  # the fill value is a number
        self.positions_at_real_values(n)
        if not isinstance(_val(n), (torch.Tensor, tuple, list)):
            raise Unpaddable(f"{_op_name(t)} returns {type(_val(n)).__name__}")
        padded_in = any(_padded(f) for a in tensors for f in self.s(a))
        out_exprs = _shape(n) if isinstance(_val(n), torch.Tensor) else None
        if not padded_in and out_exprs is not None and all(e.is_Integer for e in out_exprs):
            return [_atomic(e) for e in out_exprs]
        if not padded_in and isinstance(_val(n), (tuple, list)) and all(
                isinstance(v, torch.Tensor) and all(_expr(d).is_Integer for d in v.shape) for v in _val(n)):
            # ops on lists of fixed-size tensors (an optimizer's foreach updates)
            return [[_atomic(_expr(d)) for d in v.shape] for v in _val(n)]
        handler = _HANDLERS.get(t)
        if handler is None and isinstance(t, torch._ops.OpOverload) and torch.Tag.pointwise in t.tags:
            handler = _pointwise
        if handler is None:
            raise Unpaddable(f"{_op_name(t)} on a padded dimension")
        struct = handler(self, n, out_exprs)
        if handler in (_pointwise, _expand, _fill):
            return struct  # the ops that keep values uniform along a dim
        return _settled(struct)


    def positions_at_real_values(self, n: Node):
        """A slice start, an arange start or a selected index is a position: at
        the padded sizes it would point elsewhere (`x[k:k+3]` read x[8:11] for
        k = 5), so it goes to the program at its real value, and so does the
        end that goes with it. The length cut must then not change with
        padding; where it does, the graph runs at its exact sizes."""
        spec = _POSITION_ARGS.get(n.target)
        if spec is None:
            return
        start_at, end_at, length_of, dim_at = spec
        args = n.args
        if not (len(args) > start_at and _is_sym_node(args[start_at])):
            return
        if _run_from_a_size(self, n) or _one_block(self, n):
            return
        if length_of is not None:
            shape = _shape(n) if length_of == "out" else _shape(args[0])
            dim = (args[dim_at] if dim_at is not None and len(args) > dim_at else 0) % max(len(shape), 1)
            if not shape[dim].is_Integer:
                raise Unpaddable(f"{n.target} starts at a size and cuts a length that changes with it")
        self.real_values.append((n, start_at, _expr(_val(args[start_at]))))
        if end_at is not None and len(args) > end_at and _is_sym_node(args[end_at]):
            self.real_values.append((n, end_at, _expr(_val(args[end_at]))))


def _pointwise(an: _Analysis, n: Node, out):
    ins = [(an.s(a), _shape(a)) for a in _flat(n.args) if _is_tensor_node(a)]
    res = []
    for i in range(len(out)):
        found = [st[j] for st, ex in ins if (j := i - (len(out) - len(ex))) >= 0 and ex[j] != 1]
        # (A set of both would keep whichever came first: a uniform dim and a
        # laid-out one of equal factors compare equal.)
        laid_out = {tuple(f) for f in found if not isinstance(f, _Uniform)}
        cands = laid_out or set(found)
        if len(cands) > 1:
            raise Unpaddable(f"{n.target}: operands with different layouts {cands}")
        res.append(cands.pop() if cands else _atomic(out[i]))
    return res


# Integer division raises ZeroDivisionError on the device, so the zeros
# that pad a divisor would trip it: its padded positions hold 1 instead.
_INT_DIVISION = (aten.remainder.Tensor, aten.fmod.Tensor, aten.div.Tensor_mode, aten.floor_divide.default)


def _int_division(an, n, out):
    res = _pointwise(an, n, out)
    divisor = n.args[1] if len(n.args) > 1 else None
    if _is_tensor_node(divisor) and not (_val(divisor).is_floating_point() or _val(divisor).is_complex()):
        for d, f in enumerate(an.s(divisor)):
            if _padded(f):
                an.masks.append((n, 1, d, f, 1))
    return res


def _same(an, n, out):
    return list(an.s(n.args[0]))


def _view(an, n, out):
    src = an.s(n.args[0])
    try:
        return _regroup(src, out)
    except Unpaddable:
        if not any(isinstance(f, _Uniform) for f in src):
            raise
        # A uniform dim's layout was a guess; the view's sizes tell one.
        return _regroup([_ordered_as(f, out) if isinstance(f, _Uniform) else f for f in src], out)


def _ordered_as(f: Factors, out_exprs) -> Factors:
    """Factors `f` ordered as the view sizes `out_exprs` hold them."""
    def first_holder(x):
        for i, e in enumerate(out_exprs):
            if x in e.free_symbols if isinstance(x, sympy.Basic) else _split(e)[0] % x == 0:
                return i
        return len(out_exprs)

    return tuple(sorted(f, key=first_holder))


def _expand(an, n, out):
    src, ex = an.s(n.args[0]), _shape(n.args[0])
    lead = len(out) - len(src)
    return [src[i - lead] if i >= lead and ex[i - lead] == out[i] else _uniform(out[i]) for i in range(len(out))]


def _permute(an, n, out):
    src = an.s(n.args[0])
    return [src[d % len(src)] for d in n.args[1]]


def _transpose(an, n, out):
    src = list(an.s(n.args[0]))
    if len(src) < 2:
        return src
    a, b = (n.args[1] % len(src), n.args[2] % len(src)) if n.target != aten.t.default else (0, 1)
    src[a], src[b] = src[b], src[a]
    return src


def _unsqueeze(an, n, out):
    src = list(an.s(n.args[0]))
    src.insert(n.args[1] % (len(src) + 1), ())
    return src


def _squeeze(an, n, out):
    src, ex = an.s(n.args[0]), _shape(n.args[0])
    dims = n.args[1] if len(n.args) > 1 else range(len(src))
    dims = {d % len(src) for d in ([dims] if isinstance(dims, int) else dims)}
    return [f for i, f in enumerate(src) if not (i in dims and ex[i] == 1)]


def _slice(an, n, out):
    src = list(an.s(n.args[0]))
    dim = n.args[1] % len(src) if len(n.args) > 1 else 0
    start = n.args[2] if len(n.args) > 2 and n.args[2] is not None else 0
    step = n.args[4] if len(n.args) > 4 else 1
    before, after = _shape(n.args[0])[dim], out[dim]
    if not _padded(src[dim]):
        if _is_atom(after) and isinstance(start, int) and start >= 0 and step == 1 and before.is_Integer:
            _fit(an, after, int(before) - start)  # a run of a static dim from a fixed start
        src[dim] = _atomic(after)
        return src
    if after.is_Integer and step == 1 and (_fixed_run(an, n, src[dim], 2, 3, after)
                                           or _run_at_a_real_position(n, src[dim])):
        src[dim] = _atomic(after)
        return src
    if any(x[0] is n for x in an.runs) or _prefix_of_a_size(src[dim], start, step, before, after) \
            or _one_block(an, n) or _every_kth(src[dim], start, n.args[3] if len(n.args) > 3 else None, before, after):
        src[dim] = (after,)
        return src
    if not _cuts_a_constant(src[dim], start, step, before, after):
        raise Unpaddable("slice of a padded dimension")
    src[dim] = _atomic(after)
    return src


def _every_kth(factors, start, end, longer, shorter) -> bool:
    """`x[:, c::k]` of a plain padded dim: position o reads c + k*o, so the
    real positions read real ones and come first, `(s - c + k - 1) // k` of
    them; at the padded size the padding reads padding. (Its backward,
    `_slice_backward`, puts the gradient's padding past the real end.)"""
    return (_plain(factors) and isinstance(start, int) and start >= 0 and _is_atom(shorter)
            and _to_the_end(end, longer))


def _to_the_end(end, size) -> bool:
    return (end is None or isinstance(end, int) and end >= _TO_THE_END
            or _is_sym_node(end) and sympy.expand(_expr(_val(end)) - size) == 0)


def _prefix_of_a_size(factors, start, step, longer, shorter) -> bool:
    """`x[:, :s0]` of a plain padded dim of `s0 + s1` (the first operand of a
    cat, in its backward): the end, a size, is at the padded sizes no
    further than the padded dim's end, and cuts the real positions first."""
    return (_plain(factors) and start == 0 and step == 1 and _is_atom(shorter)
            and _grows_with_padding(longer - shorter))


def _run_from_a_size(an, n: Node) -> bool:
    """Whether slice `n` cuts a run of a padded length from a position that
    is a size along a plain padded dim (`x[:, s0:s0 + s1]` of a dim of
    `s0 + s1 + 1`: an operand after a padded one in a cat, in its
    backward). Its real positions start at the real value of the size, so
    that goes to the program, and the run is as long as the result's padded
    size, which fits: what is left of the dim after the run does not shrink
    with padding (`an.runs`)."""
    if any(x[0] is n for x in an.runs):
        return True
    if n.target is not aten.slice.Tensor:
        return False
    args = n.args
    src, out = an.s(args[0]), _shape(n)
    dim = args[1] % len(src) if len(args) > 1 else 0
    end = args[3] if len(args) > 3 else None
    step = args[4] if len(args) > 4 else 1
    before, after, start = _shape(args[0])[dim], out[dim], _expr(_val(args[2]))
    if _to_the_end(end, before):
        end = before
    elif _is_sym_node(end):
        end = _expr(_val(end))
    if not (step == 1 and _plain(src[dim]) and src[dim][0] == before and _is_atom(after)
            and isinstance(end, sympy.Expr) and sympy.expand(end - start - after) == 0
            and _grows_with_padding(start) and _grows_with_padding(before - end)):
        return False
    an.runs.append((n, start, after))
    return True


def _one_block(an, n: Node) -> bool:
    """Whether slice `n` cuts block k, `[k*s : (k+1)*s]`, of a dim laid out
    as blocks of one padded size (`(m, s)`: a cat of operands of that size,
    in its backward). Its ends, sizes, are taken at the padded sizes,
    where block k is the same block."""
    if n.target is not aten.slice.Tensor:
        return False
    args = n.args
    src = an.s(args[0])
    dim = args[1] % len(src) if len(args) > 1 else 0
    factors = src[dim]
    if not (len(factors) == 2 and isinstance(factors[0], int) and _is_atom(factors[1])):
        return False
    atom = factors[1]
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 else None
    step = args[4] if len(args) > 4 else 1
    start = _expr(_val(start)) if _is_sym_node(start) else sympy.Integer(start) if isinstance(start, int) else None
    if _to_the_end(end, factors[0] * atom):
        end = factors[0] * atom
    elif _is_sym_node(end):
        end = _expr(_val(end))
    if start is None or step != 1 or not isinstance(end, sympy.Expr):
        return False
    k = sympy.simplify(start / atom)
    return k.is_Integer and 0 <= k < factors[0] and sympy.expand(end - start - atom) == 0


def _fit(an, atom, room: int):
    """Cap the bucket of `atom`'s symbol so that `atom` at the padded size
    is at most `room`: a run of a static dimension (`pos[:, :S]` of a learned
    position table) must fit in it at the padded size too."""
    if not _linear(atom):
        raise Unpaddable(f"a run of a static dimension as long as {atom}")
    sym = _symbol(atom)
    cap = room - int(atom - sym)
    an.caps[sym] = min(an.caps.get(sym, cap), cap)


def _cuts_a_constant(factors, start, step, longer, shorter) -> bool:
    """Whether slicing a padded dim of `factors` from `longer` to `shorter`
    elements keeps its real positions a prefix: `x[:, k:]`, `x[:, :-k]`
    cut a constant off the real and the padded size alike."""
    cut = longer - shorter
    return (len(factors) == 1 and isinstance(start, int) and step == 1 and cut.is_Integer
            and 0 <= start <= int(cut) and _is_atom(shorter))


def _slice_backward(an, n, out):
    """slice_backward(grad, input_sizes, dim, start, end, step): zeros of the
    input's size with grad placed at the slice, the inverse of `_slice`."""
    src = list(an.s(n.args[0]))
    dim, start, step = n.args[2] % len(src), n.args[3], n.args[5]
    before, after = _shape(n.args[0])[dim], out[dim]
    if _padded(src[dim]):
        end = n.args[4]
        if _is_atom(after) and _plain(src[dim]) and isinstance(start, int) and start >= 0 and step > 1 \
                and _to_the_end(end, after):
            # The gradient of `x[:, c::k]`: its position o goes to c + k*o,
            # so its padding lands past the real end (c + k*o >= s for o
            # past its real count).
            pass
        elif after.is_Integer and _plain(src[dim]) and isinstance(start, int) and start >= 0 and step == 1:
            # The gradient of a run of a static dim (a learned position table
            # sliced by the length): its padded positions must add nothing.
            _fit(an, src[dim][0], int(after) - start)
            an.masks.append((n, 0, dim, src[dim], 0))
        elif not _cuts_a_constant(src[dim], start, step, after, before):
            raise Unpaddable("slice_backward of a padded dimension")
    elif not after.is_Integer:
        # A constant run placed into a padded dim (the backward of `x[:, -1:]`):
        # at a position from the end it would land in the padding.
        if not (step == 1 and _fixed_run(an, n, (after,), 3, 4, before)):
            raise Unpaddable("slice_backward of a padded dimension")
    src[dim] = _atomic(after)
    return src


# A slice end at or past this runs to the end of the dimension.
_TO_THE_END = 2**62


def _plain(factors) -> bool:
    """A padded dim that merges nothing: its position k is the same element
    at the real and at the padded size. (In a merged dim, k splits
    differently into its factors' indices.)"""
    return len(factors) == 1 and _is_atom(factors[0])


def _fixed_index(an, n: Node, factors, at: int) -> bool:
    """Whether argument `at` of `n`, a constant position along a padded dim
    of `factors`, can run padded. A non-negative one (`x[:, 0]`, a
    first-token pooling) can as it is; a negative one counts from the end,
    which padding moves, so it goes to the program as the real size plus it."""
    k = n.args[at] if len(n.args) > at else None
    if not (_plain(factors) and isinstance(k, int)):
        return False
    if k < 0:
        an.real_values.append((n, at, factors[0] + k))
    return True


def _fixed_run(an, n: Node, factors, start_at: int, end_at: int, length) -> bool:
    """Whether arguments `start_at` and `end_at` of `n`, constants that cut a
    run of `length` positions along a padded dim of `factors`, can run
    padded. Dynamo traced the length as a constant, so at the real size the
    run lies within the real positions. From a non-negative start it is the
    same run at the padded size (`x[:, :1]`, `x[:, 2:4]`); from the end
    (`x[:, -1:]`, `x[:, -3:-1]`) both ends go to the program at their real
    values."""
    args = n.args
    if not (_plain(factors) and length.is_Integer and len(args) > end_at):
        return False
    start, end = args[start_at], args[end_at]
    start = 0 if start is None else start
    end = _TO_THE_END if end is None else end
    if not (isinstance(start, int) and isinstance(end, int)):
        return False
    if start >= 0:
        return 0 <= end < _TO_THE_END and end - start == int(length)
    if end >= _TO_THE_END:
        end_from_the_end = 0
    elif end < 0:
        end_from_the_end = end
    else:
        return False
    if end_from_the_end - start != int(length):
        return False
    an.real_values += [(n, start_at, factors[0] + start), (n, end_at, factors[0] + end_from_the_end)]
    return True


def _run_at_a_real_position(n: Node, factors) -> bool:
    """Whether slice `n` of a plain padded dim cuts a constant-length run
    from a start that is a size (`positions_at_real_values` passes it at its
    real value), to an end that is a size too or a fixed position: the
    same run at either size (the tokens after a sequence, in the backward
    of their cat)."""
    end = n.args[3] if len(n.args) > 3 else None
    return (_plain(factors) and _is_sym_node(n.args[2])
            and (_is_sym_node(end) or isinstance(end, int) and 0 <= end < _TO_THE_END))


def _select(an, n, out):
    src = list(an.s(n.args[0]))
    dim = n.args[1] % len(src)
    if _padded(src[dim]) and not _fixed_index(an, n, src[dim], 2):
        raise Unpaddable("select on a padded dimension")
    del src[dim]
    return src


def _matmul(an, n, out):
    a, b = (n.args[1], n.args[2]) if n.target == aten.addmm.default else n.args[:2]
    sa, sb = an.s(a), an.s(b)
    if sa[-1] != sb[-2]:
        raise Unpaddable("matmul operands with different layouts")
    if _padded(sa[-1]):
        i = 1 if n.target == aten.addmm.default else 0
        an.masks += [(n, i, len(sa) - 1, sa[-1], 0), (n, i + 1, len(sb) - 2, sa[-1], 0)]
    res = list(sa[:-1]) + [sb[-1]]
    if n.target == aten.addmm.default and _is_tensor_node(n.args[0]):
        bias, bias_shape = an.s(n.args[0]), _shape(n.args[0])
        lead = len(res) - len(bias)
        if any(bias_shape[i] != 1 and bias[i] != res[i + lead] for i in range(len(bias))):
            raise Unpaddable("addmm bias and product with different layouts")
    return res


def _embedding(an, n, out):
    return list(an.s(n.args[1])) + [an.s(n.args[0])[-1]]


def _embedding_backward(an, n, out):
    """embedding_dense_backward(grad, indices, num_weights, padding_idx,
    scale_grad_by_freq) sums grad rows into weight rows: padded rows of grad
    are zeroed so they add nothing."""
    grad, idx = an.s(n.args[0]), an.s(n.args[1])
    if list(grad[:len(idx)]) != list(idx):
        raise Unpaddable("embedding_dense_backward operands with different layouts")
    if any(_padded(f) for f in idx) and n.args[4]:
        raise Unpaddable("embedding_dense_backward with scale_grad_by_freq over a padded dimension")
    for d, f in enumerate(idx):
        if _padded(f):
            an.masks.append((n, 0, d, f, 0))
    return [_atomic(out[0]), grad[-1]]


def _cat(an, n, out):
    """cat along a padded dim (a sequence with a learned token before or
    after it, a cache and new keys): at the padded sizes each operand after
    a padded one would start after that one's padding, so every operand
    from there on is written at its real start, in order, each over the
    padding of the one before (`an.moves`). The real positions then come
    first, and the padded size is the sum of the operands' padded sizes.
    Operands all of one padded size (`cat([h, h * 2])`) need no moves: at
    the padded sizes they are blocks of it, each its real positions first."""
    tensors = [t for t in n.args[0] if _shape(t) != [0]]
    dim = (n.args[1] if len(n.args) > 1 else 0) % len(out)
    structs = [an.s(t) for t in tensors]
    if any(s[i] != structs[0][i] for s in structs for i in range(len(out)) if i != dim):
        raise Unpaddable("cat of operands with different layouts")
    padded = [k for k, s in enumerate(structs) if _padded(s[dim])]
    if any(not _plain(structs[k][dim]) for k in padded):
        raise Unpaddable("cat along a merged padded dimension")
    res = list(structs[0])
    if len(tensors) > 1 and len(padded) == len(tensors) and len({s[dim] for s in structs}) == 1:
        res[dim] = (len(tensors), structs[0][dim][0])
        return res
    res[dim] = _atomic(out[dim])
    if padded and padded[0] < len(tensors) - 1:
        pieces = []
        for k in range(padded[0] + 1, len(tensors)):
            length = _shape(tensors[k])[dim]
            pieces.append((dim, sum(_shape(t)[dim] for t in tensors[:k]), lambda g, _, t=tensors[k]: t,
                           int(length) if length.is_Integer else None))
        an.moves.append((n, pieces))
    return res


def _split_op(an, n, out):
    src, outs = an.s(n.args[0]), _val(n)
    dim = (n.args[2] if len(n.args) > 2 else 0) % len(src)
    if _padded(src[dim]):
        raise Unpaddable("split of a padded dimension")
    return [[_atomic(_expr(t.shape[dim])) if i == dim else f for i, f in enumerate(src)] for t in outs]


def _factory(an, n, out):
    return [_atomic(e) for e in out]


def _fill(an, n, out):
    return [_uniform(e) for e in out]


def _reduced_dims(dims, rank: int) -> list:
    """A reduction's dims argument (an int, a list, or None/empty for all),
    as sorted non-negative dims."""
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(rank, 1) for d in dims}) if dims else list(range(rank))


def _reduced_struct(src: Struct, dims: list, keep: bool) -> Struct:
    """The factors of a reduction's result over `dims` of `src`."""
    if keep:
        return [(() if d in dims else f) for d, f in enumerate(src)]
    return [f for d, f in enumerate(src) if d not in dims]


def _reduce(an, n, out):
    fill, dims_at = _REDUCE[n.target]
    src = an.s(n.args[0])
    dims = _reduced_dims(n.args[dims_at] if dims_at is not None and len(n.args) > dims_at else None, len(src))
    counted = []
    for d in dims:
        if _padded(src[d]):
            an.masks.append((n, 0, d, src[d], fill))
            counted.append((d, src[d]))
        else:
            counted.append((d, None))
    if n.target in (aten.mean.dim, aten.mean.default) and any(s is not None for _, s in counted):
        an.means.append((n, counted, _shape(n.args[0])))
    if n.target in _KEEPS_DIMS:
        return list(src)
    keep = n.args[2] if len(n.args) > 2 and dims_at is not None else n.kwargs.get("keepdim", False)
    res = _reduced_struct(src, dims, keep)
    if n.target in (aten.max.dim, aten.min.dim):
        return (res, res)
    return res


def _nll_targets(an, n, self_at: int, target_at: int, batch_args: list) -> Struct:
    """Padded targets become `ignore_index`, so the loss skips them and a mean
    divides by the real count; `batch_args` (tensors indexed like the target
    along their leading dims) are masked with zeros. Returns the targets'
    factors."""
    st = an.s(n.args[target_at])
    if any(_padded(f) for f in an.s(n.args[self_at])[len(st):]):
        raise Unpaddable("nll_loss over a padded class dimension")
    ignore = n.args[target_at + 3] if len(n.args) > target_at + 3 else n.kwargs.get("ignore_index", -100)
    for d, f in enumerate(st):
        if _padded(f):
            an.masks.append((n, target_at, d, f, int(ignore)))
            for i in batch_args:
                if _is_tensor_node(n.args[i]) and d < len(an.s(n.args[i])):
                    if an.s(n.args[i])[d] != f:
                        raise Unpaddable("nll_loss operands with different layouts")
                    an.masks.append((n, i, d, f, 0))
    return st


def _nll_loss(an, n, out):
    """nll_loss_forward(self [N, C] or [C], target [N] or [], weight, reduction, ignore_index)."""
    st = _nll_targets(an, n, 0, 1, [0])
    return (list(st) if n.args[3] == 0 else [], [])


def _nll_loss_backward(an, n, out):
    """nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)."""
    _nll_targets(an, n, 1, 2, [1] + ([0] if n.args[4] == 0 else []))
    return list(an.s(n.args[1]))


def _softmax_backward(an, n, out):
    """_softmax_backward_data(g, y, dim, dtype) = y * (g - sum(g * y, dim)) and
    _log_softmax_backward_data(g, out, dim, dtype) = g - exp(out) * sum(g, dim):
    along a padded `dim` the sums must skip padding, so g (and y) are zeroed there."""
    g, y = an.s(n.args[0]), an.s(n.args[1])
    if g != y:
        raise Unpaddable(f"{n.target}: operands with different layouts")
    dim = n.args[2] % len(g)
    if _padded(g[dim]):
        an.masks.append((n, 0, dim, g[dim], 0))
        if n.target == aten._softmax_backward_data.default:
            an.masks.append((n, 1, dim, g[dim], 0))
    return list(g)


# Losses whose mean reduction divides by the element count: reduction arg index.
_MEAN_LOSSES = {aten.mse_loss.default: 2, aten.mse_loss_backward.default: 3}


def _mean_loss(an, n, out):
    """mse_loss(self, target, reduction) and its backward: padding is zeroed
    in self and target (a difference of 0); a mean becomes the sum over the
    real count, as for `mean`."""
    at = _MEAN_LOSSES[n.target]
    x = 1 if n.target == aten.mse_loss_backward.default else 0
    src = an.s(n.args[x])
    if an.s(n.args[x + 1]) != src:
        raise Unpaddable(f"{n.target}: operands with different layouts")
    counted = []
    for d, f in enumerate(src):
        if _padded(f):
            an.masks += [(n, x, d, f, 0), (n, x + 1, d, f, 0)]
        counted.append((d, f if _padded(f) else None))
    reduction = n.args[at] if len(n.args) > at else 1
    if reduction == 1 and any(f is not None for _, f in counted):
        an.means.append((n, counted, _shape(n.args[x])))
    if n.target == aten.mse_loss_backward.default or reduction == 0:
        return list(src)
    return []


def _select_backward(an, n, out):
    """select_backward(grad, input_sizes, dim, index): zeros with grad placed
    at `index` along `dim`, which must not be padded unless `index` is a
    constant position (as for `select`)."""
    dim = n.args[2] % len(out)
    if not out[dim].is_Integer and not _fixed_index(an, n, (out[dim],), 3):
        raise Unpaddable("select_backward on a padded dimension")
    src = list(an.s(n.args[0]))
    src.insert(dim, _atomic(out[dim]))
    return src


def _layer_norm_backward(an, n, out):
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean,
    rstd, weight, bias, output_mask): grad_weight and grad_bias sum over the
    leading dims, so where those are padded every operand is zeroed (zeros,
    not just a zero grad_out, so stray infinities in padding cannot make NaN)."""
    src = an.s(n.args[1])
    k = len(n.args[2])
    if any(_padded(f) for f in src[len(src) - k:]):
        raise Unpaddable("layer_norm over a padded dimension")
    for d, f in enumerate(src[: len(src) - k]):
        if _padded(f):
            for i in (0, 1, 3, 4):
                an.masks.append((n, i, d, f, 0))
    param = [_atomic(e) for e in _shape(n.args[5])] if _is_tensor_node(n.args[5]) else []
    return (list(src), param, list(param))


def _triangle(an, n, out):
    """tril / triu compare row and column positions, which padding at the
    end of each dimension keeps, unless a dimension merges sizes."""
    src = an.s(n.args[0])
    if any(len(f) > 1 and _padded(f) for f in src[-2:]):
        raise Unpaddable(f"{n.target} over a merged padded dimension")
    return list(src)


# Scans along a dim: position k depends on positions 0..k only.
_PREFIX_SCANS = (aten.cumsum.default, aten.cumprod.default, aten.logcumsumexp.default)


def _prefix_scan(an, n, out):
    """A scan along a plain padded dim reads only earlier positions, so the
    real positions (a prefix) never see padding (`attention_mask.cumsum(-1)`
    for position ids). Along a merged dim the padding of one row comes
    before the next row's positions."""
    src = an.s(n.args[0])
    dim = n.args[1] % max(len(src), 1)
    if src and _padded(src[dim]) and not _plain(src[dim]):
        raise Unpaddable(f"{n.target} along a merged padded dimension")
    return list(src)


def _flip(an, n, out):
    """flip moves a padded dim's padding to the front, so a flip of a plain
    padded dim becomes a gather at positions (real size - 1 - k) mod the
    padded size (`an.flips`): the real positions come first, reversed, and
    the padding after them. (cumsum's backward, flip -> cumsum -> flip,
    then scans the real positions first and puts each sum back.)"""
    src = an.s(n.args[0])
    padded = [d for d in (d % len(src) for d in n.args[1]) if _padded(src[d])]
    if not padded:
        return list(src)
    if not all(_plain(src[d]) for d in padded):
        raise Unpaddable("flip of a merged padded dimension")
    an.flips.append((n, padded, [src[d][0] for d in padded]))
    return list(src)


_SORTS = (aten.sort.default, aten.sort.stable)


def _sort_args(n: Node) -> tuple[int, bool]:
    """(dim, descending) of a sort node."""
    rank = max(len(_shape(n.args[0])), 1)
    if n.target is aten.sort.stable:
        return n.kwargs.get("dim", -1) % rank, n.kwargs.get("descending", False)
    dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", -1)
    return dim % rank, n.args[2] if len(n.args) > 2 else n.kwargs.get("descending", False)


def _sort(an, n, out):
    """sort along a plain padded dim: its padding is filled with what sorts
    after every real value (NaN ascending, where NaN sorts last; -inf
    descending, where NaN sorts first; the largest or smallest integer),
    and the lowering sorts stably, so a real value equal to the fill stays
    before the padding. The real positions then hold the real sorted
    values and indices that point at real positions."""
    src = an.s(n.args[0])
    dim, descending = _sort_args(n)
    if _padded(src[dim]):
        if not _plain(src[dim]):
            raise Unpaddable("sort along a merged padded dimension")
        floating = _val(n.args[0]).dtype.is_floating_point
        fill = -math.inf if descending else (math.nan if floating else math.inf)
        an.masks.append((n, 0, dim, src[dim], fill))
    return (list(src), list(src))


def _topk(an, n, out):
    """topk along a plain padded dim: the padding is filled as for a sort
    (`_sort`: the lowering sorts stably), and k is at most the real size,
    so the k found are real values at real positions."""
    src = an.s(n.args[0])
    rank = max(len(src), 1)
    dim = (n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", -1)) % rank
    largest = n.args[3] if len(n.args) > 3 else n.kwargs.get("largest", True)
    if _padded(src[dim]):
        if not _plain(src[dim]):
            raise Unpaddable("topk along a merged padded dimension")
        floating = _val(n.args[0]).dtype.is_floating_point
        an.masks.append((n, 0, dim, src[dim], -math.inf if largest else (math.nan if floating else math.inf)))
    res = [_atomic(_expr(_val(n)[0].shape[d])) if d == dim else f for d, f in enumerate(src)]
    return (res, list(res))


def _padded_spatial_dims(an, n, x_at: int, transposed_at: int) -> list:
    """The spatial dims of convolution input `x_at` that are padded. Each
    must be a plain padded dim (its real positions a prefix), not
    transposed: then a real output position reads the input positions it
    reads at the real size, or ones past the real end, where the real
    convolution reads its own zero padding, so the input's padding is
    zeroed (by the caller's masks). The output's real positions are then a
    prefix too, `(s + c) // stride + 1` of them at either size."""
    src = an.s(n.args[x_at])
    dims = [d for d in range(2, len(src)) if _padded(src[d])]
    if not dims:
        return []
    if n.args[transposed_at]:
        raise Unpaddable("transposed convolution over a padded spatial dimension")
    for d in dims:
        if not _plain(src[d]):
            raise Unpaddable("convolution over a merged padded spatial dimension")
    return dims


def _convolution(an, n, out):
    """A padded batch keeps its samples apart; a padded spatial dim
    (`_padded_spatial_dims`) has its padding zeroed first."""
    src = an.s(n.args[0])
    if _padded(src[1]) or any(_padded(f) for f in an.s(n.args[1])):
        raise Unpaddable("convolution over a padded channel dimension or weight")
    dims = _padded_spatial_dims(an, n, 0, 6)
    an.masks += [(n, 0, d, src[d], 0) for d in dims]
    return [src[0], _atomic(out[1])] + [_atomic(e) for e in out[2:]]


def _convolution_backward(an, n, out):
    """grad_weight and grad_bias sum over the batch and the spatial
    positions: the gradient's and the input's padding are zeroed. The input's
    gradient then holds, at each real position, what it holds at the real
    size."""
    src, grad = an.s(n.args[1]), an.s(n.args[0])
    if grad[0] != src[0] or _padded(src[1]) or _padded(grad[1]):
        raise Unpaddable("convolution_backward over a padded channel dimension")
    dims = _padded_spatial_dims(an, n, 1, 7)
    if any(_padded(grad[d]) != (d in dims) for d in range(2, len(grad))):
        raise Unpaddable("convolution_backward whose gradient and input are padded along different dims")
    for d in ([0] if _padded(src[0]) else []) + dims:
        an.masks += [(n, 0, d, grad[d], 0), (n, 1, d, src[d], 0)]
    bias = n.args[3]
    return (list(src), [_atomic(e) for e in _shape(n.args[2])], [_atomic(_expr(b)) for b in bias] if bias else [])


def _pooled_dims(an, n, x_at: int, avg_args: tuple | None) -> list:
    """The padded spatial dims of a 2-d pooling's input `x_at` (the last
    two), as `_padded_spatial_dims`: a real window reads the positions it
    reads at the real size, or ones past the real end, which the caller
    fills with what the real pooling reads in its own padding (-inf for a
    max, 0 for an average). An average counts its window alike at either
    size only without `ceil_mode`, and, with padding, only counting the
    padding (`avg_args`: ceil_mode, count_include_pad and the padding)."""
    src = an.s(n.args[x_at])
    dims = [d for d in range(len(src) - 2, len(src)) if _padded(src[d])]
    if not dims:
        return []
    if any(not _plain(src[d]) for d in dims):
        raise Unpaddable("pooling over a merged padded spatial dimension")
    if n.kwargs:  # (read positionally below)
        raise Unpaddable(f"{_op_name(n.target)} with keyword arguments")
    if avg_args is not None:
        ceil_mode, count_include_pad, padding = avg_args
        if ceil_mode or not count_include_pad and any(p != 0 for p in padding):
            raise Unpaddable("average pooling whose window count changes with padding")
    return dims


def _max_pool_dims(an, n, x_at: int) -> list:
    """As `_pooled_dims`, for a max pooling and its indices: flat positions
    in the input's plane, the same at either size while only the height is
    padded, or the height is 1 (a 1-d pooling). (Its backward may get them
    from a forward that ran at exact sizes.)"""
    dims = _pooled_dims(an, n, x_at, None)
    if len(an.s(n.args[x_at])) - 1 in dims and _shape(n.args[x_at])[-2] != 1:
        raise Unpaddable("max pooling indices over a padded width")
    return dims


def _max_pool(an, n, out):
    """max_pool2d_with_indices: the padding is -inf, as the real pooling's
    own, so a real window finds the max and the position it finds at the
    real size."""
    src = an.s(n.args[0])
    an.masks += [(n, 0, d, src[d], -math.inf) for d in _max_pool_dims(an, n, 0)]
    pooled = list(src[:-2]) + [_atomic(_expr(e)) for e in _val(n)[0].shape[-2:]]
    return (pooled, list(pooled))


def _max_pool_backward(an, n, out):
    """The gradient's padding is zeroed: a padded window may have found its
    max at a real position."""
    grad, src = an.s(n.args[0]), an.s(n.args[1])
    an.masks += [(n, 0, d, grad[d], 0) for d in _max_pool_dims(an, n, 1)]
    return list(src)


def _avg_pool(an, n, out):
    args = list(n.args) + [None] * 7
    src = an.s(n.args[0])
    dims = _pooled_dims(an, n, 0, (bool(args[4]), args[5] is not False, args[3] or [0]))
    an.masks += [(n, 0, d, src[d], 0) for d in dims]
    return list(src[:-2]) + [_atomic(e) for e in out[-2:]]


def _avg_pool_backward(an, n, out):
    args = list(n.args) + [None] * 8
    grad, src = an.s(n.args[0]), an.s(n.args[1])
    for d in _pooled_dims(an, n, 1, (bool(args[5]), args[6] is not False, args[4] or [0])):
        an.masks.append((n, 0, d, grad[d], 0))
    return list(src)


_VARIANCES = (aten.var.correction, aten.std.correction, aten.var_mean.correction)


def _variance(an, n, out):
    """var/std/var_mean over a padded dim is rebuilt from masked sums over
    the real count (`an.variances`): the mean, then the squared deviations."""
    src = an.s(n.args[0])
    dims = _reduced_dims(n.args[1] if len(n.args) > 1 else None, len(src))
    counted = [(d, src[d] if _padded(src[d]) else None) for d in dims]
    if any(f is not None for _, f in counted):
        an.variances.append((n, counted, _shape(n.args[0])))
    res = _reduced_struct(src, dims, n.kwargs.get("keepdim", False))
    return (res, res) if n.target is aten.var_mean.correction else res


def _argmax_dim(an, index) -> tuple | None:
    """(dim, kept) if `index` holds the positions a max/min/argmax/argmin
    found along `dim`, `kept` if that dim stays as a dim of one; else None.
    In real rows they are real positions (a padded dim's max is masked),
    elsewhere positions within the dim's size: in range either way.
    (dim, "sorted") if it holds a sort's indices along `dim` (`_sort`): the
    real positions' own, then each padding position's own. A backward
    graph's input knows it from its forward."""
    if not isinstance(index, Node):
        return None
    if index.op == "placeholder":
        return an.argmax_dims.get(index)
    if index.target is aten.unsqueeze.default:  # max's backward without keepdim
        inner = _argmax_dim(an, index.args[0])
        at = index.args[1] % len(an.s(index))
        return (at, True) if inner is not None and inner == (at, False) else None
    red = index
    if index.target is operator.getitem and index.args[1] == 1 and index.args[0].target in _SORTS:
        return _sort_args(index.args[0])[0], "sorted"
    if index.target is operator.getitem and index.args[1] == 1 and index.args[0].target is aten.topk.default:
        topk = index.args[0]
        dim = topk.args[2] if len(topk.args) > 2 else topk.kwargs.get("dim", -1)
        return dim % max(len(_shape(topk.args[0])), 1), "selected"
    if index.target is operator.getitem:
        red = index.args[0]
        if index.args[1] != 1 or red.target not in (aten.max.dim, aten.min.dim):
            return None
    elif index.target not in (aten.argmax.default, aten.argmin.default):
        return None
    src = an.s(red.args[0])
    if not (len(red.args) > 1 and isinstance(red.args[1], int)):
        return None
    dim = red.args[1] % len(src)
    keep = red.args[2] if len(red.args) > 2 else red.kwargs.get("keepdim", False)
    return dim, bool(keep)


def _scatter(an, n, out):
    """scatter at the positions a max along the same dim found (max's
    backward, with dim), or at a sort's or a topk's indices along it (their
    backward): each lands where the forward read it. Any other index,
    computed from padding, could point anywhere."""
    src = an.s(n.args[0])
    dim = n.args[1] % len(src)
    index = n.args[2]
    found = _argmax_dim(an, index)
    if found not in ((dim, True), (dim, "sorted"), (dim, "selected")):
        raise Unpaddable("scatter on a padded tensor")
    shape = an.s(index)
    along = {True: (), "sorted": src[dim], "selected": shape[dim]}[found[1]]
    if _padded(along) and found[1] == "selected":
        raise Unpaddable("scatter at topk's indices along a padded k")
    if any(shape[d] != src[d] for d in range(len(src)) if d != dim) or shape[dim] != along:
        raise Unpaddable("scatter with an index of another layout")
    if _is_tensor_node(n.args[3]) and an.s(n.args[3]) != shape:
        raise Unpaddable("scatter with a source of another layout")
    return list(src)


def _constant_pad(an, n, out):
    """constant_pad_nd: padding before a padded dim, or cropping it (its
    backward), shifts its real positions by a constant, still a prefix;
    cropping its end cuts padding first; padding after it is moved
    (`an.moves`)."""
    src, pads = list(an.s(n.args[0])), n.args[1]
    for k in range(len(pads) // 2):
        d, before, after = len(src) - 1 - k, pads[2 * k], pads[2 * k + 1]
        if not (isinstance(before, int) and isinstance(after, int)):
            raise Unpaddable("constant_pad_nd by a size")
        if _padded(src[d]):
            if not _plain(src[d]):
                raise Unpaddable("constant_pad_nd of a merged padded dimension")
            if after > 0:
                # At the padded size the fill lands after the padding: its
                # last `after` positions move to right after the real ones.
                real_end = src[d][0] + before
                an.moves.append((n, [(d, real_end, lambda g, cur, d=d, k=after:
                                      g.call_function(aten.slice.Tensor, (cur, d, -k, _TO_THE_END)), after)]))
        if before or after:
            src[d] = _atomic(out[d])
    return src


def _layer_norm(an, n, out):
    src = an.s(n.args[0])
    k = len(n.args[1])
    if any(_padded(f) for f in src[len(src) - k:]):
        raise Unpaddable("layer_norm over a padded dimension")
    stat = list(src[: len(src) - k]) + [()] * k
    return (list(src), stat, stat)


_HANDLERS = {
    **{t: _same for t in _LAYOUT},
    **{t: _view for t in _VIEWS},
    aten.expand.default: _expand, aten.permute.default: _permute,
    aten.transpose.int: _transpose, aten.t.default: _transpose,
    aten.unsqueeze.default: _unsqueeze, aten.squeeze.dim: _squeeze, aten.squeeze.dims: _squeeze,
    aten.squeeze.default: _squeeze,
    aten.slice.Tensor: _slice, aten.slice_backward.default: _slice_backward, aten.select.int: _select,
    aten.mm.default: _matmul, aten.bmm.default: _matmul, aten.addmm.default: _matmul,
    aten.embedding.default: _embedding, aten.embedding_dense_backward.default: _embedding_backward,
    aten.cat.default: _cat, aten.constant_pad_nd.default: _constant_pad,
    **{t: _variance for t in _VARIANCES},
    aten.split.Tensor: _split_op, aten.split_with_sizes.default: _split_op,
    aten.arange.default: _factory, aten.full.default: _fill, aten.zeros.default: _fill,
    aten.ones.default: _fill, aten.empty.memory_format: _factory, aten.new_zeros.default: _fill,
    aten.scatter.src: _scatter, aten.scatter.value: _scatter,
    aten.native_layer_norm.default: _layer_norm,
    aten.native_layer_norm_backward.default: _layer_norm_backward,
    aten.convolution.default: _convolution, aten.convolution_backward.default: _convolution_backward,
    aten.max_pool2d_with_indices.default: _max_pool,
    aten.max_pool2d_with_indices_backward.default: _max_pool_backward,
    aten.avg_pool2d.default: _avg_pool, aten.avg_pool2d_backward.default: _avg_pool_backward,
    aten.tril.default: _triangle, aten.triu.default: _triangle,
    **{t: _sort for t in _SORTS}, aten.topk.default: _topk,
    **{t: _prefix_scan for t in _PREFIX_SCANS}, aten.flip.default: _flip,
    aten.mse_loss.default: _mean_loss, aten.mse_loss_backward.default: _mean_loss,
    aten.select_backward.default: _select_backward,
    aten._softmax_backward_data.default: _softmax_backward,
    aten._log_softmax_backward_data.default: _softmax_backward,
    aten.nll_loss_forward.default: _nll_loss, aten.nll_loss_backward.default: _nll_loss_backward,
    aten.where.self: _pointwise, aten.masked_fill.Scalar: _pointwise, aten.masked_fill.Tensor: _pointwise,
    **{t: _reduce for t in _REDUCE},
    **{t: _int_division for t in _INT_DIVISION},
}


# ---------------------------------------------------------------- rewriting


def _fill_for(x: Node, fill):
    dt = _val(x).dtype
    if dt.is_floating_point or not math.isinf(fill):
        return fill
    if dt == torch.bool:
        return fill > 0
    info = torch.iinfo(dt)
    return info.max if fill > 0 else info.min


def _size(factors, values: dict, g: Graph | None = None):
    """The size of a dimension with these factors, where `values` maps each
    symbol to its size: ints (evaluated here, per call, so kept cheap) or
    graph nodes (`g` then builds the arithmetic into the graph)."""
    if g is not None:
        return _expr_node(g, sympy.Mul(*factors), values)
    total = 1
    for f in factors:
        total *= f if isinstance(f, int) else _value(f, values)
    return total


def _mask(g: Graph, x: Node, like: Node, dim: int, factors, real: dict, padded: dict, fill) -> Node:
    """`where(keep, x, fill)` along `dim`, where `keep` marks real positions:
    `index < real size` for a plain padded dimension; for a merged one
    (a flattened [batch, seq]) each padded factor's own index is checked.
    `real` and `padded` map symbols to graph inputs (runtime scalars). `like`
    is the original node of `x` (its metadata)."""
    rank = _val(like).dim()
    size = g.call_function(aten.sym_size.int, (x, dim))
    idx = g.call_function(aten.arange.default, (size,), {"dtype": torch.int64, "device": _val(like).device})
    keep = None
    for k, f in enumerate(factors):
        if isinstance(f, int):
            continue
        pos = idx
        if len(factors) > 1:  # this factor's own index: (idx // inner size) % its size
            inner = _size(factors[k + 1:], padded, g)
            if inner != 1:
                pos = g.call_function(aten.floor_divide.Scalar, (idx, inner))
            pos = g.call_function(aten.remainder.Scalar, (pos, _size((f,), padded, g)))
        ok = g.call_function(aten.lt.Scalar, (pos, _size((f,), real, g)))
        keep = ok if keep is None else g.call_function(aten.logical_and.default, (keep, ok))
    keep = g.call_function(aten.view.default, (keep, [size if i == dim else 1 for i in range(rank)]))
    return g.call_function(aten.where.ScalarOther, (keep, x, _fill_for(like, fill)))


def _real_count(g: Graph, counted, shape, real: dict):
    """Graph arithmetic for how many real elements a reduction over
    `counted` dims ([(dim, factors of a padded dim, or None)]) sees."""
    count = 1
    for d, factors in counted:
        size = _size(factors, real, g) if factors is not None else int(shape[d])
        count = g.call_function(operator.mul, (count, size))
    return count


def _rebuild_variance(an, g: Graph, n: Node, counted, shape, real: dict, padded: dict):
    """Replace var/std/var_mean `n` over padded dims with sums that skip the
    padding and divide by the real count (less the correction)."""
    x = n.args[0]
    dims = [d for d, _ in counted]
    keep = n.kwargs.get("keepdim", False)
    correction = n.kwargs.get("correction")
    correction = 1 if correction is None else correction

    def masked(t):
        for d, factors in counted:
            if factors is not None:
                t = _mask(g, t, x, d, factors, real, padded, 0)
        return t

    count = _real_count(g, counted, shape, real)
    mean = g.call_function(aten.div.Scalar, (g.call_function(aten.sum.dim_IntList, (masked(x), dims, True)), count))
    dev = masked(g.call_function(aten.sub.Tensor, (x, mean)))
    total = g.call_function(aten.sum.dim_IntList, (g.call_function(aten.mul.Tensor, (dev, dev)), dims, keep))
    var = g.call_function(aten.div.Scalar, (total, g.call_function(operator.sub, (count, correction))))
    if n.target is aten.std.correction:
        var = g.call_function(aten.sqrt.default, (var,))
    if n.target is not aten.var_mean.correction:
        _replace(an, n, var)
        return
    if not keep:
        mean = g.call_function(aten.squeeze.dims, (mean, dims))
    for user in list(n.users):  # getitem 0 and 1
        _replace(an, user, (var, mean)[user.args[1]])
    g.erase_node(n)


def _replace(an, old: Node, new: Node):
    """Put `new` in place of `old` (its uses, its metadata and its factors)."""
    new.meta = dict(old.meta)  # what the output narrowing reads
    an.struct[new] = an.struct[old]
    old.replace_all_uses_with(new)
    old.graph.erase_node(old)


def _at_real_sizes(g: Graph, a, real: dict):
    """A copy of the size arithmetic that computes `a` (`2.0 / (sym_float(s)
    - 1.0)`), computed from the real sizes instead of the padded ones."""
    if not isinstance(a, Node):
        return a
    if a.op == "placeholder" or a.target is aten.sym_size.int:
        return _expr_node(g, _expr(_val(a)), real)
    if a.op != "call_function" or any(_is_tensor_node(x) for x in _flat(a.args)):
        raise Unpaddable(f"{_op_name(a.target)} computes a number used as a value")
    return g.call_function(a.target, tuple(_at_real_sizes(g, x, real) for x in a.args), dict(a.kwargs))


# Sizes are never negative, so every modulo is Python's %.
_SIZE_ARITHMETIC = {Mod: operator.mod, PythonMod: operator.mod, sympy.Mod: operator.mod, FloorDiv: operator.floordiv}


def _expr_node(g: Graph, e: sympy.Expr, values: dict):
    """Graph arithmetic computing the size expression `e` from `values`
    (symbol -> graph input)."""
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return values[e]
    if e.is_Pow and e.exp.is_Integer and e.exp > 0:  # s**2: a square of two padded dims merged
        e = sympy.Mul(*[e.base] * int(e.exp), evaluate=False)
    op = next((f for cls, f in _SIZE_ARITHMETIC.items() if isinstance(e, cls)), None)
    if op is not None:
        return g.call_function(op, tuple(_expr_node(g, a, values) for a in e.args))
    if e.is_Add or e.is_Mul:
        op = operator.add if e.is_Add else operator.mul
        terms = [_expr_node(g, a, values) for a in e.args]
        acc = terms[0]
        for t in terms[1:]:
            acc = g.call_function(op, (acc, t))
        return acc
    raise Unpaddable(f"size {e} used as a value")


def _free(factors) -> set:
    return {sym for f in factors if not isinstance(f, int) for sym in f.free_symbols}


def plan(gm: GraphModule, saved: dict | None = None, forward: bool = False) -> Plan:
    """Check that `gm` can run padded and build the masked graph; raises
    Unpaddable. `gm` itself is left as it is (the caller may run it exactly).
    `saved` pairs the forward and backward graphs of one training graph: a
    `forward` graph's plan lays out its outputs there, and its backward
    graph's plan reads them (`_forward_layouts`)."""
    copy = Graph()
    copy.output(copy.graph_copy(gm.graph, {}))
    gm = GraphModule(gm, copy)
    saved = {} if saved is None else saved
    an = _Analysis(gm, {} if forward else _forward_layouts(gm, saved))
    an.run()
    if forward:
        output = next(n for n in gm.graph.nodes if n.op == "output")
        saved.update({leaf.name: (tuple(_shape(leaf)), list(an.s(leaf)), _argmax_dim(an, leaf))
                      for leaf in _flat(output.args) if _is_tensor_node(leaf)})
    g = gm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    input_dims, sources, derived = [], set(), set()
    for n in placeholders:
        v = _val(n)
        if isinstance(v, torch.SymInt):
            input_dims.append(_expr(v))
            if _expr(v).is_Symbol:
                sources.add(_expr(v))
            else:
                derived |= _expr(v).free_symbols  # evaluated at the padded sizes
        elif isinstance(v, torch.Tensor):
            dims = [(d, f) for d, f in enumerate(an.s(n)) if _padded(f)]
            input_dims.append(dims)
            single = [fs for _, fs in dims if len(fs) == 1 and _linear(fs[0])]
            sources |= {_symbol(fs[0]) for fs in single}
            derived |= {sym for _, fs in dims if fs not in single for sym in _free(fs)}
        else:
            input_dims.append(None)
    used = {sym for st in an.struct.values() if isinstance(st, list) for dim in st
            if isinstance(dim, tuple) for sym in _free(dim)} | derived
    used |= {sym for _, _, e in an.real_values for sym in (_expr(_val(e)) if isinstance(e, Node) else e).free_symbols}
    # (A merged dim, a sum or a quotient of sizes tells its symbols only as
    # the output of a padded graph, which hands them over with the tensor.)
    merged_sources = {sym for info in input_dims if isinstance(info, list) for _, fs in info
                      if len(fs) > 1 or not _linear(fs[0]) for sym in _free(fs)}
    if used - sources - merged_sources:
        raise Unpaddable(f"sizes {sorted(map(str, used - sources - merged_sources))} come from no input")
    symbols = sorted(sources | merged_sources, key=str)
    real, padded = {}, {}
    with g.inserting_after(placeholders[-1]):
        for sym in reversed(symbols):
            padded[sym] = g.placeholder(f"padded_{sym}")
        for sym in reversed(symbols):
            real[sym] = g.placeholder(f"real_{sym}")
    by_arg: dict = {}
    for n, i, dim, factors, fill in an.masks:
        by_arg.setdefault((n, i), []).append((dim, factors, fill))
    for (n, i), dims in by_arg.items():
        with g.inserting_before(n):
            x = like = n.args[i]
            for dim, factors, fill in dims:
                x = _mask(g, x, like, dim, factors, real, padded, fill)
            n.update_arg(i, x)
    for n, i, expr in an.real_values:
        with g.inserting_before(n):
            n.update_arg(i, _at_real_sizes(g, expr, real) if isinstance(expr, Node) else _expr_node(g, expr, real))
    for n, pieces in an.moves:
        moved, made = n, set()
        with g.inserting_before(n.next):
            for dim, at, build, length in pieces:
                begin = _expr_node(g, at, real)
                piece = build(g, moved)
                if length is None:
                    length = g.call_function(aten.sym_size.int, (piece, dim))
                end = g.call_function(operator.add, (begin, length))
                moved = g.call_function(aten.slice_scatter.default, (moved, piece, dim, begin, end))
                made |= {piece, moved}
        n.replace_all_uses_with(moved, delete_user_cb=lambda user: user not in made)
        moved.meta = dict(n.meta)
        an.struct[moved] = an.struct[n]
    for n, start, atom in an.runs:
        with g.inserting_before(n):
            begin = _expr_node(g, start, real)
            end = g.call_function(operator.add, (begin, _expr_node(g, atom, padded)))
            n.args = (n.args[0], n.args[1], begin, end) + tuple(n.args[4:])
    for n, padded_dims, atoms in an.flips:
        x, dims = n.args[0], [d % len(_shape(n)) for d in n.args[1]]
        with g.inserting_before(n):
            others = [d for d in dims if d not in padded_dims]
            y = g.call_function(aten.flip.default, (x, others)) if others else x
            for d, atom in zip(padded_dims, atoms):
                size = g.call_function(aten.sym_size.int, (x, d))
                k = g.call_function(aten.arange.default, (size,), {"dtype": torch.int64, "device": _val(x).device})
                at = g.call_function(aten.rsub.Scalar, (k, _expr_node(g, atom - 1, real)))
                at = g.call_function(aten.remainder.Scalar, (at, size))
                y = g.call_function(aten.index_select.default, (y, d, at))
        _replace(an, n, y)
    for n, counted, shape in an.variances:
        with g.inserting_before(n):
            _rebuild_variance(an, g, n, counted, shape, real, padded)
    for n, counted, shape in an.means:
        x = n.args[0]
        with g.inserting_before(n):
            count = _real_count(g, counted, shape, real)
            if n.target in _MEAN_LOSSES:  # the same loss summed, over the real count
                at = _MEAN_LOSSES[n.target]
                total = g.call_function(n.target, tuple(n.args[:at]) + (2,) + tuple(n.args[at + 1:]), dict(n.kwargs))
            else:
                keep = n.args[2] if len(n.args) > 2 else False
                total = g.call_function(aten.sum.dim_IntList, (x, [d for d, _ in counted], keep), dict(n.kwargs))
            mean = g.call_function(aten.div.Scalar, (total, count))
        _replace(an, n, mean)
    for n in g.nodes:
        if n.target is aten.view.default:
            # A view that the real strides allow may not be one at the padded
            # ones (`x[:, ::2]` of an even length flattens as a view, of an
            # odd one it does not): reshape copies only where it must.
            n.target = aten.reshape.default
    output = next(n for n in g.nodes if n.op == "output")
    output_dims = []
    for leaf in _flat(output.args):
        if _is_tensor_node(leaf):
            output_dims.append([(d, f) for d, f in enumerate(an.s(leaf)) if _padded(f)])
        elif _is_sym_node(leaf):
            if not _expr(_val(leaf)).free_symbols <= set(symbols):
                raise Unpaddable(f"output size {_expr(_val(leaf))} comes from no input")
            output_dims.append(_expr(_val(leaf)))  # returned at its real value
        else:
            output_dims.append(None)
    g.lint()
    return Plan(GraphModule(gm, g), symbols, input_dims, output_dims, an.caps)


def has_symbolic_shapes(gm: GraphModule) -> bool:
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = _val(n)
            if isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and any(
                    not isinstance(d, int) for d in v.shape):
                return True
    return False
