"""Complex linear algebra on tpu against the CPU (LAPACK/MKL), in complex64
and complex128, forward and gradients of real losses: the LU family
(lu_factor, lu, lu_unpack, solve, inv, det, slogdet; lu_solve is in
test_ops_linalg_lu.py), the Cholesky family (cholesky, cholesky_ex,
cholesky_solve, cholesky_inverse, solve_triangular, triangular_solve),
Householder QR, SVD, eigh and lstsq."""
from __future__ import annotations

import pytest
import torch

import torch_tpu_rs
from conftest import assert_same, grads_of, run_both

COMPLEX = [torch.complex64, torch.complex128]


def crand(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.complex128).to(dtype)


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == torch.complex64 else dict(rtol=1e-9, atol=1e-9)


def hpd(*shape, dtype, seed):
    """Hermitian positive-definite matrices."""
    a = crand(*shape, dtype=torch.complex128, seed=seed)
    n = shape[-1]
    return (a @ a.mH + n * torch.eye(n, dtype=torch.complex128)).to(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_lu_factor_pivots_match_zgetrf(dtype):
    # Pivots follow LAPACK's |re| + |im| (izamax), not the modulus: in column 0,
    # 3+3j has the larger |re| + |im| (6 > 5) but the smaller modulus (4.24 < 5).
    a = torch.tensor([[1 + 0j, 2, 0], [3 + 3j, 1, 1j], [5 + 0j, 0, 2]], dtype=dtype)
    t, c = run_both(torch.linalg.lu_factor_ex, a)
    assert_same(t[1], c[1])
    assert c[1][0].item() == 2  # the |re| + |im| rule picked row 2 (1-based)
    assert_same(t, c, **tol(dtype))
    for shape in [(5, 5), (2, 3, 4, 6), (6, 4), (0, 3, 3)]:
        t, c = run_both(torch.linalg.lu_factor_ex, crand(*shape, dtype=dtype, seed=1))
        assert_same(t, c, **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_lu_and_unpack(dtype):
    a = crand(2, 4, 6, dtype=dtype, seed=2)
    assert_same(*run_both(torch.linalg.lu, a), **tol(dtype))
    lu, piv = torch.linalg.lu_factor(a)
    assert_same(*run_both(torch.lu_unpack, lu, piv), **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_solve_inv_det(dtype):
    a = crand(3, 5, 5, dtype=dtype, seed=5)
    b = crand(3, 5, 2, dtype=dtype, seed=6)
    assert_same(*run_both(torch.linalg.solve, a, b), **tol(dtype))
    assert_same(*run_both(lambda x, y: torch.linalg.solve(x, y, left=False), a, b.mT), **tol(dtype))
    assert_same(*run_both(torch.linalg.solve, a, b[..., 0]), **tol(dtype))
    assert_same(*run_both(torch.linalg.inv, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.det, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.slogdet, a), **tol(dtype))
    assert_same(*run_both(torch.logdet, hpd(5, 5, dtype=dtype, seed=7)), **tol(dtype))
    # The LU that det returns is of A itself for complex A (the backward relies on it).
    assert_same(*run_both(torch.ops.aten._linalg_det, a), **tol(dtype))
    assert_same(*run_both(torch.ops.aten._linalg_slogdet, a), **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(dtype, upper):
    a = hpd(2, 4, 4, dtype=dtype, seed=8)
    b = crand(2, 4, 3, dtype=dtype, seed=9)
    assert_same(*run_both(lambda x: torch.linalg.cholesky(x, upper=upper), a), **tol(dtype))
    assert_same(*run_both(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a), **tol(dtype))
    f = torch.linalg.cholesky(a, upper=upper)
    assert_same(*run_both(lambda y, x: torch.cholesky_solve(y, x, upper=upper), b, f), **tol(dtype))
    assert_same(*run_both(lambda x: torch.cholesky_inverse(x, upper=upper), f), **tol(dtype))
    for left in (True, False):
        rhs = b if left else b.mT
        t, c = run_both(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left), f, rhs)
        assert_same(t, c, **tol(dtype))
    for transpose in (False, True):
        t, c = run_both(lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=transpose), b, f)
        assert_same(t, c, **tol(dtype))


def _fails_at_pivot_3():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(5, 5, generator=g, dtype=torch.float64)
    a = m @ m.mT + 5 * torch.eye(5, dtype=torch.float64)
    a[2, 2] = -50.0
    return a


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_cholesky_reads_one_triangle_and_a_real_diagonal(dtype):
    # LAPACK reads only the triangle `upper` names, and only the real part of
    # a complex diagonal: garbage elsewhere must not matter.
    a = hpd(2, 4, 4, dtype=dtype, seed=22)
    garbage = a.clone()
    rows, cols = torch.tril_indices(4, 4, -1)
    garbage[:, rows, cols] = 9.0
    assert_same(*run_both(lambda x: torch.linalg.cholesky_ex(x, upper=True), garbage), **tol(dtype))
    garbage = a.clone()
    garbage[:, cols, rows] = 9.0
    assert_same(*run_both(lambda x: torch.linalg.cholesky_ex(x, upper=False), garbage), **tol(dtype))
    if dtype.is_complex:
        imag_diag = a + 0.5j * torch.eye(4, dtype=dtype)
        assert_same(*run_both(torch.linalg.cholesky_ex, imag_diag), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_cholesky_not_positive_definite(dtype):
    # Like LAPACK's potrf: info is the first non-positive pivot (1-based) and
    # L holds the factorization up to it (XLA alone gives all NaN, info 1).
    mats = [
        torch.tensor([[1., 2], [2, 1]]),
        torch.tensor([[4., 2, 0], [2, 1, 0], [0, 0, 1]]),  # singular: pivot 2 is 0
        torch.tensor([[float("nan"), 0], [0, 1.]]),
        torch.stack([torch.tensor([[1., 2], [2, 1]]), 3 * torch.eye(2)]),  # one bad, one good
        torch.zeros(1, 1),  # sqrt(0) = 0: XLA reports no failure
        _fails_at_pivot_3(),  # below and right of the failed pivot keep A's values (left-looking potf2)
    ]
    for a in mats:
        t, c = run_both(torch.linalg.cholesky_ex, a.to(dtype))
        assert_same(t, c, **tol(torch.complex64))
        assert_same(*run_both(lambda x: torch.linalg.cholesky_ex(x, upper=True), a.to(dtype)), **tol(torch.complex64))
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(mats[0].to(dtype).to("tpu"))
    torch.tpu.synchronize()
    assert_same(*run_both(torch.linalg.cholesky, hpd(3, 3, dtype=torch.complex64, seed=1)), **tol(torch.complex64))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_gradients(dtype, mode):
    a = crand(2, 4, 4, dtype=dtype, seed=10)
    b = crand(2, 4, 3, dtype=dtype, seed=11)
    h = hpd(2, 4, 4, dtype=dtype, seed=12)
    fns = [
        lambda x, y: torch.linalg.solve(x, y).abs().sum(),
        lambda x, y: torch.linalg.det(x).abs().sum(),
        lambda x, y: torch.linalg.slogdet(x)[1].sum(),
        lambda x, y: torch.linalg.inv(x).real.sum(),
        lambda x, y: torch.view_as_real(torch.linalg.lu_factor(x)[0]).sum(),
        lambda x, y: torch.view_as_real(torch.linalg.cholesky(x @ x.mH + 4 * torch.eye(4, device=x.device))).sum(),
        lambda x, y: torch.cholesky_solve(y, torch.linalg.cholesky(x @ x.mH + 4 * torch.eye(4, device=x.device))).abs().sum(),
    ]
    torch_tpu_rs.set_eager_mode(mode)
    for f in fns:
        assert_same(*run_both(lambda x, y: grads_of(f, x, y), a, b), **tol(dtype))
    assert_same(*run_both(lambda x: torch.linalg.cholesky(x), h), **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_householder_qr(dtype, shape):
    # zgeqrf's reflectors: real beta on R's diagonal, complex tau.
    a = crand(*shape, dtype=dtype, seed=13)
    assert_same(*run_both(torch.geqrf, a), **tol(dtype))
    for mode in ("reduced", "complete", "r"):
        assert_same(*run_both(lambda x: torch.linalg.qr(x, mode=mode), a), **tol(dtype))
    p, tau = torch.geqrf(a)
    if shape[-2] >= shape[-1]:
        assert_same(*run_both(torch.linalg.householder_product, p, tau), **tol(dtype))
    m = shape[-2]
    for left in (True, False):
        for transpose in (False, True):
            c = crand(*shape[:-2], m, 2, dtype=dtype, seed=14) if left else crand(*shape[:-2], 2, m, dtype=dtype, seed=14)
            t, cc = run_both(lambda x, y, z: torch.ormqr(x, y, z, left=left, transpose=transpose), p, tau, c)
            assert_same(t, cc, **tol(dtype))


def test_householder_qr_real_alpha_only():
    # A column whose entries below the diagonal are zero but whose diagonal
    # is not real still gets a reflector (tau != 0), as in zlarfg.
    a = torch.tensor([[1 + 2j, 3], [0, 4 - 1j]], dtype=torch.complex128)
    assert_same(*run_both(torch.geqrf, a), **tol(torch.complex128))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_qr_gradients(mode):
    a = crand(4, 3, dtype=torch.complex128, seed=15)
    torch_tpu_rs.set_eager_mode(mode)

    def grad(x):
        x = x.clone().requires_grad_()
        q, r = torch.linalg.qr(x)
        loss = torch.view_as_real(q).sum() + r.abs().sum()
        return torch.autograd.grad(loss, x)[0]
    assert_same(*run_both(grad, a), **tol(torch.complex128))


def _phase_free(u):
    """Singular/eigen vectors are defined up to a phase per column: compare |u|."""
    return u.abs()


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svd(dtype, shape):
    a = crand(*shape, dtype=dtype, seed=16)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=False)
    cu, cs, cvh = torch.linalg.svd(a, full_matrices=False)
    assert s.dtype == cs.dtype  # real singular values
    assert_same(s, cs, **tol(dtype))
    assert_same(_phase_free(u), _phase_free(cu), **tol(dtype))
    assert_same(_phase_free(vh), _phase_free(cvh), **tol(dtype))
    recon = u @ torch.diag_embed(s).to(dtype) @ vh
    assert_same(recon, a, **tol(dtype))
    k = s.shape[-1]
    eye = torch.eye(k, dtype=dtype)
    assert_same(u.mH @ u, eye.expand(*shape[:-2], k, k), **tol(dtype))
    uf, _, vhf = torch.linalg.svd(a.to("tpu"), full_matrices=True)
    m, n = shape[-2:]
    assert uf.shape[-2:] == (m, m) and vhf.shape[-2:] == (n, n)
    assert_same(uf.mH @ uf, torch.eye(m, dtype=dtype).expand(*shape[:-2], m, m), **tol(dtype))
    assert_same(vhf @ vhf.mH, torch.eye(n, dtype=dtype).expand(*shape[:-2], n, n), **tol(dtype))
    assert_same(*run_both(torch.linalg.svdvals, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.pinv, a), **tol(dtype))
    assert_same(*run_both(torch.linalg.matrix_rank, a))
    assert_same(*run_both(lambda x: torch.linalg.matrix_norm(x, "nuc"), a), **tol(dtype))
    if m >= n:  # the polar decomposition is unique: compare it as is
        assert_same(*run_both(torch.linalg.polar, a), **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    a = crand(3, 5, 5, dtype=dtype, seed=17)  # not Hermitian: only one triangle is read
    w, v = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
    cw, cv = torch.linalg.eigh(a, UPLO=uplo)
    assert w.dtype == cw.dtype
    assert_same(w, cw, **tol(dtype))
    assert_same(_phase_free(v), _phase_free(cv), **tol(dtype))
    h = cv @ torch.diag_embed(cw).to(dtype) @ cv.mH  # the Hermitian matrix eigh read
    assert_same(h.to("tpu") @ v, (v * w.unsqueeze(-2).to(dtype)).cpu(), **tol(dtype))
    assert_same(*run_both(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a), **tol(dtype))
    assert_same(*run_both(lambda x: torch.linalg.matrix_rank(x, hermitian=True), h))
    assert_same(*run_both(lambda x: torch.linalg.pinv(x, hermitian=True), h), **tol(dtype))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_svd_eigh_gradients(mode):
    dtype = torch.complex128
    a = crand(4, 3, dtype=dtype, seed=18)
    h = hpd(4, 4, dtype=dtype, seed=19)
    torch_tpu_rs.set_eager_mode(mode)
    fns = [
        lambda x: torch.linalg.svdvals(x).sum(),
        lambda x: torch.linalg.pinv(x).abs().sum(),
        lambda x: torch.linalg.matrix_norm(x, "nuc"),
        lambda x: (lambda u, s, vh: (u @ torch.diag_embed(s).to(x.dtype) @ vh).real.sum())(*torch.linalg.svd(x, full_matrices=False)),
    ]
    for f in fns:
        assert_same(*run_both(lambda x: grads_of(f, x), a), **tol(dtype))
    assert_same(*run_both(lambda x: grads_of(lambda y: torch.linalg.eigvalsh(y).pow(2).sum(), x), h), **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gels"])
def test_lstsq(dtype, driver):
    for shape_a, shape_b in [((6, 3), (6, 2)), ((3, 6), (3, 2)), ((2, 5, 4), (2, 5))]:
        a = crand(*shape_a, dtype=dtype, seed=20)
        b = crand(*shape_b, dtype=dtype, seed=21)
        t = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
        c = torch.linalg.lstsq(a, b, driver=driver)
        assert_same(t.solution, c.solution, **tol(dtype))
        if c.residuals.numel():
            assert_same(t.residuals, c.residuals, **tol(dtype))
        if driver != "gels":
            assert_same(t.rank, c.rank)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("scale", [1e-3, 0.3, 2.0, 40.0])
def test_matrix_exp_complex(dtype, scale):
    # Each scale picks another Taylor degree; 40 needs scaling and squaring.
    torch.manual_seed(0)
    a = torch.randn(4, 4, dtype=dtype) * scale
    batch = torch.randn(3, 5, 5, dtype=dtype) * scale
    rel = 2e-5 if dtype == torch.complex64 else 1e-12
    for x in (a, batch):
        ref = torch.linalg.matrix_exp(x)
        got = torch.linalg.matrix_exp(x.to("tpu")).cpu()
        # Error relative to the result's largest entry (squaring spreads it).
        assert ((got - ref).abs().max() / ref.abs().max()).item() < rel
