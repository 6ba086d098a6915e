"""Shared code of the OpInfo harness (tests/test_opinfo.py, tests/opinfo_refresh.py,
bench/op_coverage.py): the list of cases built from PyTorch's OpInfo database
and the function that runs one case on the CPU and on tpu and compares them.

A case is (op name, variant, dtype, kind) with kind "fwd" (outputs) or "grad"
(gradients of the outputs against a fixed random cotangent, float32 only).
`run_case` returns "pass" or "skip" or raises with the reason of a failure.
"""
from __future__ import annotations

import inspect
import itertools
import re
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu_rs

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool, torch.complex64]
MAX_SAMPLES = 3

# Ops that abort or hang the process on tpu: never run (found by opinfo_refresh.py,
# which runs the cases in a child process and records crashes in opinfo_known_failures.CRASHES).
DENYLIST: dict[str, str] = {}

# Comparison tolerances per dtype (forward). float32 is looser than PyTorch's
# default (1.3e-6): XLA's transcendental approximations differ from ATen's by a few ulp.
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.complex64: dict(rtol=1e-5, atol=1e-5),
    torch.complex128: dict(rtol=1e-7, atol=1e-7),
}
GRAD_TOL = dict(rtol=1e-4, atol=1e-4)

# Ops whose values are uninitialized memory: only shapes and dtypes are compared.
UNINITIALIZED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}


def _tpu_available() -> bool:
    return torch_tpu_rs._C.device_count() > 0


def _needs_cuda_or_only_complex(op) -> bool:
    dts = op.supported_dtypes("cpu")
    if not dts:
        return True  # CUDA-only
    return all(d.is_complex for d in dts)


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


@dataclass(frozen=True)
class Case:
    op_index: int
    name: str
    variant: str
    dtype: torch.dtype
    kind: str  # "fwd" | "grad"

    @property
    def id(self) -> str:
        return f"{self.name}{'.' + self.variant if self.variant else ''}-{dtype_name(self.dtype)}-{self.kind}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.name, self.variant, dtype_name(self.dtype), self.kind)


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def build_cases(full_dtypes: bool = True) -> list[Case]:
    """All cases: float32 fwd (+grad if the op has autograd) for every entry,
    and fwd in the other CPU-supported dtypes (all entries when full_dtypes,
    else a deterministic subset)."""
    cases = []
    for i, op in enumerate(op_db()):
        if _needs_cuda_or_only_complex(op) or op.supports_sparse and not op.supported_dtypes("cpu"):
            continue
        dts = op.supported_dtypes("cpu")
        for dt in DTYPES:
            if dt not in dts:
                continue
            if dt != torch.float32 and not full_dtypes and not in_dtype_subset(op):
                continue
            cases.append(Case(i, op.name, op.variant_test_name, dt, "fwd"))
            if dt == torch.float32 and op.supports_autograd and dt in op.supported_backward_dtypes("cpu"):
                cases.append(Case(i, op.name, op.variant_test_name, dt, "grad"))
    return cases


def in_dtype_subset(op) -> bool:
    """Deterministic subset of entries that also run the non-float32 dtypes."""
    import zlib
    return zlib.crc32(op_id(op).encode()) % 3 == 0


# ---------------------------------------------------------------------------- running


def _to_tpu(x, leaves):
    if isinstance(x, torch.Tensor):
        y = _same_storage_layout_on_tpu(x.detach())
        if x.requires_grad:
            y.requires_grad_(True)
            leaves.append(y)
        return y
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to_tpu(v, leaves) for v in x)
    if isinstance(x, dict):
        return {k: _to_tpu(v, leaves) for k, v in x.items()}
    return x


# Arguments PyTorch requires on the CPU whatever the device (a CUDA run of
# the same samples leaves them there too): (op name, position in
# (input, *args)) -> kept as is.
HOST_ARGS = {("tensor_split", 1)}


def _args_to_tpu(op, cpu_args, leaves):
    return tuple(a if (op.name, i) in HOST_ARGS else _to_tpu(a, leaves) for i, a in enumerate(cpu_args))


def _same_storage_layout_on_tpu(x):
    """A view of part of a storage moves with its whole storage, as a sample
    made on the device would be (as_strided may read past the view)."""
    n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
    if x.layout != torch.strided or x.is_conj() or x.is_neg() or (x.storage_offset() == 0 and n == x.numel() and x.is_contiguous()):
        return x.to("tpu")
    flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
    return flat.to("tpu").as_strided(x.shape, x.stride(), x.storage_offset())


def _leaves(x, out):
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _leaves(v, out)
    return out


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return [_to_cpu(v) for v in x]
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    return x


def _flat_tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_tensors(v)]
    return []


def _metadata(x):
    return [(tuple(t.shape), t.dtype) for t in _flat_tensors(x)]


def _tolerance(op, dtype, kind):
    tol = dict(GRAD_TOL if kind == "grad" else TOL.get(dtype, dict(rtol=0, atol=0)))
    # The op's own tolerance hints (toleranceOverride decorators in its DecorateInfos).
    for dec in getattr(op, "decorators", ()) or ():
        for d in getattr(dec, "decorators", [dec]) or ():
            over = getattr(d, "d", None)
            if isinstance(over, dict) and dtype in over:
                t = over[dtype]
                tol["atol"] = max(tol["atol"], getattr(t, "atol", 0))
                tol["rtol"] = max(tol["rtol"], getattr(t, "rtol", 0))
    return tol


def _nondeterministic(op) -> bool:
    """Entries whose OpInfo skips PyTorch's own device-vs-CPU comparison
    (TestCommon.test_compare_cpu) because the output depends on the device's
    random stream: their values cannot match CPU, so the harness checks
    metadata, finiteness and reproducibility under the same seed instead."""
    for d in list(getattr(op, "skips", ()) or ()) + list(op.decorators or ()):
        if getattr(d, "cls_name", None) == "TestCommon" and getattr(d, "test_name", None) == "test_compare_cpu":
            for dec in getattr(d, "decorators", ()) or ():
                try:  # unittest.skip(reason) keeps its reason in the decorator's closure
                    reason = inspect.getclosurevars(dec).nonlocals.get("reason", "")
                except TypeError:
                    reason = ""
                if "non-deterministic" in str(reason):
                    return True
    return False


class _SeededOpProbe(TorchDispatchMode):
    """Notes whether any ATen op tagged nondeterministic_seeded (one that draws
    from a generator: bernoulli, normal, rand, ...) ran inside the mode."""

    seeded = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            self.seeded = True
        return func(*args, **(kwargs or {}))


def _check_random(act, exp, again, n):
    """Random outputs: same shapes/dtypes as CPU, finite wherever CPU is finite,
    and the same values when rerun on tpu under the same seed."""
    assert _metadata(act) == _metadata(exp), f"sample {n}: random op metadata {_metadata(act)} != {_metadata(exp)}"
    for a, e in zip(_flat_tensors(_to_cpu(act)), _flat_tensors(_to_cpu(exp))):
        if a.is_floating_point() and e.is_floating_point():
            assert bool(torch.isfinite(a)[torch.isfinite(e)].all()), f"sample {n}: non-finite values where CPU has finite ones"
    assert again is None or _same(act, again), f"sample {n}: not reproducible under the same seed"


def _output_tolerance(op, case, exp, tol):
    """An integer or bool input whose op returns floats or complex numbers
    (sqrt, special functions, fft) is compared with the output's tolerance,
    as PyTorch's assertEqual picks tolerances by the compared tensors' dtype."""
    if case.kind == "grad" or case.dtype.is_floating_point:
        return tol
    floats = {t.dtype for t in _flat_tensors(exp) if t.dtype.is_floating_point or t.dtype.is_complex}
    if len(floats) != 1:
        return tol
    return _tolerance(op, floats.pop(), case.kind)


def _grads(outputs, leaves, cot_seed):
    outs = [o for o in _flat_tensors(outputs) if o.requires_grad and o.dtype.is_floating_point]
    if not outs or not leaves:
        return None
    g = torch.Generator().manual_seed(cot_seed)
    cots = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in outs]
    return torch.autograd.grad(outs, leaves, cots, allow_unused=True)


def run_case(case: Case) -> str:
    op = op_db()[case.op_index]
    grad = case.kind == "grad"
    tol = _tolerance(op, case.dtype, case.kind)
    ran = 0
    random_op = op.name in UNINITIALIZED
    seeded_random = _nondeterministic(op)
    samples = op.sample_inputs("cpu", case.dtype, requires_grad=grad)
    for n, s in enumerate(itertools.islice(samples, MAX_SAMPLES)):
        cpu_args = (s.input, *s.args)
        try:
            if not seeded_random:
                torch.manual_seed(0)
                with _SeededOpProbe() as probe:
                    op(*cpu_args, **s.kwargs)
                seeded_random = probe.seeded
            # The reference runs outside the probe: under a dispatch mode the
            # CPU computes some complex ops wrongly (linalg.pinv of a @ b.mT).
            torch.manual_seed(0)
            raw = op(*cpu_args, **s.kwargs)
            if ran == 0:
                torch.manual_seed(1)
                random_op = random_op or not _same(raw, op(*cpu_args, **s.kwargs))
            exp = s.output_process_fn_grad(raw) if grad else raw
            exp_g = _grads(exp, _leaves(cpu_args, []) + _leaves(s.kwargs, []), n) if grad else None
        except Exception:
            continue  # the sample is invalid on the CPU too
        if grad and exp_g is None:
            continue
        leaves = []
        t_args = _args_to_tpu(op, cpu_args, leaves)
        t_kwargs = _to_tpu(s.kwargs, leaves)
        torch.manual_seed(0)
        act = op(*t_args, **t_kwargs)
        if grad:
            act = s.output_process_fn_grad(act)
            act_g = _grads(act, leaves, n)
            act, exp = act_g, exp_g
        if seeded_random and op.name not in UNINITIALIZED:
            torch.manual_seed(0)
            again = op(*_args_to_tpu(op, cpu_args, []), **_to_tpu(s.kwargs, [])) if not grad else None
            _check_random(act, exp, again, n)
        elif random_op:
            assert _metadata(act) == _metadata(exp), f"sample {n}: random op metadata {_metadata(act)} != {_metadata(exp)}"
        else:
            try:
                torch.testing.assert_close(_to_cpu(act), _to_cpu(exp), equal_nan=True, check_device=False,
                                           **_output_tolerance(op, case, exp, tol))
            except AssertionError as e:
                if not _at_least_as_precise(op, case, cpu_args, s.kwargs, act, exp, _output_tolerance(op, case, exp, tol)):
                    raise AssertionError(f"mismatch (sample {n}): {str(e).strip().splitlines()[0]}") from None
        ran += 1
    return "pass" if ran else "skip"


# Matrix functions whose float32 accuracy is bounded relative to each result
# matrix's norm, not per element: matrix_exp squares its result up to ~5 times
# for inputs of norm ~30, so a small element next to large ones carries the
# large ones' rounding (on an AMD EPYC runner one element of -21.5 was off by
# 3e-5 relative, 1e-6 of its matrix's largest element).
NORMWISE = {"matrix_exp"}


def _normwise_close(a, r, tol):
    """Per element of `a`: whether its matrix (the last two dims) is within
    tolerance of the float64 result `r`, measured in the max-norm."""
    scale = r.abs().amax(dim=(-2, -1), keepdim=True)
    err = (a - r).abs().amax(dim=(-2, -1), keepdim=True)
    return (err <= tol["atol"] + tol["rtol"] * scale).expand_as(a)


def _at_least_as_precise(op, case, cpu_args, kwargs, act, exp, tol) -> bool:
    """After PyTorch's rule for results outside tolerance (test_ops.py's
    reference tests): they still pass when each element is within tolerance
    of the CPU's, or at least as close to a float64 computation as the CPU's
    element. The CPU computes float16/bfloat16 ops such as addr or
    conv_transpose in the low dtype, so its result is the less exact one
    there. NaNs and infinities must sit in the same places."""
    if case.kind != "fwd" or case.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    # An upcast copy has a storage of its own: only whole tensors keep their
    # meaning (as_strided reads past a partial view into its storage).
    inputs = _flat_tensors(list(cpu_args) + list(kwargs.values()))
    if any(t.storage_offset() or t.untyped_storage().nbytes() != t.numel() * t.element_size() for t in inputs):
        return False
    up = lambda x: x.double() if isinstance(x, torch.Tensor) and x.dtype == case.dtype else x  # noqa: E731
    try:
        ref = op(*[_map_tensors(a, up) for a in cpu_args], **{k: _map_tensors(v, up) for k, v in kwargs.items()})
    except Exception:
        return False
    acts, exps, refs = _flat_tensors(_to_cpu(act)), _flat_tensors(exp), _flat_tensors(ref)
    if not (len(acts) == len(exps) == len(refs)):
        return False
    for a, e, r in zip(acts, exps, refs):
        if a.shape != e.shape or a.dtype != e.dtype or r.shape != e.shape:
            return False
        if not e.is_floating_point():
            if not torch.equal(a, e):
                return False
            continue
        a, e, r = a.double(), e.double(), r.double()
        finite = torch.isfinite(e)
        if not torch.equal(finite, torch.isfinite(a)) or not torch.equal(a[~finite].nan_to_num(), e[~finite].nan_to_num()):
            return False
        # Per element: each one is within tolerance of the CPU's, or at least
        # as close to float64 as the CPU's (one large element's rounding must
        # not excuse a wrong small one).
        within = (a - e).abs() <= tol["atol"] + tol["rtol"] * e.abs()
        closer = (a - r).abs() <= (e - r).abs()
        if op.name in NORMWISE and a.dim() >= 2 and finite.all():
            within = within | _normwise_close(a, r, tol)
        if not (within | closer)[finite].all():
            return False
    return True


def _map_tensors(x, f):
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_map_tensors(v, f) for v in x)
    return f(x)


def _same(a, b) -> bool:
    try:
        torch.testing.assert_close(_to_cpu(a), _to_cpu(b), equal_nan=True, rtol=0, atol=0)
        return True
    except Exception:
        return False


def set_strict():
    torch_tpu_rs.set_eager_mode("strict")
    torch_tpu_rs._C.set_cpu_fallback(False)


_UNLOWERED = re.compile(r"operator '(aten::[\w.]+)' is not lowered")


def short_reason(e: BaseException) -> str:
    """One-line reason of a failure: the unlowered aten op, or the first line."""
    msg = str(e)
    m = _UNLOWERED.search(msg)
    if m:
        return f"not lowered: {m.group(1)}"
    first = msg.strip().splitlines()[0] if msg.strip() else ""
    if isinstance(e, AssertionError) and first.startswith("mismatch"):
        return first[:160]
    return f"error: {type(e).__name__}: {first}"[:160]
