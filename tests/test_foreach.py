"""`_foreach_*` ops on tpu against the CPU (each list op is one program),
and the foreach optimizers (AdamW, SGD with momentum) on a tiny MLP."""
import pytest
import torch
import torch_tpu_rs

from conftest import assert_same, run_both, to_tpu


def tensors(dtype=torch.float32, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    shapes = [(3, 4), (5,), (), (2, 3, 2)]
    if dtype.is_floating_point:
        out = [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]
        if positive:
            out = [t.abs() + 0.1 for t in out]
        return out
    return [torch.randint(1, 9, s, generator=g).to(dtype) for s in shapes]


S = [2, -1, 1, 3]
# A Scalar[] of floats reaches the engine as an unsupported "GenericList" (and a
# mixed int/float list trips an internal assert in csrc's marshalling), so the
# engine-path tests use ints; FLOAT_S (floats) is checked separately.
FLOAT_S = [2.5, -1.0, 0.5, 3.0]
F32_64_BF16 = [torch.float32, torch.float64, torch.bfloat16]

# PyTorch gives every _foreach_* op a CompositeExplicitAutograd kernel (a loop
# over the single-tensor op), which beats tpu's boxed fallback, so today
# `torch._foreach_add(...)` on tpu runs one program per tensor. To test the
# one-program lowerings through the real engine, each op is re-declared under
# a new overload name ("<overload>TpuEngine"): that overload has no kernel, so
# it reaches the engine, whose table lookup falls back to the op's base name.
_LIB = torch.library.Library("aten", "FRAGMENT")
_CLONES = {}


def engine_op(name, overload="default"):
    key = (name, overload)
    if key not in _CLONES:
        schema = str(getattr(getattr(torch.ops.aten, name), overload)._schema)
        rest = schema.split("(", 1)[1]
        new = ("" if overload == "default" else overload) + "TpuEngine"
        _LIB.define(f"{name}.{new}(" + rest)
        _CLONES[key] = getattr(getattr(torch.ops.aten, name), new)
    return _CLONES[key]


def check(name, overload, argfn, a, b, inplace=False, **tol):
    """Compares engine_op(name.overload) on tpu with the real op on the CPU, and
    checks that it ran as one program."""
    ref_op = getattr(getattr(torch.ops.aten, name), overload)
    cpu_a, cpu_b = [t.clone() for t in a], [t.clone() for t in b]
    args, kwargs = argfn(cpu_a, cpu_b)
    cpu = ref_op(*args, **kwargs)
    tpu_a, tpu_b = to_tpu(a), to_tpu(b)
    args, kwargs = argfn(tpu_a, tpu_b)
    before = torch_tpu_rs.metrics()["executions"]
    tpu = engine_op(name, overload)(*args, **kwargs)
    assert torch_tpu_rs.metrics()["executions"] - before == 1, "a foreach op should run as one program"
    if inplace:
        assert tpu is None or isinstance(tpu, (list, tuple))
        assert_same(tpu_a + tpu_b, cpu_a + cpu_b, **tol)
    else:
        assert_same(list(tpu), list(cpu), **tol)


BINARY = {
    "add_list": ("_foreach_add", "List", lambda a, b: ((a, b), {})),
    "add_list_alpha": ("_foreach_add", "List", lambda a, b: ((a, b), {"alpha": -0.5})),
    "add_scalar": ("_foreach_add", "Scalar", lambda a, b: ((a, 1.5), {})),
    "add_scalarlist": ("_foreach_add", "ScalarList", lambda a, b: ((a, S), {})),
    "add_tensor": ("_foreach_add", "Tensor", lambda a, b: ((a, b[2]), {"alpha": 2})),
    "sub_list": ("_foreach_sub", "List", lambda a, b: ((a, b), {"alpha": 2})),
    "sub_scalar": ("_foreach_sub", "Scalar", lambda a, b: ((a, 3), {})),
    "sub_scalarlist": ("_foreach_sub", "ScalarList", lambda a, b: ((a, S), {})),
    "mul_list": ("_foreach_mul", "List", lambda a, b: ((a, b), {})),
    "mul_scalar": ("_foreach_mul", "Scalar", lambda a, b: ((a, 0.25), {})),
    "mul_scalarlist": ("_foreach_mul", "ScalarList", lambda a, b: ((a, S), {})),
    "mul_tensor": ("_foreach_mul", "Tensor", lambda a, b: ((a, b[2]), {})),
    "div_list": ("_foreach_div", "List", lambda a, b: ((a, b), {})),
    "div_scalar": ("_foreach_div", "Scalar", lambda a, b: ((a, 4.0), {})),
    "div_scalarlist": ("_foreach_div", "ScalarList", lambda a, b: ((a, S), {})),
    "div_tensor": ("_foreach_div", "Tensor", lambda a, b: ((a, b[2]), {})),
    "maximum_list": ("_foreach_maximum", "List", lambda a, b: ((a, b), {})),
    "maximum_scalar": ("_foreach_maximum", "Scalar", lambda a, b: ((a, 0.1), {})),
    "maximum_scalarlist": ("_foreach_maximum", "ScalarList", lambda a, b: ((a, S), {})),
    "clamp_min_scalar": ("_foreach_clamp_min", "Scalar", lambda a, b: ((a, 0.0), {})),
    "clamp_min_list": ("_foreach_clamp_min", "List", lambda a, b: ((a, b), {})),
    "clamp_max_scalarlist": ("_foreach_clamp_max", "ScalarList", lambda a, b: ((a, S), {})),
    "minimum_list": ("_foreach_minimum", "List", lambda a, b: ((a, b), {})),
    "pow_scalar": ("_foreach_pow", "Scalar", lambda a, b: ((b, 2.0), {})),
    "pow_list": ("_foreach_pow", "List", lambda a, b: ((b, a), {})),
    "pow_scalarlist": ("_foreach_pow", "ScalarList", lambda a, b: ((b, S), {})),
    "pow_scalar_and_tensor": ("_foreach_pow", "ScalarAndTensor", lambda a, b: ((0.9, a), {})),
    "addcmul_scalar": ("_foreach_addcmul", "Scalar", lambda a, b: ((a, a, b, 0.5), {})),
    "addcmul_scalarlist": ("_foreach_addcmul", "ScalarList", lambda a, b: ((a, b, b, S), {})),
    "addcdiv_scalar": ("_foreach_addcdiv", "Scalar", lambda a, b: ((a, a, b, -2.0), {})),
    "addcdiv_scalarlist": ("_foreach_addcdiv", "ScalarList", lambda a, b: ((a, a, b, S), {})),
    "lerp_scalar": ("_foreach_lerp", "Scalar", lambda a, b: ((a, b, 0.3), {})),
    "lerp_list": ("_foreach_lerp", "List", lambda a, b: ((a, b, [t / (t + 1) for t in b]), {})),
}
UNARY = ["sqrt", "neg", "exp", "reciprocal", "abs", "log", "sigmoid", "tanh", "sign", "rsqrt", "floor", "sin"]
BF16_TOL = dict(rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", F32_64_BF16)
@pytest.mark.parametrize("case", list(BINARY))
def test_binary(case, dtype):
    name, overload, argfn = BINARY[case]
    a, b = tensors(dtype), tensors(dtype, seed=1, positive=True)
    tol = BF16_TOL if dtype == torch.bfloat16 else {}
    check(name, overload, argfn, a, b, **tol)


@pytest.mark.parametrize("case", ["add_list", "add_scalar", "add_scalarlist", "mul_list", "mul_scalar", "sub_list", "maximum_list", "pow_scalar"])
def test_binary_int(case):
    name, overload, argfn = BINARY[case]
    check(name, overload, argfn, tensors(torch.int64), tensors(torch.int64, seed=1))


@pytest.mark.parametrize("dtype", F32_64_BF16)
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, dtype):
    a = tensors(dtype, positive=op in ("sqrt", "log", "rsqrt"))
    check(f"_foreach_{op}", "default", lambda a, b: ((a,), {}), a, [])


INPLACE = {
    "add_": ("_foreach_add_", "List", lambda a, b: ((a, b), {"alpha": 0.5})),
    "add_scalar_": ("_foreach_add_", "Scalar", lambda a, b: ((a, 1), {})),
    "sub_scalarlist_": ("_foreach_sub_", "ScalarList", lambda a, b: ((a, S), {})),
    "mul_": ("_foreach_mul_", "List", lambda a, b: ((a, b), {})),
    "mul_tensor_": ("_foreach_mul_", "Tensor", lambda a, b: ((a, b[0][0, 1]), {})),
    "div_scalarlist_": ("_foreach_div_", "ScalarList", lambda a, b: ((a, S), {})),
    "addcmul_": ("_foreach_addcmul_", "Scalar", lambda a, b: ((a, b, b, 0.1), {})),
    "addcdiv_scalarlist_": ("_foreach_addcdiv_", "ScalarList", lambda a, b: ((a, a, b, S), {})),
    "lerp_": ("_foreach_lerp_", "Scalar", lambda a, b: ((a, b, 0.1), {})),
    "sqrt_": ("_foreach_sqrt_", "default", lambda a, b: ((b,), {})),
    "neg_": ("_foreach_neg_", "default", lambda a, b: ((a,), {})),
    "exp_": ("_foreach_exp_", "default", lambda a, b: ((a,), {})),
    "zero_": ("_foreach_zero_", "default", lambda a, b: ((a,), {})),
    "copy_": ("_foreach_copy_", "default", lambda a, b: ((a, b), {})),
    "maximum_": ("_foreach_maximum_", "List", lambda a, b: ((a, b), {})),
    "clamp_min_": ("_foreach_clamp_min_", "Scalar", lambda a, b: ((a, 0.0), {})),
    "pow_": ("_foreach_pow_", "Scalar", lambda a, b: ((b, 0.5), {})),
    "reciprocal_": ("_foreach_reciprocal_", "default", lambda a, b: ((b,), {})),
}


@pytest.mark.parametrize("case", list(INPLACE))
def test_inplace(case):
    name, overload, argfn = INPLACE[case]
    check(name, overload, argfn, tensors(), tensors(seed=1, positive=True), inplace=True)


def test_inplace_on_views_and_mixed_dtypes():
    def views(base):
        return [base[:, ::2], base.t()[1], base[:, 5]]

    # (non-overlapping: the engine reads every view before writing any)
    base, other = torch.randn(4, 6), [torch.randn(4, 3), torch.randn(4), torch.randn(4, dtype=torch.float64)]
    tbase = base.to("tpu")
    engine_op("_foreach_add_", "List")(views(tbase), to_tpu(other), alpha=2)
    torch._foreach_add_(views(base), other, alpha=2)
    assert_same(tbase, base)
    mixed = [torch.randn(3), torch.arange(4), torch.randn(2, dtype=torch.bfloat16), torch.tensor(True)]
    check("_foreach_mul", "Scalar", lambda a, b: ((a, 2), {}), mixed, [])
    check("_foreach_add", "Scalar", lambda a, b: ((a, 1.5), {}), mixed, [])  # int64 -> float32


def test_inplace_cast_error_like_cpu():
    ints = [torch.arange(3)]
    with pytest.raises(RuntimeError):
        torch._foreach_add_(ints, 1.5)
    with pytest.raises(RuntimeError):
        engine_op("_foreach_add_", "Scalar")(to_tpu(ints), 1.5)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), 3.0])
@pytest.mark.parametrize("dtype", F32_64_BF16)
def test_norm(ord, dtype):
    check("_foreach_norm", "Scalar", lambda a, b: ((a, ord), {}), tensors(dtype), [])


def test_norm_dtype():
    check("_foreach_norm", "Scalar", lambda a, b: ((a, 2), {"dtype": torch.float32}), tensors(torch.bfloat16), [])


@pytest.mark.parametrize(
    "name,overload,argfn",
    [
        ("_foreach_mul", "ScalarList", lambda a, b: ((a, FLOAT_S), {})),
        ("_foreach_addcdiv", "ScalarList", lambda a, b: ((a, a, b, FLOAT_S), {})),
        ("_foreach_lerp", "ScalarList", lambda a, b: ((a, b, [0.1, 0.9, 0.5, 0.7]), {})),
    ],
)
def test_float_scalarlist(name, overload, argfn):
    check(name, overload, argfn, tensors(), tensors(seed=1, positive=True))


def test_real_foreach_op_is_one_program():
    a = to_tpu(tensors())
    before = torch_tpu_rs.metrics()["executions"]
    torch._foreach_add(a, a)
    assert torch_tpu_rs.metrics()["executions"] - before == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch._foreach_add(a, b, alpha=2),
        lambda a, b: torch._foreach_addcdiv(a, a, b, FLOAT_S),
        lambda a, b: torch._foreach_lerp(a, b, 0.3),
        lambda a, b: torch._foreach_norm(a),
        lambda a, b: torch._foreach_sqrt(b),
    ],
)
def test_real_foreach_api(fn):
    """The public API, whatever path it takes, matches the CPU."""
    assert_same(*run_both(fn, tensors(), tensors(seed=1, positive=True)))


def test_clip_grad_norm_foreach():
    def clip(grads):
        ps = [torch.zeros_like(g).requires_grad_() for g in grads]
        for p, g in zip(ps, grads):
            p.grad = g.clone()
        total = torch.nn.utils.clip_grad_norm_(ps, 0.5, foreach=True)
        return [total] + [p.grad for p in ps]

    assert_same(*run_both(clip, tensors(seed=4)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- optimizers


def _train(device, make_opt, steps=5):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = model.to(device)
    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(1)).to(device)
    y = torch.randn(10, 4, generator=torch.Generator().manual_seed(2)).to(device)
    opt = make_opt(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
        lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, foreach=True),
    ],
    ids=["adamw", "sgd_momentum", "adam_amsgrad"],
)
def test_optimizer_foreach(make_opt):
    cpu = _train("cpu", make_opt)
    before = dict(torch_tpu_rs.metrics()["fallbacks"])
    tpu = _train("tpu", make_opt)
    assert torch_tpu_rs.metrics()["fallbacks"] == before, "training needed the CPU fallback"
    assert_same(tpu, cpu, rtol=1e-4, atol=1e-5)
