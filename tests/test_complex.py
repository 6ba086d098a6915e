"""Complex tensors (complex64, complex128) on tpu, against the CPU: copies,
the view_as_real/view_as_complex views, the arithmetic and constructors
that rotary embeddings written with complex numbers use (Meta's Llama,
torchtitan), and their gradients. Ops without complex support fail with
a message naming the op."""
import io
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu_rs
from conftest import assert_same, run_both

CTOL = {torch.complex64: dict(rtol=1.3e-6, atol=1e-5), torch.complex128: dict(rtol=1e-7, atol=1e-7)}
COMPLEX = [torch.complex64, torch.complex128]


def crandn(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_host_round_trip_and_printing(mode, dtype):
    z = crandn(3, 4, dtype=dtype)
    t = z.to("tpu")
    assert t.dtype == dtype and t.device.type == "tpu"
    assert torch.equal(t.cpu(), z)
    assert torch.equal(z.t().to("tpu").cpu(), z.t())  # non-contiguous source
    assert torch.equal(t.t().contiguous().cpu(), z.t().contiguous())
    squeeze = lambda s: re.sub(r"\s+", "", s)  # noqa: E731  (line breaks depend on the suffix)
    assert squeeze(repr(t)).replace(",device='tpu:0'", "") == squeeze(repr(z))


def test_save_and_load(tmp_path):
    z = crandn(5)
    buf = io.BytesIO()
    torch.save({"z": z.to("tpu")}, buf)
    buf.seek(0)
    back = torch.load(buf)["z"]
    assert back.device.type == "tpu" and torch.equal(back.cpu(), z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_view_as_real_is_a_view(mode, dtype):
    z = crandn(2, 3, dtype=dtype)
    tpu, cpu = run_both(torch.view_as_real, z)
    assert_same(tpu, cpu, check_strides=True)
    # Writing through the float view changes the complex tensor.
    t = z.to("tpu")
    torch.view_as_real(t)[..., 1].zero_()
    assert torch.equal(t.cpu(), torch.complex(z.real, torch.zeros_like(z.real)))


def test_view_as_complex_is_a_view(mode):
    f = torch.randn(4, 3, 2)
    tpu, cpu = run_both(torch.view_as_complex, f)
    assert_same(tpu, cpu, check_strides=True, **CTOL[torch.complex64])
    t = f.to("tpu")
    torch.view_as_complex(t).mul_(torch.tensor(1j).to("tpu"))  # (a, b) -> (-b, a)
    assert torch.equal(t.cpu(), torch.stack([-f[..., 1], f[..., 0]], -1))


def test_real_imag_conj(mode):
    z = crandn(6)
    for fn in (torch.real, torch.imag, lambda x: x.conj().resolve_conj(), torch.conj_physical,
               lambda x: x.conj().imag, lambda x: torch.neg(x.conj()).resolve_conj()):
        tpu, cpu = run_both(fn, z)
        assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic(mode, dtype, op):
    a, b = crandn(3, 4, dtype=dtype, seed=1), crandn(4, dtype=dtype, seed=2)
    fn = getattr(torch, op)
    tpu, cpu = run_both(fn, a, b)  # broadcasting
    assert_same(tpu, cpu, **CTOL[dtype])
    tpu, cpu = run_both(lambda x: fn(x, 2.5), a)  # a Python float
    assert_same(tpu, cpu, **CTOL[dtype])
    tpu, cpu = run_both(lambda x: -x, a)
    assert_same(tpu, cpu, **CTOL[dtype])
    t = a.to("tpu")
    getattr(t, op + "_")(b.to("tpu"))  # in place
    assert_same(t, fn(a, b), **CTOL[dtype])


def test_type_promotion():
    z, d, i = crandn(3), torch.randn(3, dtype=torch.float64), torch.arange(3)
    for fn in (torch.mul, torch.add):
        for x, y in ((z, d), (d, z), (z, i), (z, torch.tensor(2.0, dtype=torch.float64))):
            tpu, cpu = run_both(fn, x, y)
            assert_same(tpu, cpu, **CTOL[cpu.dtype])
    tpu, cpu = run_both(lambda x: x.to(torch.complex64), torch.randn(4))
    assert_same(tpu, cpu)
    tpu, cpu = run_both(lambda x: x.to(torch.complex128), crandn(4))
    assert_same(tpu, cpu)


@pytest.mark.parametrize("fn", ["exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
                                "sin", "cos", "tan", "tanh"])
def test_math_functions(mode, fn):
    z = crandn(8, seed=4)
    tpu, cpu = run_both(getattr(torch, fn), z)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "sin", "cos", "reciprocal"])
def test_math_function_gradients(mode, fn):
    z = crandn(6, seed=5)

    def run(x):
        x = x.clone().requires_grad_()
        getattr(torch, fn)(x).abs().sum().backward()
        return x.grad

    tpu, cpu = run_both(run, z)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


def test_rotary_embedding_written_with_exp_of_1j():
    theta = torch.outer(torch.arange(6.0), torch.rand(4))
    x = torch.randn(6, 4, 2)
    tpu, cpu = run_both(lambda t, x: torch.view_as_real(torch.view_as_complex(x) * torch.exp(1j * t)), theta, x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constructors(mode, dtype):
    r, theta = torch.rand(5, dtype=dtype) + 0.5, torch.randn(5, dtype=dtype)
    tpu, cpu = run_both(torch.polar, r, theta)
    assert_same(tpu, cpu, **CTOL[cpu.dtype])
    tpu, cpu = run_both(torch.complex, r, theta)
    assert_same(tpu, cpu)


def test_abs_angle_sgn(mode):
    z = torch.cat([crandn(5), torch.zeros(1, dtype=torch.complex64)])
    for fn in (torch.abs, torch.angle, torch.sgn):
        tpu, cpu = run_both(fn, z)
        assert_same(tpu, cpu, **CTOL[cpu.dtype] if cpu.dtype.is_complex else {})


def test_cat_stack_clone(mode):
    a, b = crandn(2, 3, seed=1), crandn(2, 3, seed=2)
    for fn in (lambda x, y: torch.cat([x, y], 1), lambda x, y: torch.stack([x, y]), lambda x, y: x.t().clone()):
        tpu, cpu = run_both(fn, a, b)
        assert_same(tpu, cpu)


@pytest.mark.parametrize("case", ["roll", "flip", "index_select", "pad", "slice_grad", "repeat", "where", "sum", "mean"])
def test_moving_and_reducing(mode, case):
    z = crandn(3, 4)
    fn = {
        "roll": lambda x: torch.roll(x, 2, -1),
        "flip": lambda x: torch.flip(x, (0,)),
        "index_select": lambda x: torch.index_select(x, 1, torch.tensor([3, 0, 3], device=x.device)),
        "pad": lambda x: F.pad(x, (1, 2)),
        "slice_grad": lambda x: torch.autograd.grad(x.requires_grad_()[1:, ::2].abs().sum(), x)[0],
        "repeat": lambda x: x.repeat(2, 1),
        "where": lambda x: torch.where(x.real > 0, x, x * 2),
        "sum": lambda x: (x.sum(), x.sum(1)),
        "mean": lambda x: (x.mean(), x.mean(0)),
    }[case]
    tpu, cpu = run_both(fn, z)
    assert_same(tpu, cpu, **CTOL[torch.complex64])


MATRIX_PRODUCTS = {
    "mm": lambda a, b, c: a @ b,
    "mm_conj_bit": lambda a, b, c: a.conj() @ b,  # reaches mm with the lazy conjugate bit set
    "mm_mH": lambda a, b, c: a @ b.mH,
    "matmul_batched": lambda a, b, c: torch.stack([a, b]) @ torch.stack([b, a]).conj(),
    "addmm": lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
    "addmm_complex_scalars": lambda a, b, c: torch.addmm(c, a, b, beta=0.2 + 0.6j, alpha=0.3j),
    "baddbmm_complex_scalars": lambda a, b, c: torch.baddbmm(c[None], a[None], b[None], alpha=1 - 1j),
    "baddbmm": lambda a, b, c: torch.baddbmm(c[None], a[None], b.mH[None]),
    "mv": lambda a, b, c: a @ b[:, 0].conj(),
    "dot": lambda a, b, c: torch.dot(a[0], b[:, 1]),
    "vdot": lambda a, b, c: torch.vdot(a[0], b[:, 1]),
    "dot_conj_bit": lambda a, b, c: (torch.dot(a[0].conj(), b[:, 1]), torch.vdot(a[0].conj(), b[:, 1].conj())),
    "outer": lambda a, b, c: torch.outer(a[0], b[1].conj()),
    "trace": lambda a, b, c: torch.trace(a),
    "linear": lambda a, b, c: F.linear(a, b, c[0]),
}


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("case", sorted(MATRIX_PRODUCTS))
def test_matrix_products(mode, dtype, case):
    a, b, c = (crandn(4, 4, dtype=dtype, seed=s) for s in (1, 2, 3))
    tpu, cpu = run_both(MATRIX_PRODUCTS[case], a, b, c)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


def test_matrix_product_gradients(mode):
    # mm's backward multiplies by the conjugate transposes (conjugate-bit views).
    a, b = crandn(3, 4, seed=1), crandn(4, 2, seed=2)

    def run(a, b):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        (a @ b).abs().pow(2).sum().backward()
        return a.grad, b.grad

    tpu, cpu = run_both(run, a, b)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


def test_writing_into_a_conjugate_view_is_refused_and_the_device_keeps_working(mode):
    a, b = crandn(2, 2, seed=1).to("tpu"), crandn(2, 2, seed=2).to("tpu")
    out = torch.zeros(2, 2, dtype=torch.complex64, device="tpu")
    with pytest.raises(RuntimeError, match=r"mm.*conjugate.*resolve_conj"):
        torch.mm(a, b, out=out.conj())
        out.cpu()
    assert torch.equal(out.cpu(), torch.zeros(2, 2, dtype=torch.complex64))
    assert_same(a @ b, a.cpu() @ b.cpu(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 0, 2.5])
def test_pow_with_a_real_exponent(mode, exponent):
    z = torch.cat([crandn(6, seed=6), torch.zeros(1, dtype=torch.complex64)])
    tpu, cpu = run_both(lambda x: x**exponent, z)
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert tpu.dtype == cpu.dtype


def test_pow_with_complex_operands(mode):
    z, w = crandn(5, seed=7), crandn(5, seed=8)
    for fn in (torch.pow, lambda a, b: 2**a, lambda a, b: a ** b.real):
        tpu, cpu = run_both(fn, z, w)
        assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


def test_equality_and_nan_tests(mode):
    z = crandn(6, seed=9)
    z[1] = z[0]
    z[2] = complex(float("nan"), 1.0)
    z[3] = complex(1.0, float("nan"))
    z[4] = 0
    cases = [lambda x: x == x[0], lambda x: x != 0, lambda x: x == 0, torch.isnan,
             lambda x: torch.isclose(x, x * (1 + 1e-7)), lambda x: torch.equal(x, x.clone()),
             lambda x: torch.equal(x[:2], x[1:3]), lambda x: torch.allclose(x[:2], x[:2] * (1 + 1e-7))]
    for fn in cases:
        tpu, cpu = run_both(fn, z)
        if isinstance(cpu, torch.Tensor):
            assert_same(tpu, cpu)
        else:
            assert tpu == cpu
    with pytest.raises(RuntimeError):  # complex numbers have no order, on the CPU too
        (z.to("tpu") < 0).cpu()


@pytest.mark.parametrize("dtype", COMPLEX)
def test_random_fills(dtype):
    # PyTorch fills a complex tensor through its view_as_real view; a complex
    # normal with std s has each part's std s / sqrt(2).
    torch.manual_seed(3)
    z = torch.randn(100_000, dtype=dtype, device="tpu").cpu()
    assert z.dtype == dtype
    for part in (z.real, z.imag):
        assert abs(part.mean().item()) < 0.01 and abs(part.std().item() - 0.5**0.5) < 0.01
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]))[0, 1].item()) < 0.02  # independent parts
    w = torch.empty(100_000, dtype=dtype, device="tpu").normal_(2.0, 3.0).cpu()
    for part in (w.real, w.imag):
        assert abs(part.mean().item() - 2.0) < 0.05 and abs(part.std().item() - 3.0 / 2**0.5) < 0.05
    u = torch.rand(100_000, dtype=dtype, device="tpu").cpu()
    for part in (u.real, u.imag):
        assert 0.0 <= part.min().item() and part.max().item() < 1.0 and abs(part.mean().item() - 0.5) < 0.01
    # Reproducible under torch.manual_seed, and fresh values for the next draw.
    torch.manual_seed(3)
    again = torch.randn(100_000, dtype=dtype, device="tpu").cpu()
    assert torch.equal(again, z)
    assert not torch.equal(torch.randn(100_000, dtype=dtype, device="tpu").cpu(), z)


REDUCTIONS = {
    "prod": lambda x: (x.prod(), x.prod(1)),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(0),
    "var": lambda x: (x.var(), x.var(1, correction=0)),
    "std": lambda x: (x.std(), x.std(0)),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "vector_norm": lambda x: [torch.linalg.vector_norm(x, p) for p in (2, 1, float("inf"), 3)],
    "norm_dim": lambda x: x.norm(dim=1),
    "matrix_norm": lambda x: torch.linalg.matrix_norm(x),
}


@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_reductions(mode, case):
    tpu, cpu = run_both(REDUCTIONS[case], crandn(3, 4, seed=10))
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", ["sinh", "cosh", "sigmoid", "square"])
def test_more_math_functions(mode, fn):
    tpu, cpu = run_both(getattr(torch, fn), crandn(8, seed=11))
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


INVERSE = ["asin", "acos", "atan", "asinh", "acosh", "atanh"]


def _branch_cut_grid(dtype):
    """Points on and around every branch cut, zeros signed both ways, tiny and
    huge parts: where a textbook formula cancels or picks the wrong side."""
    parts = [0.0, -0.0, 1e-30, 1e-8, 0.3, -0.7, 1.0, -1.0, 1.5, -2.0, 9.0, 1e4, -1e8, 1e20, 3e38]
    re = torch.tensor([a for a in parts for _ in parts], dtype=torch.float64)
    im = torch.tensor([b for _ in parts for b in parts], dtype=torch.float64)
    return torch.complex(re, im).to(dtype)


@pytest.mark.parametrize("fn", INVERSE)
def test_inverse_trig_and_hyperbolic_functions(mode, fn):
    f = getattr(torch, fn)
    z = _branch_cut_grid(torch.complex64)
    tpu, cpu = run_both(f, z)
    assert_same(tpu, cpu, rtol=2e-7, atol=0)  # 2 ulp, however small the value
    t = tpu.cpu()
    # The side of a cut: the signs of zero parts match too.
    assert torch.equal(torch.signbit(t.real), torch.signbit(cpu.real))
    assert torch.equal(torch.signbit(t.imag), torch.signbit(cpu.imag))
    z = crandn(200, dtype=torch.complex128, seed=13) * 5
    tpu, cpu = run_both(f, z)
    assert_same(tpu, cpu, rtol=1e-13, atol=0)


@pytest.mark.parametrize("fn", INVERSE)
def test_inverse_function_gradients(mode, fn):
    def run(x):
        x = x.clone().requires_grad_()
        getattr(torch, fn)(x).abs().sum().backward()
        return x.grad

    tpu, cpu = run_both(run, crandn(6, seed=14) * 2)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", ["tanh", "sigmoid", "norm", "var", "cumsum"])
def test_more_gradients(mode, fn):
    # tanh/sigmoid backward multiply by the conjugate derivative.
    f = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "norm": torch.norm, "var": torch.var,
         "cumsum": lambda x: x.cumsum(0)}[fn]

    def run(x):
        x = x.clone().requires_grad_()
        y = f(x)
        (y.abs().sum() if y.is_complex() else y.sum()).backward()
        return x.grad

    tpu, cpu = run_both(run, crandn(6, seed=12))
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


INDEXING = {
    "gather": lambda x: x.gather(1, torch.tensor([[0, 2], [3, 3], [1, 0]], device=x.device)),
    "scatter": lambda x: torch.zeros_like(x).scatter(1, torch.tensor([[0, 2], [3, 1], [1, 0]], device=x.device), x),
    "index_put": lambda x: x.clone().index_put_((torch.tensor([0, 2], device=x.device),), x[1]),
    "index_put_accumulate": lambda x: x.clone().index_put_((torch.tensor([0, 0], device=x.device),), x[1:],
                                                           accumulate=True),
    "masked_fill_complex": lambda x: x.masked_fill(x.real > 0, 2 - 1j),
    "masked_fill_real": lambda x: x.masked_fill(x.real > 0, 3.0),
    "triu_tril": lambda x: (x.triu(1), x.tril()),
    "setitem": lambda x: (lambda y: (y.__setitem__((slice(None), 0), 5 - 1j), y)[1])(x.clone()),
    "fill": lambda x: x.clone().fill_(1j),
    "full": lambda x: torch.full((2, 3), 1 + 2j, device=x.device),
    "add_alpha": lambda x: torch.add(x, x, alpha=2j),
    "scatter_value": lambda x: x.clone().scatter_(1, torch.tensor([[0, 2], [3, 1], [1, 0]], device=x.device), 1j),
    "index_fill": lambda x: x.index_fill(1, torch.tensor([0, 2], device=x.device), -1j),
    "where_scalar": lambda x: torch.where(x.real > 0, x, 2j),
    "pow_complex_exponent": lambda x: (x ** (2 + 1j), torch.pow(x, 2 + 0j), torch.pow(x, 0.5j)),
    "eq_scalar": lambda x: (x == 1j, x.clone().fill_(1j) == 1j),
    "lerp": lambda x: (torch.lerp(x, x.flip(0), 0.3 + 0.2j), torch.lerp(x, x.flip(0), x.real.cfloat() * 0.1)),
    "addcmul_value": lambda x: torch.addcmul(x, x, x, value=1 - 2j),
    "index_add_alpha": lambda x: x.index_add(0, torch.tensor([0, 0, 2], device=x.device), x, alpha=1j),
}


@pytest.mark.parametrize("case", sorted(INDEXING))
def test_indexing_masking_and_complex_scalars(mode, case):
    tpu, cpu = run_both(INDEXING[case], crandn(3, 4, seed=13))
    assert_same(tpu, cpu, rtol=1e-6, atol=1e-6)


def test_truth_tests_see_the_imaginary_part(mode):
    # A purely imaginary number is nonzero: any/all/nonzero/logical ops and
    # masks must not look at the real part alone.
    z = torch.tensor([0j, 1j, 2 + 0j, 0j, -3j])
    cases = [torch.nonzero, lambda x: x[x != 0], torch.any, torch.all, torch.count_nonzero, torch.logical_not,
             lambda x: torch.logical_and(x, x.flip(0)), lambda x: torch.logical_xor(x, torch.ones_like(x)),
             lambda x: torch.masked_select(x, x.imag > 0)]
    for fn in cases:
        tpu, cpu = run_both(fn, z)
        assert_same(tpu, cpu)


def test_nan_to_num_replaces_each_part(mode):
    inf, nan = float("inf"), float("nan")
    z = torch.tensor([complex(nan, 1), complex(2, inf), complex(-inf, nan), 1 - 1j])
    for kwargs in ({}, dict(nan=1.0, posinf=2.0, neginf=-3.0)):
        tpu, cpu = run_both(lambda x: torch.nan_to_num(x, **kwargs), z)
        assert_same(tpu, cpu)


def test_complex_fill_value_into_a_real_tensor_is_refused(mode):
    t = torch.zeros(3, device="tpu")
    with pytest.raises(RuntimeError, match="value cannot be converted"):
        t.masked_fill(t == 0, 1j).cpu()
    with pytest.raises(RuntimeError, match="value cannot be converted"):
        t.fill_(1j)
        t.cpu()
    assert torch.equal(t.cpu(), torch.zeros(3))

COMPLEX_NUMBER_WITH_REAL_TENSORS = {
    "add_alpha": lambda t: torch.add(t, t, alpha=1j),
    "addmm_alpha": lambda t: torch.addmm(t[:, None], t[:, None], t[None], alpha=1j),
    "addcmul_value": lambda t: torch.addcmul(t, t, t, value=1j),
    "lerp_weight": lambda t: torch.lerp(t, t, 0.5 + 0.5j),
    "index_add_alpha": lambda t: t.index_add(0, torch.tensor([0], device=t.device), t[:1], alpha=1j),
}


@pytest.mark.parametrize("case", sorted(COMPLEX_NUMBER_WITH_REAL_TENSORS))
def test_complex_number_with_real_tensors_is_refused_as_on_the_cpu(mode, case):
    fn = COMPLEX_NUMBER_WITH_REAL_TENSORS[case]
    with pytest.raises(RuntimeError):
        fn(torch.ones(3))  # the CPU refuses it
    t = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError, match="complex"):
        fn(t).cpu()
    assert torch.equal((t * 2).cpu(), torch.full((3,), 2.0))


def test_lerp_weight_tensor_must_match_the_dtype(mode):
    a = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError, match="weight"):
        torch.lerp(a, a, torch.full((3,), 0.5 + 0.5j, device="tpu")).cpu()


def test_complex_numbers_stay_on_the_tensors_device(mode):
    z = crandn(3).to("tpu:1")
    for fn in (lambda x: x.clone().fill_(1j), lambda x: x * 1j, lambda x: x.masked_fill(x.real > 0, 2j)):
        out = fn(z)
        assert out.device == z.device
        assert_same(out, fn(z.cpu()))


def test_unsupported_complex_op_names_it_and_the_device_keeps_working(mode):
    t = crandn(3).to("tpu")
    with pytest.raises(NotImplementedError, match=r"aten::linalg_ldl_factor_ex.*complex64.*view_as_real"):
        torch.linalg.ldl_factor(crandn(2, 2).to("tpu"))[0].cpu()
    assert torch.equal((t * 2).cpu(), t.cpu() * 2)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_item(mode, dtype):
    z = crandn(3, dtype=dtype)
    t = z.to("tpu")
    assert t[1].item() == z[1].item() and isinstance(t[1].item(), complex)
    assert (t.sum() * 2).item() == pytest.approx((z.sum() * 2).item(), rel=1e-6)


def test_cpu_fallback_takes_unsupported_complex_ops(mode):
    z = crandn(2, 2)
    before = torch_tpu_rs.metrics()["fallbacks"].get("aten::linalg_ldl_factor_ex.out", 0)
    torch_tpu_rs._C.set_cpu_fallback(True)  # the autouse fixture turns it off again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once per op (tests/test_fallback.py)
        out = torch.linalg.ldl_factor(z.to("tpu"))
    assert_same(out, torch.linalg.ldl_factor(z))
    assert torch_tpu_rs.metrics()["fallbacks"]["aten::linalg_ldl_factor_ex.out"] == before + 1


# Rotary embeddings as Meta's Llama writes them.
def freqs_cis(head_dim, seq_len, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(xq, xk, fc):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = fc.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class ComplexRopeLM(nn.Module):
    def __init__(self, vocab=32, dim=32, heads=2, seq=8):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("fc", freqs_cis(dim // heads, seq), persistent=False)

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.emb(tokens)
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, -1).unbind(2)
        q, k = apply_rotary_emb(q, k, self.fc[:s])
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(x + y.transpose(1, 2).reshape(b, s, -1))


def train_losses(device, steps=4, compiled=False):
    torch.manual_seed(0)
    model = ComplexRopeLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(3)).to(device)

    def step():
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 32), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(step, backend="tpu") if compiled else step
    return [step().item() for _ in range(steps)]


def test_rotary_embedding_forward_and_backward(mode):
    xq, xk = torch.randn(2, 8, 2, 16), torch.randn(2, 8, 2, 16)
    fc = freqs_cis(16, 8)

    def run(device):
        q, k = (t.to(device).requires_grad_() for t in (xq, xk))
        oq, ok = apply_rotary_emb(q, k, fc.to(device))
        ((oq * oq).sum() + ok.sum()).backward()
        return oq, ok, q.grad, k.grad

    for a, b in zip(run("tpu"), run("cpu")):
        assert_same(a, b)


def test_training_with_complex_rotary_embeddings_matches_cpu(mode):
    cpu = train_losses("cpu")
    tpu = train_losses("tpu")
    assert tpu == pytest.approx(cpu, rel=1e-4)
    assert cpu[-1] < cpu[0]


def test_compiled_training_with_complex_rotary_embeddings_matches_cpu():
    torch._dynamo.reset()
    cpu = train_losses("cpu")
    tpu = train_losses("tpu", compiled=True)
    assert tpu == pytest.approx(cpu, rel=1e-4)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logaddexp_and_logcumsumexp(dtype):
    # ATen's complex rule: ordered by real part, log1p(exp(min - max)) + max;
    # both -inf gives the smaller operand; any NaN part gives NaN + NaN i.
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([1 + 2j, complex(-inf, 0), complex(nan, 0), 3 - 1j, 0j, complex(-inf, 3), -40 + 1j], dtype=dtype)
    y = torch.tensor([0.5 - 1j, complex(-inf, 1), 1 + 1j, 3 + 5j, 1e-30 + 0j, 2 + 2j, 30 - 2j], dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.complex64 else dict(rtol=1e-12, atol=1e-12)
    assert_same(*run_both(torch.logaddexp, x, y), **tol)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 40, generator=g, dtype=dtype) * 3
    assert_same(*run_both(lambda t: torch.logcumsumexp(t, 1), z), **tol)
    assert_same(*run_both(lambda t: torch.logcumsumexp(t, 0), x), **tol)
    # A long dim, wide values: a parallel scan differed from CPU by 2 pi in phase.
    big = torch.randn(2, 300, generator=g, dtype=dtype) * 3
    assert_same(*run_both(lambda t: torch.logcumsumexp(t, 1), big), **tol)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_renorm(dtype):
    # Each slice's p-norm is its moduli's; the real factor scales the complex values.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 5, generator=g, dtype=dtype) * 3
    for p, dim, maxnorm in [(2, 0, 1.0), (1, 1, 2.0), (3.5, 2, 0.5), (float("inf"), 0, 1.0), (2, -1, 100.0)]:
        assert_same(*run_both(lambda t: torch.renorm(t, p, dim, maxnorm), x), rtol=1e-5, atol=1e-5)
