"""Elementwise ops on tpu against PyTorch on the CPU: dtypes, broadcasting,
Python-scalar and 0-dim operands, type promotion, in-place, out= and
non-contiguous inputs."""
import pytest
import torch

from conftest import TOL, assert_same, run_both

F = [torch.float32, torch.float64, torch.bfloat16]
I = [torch.int64, torch.int32]
ALL = F + I + [torch.bool]


def make(dtype, *shape, positive=False, nonzero=False, seed=0):
    g = torch.Generator().manual_seed(seed + len(shape) + 7 * sum(shape))
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if dtype.is_floating_point:
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 2
        if positive:
            x = x.abs() + 0.1
        return x.to(dtype)
    x = torch.randint(-6, 7, shape, generator=g)
    if positive:
        x = x.abs() + 1
    elif nonzero:
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype)


# ---------------------------------------------------------------- binary

BINARY = {
    "add": (lambda a, b: torch.add(a, b), ALL),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), F + I),
    "sub": (lambda a, b: a - b, F + I),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), F),
    "rsub": (lambda a, b: torch.rsub(a, b, alpha=2), F + I),
    "mul": (lambda a, b: a * b, ALL),
    "div": (lambda a, b: a / b, F + I),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), F + I),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), F + I),
    "floor_divide": (lambda a, b: a // b, F + I),
    "remainder": (lambda a, b: a % b, F + I),
    "fmod": (torch.fmod, F + I),
    "maximum": (torch.maximum, ALL),
    "minimum": (torch.minimum, ALL),
    "fmax": (torch.fmax, F + I),
    "fmin": (torch.fmin, F + I),
    "atan2": (torch.atan2, F + I),
    "hypot": (torch.hypot, F),
    "copysign": (torch.copysign, F + I),
    "xlogy": (torch.xlogy, F),
    "eq": (torch.eq, ALL),
    "ne": (torch.ne, ALL),
    "lt": (torch.lt, ALL),
    "le": (torch.le, ALL),
    "gt": (torch.gt, ALL),
    "ge": (torch.ge, ALL),
    "logical_and": (torch.logical_and, ALL),
    "logical_or": (torch.logical_or, ALL),
    "logical_xor": (torch.logical_xor, ALL),
    "bitwise_and": (torch.bitwise_and, I + [torch.bool]),
    "bitwise_or": (torch.bitwise_or, I + [torch.bool]),
    "bitwise_xor": (torch.bitwise_xor, I + [torch.bool]),
}

BINARY_CASES = [(n, d) for n, (_, ds) in BINARY.items() for d in ds]
NEEDS_NONZERO = {"div", "div_floor", "div_trunc", "floor_divide", "remainder", "fmod"}


@pytest.mark.parametrize("name,dtype", BINARY_CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in BINARY_CASES])
def test_binary_broadcast(name, dtype):
    fn = BINARY[name][0]
    a = make(dtype, 4, 10)
    b = make(dtype, 10, nonzero=name in NEEDS_NONZERO, seed=1)
    assert_same(*run_both(fn, a, b))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "div_floor", "remainder", "maximum", "eq", "lt", "atan2"])
def test_binary_float_edge_values(name):
    vals = torch.tensor([0.0, -0.0, 1.5, -1.5, 2.0, -7.0, float("inf"), float("-inf"), float("nan"), 1e-30])
    a = vals.repeat_interleave(10)
    b = vals.repeat(10)
    assert_same(*run_both(BINARY[name][0], a, b))


REVERSED = {
    "add": lambda s, x: s + x,
    "sub": lambda s, x: s - x,
    "mul": lambda s, x: s * x,
    "div": lambda s, x: s / x,
    "div_floor": lambda s, x: s // x,
    "remainder": lambda s, x: s % x,
    "eq": lambda s, x: s == x,
    "lt": lambda s, x: s < x,
}


@pytest.mark.parametrize("name", list(REVERSED))
@pytest.mark.parametrize("scalar", [-3, 2.5, True])
def test_binary_python_scalar(name, scalar):
    fn = BINARY[name][0]
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        a = make(dtype, 3, 4)
        if name == "sub" and (scalar is True or dtype == torch.bool):
            continue
        assert_same(*run_both(lambda x: fn(x, scalar), a))
        divisor = a.abs() + 1 if name in NEEDS_NONZERO else a
        assert_same(*run_both(lambda x: REVERSED[name](scalar, x), divisor))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16])
@pytest.mark.parametrize("zero_dim", [torch.tensor(2.5, dtype=torch.float64), torch.tensor(3), torch.tensor(1.5, dtype=torch.float16)])
def test_binary_zero_dim_operands(dtype, zero_dim):
    a = make(dtype, 3, 4)
    # A 0-dim tpu tensor promotes like a 0-dim tensor (weaker than dimensioned).
    assert_same(*run_both(lambda x, z: x * z, a, zero_dim))
    assert_same(*run_both(lambda x, z: z - x, a, zero_dim))
    # A 0-dim CPU tensor is accepted as a scalar.
    cpu = (a * zero_dim)
    tpu = a.to("tpu") * zero_dim
    assert_same(tpu, cpu)


def test_type_promotion():
    i = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    assert_same(*run_both(lambda x: x * 2.5, i))  # -> float32
    assert_same(*run_both(lambda x: x + True, i))  # -> int32
    assert_same(*run_both(lambda x, b: x + b, i, torch.ones(2, 3, dtype=torch.bool)))
    assert_same(*run_both(lambda x, y: x + y, i, torch.ones(3, dtype=torch.int64)))  # -> int64
    assert_same(*run_both(lambda x, y: x * y, i, torch.ones(3, dtype=torch.float64)))
    assert_same(*run_both(lambda x, y: x + y, torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.float16)))
    assert_same(*run_both(lambda x: x / 2, i))  # integer true division -> float
    assert_same(*run_both(lambda x, y: x / y, i, torch.tensor([1, 2, 3])))
    assert_same(*run_both(lambda x: 2 ** x, i))
    assert_same(*run_both(lambda x: x ** 2.0, i))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_pow(dtype):
    base = make(dtype, 3, 5, positive=dtype.is_floating_point)
    exp = make(dtype, 5, positive=True, seed=3).clamp(max=4)
    assert_same(*run_both(torch.pow, base, exp))
    assert_same(*run_both(lambda x: x ** 3, base))
    assert_same(*run_both(lambda x: 2 ** x, exp))
    if dtype.is_floating_point:
        assert_same(*run_both(lambda x: x ** 0.5, base))
        assert_same(*run_both(lambda x: x ** -1.5, base))
        assert_same(*run_both(lambda x: 1.7 ** x, base))
        assert_same(*run_both(torch.pow, make(dtype, 3, 5), torch.tensor([2.0, 3.0, 0.5, -1.0, 0.0], dtype=dtype)))
    else:
        b = torch.tensor([-2, -1, 0, 1, 2, 3], dtype=dtype)
        e = torch.tensor([-1, -2, -3, 3, 2, 0], dtype=dtype)
        assert_same(*run_both(torch.pow, b, e))
    assert_same(*run_both(lambda x: torch.float_power(x, 2), base))


# ---------------------------------------------------------------- unary

FLOAT_UNARY = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv,
    "sigmoid": torch.sigmoid,
}
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt"}
UNIT = {"asin", "acos", "erfinv"}
UNARY_CASES = [(n, d) for n in FLOAT_UNARY for d in F + [torch.int64]]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in UNARY_CASES])
def test_float_unary(name, dtype):
    x = make(dtype, 5, 7, positive=name in POSITIVE)
    if name in UNIT:
        x = (x.double() / 4.5).clamp(-0.999, 0.999).to(dtype) if dtype.is_floating_point else x.clamp(-1, 1)
    if name == "log1p" and dtype.is_floating_point:
        x = x.abs().to(dtype)
    if name == "tan":
        x = (x.double() / 3).to(dtype) if dtype.is_floating_point else x.clamp(-1, 1)
    assert_same(*run_both(FLOAT_UNARY[name], x))


@pytest.mark.parametrize("name", ["log", "sqrt", "asin", "acos", "erfinv", "log1p", "reciprocal", "exp", "sigmoid"])
def test_float_unary_edge_values(name):
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.0, -3.0, float("inf"), float("-inf"), float("nan"), 1e-20, 50.0])
    assert_same(*run_both(FLOAT_UNARY[name], x))


KEEP_UNARY = {
    "neg": (torch.neg, F + I),
    "abs": (torch.abs, F + I),
    "sign": (torch.sign, ALL),
    "sgn": (torch.sgn, F + I),
    "square": (torch.square, ALL),
    "floor": (torch.floor, F + I),
    "ceil": (torch.ceil, F + I),
    "round": (torch.round, F + I),
    "trunc": (torch.trunc, F + I),
    "frac": (torch.frac, F),
    "isnan": (torch.isnan, ALL),
    "isinf": (torch.isinf, ALL),
    "isfinite": (torch.isfinite, ALL),
    "logical_not": (torch.logical_not, ALL),
    "bitwise_not": (torch.bitwise_not, I + [torch.bool]),
    "nan_to_num": (torch.nan_to_num, F + I),
}
KEEP_CASES = [(n, d) for n, (_, ds) in KEEP_UNARY.items() for d in ds]


BOOL_CLAMPS = {
    "clamp_min": lambda a, b: torch.clamp_min(a, b),
    "clamp_max": lambda a, b: torch.clamp_max(a, b),
    "clamp(min=)": lambda a, b: torch.clamp(a, min=b),
    "clamp(max=)": lambda a, b: torch.clamp(a, max=b),
}


@pytest.mark.parametrize("name", list(BOOL_CLAMPS))
def test_bool_clamp_by_one_tensor_bound(name):
    a = torch.tensor([[True, False, True], [False, False, True]])
    for b in (torch.tensor(False), torch.tensor([True, False, True])):
        assert_same(*run_both(BOOL_CLAMPS[name], a, b))


def test_bool_clamp_errors_like_cpu():
    a = torch.tensor([True, False])
    for f in (lambda x: torch.clamp(x, min=False), lambda x: torch.clamp_max(x, True),
              lambda x: torch.clamp(x, min=torch.tensor(False, device=x.device), max=torch.tensor(True, device=x.device))):
        with pytest.raises((RuntimeError, NotImplementedError)) as cpu:
            f(a)
        with pytest.raises((RuntimeError, NotImplementedError)) as tpu:
            f(a.to("tpu"))
        assert str(cpu.value) in str(tpu.value)
    assert torch.equal(a.to("tpu").cpu(), a)  # the device still works


SHIFTS = {"<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
          "left": torch.bitwise_left_shift, "right": torch.bitwise_right_shift}


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("name", list(SHIFTS))
def test_shifts_by_negative_and_too_wide_amounts(name, dtype):
    # The CPU gives 0 (left) or the sign fill (right) for amounts < 0 or >= the bit width.
    lo = 0 if dtype == torch.uint8 else -100
    a = torch.tensor([lo, -7 if lo else 7, 5, 1, 3, 100, 1, 64], dtype=dtype)
    b = torch.tensor([1, 0, 3, 65, 7, 8, 63, 2 if lo else 9], dtype=dtype)
    if dtype != torch.uint8:
        b[1] = -1
    assert_same(*run_both(SHIFTS[name], a, b))
    assert_same(*run_both(lambda x: SHIFTS[name](x, 3), a))


@pytest.mark.parametrize("name,dtype", KEEP_CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in KEEP_CASES])
def test_unary(name, dtype):
    x = make(dtype, 4, 5)
    if dtype.is_floating_point:
        x = (x.double() * 3).to(dtype)
        x[0, :4] = torch.tensor([float("nan"), float("inf"), float("-inf"), 2.5])
        x[1, :3] = torch.tensor([-2.5, 0.5, -0.0])
    assert_same(*run_both(KEEP_UNARY[name][0], x))


def test_round_decimals_and_nan_to_num_args():
    x = torch.randn(4, 6) * 100
    assert_same(*run_both(lambda t: torch.round(t, decimals=2), x))
    assert_same(*run_both(lambda t: torch.round(t, decimals=-1), x))
    y = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    assert_same(*run_both(lambda t: torch.nan_to_num(t, nan=0.5, posinf=7.0, neginf=-9.0), y))
    assert_same(*run_both(lambda t: torch.nan_to_num(t), y.double()))


# ---------------------------------------------------------------- ternary / selection


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_clamp(dtype):
    x = make(dtype, 4, 6)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
    lo, hi = make(dtype, 6, seed=1), make(dtype, 4, 1, seed=2)
    assert_same(*run_both(lambda t: t.clamp(-1, 1), x))
    assert_same(*run_both(lambda t: t.clamp(min=0), x))
    assert_same(*run_both(lambda t: t.clamp(max=0.5), x))  # int -> float promotion
    assert_same(*run_both(lambda t: torch.clamp_min(t, -2), x))
    assert_same(*run_both(lambda t: torch.clamp_max(t, 2), x))
    assert_same(*run_both(lambda t, a, b: t.clamp(a, b), x, lo, hi))
    assert_same(*run_both(lambda t, a: t.clamp(min=a), x, lo))
    assert_same(*run_both(lambda t, b: t.clamp(max=b), x, hi))
    assert_same(*run_both(lambda t: t.clamp(2, -2), x))  # min > max gives max
    assert_same(*run_both(lambda t: torch.clip(t, -1, 1), x))


def test_clamp_needs_a_bound():
    with pytest.raises(RuntimeError):
        torch.clamp(torch.ones(3, device="tpu"))


@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype):
    c = make(torch.bool, 4, 1, seed=5)
    a, b = make(dtype, 4, 6), make(dtype, 6, seed=1)
    assert_same(*run_both(torch.where, c, a, b))
    assert_same(*run_both(lambda c, a: torch.where(c, a, 2.5), c, a))  # promotes
    assert_same(*run_both(lambda c, b: torch.where(c, 3, b), c, b))
    assert_same(*run_both(lambda c, a, b: torch.where(c, a, b), c, a, b.to(torch.float64)))


@pytest.mark.parametrize("dtype", ALL)
def test_masked_fill(dtype):
    x = make(dtype, 4, 6)
    m = make(torch.bool, 6, seed=3)
    assert_same(*run_both(lambda t, m: t.masked_fill(m, 1), x, m))
    assert_same(*run_both(lambda t, m, v: t.masked_fill(m, v), x, m, torch.tensor(0, dtype=dtype)))
    assert_same(*run_both(lambda t, m: t.masked_fill(m, torch.tensor(1)), x, m))  # CPU 0-dim value

    def inplace(t, m):
        t = t.clone()
        t.masked_fill_(m, 0)
        return t

    assert_same(*run_both(inplace, x, m))


def test_masked_fill_errors_match_cpu():
    x, m = torch.ones(3), torch.tensor([1, 0, 1])
    with pytest.raises(RuntimeError):
        x.masked_fill(m, 0.0)
    with pytest.raises(RuntimeError):
        x.to("tpu").masked_fill(m.to("tpu"), 0.0)
    with pytest.raises(RuntimeError):
        x.to("tpu").masked_fill(m.bool().to("tpu"), torch.ones(2, device="tpu"))


@pytest.mark.parametrize("dtype", F)
def test_lerp(dtype):
    a, b = make(dtype, 4, 6), make(dtype, 6, seed=1)
    w = torch.rand(4, 6, dtype=torch.float64).mul(1.5).sub(0.25).to(dtype)
    assert_same(*run_both(lambda a, b: torch.lerp(a, b, 0.3), a, b))
    assert_same(*run_both(lambda a, b: torch.lerp(a, b, 0.8), a, b))
    assert_same(*run_both(torch.lerp, a, b, w))
    assert_same(*run_both(lambda a, b: torch.lerp(a, b, torch.tensor(0.7)), a, b))


@pytest.mark.parametrize("dtype", F + I)
def test_addcmul_addcdiv(dtype):
    s, t1, t2 = make(dtype, 4, 6), make(dtype, 6, seed=1), make(dtype, 4, 1, seed=2, positive=True)
    assert_same(*run_both(torch.addcmul, s, t1, t2))
    assert_same(*run_both(lambda s, a, b: torch.addcmul(s, a, b, value=2), s, t1, t2))
    if dtype.is_floating_point:
        assert_same(*run_both(lambda s, a, b: torch.addcdiv(s, a, b, value=-0.5), s, t1, t2))
        assert_same(*run_both(torch.addcdiv, s, t1, t2))
    else:
        with pytest.raises(RuntimeError):
            torch.addcdiv(s.to("tpu"), t1.to("tpu"), t2.to("tpu"))


# ---------------------------------------------------------------- variants


INPLACE = [
    ("add_", lambda x, y: x.add_(y, alpha=2)),
    ("sub_", lambda x, y: x.sub_(y)),
    ("mul_", lambda x, y: x.mul_(y)),
    ("div_", lambda x, y: x.div_(y)),
    ("div_floor_", lambda x, y: x.div_(y, rounding_mode="floor")),
    ("pow_", lambda x, y: x.abs_().pow_(y)),
    ("clamp_", lambda x, y: x.clamp_(-0.5, 0.5)),
    ("exp_", lambda x, y: x.exp_()),
    ("neg_", lambda x, y: x.neg_()),
    ("sigmoid_", lambda x, y: x.sigmoid_()),
    ("lerp_", lambda x, y: x.lerp_(y, 0.25)),
    ("addcmul_", lambda x, y: x.addcmul_(y, y, value=0.5)),
    ("masked_fill_", lambda x, y: x.masked_fill_(y > 0, -1.0)),
    ("copysign_", lambda x, y: x.copysign_(y)),
    ("scalar_", lambda x, y: x.mul_(3).add_(1.5)),
]


@pytest.mark.parametrize("name,fn", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace(name, fn):
    def f(x, y):
        x = x.clone()
        r = fn(x, y)
        assert r is x
        return x

    assert_same(*run_both(f, torch.randn(4, 6), torch.randn(6)))


def test_inplace_on_views_and_errors():
    def f(x, y):
        x = x.clone()
        x[:, ::2].add_(y)  # writes through a strided view
        x.t()[1].mul_(2)
        return x

    assert_same(*run_both(f, torch.randn(4, 6), torch.randn(3)))
    i = torch.arange(4).to("tpu")
    with pytest.raises(RuntimeError):
        i.add_(2.5)  # result type Float can't be cast to Long
    with pytest.raises(RuntimeError):
        i.to(torch.bool) - i.to(torch.bool)


@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "eq", "atan2", "where"])
def test_out(name):
    a, b = torch.randn(4, 6), torch.randn(6)

    def f(a, b, o):
        if name == "where":
            r = torch.where(a > 0, a, b, out=o)
        else:
            r = getattr(torch, name)(a, b, out=o)
        assert r is o
        return o

    out_dtype = torch.bool if name == "eq" else torch.float32
    # right shape, wrong shape (resized), wrong-but-castable dtype
    assert_same(*run_both(f, a, b, torch.empty(4, 6, dtype=out_dtype)))
    with pytest.warns(UserWarning):
        assert_same(*run_both(f, a, b, torch.empty(3, dtype=out_dtype)))
    if name not in ("eq", "where"):
        # Computed in float32 and stored as float64: the values carry
        # float32 precision (XLA turns a division by a broadcast divisor
        # into a multiply by its reciprocal, 1 ulp away from CPU's).
        assert_same(*run_both(f, a, b, torch.empty(4, 6, dtype=torch.float64)), **TOL[torch.float32])


def test_out_unary_and_dtype_cast():
    x = torch.randn(3, 4)
    assert_same(*run_both(lambda x, o: torch.exp(x, out=o), x, torch.empty(3, 4)))
    assert_same(*run_both(lambda x, o: torch.neg(x, out=o), x, torch.empty(0)))
    assert_same(*run_both(lambda x, o: torch.gt(x, 0, out=o), x, torch.empty(3, 4)))  # bool -> float out


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: x.t() + y[:4],
        lambda x, y: x[:, ::2] * y[::2],
        lambda x, y: torch.exp(x.t()),
        lambda x, y: torch.where(x.t() > 0, x.t(), y[0]),
        lambda x, y: torch.maximum(x[1:, 1::3], y[1::3]),
        lambda x, y: x.expand(2, 4, 6)[:, ::2] - y,
        lambda x, y: torch.clamp(x.t(), -0.1, 0.1),
        lambda x, y: torch.lerp(x[:, ::2], y[::2], 0.5),
    ],
)
def test_non_contiguous(fn):
    assert_same(*run_both(fn, torch.randn(4, 6), torch.randn(6)))


def test_broadcast_error_type():
    a, b = torch.ones(3, 4, device="tpu"), torch.ones(5, device="tpu")
    with pytest.raises(RuntimeError, match="must match"):
        a + b
    with pytest.raises(NotImplementedError):
        -torch.ones(2, dtype=torch.bool, device="tpu")


GRAD_FNS = {
    "mul_div": lambda x, y: x * y / (y.abs() + 1),
    "exp_log": lambda x, y: torch.exp(x) + torch.log(y.abs() + 0.5),
    "pow": lambda x, y: torch.pow(x.abs() + 0.5, y) + x ** 3,
    "sqrt_rsqrt": lambda x, y: torch.sqrt(x.abs() + 0.1) * torch.rsqrt(y.abs() + 0.2),
    "trig": lambda x, y: torch.sin(x) * torch.cos(y) + torch.tan(x / 4) + torch.atan2(x, y),
    "hyperbolic": lambda x, y: torch.sinh(x / 2) + torch.cosh(y / 2) + torch.tanh(x) + torch.sigmoid(y),
    "abs_sign": lambda x, y: torch.abs(x) * y + torch.sign(x),
    "clamp": lambda x, y: torch.clamp(x, -0.5, 0.5) + torch.clamp(y, min=x),
    "min_max": lambda x, y: torch.maximum(x, y) + torch.minimum(x, y * 2),
    "where_masked": lambda x, y: torch.where(x > 0, x, y * 3).masked_fill(y > 1, 0.0),
    "lerp_addc": lambda x, y: torch.lerp(x, y, 0.3) + torch.addcmul(x, x, y, value=2) + torch.addcdiv(y, x, y.abs() + 1),
    "erf_family": lambda x, y: torch.erf(x) + torch.erfc(y) + torch.erfinv(x.clamp(-0.9, 0.9)) + torch.expm1(y) + torch.log1p(x.abs()),
    "asin_acos": lambda x, y: torch.asin(x.clamp(-0.9, 0.9)) + torch.acos(y.clamp(-0.9, 0.9)) + torch.atan(x),
    "hypot_xlogy": lambda x, y: torch.hypot(x, y) + torch.xlogy(x.abs(), y.abs() + 0.1) + torch.reciprocal(y.abs() + 1),
    "exp2_log2": lambda x, y: torch.exp2(x) + torch.log2(y.abs() + 1) + torch.log10(x.abs() + 1) + x.square(),
}


@pytest.mark.parametrize("name", list(GRAD_FNS))
def test_autograd(name):
    def grads(x, y, g):
        x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
        GRAD_FNS[name](x, y).backward(g)
        return x.grad, y.grad

    x, y, g = torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 5)
    assert_same(*run_both(grads, x, y, g), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_clamp_int_by_out_of_range_python_bounds(dtype):
    # A bound beyond the dtype's range clamps nothing (casting it first
    # wrapped it: int8's clamp(-200, 200) gave -56 everywhere).
    lo_v, hi_v = (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
    x = torch.tensor([lo_v, -1 if lo_v < 0 else 0, 0, 7, hi_v], dtype=dtype)
    for lo, hi in [(lo_v - 100, hi_v + 100), (None, hi_v + 1000), (lo_v - 1, None), (3, 2**40), (-2**40, 5)]:
        assert_same(*run_both(lambda t: torch.clamp(t, lo, hi), x))
        assert_same(*run_both(lambda t: t.clone().clamp_(lo, hi), x))


def test_clamp_int_bound_beyond_the_other_end_raises():
    x = torch.tensor([1, 2, 3], dtype=torch.uint8)
    for kw in [dict(max=-1), dict(min=300)]:
        with pytest.raises(RuntimeError, match="outside the representable range"):
            torch.clamp(x, **kw)
        with pytest.raises(RuntimeError, match="outside the representable range"):
            torch.clamp(x.to("tpu"), **kw).cpu()
    # The device keeps working.
    assert_same(*run_both(lambda t: t + 1, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hypot_extremes(dtype):
    big, small = (1e30, 1e-30) if dtype == torch.float32 else (1e300, 1e-300)
    a = torch.tensor([big, small, 3.0, 0.0, float("inf"), float("nan"), -big, 1.0], dtype=dtype)
    b = torch.tensor([big, small, 4.0, 0.0, float("nan"), 2.0, 1.0, -small], dtype=dtype)
    assert_same(*run_both(torch.hypot, a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_erfc_tails(dtype):
    # 1 - erf(x) was 0 from x = 4 on in float32; erfc goes through erfcx.
    x = torch.tensor([-30.0, -3.0, -0.5, 0.0, 0.3, 3.0, 4.0, 5.0, 9.0, 10.5, 26.5, 30.0,
                      float("inf"), float("-inf"), float("nan")], dtype=dtype)
    t, c = run_both(torch.erfc, x)
    assert_same(t, c, rtol={torch.float32: 1e-6, torch.float64: 1e-13, torch.bfloat16: 1e-2}[dtype], atol=0)


def test_float64_erf_family_at_full_precision():
    # The float64 fits were good to about 1e-10 (erf) and 2e-8 (erfinv);
    # erf now uses its series and erfcx, erfinv two Newton steps on top.
    x = torch.cat([torch.linspace(-7, 7, 1001, dtype=torch.float64),
                   torch.tensor([0.0, -0.0, 1e-300, 0.4999999, 0.5, float("inf"), float("-inf"), float("nan")],
                                dtype=torch.float64)])
    for f in (torch.erf, torch.erfc, torch.nn.functional.gelu):
        assert_same(*run_both(f, x), rtol=1e-13, atol=0)
    y = torch.cat([torch.linspace(-0.999999999, 0.999999999, 1001, dtype=torch.float64),
                   torch.tensor([0.0, -0.0, 1e-300, -1e-120, 1e-12, 0.999, 1 - 1e-15, 1.0, -1.0, 1.5, float("nan")],
                                dtype=torch.float64)])
    assert_same(*run_both(torch.erfinv, y), rtol=1e-14, atol=0)


@pytest.mark.parametrize("fill", [
    lambda t, v: t.fill_(v),
    lambda t, v: torch.full(t.shape, v, dtype=t.dtype, device=t.device),
    lambda t, v: t.masked_fill(torch.ones_like(t, dtype=torch.bool), v),
    lambda t, v: t.index_fill(0, torch.tensor([0], device=t.device), v),
    lambda t, v: t.scatter(0, torch.tensor([0], device=t.device), v),
])
def test_fill_values_that_overflow_raise_like_cpu(fill):
    # c10's checked_convert: 300 into uint8 raises (it wrapped to 44);
    # unsigned targets take down to -max (wrapping), floats take inf.
    cases = [(torch.uint8, 300, False), (torch.uint8, -1, True), (torch.uint8, -256, False), (torch.int8, 127, True),
             (torch.int8, -129, False), (torch.int32, 2**31, False), (torch.float16, 1e6, False),
             (torch.float16, float("inf"), True), (torch.float32, 1e300, False), (torch.uint8, 1.5, True)]
    for dtype, v, ok in cases:
        x = torch.tensor([1, 2, 3]).to(dtype)
        if ok:
            assert_same(*run_both(lambda t: fill(t.clone(), v), x))
            continue
        with pytest.raises(RuntimeError, match="without overflow"):
            fill(x.clone(), v)
        with pytest.raises(RuntimeError, match="without overflow"):
            fill(x.to("tpu"), v).cpu()
    assert_same(*run_both(lambda t: t + 1, torch.tensor([1, 2, 3], dtype=torch.uint8)))
