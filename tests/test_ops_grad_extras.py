"""group_norm (native_group_norm and its backward), Tensor.unfold's backward
(overlapping and gapped windows), sgn's zero gradient and one_hot, against CPU."""
from __future__ import annotations

import pytest
import torch

from conftest import assert_same, run_both


def _grads(fn, *cpu_inputs):
    """fn's output and the gradients of its inputs for a fixed cotangent, on CPU and tpu."""
    out = []
    for dev in ("cpu", "tpu"):
        xs = [x.detach().to(dev).requires_grad_(True) for x in cpu_inputs]
        y = fn(*xs)
        cot = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(dev)
        gs = torch.autograd.grad(y, xs, cot)
        out.append((y, gs))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((1, 8), 4)])
def test_group_norm_forward_and_backward(shape, groups, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    w = torch.randn(shape[1], dtype=dtype)
    b = torch.randn(shape[1], dtype=dtype)
    (cy, cg), (ty, tg) = _grads(lambda x, w, b: torch.nn.functional.group_norm(x, groups, w, b, eps=1e-5), x, w, b)
    assert_same(ty, cy)
    for t, c in zip(tg, cg):
        assert_same(t, c, rtol=1e-4, atol=1e-5)


def test_group_norm_without_affine_and_bfloat16():
    x = torch.randn(2, 4, 6)
    (cy, cg), (ty, tg) = _grads(lambda x: torch.nn.functional.group_norm(x, 2), x)
    assert_same(ty, cy)
    assert_same(tg[0], cg[0], rtol=1e-4, atol=1e-5)
    xb = x.bfloat16()
    assert_same(torch.nn.functional.group_norm(xb.to("tpu"), 2), torch.nn.functional.group_norm(xb, 2))


def test_group_norm_rejects_indivisible_channels():
    x = torch.randn(2, 5, 3)
    with pytest.raises(RuntimeError, match="divisible"):
        torch.nn.functional.group_norm(x, 2)
    with pytest.raises(RuntimeError, match="divisible"):
        torch.nn.functional.group_norm(x.to("tpu"), 2).cpu()


@pytest.mark.parametrize("dim,size,step", [(0, 3, 1), (1, 2, 3), (-1, 4, 2), (1, 1, 1), (0, 7, 1)])
def test_unfold_backward_accumulates_overlapping_windows(dim, size, step):
    x = torch.randn(7, 9)
    (cy, cg), (ty, tg) = _grads(lambda x: x.unfold(dim, size, step) * 3, x)
    assert_same(ty, cy)
    assert_same(tg[0], cg[0])


def test_sgn_gradient_is_zero():
    x = torch.tensor([-2.0, 0.0, 3.0])
    (cy, cg), (ty, tg) = _grads(torch.sgn, x)
    assert_same(ty, cy)
    assert_same(tg[0], cg[0])


@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot(num_classes):
    idx = torch.tensor([[0, 3, 1], [2, 2, 5]])
    want = torch.nn.functional.one_hot(idx, num_classes)
    got = torch.nn.functional.one_hot(idx.to("tpu"), num_classes)
    assert_same(got, want)


def test_one_hot_rejects_out_of_range_classes():
    idx = torch.tensor([0, 7])
    with pytest.raises(RuntimeError):
        torch.nn.functional.one_hot(idx, 4)
    with pytest.raises((RuntimeError, IndexError)):
        torch.nn.functional.one_hot(idx.to("tpu"), 4).cpu()


def test_backward_kernels_leave_out_what_output_mask_skips():
    # ATen returns undefined gradients where output_mask is False; DTensor's
    # sharding rules rely on it (SequenceParallel's LayerNorm backward failed),
    # and computing them anyway wastes work.
    A = torch.ops.aten
    g = torch.Generator().manual_seed(0)
    x, gy = torch.randn(2, 4, 6, generator=g), torch.randn(2, 4, 6, generator=g)
    mean, rstd = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False).add(1e-5).rsqrt()
    w, b = torch.randn(6, generator=g), torch.randn(6, generator=g)
    img, gimg = torch.randn(2, 4, 5, 5, generator=g), torch.randn(2, 4, 5, 5, generator=g)
    cw = torch.randn(4, 4, 3, 3, generator=g)
    gmean, grstd = torch.randn(2, 2, generator=g), torch.rand(2, 2, generator=g) + 0.5
    for mask in ([False, True, True], [True, False, False], [True, True, False]):
        calls = [
            lambda *t: A.native_layer_norm_backward(t[0], t[1], [6], t[2], t[3], t[4], t[5], mask),
            lambda *t: A.native_batch_norm_backward(t[6], t[7], t[4][:4], None, None, t[7].mean((0, 2, 3)),
                                                    t[7].var((0, 2, 3)).add(1e-5).rsqrt(), True, 1e-5, mask),
            lambda *t: A.native_group_norm_backward(t[6], t[7], t[9], t[10], t[4][:4], 2, 4, 25, 2, mask),
            lambda *t: A.convolution_backward(t[6][:, :, 1:4, 1:4], t[7], t[8], [4], [1, 1], [0, 0], [1, 1],
                                              False, [0, 0], 1, mask),
        ]
        for call in calls:
            t, c = run_both(call, gy, x, mean, rstd, w, b, gimg, img, cw, gmean, grstd)
            assert [r is None for r in t] == [r is None for r in c] == [not m for m in mask]
            assert_same([r for r in t if r is not None], [r for r in c if r is not None], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_unfold_backward_broadcasts_its_gradient(dtype):
    # istft's window envelope: a batch-1 gradient for a batch-2 input.
    torch.manual_seed(0)
    g = torch.randn(1, 17, 64, dtype=dtype)
    assert_same(torch.ops.aten.unfold_backward(g.to("tpu"), [2, 320], 1, 64, 16),
                torch.ops.aten.unfold_backward(g, [2, 320], 1, 64, 16), rtol=1.3e-6, atol=1e-5)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        torch.ops.aten.unfold_backward(torch.ones(3, 17, 64, device="tpu"), [2, 320], 1, 64, 16)


def test_istft_batched_compiled_and_complex():
    torch.manual_seed(0)
    w = torch.hann_window(64)
    s = torch.stft(torch.randn(2, 256), 64, 16, window=w, return_complex=True)
    f = torch.compile(lambda s, w: torch.istft(s, 64, 16, window=w), backend="tpu")
    assert_same(f(s.to("tpu"), w.to("tpu")), torch.istft(s, 64, 16, window=w), atol=1e-5)
    sc = torch.stft(torch.randn(2, 256, dtype=torch.complex64), 64, 16, window=w, return_complex=True, onesided=False)
    kw = dict(window=w, onesided=False, return_complex=True)
    got = torch.istft(sc.to("tpu"), 64, 16, **{**kw, "window": w.to("tpu")})
    assert_same(got, torch.istft(sc, 64, 16, **kw), atol=1e-5)
