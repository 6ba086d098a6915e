"""Resampling and border padding on tpu against the CPU, forward and
gradients: F.interpolate (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear, antialiased; sizes and scale factors, align_corners) and F.pad reflect /
replicate (including negative replicate padding)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def grads(fn, x, reference_dtype=None):
    """(tpu, cpu) output and input gradient. With `reference_dtype` (for
    dtypes the CPU has no kernel for) the CPU runs on the same values in that
    dtype, and its results are rounded back to x's dtype."""
    def run(x):
        x = x.clone().requires_grad_(True)
        out = fn(x)
        proj = make(out.shape, out.dtype, seed=7).to(out.device)
        (out.float() * proj.float()).sum().backward()
        return out, x.grad

    if reference_dtype is None:
        return run_both(run, x)
    cpu = tuple(t.to(x.dtype) for t in run(x.to(reference_dtype)))
    return run(x.to("tpu")), cpu


def tol(dtype):
    return dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)


INTERP = [
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 5, 4), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 7, 6), dict(size=(3, 4), mode="nearest")),
    ((1, 2, 5, 4), dict(scale_factor=1.7, mode="nearest-exact")),
    ((2, 3, 6), dict(size=11, mode="linear")),
    ((1, 2, 5, 4), dict(size=(8, 7), mode="bilinear")),
    ((1, 2, 5, 4), dict(size=(8, 3), mode="bilinear", align_corners=True)),
    ((1, 2, 6, 6), dict(scale_factor=0.6, mode="bilinear")),
    ((1, 1, 3, 4, 2), dict(size=(5, 6, 3), mode="trilinear")),
    ((1, 2, 5, 4), dict(size=(8, 3), mode="bicubic")),
    ((2, 1, 4, 6), dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    ((1, 2, 9, 7), dict(size=(4, 10), mode="bilinear", antialias=True)),
    ((1, 2, 9, 7), dict(size=(3, 5), mode="bicubic", antialias=True)),
    ((1, 2, 8, 6), dict(scale_factor=0.4, mode="bilinear", antialias=True, align_corners=True)),
    ((1, 1, 3, 4, 2), dict(scale_factor=2, mode="nearest")),
]


@pytest.mark.parametrize("case", INTERP, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_interpolate(case, dtype):
    shape, kw = case
    # The CPU has no bfloat16 antialiased kernel: the reference runs in float32.
    no_cpu_kernel = kw.get("antialias") and dtype == torch.bfloat16
    tpu, cpu = grads(lambda x: F.interpolate(x, **kw), make(shape, dtype), torch.float32 if no_cpu_kernel else None)
    assert_same(tpu, cpu, **tol(dtype))


UINT8_RESIZES = [
    ((2, 3, 17, 23), dict(size=(9, 12))),  # downscale both dims
    ((1, 3, 8, 8), dict(size=(19, 21))),  # upscale
    ((1, 4, 33, 20), dict(size=(33, 41))),  # width only: one pass
    ((1, 3, 100, 90), dict(size=(7, 5))),  # heavy downscale: wide filters, high precision
    ((2, 3, 10, 13), dict(scale_factor=1.7)),
    ((1, 3, 12, 9), dict(scale_factor=(0.5, 2.5))),
]


@pytest.mark.parametrize("case", UINT8_RESIZES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_uint8_equals_cpu_bytes(case, mode, antialias, align_corners):
    """torchvision resizes uint8 images with these: the bytes must be the
    CPU's (a separable fixed-point filter, each pass rounded to a byte), not
    a float result rounded once, which differs by up to 25 for bicubic."""
    shape, kw = case
    x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    fn = lambda x: F.interpolate(x, mode=mode, antialias=antialias, align_corners=align_corners, **kw)  # noqa: E731
    assert_same(*run_both(fn, x))
    assert_same(*run_both(fn, x.contiguous(memory_format=torch.channels_last)))


def test_interpolate_int32_is_refused_as_on_cpu():
    x = torch.randint(0, 256, (1, 1, 4, 4), dtype=torch.int32)
    with pytest.raises(RuntimeError):
        F.interpolate(x, size=(8, 8), mode="bilinear")
    with pytest.raises(NotImplementedError, match="upsample_bilinear2d.*torch.int32"):
        F.interpolate(x.to("tpu"), size=(8, 8), mode="bilinear")


def test_interpolate_nearest_keeps_inf_nan():
    x = torch.tensor([[[1.0, float("inf"), float("nan"), -2.0]]])
    assert_same(*run_both(lambda x: F.interpolate(x, size=7), x))


PADS = [
    ((2, 3, 6), (2, 3), "reflect"),
    ((1, 2, 5, 4), (1, 2, 3, 0), "reflect"),
    ((1, 2, 3, 4, 3), (1, 1, 2, 0, 1, 2), "reflect"),
    ((2, 3, 6), (2, 5), "replicate"),
    ((3, 5, 4), (1, 2, 3, 0), "replicate"),
    ((1, 2, 5, 4), (-1, 2, 3, -2), "replicate"),
    ((1, 2, 3, 4, 3), (1, 1, 2, 0, 1, 2), "replicate"),
]


@pytest.mark.parametrize("case", PADS, ids=lambda c: f"{c[2]}-{c[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pad(case, dtype):
    shape, pad, mode = case
    tpu, cpu = grads(lambda x: F.pad(x, pad, mode=mode), make(shape, dtype))
    assert_same(tpu, cpu, **tol(dtype))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_int(mode):
    x = torch.randint(-9, 9, (2, 3, 5))
    assert_same(*run_both(lambda x: F.pad(x, (2, 1), mode=mode), x))
