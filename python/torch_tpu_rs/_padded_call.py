"""Running a bucketing plan (`_bucketing.py`): inputs are padded to the
bucket sizes, the masked graph runs, and outputs are narrowed back to their
real sizes.

Training: the forward graph's outputs saved for backward stay padded (no
narrowing copy), and the backward graph, bucketed the same way, takes them
as they are (`_SAVED`, found by storage and geometry, since AOTAutograd may
pass an alias). Their real sizes travel with them, so a backward input that
merges sizes (a flattened `[batch, seq]`) needs no guess about its layout.
"""
from __future__ import annotations

import weakref

import sympy
import torch

from ._bucketing import Plan, _free, _linear, _size, _symbol, bucket

# Caps on buckets by symbol, shared by the forward and backward graphs of a
# training step, so both pad a size alike and the backward can take the
# forward's padded tensors as they are. (Unrelated graphs may reuse a symbol
# name; a cap then only makes a bucket smaller, never smaller than the size.)
_CAPS: dict = {}


class _Origin:
    """A padded output of a padded graph: its padded dims, and the real and
    padded sizes of their symbols. A backward graph that receives it (or
    the real-size tensor returned for it) takes the padded tensor as it
    is, with no copy, and learns the real sizes from it."""

    def __init__(self, padded_tensor, dims, real: dict, pad: dict):
        syms = {s for _, fs in dims for s in _free(fs)}
        self.padded, self.dims = padded_tensor, dims
        self.real, self.pad = {s: real[s] for s in syms}, {s: pad[s] for s in syms}


# Tensors returned at real sizes: id(returned tensor) -> (weakref, _Origin).
_NARROWED: dict = {}
# Tensors saved for backward, which stay padded. AOTAutograd may hand the
# backward an alias of the tensor returned, so these are found by storage
# and geometry; an entry lives as long as its storage.
_SAVED: dict = {}


def _geometry(t: torch.Tensor):
    st = t.untyped_storage()
    return id(st), tuple(t.shape), t.stride(), t.storage_offset()


def _remember_narrowed(returned, origin: _Origin):
    key = id(returned)
    _NARROWED[key] = (weakref.ref(returned), origin)
    weakref.finalize(returned, _NARROWED.pop, key, None)


def _remember_saved(padded_tensor, origin: _Origin):
    key = _geometry(padded_tensor)
    # No reference to the tensor: the entry must not keep its storage alive
    # (`_origin` hands back the tensor the backward got, which is the padded one).
    origin.padded = None
    _SAVED[key] = origin
    weakref.finalize(padded_tensor.untyped_storage(), _SAVED.pop, key, None)


def _origin(t, dims):
    """The _Origin of `t` as a padded graph returned it, or None; for a
    tensor kept padded, its `padded` is `t` itself."""
    o = _SAVED.get(_geometry(t))
    if o is not None:
        if o.dims != dims:  # never read real sizes off a padded tensor
            raise NotPaddable(f"a tensor kept padded as {o.dims} is expected as {dims}")
        return _Origin(t, dims, o.real, o.pad)
    entry = _NARROWED.get(id(t))
    if entry is not None and entry[0]() is t and entry[1].dims == dims:
        return entry[1]
    return None


def unpadded(args: list) -> list:
    """`args` with tensors kept padded for a backward graph narrowed to their
    real sizes, for a graph that runs at exact sizes."""
    out = []
    for a in args:
        o = _SAVED.get(_geometry(a)) if isinstance(a, torch.Tensor) and a.device.type == "tpu" else None
        out.append(_narrow(a, o.dims, o.real, o.pad) if o is not None else a)
    return out


def _pad_input(t: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Zero-pad a device tensor to `sizes` by staging it through host memory:
    a transfer each way and no device program, so new sizes compile nothing."""
    host = t.detach().cpu()
    out = host.new_zeros(sizes)
    out[tuple(slice(0, n) for n in host.shape)] = host
    return out.to(t.device)


def _narrow(t: torch.Tensor, dims, real: dict, padded: dict) -> torch.Tensor:
    """The real part of a padded output: a view when each padded dimension
    is one factor, a copy when one is merged (a flattened [batch, seq])."""
    for d, factors in sorted(dims, key=lambda x: -x[0]):
        if len(factors) == 1:
            t = t.narrow(d, 0, _size(factors, real))
            continue
        pre, post = list(t.shape[:d]), list(t.shape[d + 1:])
        t = t.reshape(pre + [_size((f,), padded) for f in factors] + post)
        for k, f in enumerate(factors):
            if not isinstance(f, int):
                t = t.narrow(d + k, 0, _size((f,), real))
        t = t.reshape(pre + [_size(factors, real)] + post)
    return t


def _cap(plan: Plan, sym):
    caps = [c[sym] for c in (plan.caps, _CAPS) if sym in c]
    return min(caps) if caps else None


class NotPaddable(Exception):
    """This call's inputs cannot be padded (a merged dimension of a tensor
    that no padded graph produced): run the graph at its exact sizes."""


def run_padded(plan: Plan, run_graph, args: list):
    """Run the plan's graph at bucket sizes and narrow its outputs to the
    real ones; raises NotPaddable before running anything if an input
    cannot be padded."""
    for sym, cap in plan.caps.items():
        _CAPS[sym] = min(_CAPS.get(sym, cap), cap)
    real, origins = {}, {}
    for k, (info, a) in enumerate(zip(plan.input_dims, args)):
        if isinstance(info, sympy.Expr):
            if info.is_Symbol:
                real[info] = int(a)
        elif info:
            o = _origin(a, info)
            if o is not None:
                origins[k] = o
                real.update(o.real)
                continue
            for d, factors in info:
                if len(factors) > 1:
                    raise NotPaddable(f"input {k} has a merged padded dimension {factors}")
                if _linear(factors[0]):  # else (a sum or a quotient of sizes) the other inputs tell them
                    real[_symbol(factors[0])] = a.shape[d] - int(factors[0] - _symbol(factors[0]))
    if set(plan.symbols) - set(real):
        raise NotPaddable(f"no real size for {sorted(map(str, set(plan.symbols) - set(real)))}")
    pad = {s: bucket(r, _cap(plan, s)) for s, r in real.items()}
    padded = []
    for k, (info, a) in enumerate(zip(plan.input_dims, args)):
        if isinstance(info, sympy.Expr):
            a = pad[info] if info.is_Symbol else int(info.subs(pad))
        elif info:
            sizes = list(a.shape)
            for d, factors in info:
                sizes[d] = _size(factors, pad)
            o = origins.get(k)
            if o is not None and list(o.padded.shape) == sizes:
                a = o.padded
            else:
                if o is not None and o.padded is a:  # kept padded, to other buckets
                    if any(len(f) > 1 for _, f in info):
                        raise NotPaddable(f"input {k} was padded to other buckets")
                    a = _narrow(a, info, o.real, o.pad)
                if list(a.shape) != sizes:
                    a = _pad_input(a, sizes)
        padded.append(a)
    outs = run_graph(*padded, *[real[s] for s in plan.symbols], *[pad[s] for s in plan.symbols])
    flat = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    for k, dims in enumerate(plan.output_dims):
        if isinstance(dims, sympy.Expr):
            flat[k] = int(dims.subs(real))
        elif dims:
            full = flat[k]
            if plan.saved_from is None or k < plan.saved_from:
                flat[k] = _narrow(full, dims, real, pad)
                _remember_narrowed(flat[k], _Origin(full, dims, real, pad))
            else:
                _remember_saved(full, _Origin(full, dims, real, pad))
    return type(outs)(flat) if isinstance(outs, (list, tuple)) else flat[0]
