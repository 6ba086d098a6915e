"""LU-based linear algebra on tpu against the CPU (LAPACK/MKL): lu_factor(_ex),
lu, lu_unpack, lu_solve (left/right, adjoint), solve(_ex), inv(_ex), det,
slogdet, logdet and matrix_exp, with batches, rectangular and singular inputs,
and gradients through the composite backward formulas."""
from __future__ import annotations

import pytest
import torch

from conftest import assert_same, grads_of, run_both

FLOATS = [torch.float32, torch.float64]


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    return torch.randn(*shape, generator=g, dtype=wide).to(dtype)


def tol(dtype, f32=1e-4):
    return dict(rtol=f32, atol=f32) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype,shape", [(torch.float64, (5, 5))] + [
    (torch.float32, s) for s in [(5, 5), (2, 3, 6, 4), (4, 7), (1, 1), (0, 3, 3), (3, 0)]])
def test_lu_factor_ex_matches_lapack(dtype, shape):
    a = rand(*shape, dtype=dtype)
    t, c = run_both(torch.linalg.lu_factor_ex, a)
    assert_same(t[1], c[1])  # pivots: same choices as getrf
    assert_same(t[2], c[2])  # info
    assert_same(t[0], c[0], **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32])
def test_lu_factor_ties_and_singular(dtype):
    # integer entries with ties in |a|, a zero column (info > 0), a rank-deficient matrix
    a = torch.tensor([[1., -2., 2.], [2., 4., -2.], [-2., 1., 3.]], dtype=dtype)
    z = a.clone()
    z[:, 1] = 0
    r = torch.tensor([[1., 2., 3.], [2., 4., 6.], [1., 1., 1.]], dtype=dtype)
    for m in (a, z, r, torch.zeros(3, 3, dtype=dtype)):
        t, c = run_both(torch.linalg.lu_factor_ex, m)
        assert_same(t, c, **tol(dtype))


@pytest.mark.parametrize("dtype,shape", [(torch.float64, (5, 5)), (torch.float32, (2, 3, 5)), (torch.float32, (2, 5, 3))])
def test_linalg_lu_and_unpack(dtype, shape):
    a = rand(*shape, dtype=dtype, seed=1)
    t, c = run_both(torch.linalg.lu, a)
    assert_same(t, c, **tol(dtype))
    lu, piv = torch.linalg.lu_factor(a)
    t, c = run_both(torch.lu_unpack, lu, piv)
    assert_same(t, c, **tol(dtype))
    t, c = run_both(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv)
    assert_same(t, c)
    t, c = run_both(lambda x, p: torch.lu_unpack(x, p, unpack_pivots=False), lu, piv)
    assert_same(t, c, **tol(dtype))


@pytest.mark.parametrize("dtype,left,adjoint", [(torch.float64, True, False)] + [
    (dt, left, adj) for dt in (torch.float32, torch.complex64, torch.complex128)
    for left in (True, False) for adj in (True, False)])
def test_lu_solve(dtype, left, adjoint):
    # complex: adjoint is the conjugate transpose
    a = rand(2, 4, 4, dtype=dtype, seed=2)
    b = rand(3, 1, 4, 2, dtype=dtype, seed=3) if left else rand(3, 1, 2, 4, dtype=dtype, seed=3)
    lu, piv = torch.linalg.lu_factor(a)
    t, c = run_both(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint), lu, piv, b)
    assert_same(t, c, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32])
def test_solve_inv(dtype):
    a = rand(3, 5, 5, dtype=dtype, seed=4)
    b = rand(3, 5, 2, dtype=dtype, seed=5)
    assert_same(*run_both(torch.linalg.solve, a, b), **tol(dtype))
    assert_same(*run_both(torch.linalg.solve, a, b[..., 0]), **tol(dtype))  # batched vector rhs
    assert_same(*run_both(torch.linalg.solve, a[0], b[0, :, 0]), **tol(dtype))  # vector rhs
    assert_same(*run_both(lambda x, y: torch.linalg.solve(x, y, left=False), a, b.mT), **tol(dtype))
    assert_same(*run_both(torch.linalg.solve_ex, a, b), **tol(dtype))
    assert_same(*run_both(torch.linalg.inv, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.inv_ex, a[0]), **tol(dtype))
    assert_same(*run_both(torch.ops.aten._linalg_solve_ex, a, b), **tol(dtype))  # LU of A, as on the CPU


def test_inv_singular_info_and_error():
    s = torch.tensor([[1., 2.], [2., 4.]])
    t, c = run_both(torch.linalg.inv_ex, s)
    assert_same(t[1], c[1])
    with pytest.raises(RuntimeError):
        torch.linalg.inv(s.to("tpu"))


@pytest.mark.parametrize("dtype", [torch.float32])
def test_det_slogdet_logdet(dtype):
    a = rand(4, 5, 5, dtype=dtype, seed=6)
    a[1, :, 2] = 0  # singular
    a[2] = a[2] @ a[2].mT  # positive definite
    assert_same(*run_both(torch.linalg.det, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.slogdet, a), **tol(dtype))
    assert_same(*run_both(torch.logdet, a), **tol(dtype))
    assert_same(*run_both(torch.ops.aten._linalg_det, a), **tol(dtype))  # LU of A^T, as on the CPU
    assert_same(*run_both(torch.linalg.det, torch.zeros(2, 0, 0, dtype=dtype)))


def test_gradients():
    a = rand(2, 4, 4, seed=7)
    b = rand(2, 4, 3, seed=8)
    fns = [
        lambda x, y: torch.linalg.solve(x, y).sum(),
        lambda x, y: torch.linalg.det(x).sum(),
        lambda x, y: torch.linalg.slogdet(x)[1].sum(),
        lambda x, y: sum(v.sum() for v in torch.linalg.lu(x)),
        lambda x, y: torch.linalg.matrix_exp(x).sum(),
    ]
    for f in fns:
        assert_same(*run_both(lambda x, y: grads_of(f, x, y), a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("scale", [1e-9, 1e-3, 0.03, 0.3, 1.0, 2.5, 8.0])
def test_matrix_exp_every_degree(dtype, scale):
    # one matrix: the Taylor degree follows the norm; a batch: degree 18 + squaring
    a = rand(4, 4, dtype=dtype, seed=9) * scale
    assert_same(*run_both(torch.linalg.matrix_exp, a), **tol(dtype, 2e-5))
    b = torch.stack([a, 2 * a, a / 3])
    assert_same(*run_both(torch.linalg.matrix_exp, b), **tol(dtype, 2e-5))


def test_matrix_exp_small_sizes():
    for shape in [(3, 1, 1), (0, 2, 2), (2, 0, 0)]:
        assert_same(*run_both(torch.linalg.matrix_exp, rand(*shape)))


def test_errors():
    with pytest.raises(RuntimeError):
        torch.linalg.inv(torch.ones(2, 3, device="tpu"))
    with pytest.raises(RuntimeError):
        torch.linalg.det(torch.ones(3, 3, dtype=torch.int64, device="tpu"))
    with pytest.raises(RuntimeError):
        torch.linalg.lu_factor(torch.ones(3, 3, device="tpu"), pivot=False)


@pytest.mark.parametrize("dtype", FLOATS)
def test_ldl_factor_and_solve(dtype):
    # Bunch-Kaufman: zero leading diagonals force 1x1 swaps and 2x2 blocks
    a = rand(6, 5, 5, dtype=dtype, seed=10)
    a = a + a.mT
    a[::2, 0, 0] = 0
    a[1, :2, :2] = 0  # a 2x2 block with zero diagonal
    t, c = run_both(torch.linalg.ldl_factor_ex, a)
    assert_same(t[1], c[1])  # pivots: the same choices as sytrf
    assert_same(t[2], c[2])
    assert_same(t[0], c[0], **tol(dtype))
    b = rand(6, 5, 2, dtype=dtype, seed=11)
    ld, piv = torch.linalg.ldl_factor(a)
    assert_same(*run_both(torch.linalg.ldl_solve, ld, piv, b), **tol(dtype, 1e-3))


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_det_gradients_of_noncontiguous_inputs(layout):
    # ATen's det/slogdet factor A^T only when A is contiguous, and their
    # backward solves with the LU under that same assumption: factoring A^T
    # for a non-contiguous A gave wrong gradients.
    base = rand(2, 4, 6, dtype=torch.float64, seed=13)
    a = base[0, :, :4].mT if layout == "transposed" else base[:, :, :4]
    assert not a.is_contiguous()

    def grads(x):
        x = x.detach().requires_grad_()
        g1, = torch.autograd.grad(torch.linalg.det(x).sum(), x)
        g2, = torch.autograd.grad(torch.linalg.slogdet(x)[1].sum(), x)
        g3, = torch.autograd.grad(torch.logdet(x @ x.mT).sum(), x)
        return g1, g2, g3

    t_in = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="tpu")
    t_in.copy_(a)
    assert t_in.stride() == a.stride()
    assert_same(grads(t_in), grads(a), rtol=1e-9, atol=1e-9)
    assert_same(torch.ops.aten._linalg_det(t_in), torch.ops.aten._linalg_det(a), rtol=1e-9, atol=1e-9)
