"""Orthogonal factorizations on tpu vs CPU: Householder QR (geqrf, linalg.qr,
householder_product, ormqr), symmetric eigen (eigh/eigvalsh, matrix_sqrth),
SVD and what is built on it (svdvals, pinv, matrix_rank, cond, nuclear
norm, lstsq, polar), and their gradients. Eigen/singular vectors are only unique up
to sign, so they are compared through sign-invariant quantities."""
from __future__ import annotations

import pytest
import torch

from conftest import assert_same, run_both

# float32 on most cases, float64 on one each: every case compiles several
# loop-heavy programs (about 0.3-1 s each on a cold compile cache).
F32 = torch.float32
F64 = torch.float64

def tol(dt, f32=1e-4):
    return dict(rtol=f32, atol=f32) if dt == torch.float32 else dict(rtol=1e-9, atol=1e-9)


def rand(*shape, dt=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dt)


@pytest.mark.parametrize("dt,shape", [(F32, (5, 5)), (F32, (6, 3)), (F32, (3, 6)), (F32, (2, 4, 3)), (F32, (4, 0)), (F64, (2, 4, 3))])
def test_geqrf_and_qr_modes(dt, shape):
    a = rand(*shape, dt=dt)
    assert_same(*run_both(torch.geqrf, a), **tol(dt, 1e-5))
    for mode in ["reduced", "complete", "r"]:
        assert_same(*run_both(lambda x: torch.linalg.qr(x, mode=mode), a), **tol(dt, 1e-5))


@pytest.mark.parametrize("dt", [F32])
def test_householder_product_and_ormqr(dt):
    a, tau = rand(2, 6, 4, dt=dt), rand(2, 4, dt=dt, seed=1)
    assert_same(*run_both(torch.linalg.householder_product, a, tau[:, :3]), **tol(dt, 1e-5))
    assert_same(*run_both(torch.linalg.householder_product, a, tau), **tol(dt, 1e-5))
    for left in (True, False):
        for trans in (True, False):
            c = rand(2, 6, 3, dt=dt, seed=2) if left else rand(2, 3, 6, dt=dt, seed=2)
            assert_same(*run_both(lambda x, t, y: torch.ormqr(x, t, y, left, trans), a, tau, c), **tol(dt, 1e-5))


def test_ormqr_of_geqrf_applies_q():
    a, c = rand(5, 3), rand(5, 2, seed=1)
    p, tau = torch.geqrf(a.to("tpu"))
    q = torch.linalg.qr(a)[0]
    got = torch.ormqr(p, tau, c.to("tpu"), True, True)
    torch.testing.assert_close(got.cpu()[:3], q.mT @ c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt,uplo,shape", [(F32, "L", (5, 5)), (F32, "U", (3, 6, 6)), (F32, "L", (1, 1)), (F32, "U", (0, 4, 4)), (F64, "U", (5, 5))])
def test_eigh(dt, uplo, shape):
    a = rand(*shape, dt=dt)
    (w, v), (w0, v0) = run_both(lambda x: torch.linalg.eigh(x, UPLO=uplo), a)
    assert_same(w, w0, **tol(dt))
    assert_same(v.abs(), v0.abs(), **tol(dt, 1e-3))  # columns up to sign
    sym = torch.tril(a) + torch.tril(a, -1).mT if uplo == "L" else torch.triu(a) + torch.triu(a, 1).mT
    torch.testing.assert_close((v * w.unsqueeze(-2) @ v.mT).cpu(), sym, **tol(dt))
    assert_same(*run_both(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a), **tol(dt))


@pytest.mark.parametrize("dt", [F64])
def test_matrix_sqrth(dt):
    a = rand(2, 5, 5, dt=dt)
    spd = a @ a.mT + torch.eye(5, dtype=dt)
    assert_same(*run_both(torch.linalg.matrix_sqrth, spd), **tol(dt))


@pytest.mark.parametrize("dt,shape", [(F32, (5, 5)), (F32, (6, 3)), (F32, (3, 6)), (F32, (4, 1)), (F32, (0, 3, 3)), (F64, (2, 4, 3))])
def test_svd(dt, shape):
    a = rand(*shape, dt=dt)
    assert_same(*run_both(torch.linalg.svdvals, a), **tol(dt))
    k = min(shape[-2:])
    for full in (False, True):
        (u, s, vh), (u0, s0, vh0) = run_both(lambda x: torch.linalg.svd(x, full_matrices=full), a)
        assert u.shape == u0.shape and vh.shape == vh0.shape
        assert_same(s, s0, **tol(dt))
        u, s, vh = u.cpu(), s.cpu(), vh.cpu()
        torch.testing.assert_close(u[..., :k] * s.unsqueeze(-2) @ vh[..., :k, :], a, **tol(dt))
        eye_u = torch.eye(u.shape[-1], dtype=dt).expand(u.mT.shape[:-1] + (u.shape[-1],))
        torch.testing.assert_close(u.mT @ u, eye_u, **tol(dt))
        eye_v = torch.eye(vh.shape[-2], dtype=dt).expand(vh.shape[:-1] + (vh.shape[-2],))
        torch.testing.assert_close(vh @ vh.mT, eye_v, **tol(dt))


@pytest.mark.parametrize("dt", [F64])
def test_svd_rank_deficient(dt):
    a = rand(6, 2, dt=dt) @ rand(2, 5, dt=dt, seed=1)
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu")))
    assert_same(*run_both(torch.linalg.svdvals, a), **tol(dt))
    torch.testing.assert_close(u.mT @ u, torch.eye(6, dtype=dt), **tol(dt))
    torch.testing.assert_close(u[:, :5] * s @ vh, a, **tol(dt))
    assert_same(*run_both(torch.linalg.matrix_rank, a))
    assert_same(*run_both(lambda x: torch.linalg.matrix_rank(x @ x.mT, hermitian=True), a))


@pytest.mark.parametrize("dt", [F32])
def test_svd_consumers(dt):
    a = rand(3, 4, 4, dt=dt) + 3 * torch.eye(4, dtype=dt)
    assert_same(*run_both(torch.linalg.pinv, a), **tol(dt))
    assert_same(*run_both(lambda x: torch.linalg.pinv(x @ x.mT, hermitian=True), a), **tol(dt))
    assert_same(*run_both(torch.linalg.cond, a), **tol(dt))
    assert_same(*run_both(lambda x: torch.linalg.matrix_norm(x, "nuc"), a), **tol(dt))
    assert_same(*run_both(lambda x: torch.linalg.matrix_norm(x, 2), a), **tol(dt))
    assert_same(*run_both(torch.pinverse, rand(5, 3, dt=dt)), **tol(dt))


@pytest.mark.parametrize("dt,driver,m,n", [(F32, "gels", 5, 3), (F32, "gelsy", 3, 5), (F32, "gelsd", 5, 3), (F32, "gelss", 4, 4), (F64, "gelsd", 3, 5)])
def test_lstsq(dt, driver, m, n):
    a, b = rand(2, m, n, dt=dt), rand(2, m, 2, dt=dt, seed=1)
    assert_same(*run_both(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)), a, b), **tol(dt))


def test_lstsq_vector_rhs_and_broadcast():
    a, b = rand(2, 5, 3), rand(2, 5, seed=1)
    assert_same(*run_both(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver="gelsd")), a, b), **tol(torch.float32))
    b2 = rand(1, 5, 2, seed=2)
    assert_same(*run_both(lambda x, y: tuple(torch.linalg.lstsq(x, y)), a, b2), **tol(torch.float32))


def _grads(fn, *inputs):
    """Gradients of sum(fn(*inputs) * fixed cotangents) on CPU and tpu."""
    out = []
    for dev in ("cpu", "tpu"):
        xs = [x.detach().to(dev).requires_grad_(True) for x in inputs]
        ys = fn(*xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        g = torch.Generator().manual_seed(7)
        loss = sum((y * torch.randn(y.shape, generator=g, dtype=y.dtype).to(dev)).sum() for y in ys)
        out.append(torch.autograd.grad(loss, xs))
    return out


@pytest.mark.parametrize(
    "name,fn",
    [
        ("qr", lambda x: torch.linalg.qr(x)),
        ("svd_gauge_free", lambda x: (torch.linalg.svdvals(x), (lambda u, s, vh: u * s.unsqueeze(-2) @ vh)(*torch.linalg.svd(x, full_matrices=False)))),
        ("eigh_gauge_free", lambda x: (lambda w, v: (w, v * v))(*torch.linalg.eigh(x))),
        ("pinv", torch.linalg.pinv),
        ("lstsq", lambda x: torch.linalg.lstsq(x, x[..., :2] + 1.0).solution),
        ("polar", lambda x: tuple(torch.linalg.polar(x))),
    ],
)
def test_gradients(name, fn):
    a = rand(2, 5, 4) + torch.eye(5, 4)
    if name == "eigh_gauge_free":
        a = rand(2, 4, 4)
    cpu, tpu = _grads(fn, a)
    for g0, g1 in zip(cpu, tpu):
        torch.testing.assert_close(g1.cpu(), g0, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dt,shape", [(F32, (5, 3)), (F32, (4, 4)), (F32, (2, 6, 2)), (F32, (0, 3, 3)), (F32, (3, 0)), (F64, (2, 5, 4))])
def test_polar(dt, shape):
    # U and H are unique for full column rank, so they compare directly.
    a = rand(*shape, dt=dt)
    (u, h), (u0, h0) = run_both(lambda x: tuple(torch.linalg.polar(x)), a)
    assert_same(u, u0, **tol(dt, 1e-5))
    assert_same(h, h0, **tol(dt, 1e-5))


def test_polar_rejects_wide_matrices_like_cpu():
    a = rand(2, 3)
    with pytest.raises(RuntimeError, match="at least as many rows as columns, but got 2 by 3"):
        torch.linalg.polar(a.to("tpu"))
    torch.testing.assert_close(torch.linalg.polar(a.mT.to("tpu")).U.cpu(), torch.linalg.polar(a.mT).U, rtol=1e-5, atol=1e-5)


def test_errors_match_cpu_types():
    for fn in (
        lambda x: torch.linalg.qr(x, mode="bad"),
        lambda x: torch.linalg.eigh(x[:, :3]),
        lambda x: torch.linalg.eigh(x.long()),
        lambda x: torch.linalg.lstsq(x, x, driver="nope"),
    ):
        a = rand(4, 4)
        with pytest.raises(RuntimeError):
            fn(a)
        with pytest.raises(RuntimeError):
            fn(a.to("tpu"))
