"""torch.fft on tpu (`ops/fft.rs`: _fft_r2c, _fft_c2c, _fft_c2r as
stablehlo.fft) against the CPU: every public transform family, each
normalization, transforms over inner and outer dimensions, gradients, and
the Fused Eager and compiled paths. (OpInfo's fft.* entries cover the
remaining dtypes and sample shapes.)"""
import pytest
import torch

from conftest import assert_same, run_both

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}

CASES = {
    "fft": lambda x: torch.fft.fft(x),
    "fft_n_dim0": lambda x: torch.fft.fft(x, n=5, dim=0),
    "ifft": lambda x: torch.fft.ifft(x),
    "fft2": lambda x: torch.fft.fft2(x),
    "ifftn_outer": lambda x: torch.fft.ifftn(x, dim=(0, 1)),
    "rfft": lambda x: torch.fft.rfft(x),
    "rfft_dim1": lambda x: torch.fft.rfft(x, dim=1),
    "rfftn": lambda x: torch.fft.rfftn(x),
    "irfft": lambda x: torch.fft.irfft(torch.fft.rfft(x)),
    "irfft_n": lambda x: torch.fft.irfft(torch.fft.rfft(x), n=9),
    "irfftn": lambda x: torch.fft.irfftn(torch.fft.rfftn(x), s=x.shape),
    "hfft": lambda x: torch.fft.hfft(x),
    "ihfft": lambda x: torch.fft.ihfft(x),
    "complex_input": lambda x: torch.fft.fft(torch.polar(x.abs(), x)),
    "fftshift_freq": lambda x: torch.fft.fftshift(torch.fft.fft(x), dim=-1),
}


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("case", CASES)
def test_transform(mode, case, norm):
    x = torch.randn(4, 6, 10)
    fn = CASES[case]
    if norm is not None and case not in ("fftshift_freq", "complex_input"):
        fn = {
            "fft": lambda x: torch.fft.fft(x, norm=norm),
            "ifft": lambda x: torch.fft.ifft(x, norm=norm),
            "rfftn": lambda x: torch.fft.rfftn(x, norm=norm),
            "irfftn": lambda x: torch.fft.irfftn(torch.fft.rfftn(x, norm=norm), s=x.shape, norm=norm),
        }.get(case, fn)
    tpu, cpu = run_both(fn, x)
    assert_same(tpu, cpu, **TOL[torch.float32])


def test_float64(mode):
    x = torch.randn(3, 16, dtype=torch.float64)
    for fn in (torch.fft.rfft, torch.fft.fft, lambda x: torch.fft.irfft(torch.fft.fft(x))):
        tpu, cpu = run_both(fn, x)
        assert_same(tpu, cpu, **TOL[torch.float64])


def test_gradients(mode):
    x = torch.randn(4, 12)
    w = torch.randn(4, 7)

    def loss(x, w):
        x = x.clone().requires_grad_()
        spec = torch.fft.rfft(x, norm="ortho")
        y = torch.fft.irfft(spec * w, n=12)
        (y.pow(2).sum() + torch.fft.fft2(x).abs().sum()).backward()
        return y, x.grad

    tpu, cpu = run_both(loss, x, w)
    assert_same(tpu, cpu, rtol=1e-4, atol=1e-4)


def test_compiled():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.fft.irfft(torch.fft.rfft(x) * 0.5, n=x.shape[-1]), backend="tpu")
    x = torch.randn(2, 16)
    assert_same(fn(x.to("tpu")), fn(x), **TOL[torch.float32])


def test_half_precision_is_refused_as_on_cpu():
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=r"Unsupported dtype BFloat16"):
            torch.fft.rfft(torch.randn(8, device=device, dtype=torch.bfloat16))


@pytest.mark.parametrize("n,d", [(5, 1.0), (4, 0.5), (6, 1.0), (1, 1.0)])
def test_fftfreq_and_fftshift(mode, n, d):
    # fftfreq writes its negative half through arange(out=) into an empty
    # view at an offset, which once got a buffer of its own.
    for fn in (torch.fft.fftfreq, torch.fft.rfftfreq):
        assert_same(fn(n, d, device="tpu"), fn(n, d))
    assert_same(torch.fft.fftshift(torch.fft.fftfreq(n, d, device="tpu")), torch.fft.fftshift(torch.fft.fftfreq(n, d)))
