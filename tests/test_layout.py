"""Memory layouts of new results, against the CPU: pointwise ops lay out
their output like their inputs (TensorIterator's rule; so do a few untagged
ones, such as flip, and out= tensors they resize), and convolutions,
batch norm, pooling and resampling keep channels-last inputs channels-last,
so `y.permute(0, 2, 3, 1).view(n, -1, c)` code written for NHWC runs on tpu
as on the CPU and CUDA. In Strict and Fused Eager."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu_rs
from conftest import assert_same, run_both


@pytest.fixture(params=["strict", "fused"])
def mode(request):
    torch_tpu_rs.set_eager_mode(request.param)
    yield request.param
    torch_tpu_rs.set_eager_mode("strict")


def g(seed=0):
    return torch.Generator().manual_seed(seed)


INPUTS = {
    "channels_last": lambda: torch.randn(2, 3, 4, 5, generator=g()).contiguous(memory_format=torch.channels_last),
    "channels_last_c1": lambda: torch.randn(2, 1, 4, 5, generator=g()).contiguous(memory_format=torch.channels_last),
    "channels_last_3d": lambda: torch.randn(2, 3, 2, 4, 5, generator=g()).contiguous(memory_format=torch.channels_last_3d),
    "transposed": lambda: torch.randn(5, 3, generator=g()).t(),
    "permuted_3d": lambda: torch.randn(4, 5, 6, generator=g()).permute(2, 0, 1),
    "strided_slice": lambda: torch.randn(4, 6, generator=g())[:, ::2],
    "expanded": lambda: torch.randn(3, 1, generator=g()).expand(3, 4),
}

# Pointwise ops that PyTorch does not allocate for us (it does for
# structured ones such as add): the engine lays out their outputs.
UNARY = {
    "relu": torch.relu,
    "abs": torch.abs,
    "hardtanh": F.hardtanh,
    "leaky_relu": F.leaky_relu,
    "isnan": torch.isnan,
    "logical_not": torch.logical_not,
    "nan_to_num": torch.nan_to_num,
    "where_scalar": lambda x: torch.where(x > 0, x, 0.0),
}


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("layout", INPUTS)
def test_pointwise_output_takes_the_input_layout(mode, op, layout):
    assert_same(*run_both(UNARY[op], INPUTS[layout]()), check_strides=True)


def cl(*shape, seed=0):
    return torch.randn(*shape, generator=g(seed)).contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    "x, y",
    [
        (cl(2, 3, 4, 5), torch.randn(2, 3, 4, 5)),  # layouts disagree: the first input decides
        (torch.randn(2, 3, 4, 5), cl(2, 3, 4, 5)),
        (cl(2, 3, 4, 5), torch.randn(5)),  # broadcast
        (cl(2, 3, 4, 5), torch.randn(3, 1, 1)),
        (torch.randn(5, 3).t(), torch.randn(3, 5)),
    ],
    ids=["cl-contiguous", "contiguous-cl", "cl-row", "cl-channel", "transposed-contiguous"],
)
def test_binary_pointwise_layout_follows_tensor_iterator(mode, x, y):
    assert_same(*run_both(lambda x, y: torch.where(x > 0, x, y), x, y), check_strides=True)
    assert_same(*run_both(lambda x, y: x.masked_fill(y > 0, 1.0), x, y), check_strides=True)


# Ops PyTorch does not tag `pointwise` whose CPU kernels still lay out their
# results by TensorIterator's rule (`layout.rs`): code such as
# `x.t().flip(0).view(-1)` must fail or succeed on tpu as on the CPU.
UNTAGGED = {
    "flip": lambda x, y: x.flip(0),
    "fliplr": lambda x, y: x.fliplr(),
    "rsub": lambda x, y: torch.rsub(x, y),  # runs as y - x: y decides ties
    "floor_divide": lambda x, y: torch.floor_divide(x, y.abs() + 1),
    "hardswish": lambda x, y: F.hardswish(x),
    "complex": lambda x, y: torch.complex(x, y),
    "polar": lambda x, y: torch.polar(x.abs(), y),
    "huber_loss": lambda x, y: F.huber_loss(x, y, reduction="none"),
    "native_dropout": lambda x, y: torch.ops.aten.native_dropout(x, 0.0, True),
}

PAIRS = {
    "transposed-contiguous": lambda: (torch.randn(5, 3, generator=g(1)).t(), torch.randn(3, 5, generator=g(2))),
    "contiguous-transposed": lambda: (torch.randn(3, 5, generator=g(1)), torch.randn(5, 3, generator=g(2)).t()),
    "permuted_3d": lambda: (torch.randn(4, 5, 6, generator=g(1)).permute(2, 0, 1), torch.randn(4, 5, 6, generator=g(2)).permute(2, 0, 1)),
}


@pytest.mark.parametrize("op", UNTAGGED)
@pytest.mark.parametrize("pair", PAIRS)
def test_untagged_tensor_iterator_ops_keep_the_input_layout(mode, op, pair):
    assert_same(*run_both(UNTAGGED[op], *PAIRS[pair]()), check_strides=True, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("out_shape", [(0,), (2, 2)], ids=["empty_out", "wrong_shape_out"])
def test_resized_out_takes_the_layout_the_cpu_gives_it(mode, out_shape):
    """A TensorIterator op resizing its out= restrides it like a new result;
    a matmul's resized out= stays contiguous."""

    def fn(x, y):
        outs = [torch.empty(out_shape, device=x.device) for _ in range(3)]
        torch.add(x, y, out=outs[0])
        torch.abs(x, out=outs[1])
        torch.mm(x, y.t(), out=outs[2])
        c = torch.complex(x, y, out=torch.empty(out_shape, dtype=torch.complex64, device=x.device))
        d = torch.floor_divide(x, y.abs() + 1, out=torch.empty(out_shape, device=x.device))
        h = torch._C._nn.hardswish(x, out=torch.empty(out_shape, device=x.device))
        return outs + [c, d, h]

    x = torch.randn(5, 3, generator=g(1)).t()
    tpu, cpu = run_both(fn, x, torch.randn(3, 5, generator=g(2)))
    assert not cpu[0].is_contiguous() and cpu[2].is_contiguous()
    assert_same(tpu, cpu, check_strides=True, rtol=1e-5, atol=1e-5)


def test_view_after_flip_of_a_transpose_fails_as_on_the_cpu():
    x = torch.randn(4, 6, generator=g())
    for t in (x, x.to("tpu")):
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            t.t().flip(0).view(-1)


LAYERS = {
    "conv": lambda: nn.Conv2d(3, 4, 3),
    "conv_transpose": lambda: nn.ConvTranspose2d(3, 4, 3),
    "batch_norm": lambda: nn.BatchNorm2d(3),
    "max_pool": lambda: nn.MaxPool2d(2),
    "avg_pool": lambda: nn.AvgPool2d(2),
    "adaptive_avg_pool": lambda: nn.AdaptiveAvgPool2d(3),
    "upsample_nearest": lambda: nn.Upsample(scale_factor=2),
    "upsample_bilinear": lambda: nn.Upsample(scale_factor=2, mode="bilinear"),
}


@pytest.mark.parametrize("layer", LAYERS)
def test_channels_last_input_gives_channels_last_output(mode, layer):
    def fn(x):
        torch.manual_seed(0)
        y = LAYERS[layer]().to(x.device)(x)
        c = y.shape[1]
        # NHWC code: only valid when y is channels-last, as on the CPU.
        return y, y.permute(0, 2, 3, 1).view(-1, c)

    tpu, cpu = run_both(fn, cl(2, 3, 8, 8))
    assert cpu[0].is_contiguous(memory_format=torch.channels_last)
    assert_same(tpu, cpu, check_strides=True, rtol=1e-5, atol=1e-5)


def test_convolution_follows_a_channels_last_weight(mode):
    def fn(x):
        torch.manual_seed(0)
        conv = nn.Conv2d(3, 4, 3).to(x.device).to(memory_format=torch.channels_last)
        return conv(x)

    assert_same(*run_both(fn, torch.randn(2, 3, 8, 8, generator=g())), check_strides=True, rtol=1e-5, atol=1e-5)


def test_contiguous_input_stays_contiguous(mode):
    def fn(x):
        torch.manual_seed(0)
        return F.max_pool2d(torch.relu(nn.Conv2d(3, 4, 3).to(x.device)(x)), 2)

    assert_same(*run_both(fn, torch.randn(2, 3, 8, 8, generator=g())), check_strides=True, rtol=1e-5, atol=1e-5)


def channels_last_net():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 5),
    ).to(memory_format=torch.channels_last)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_channels_last_network_trains_like_cpu(mode, compiled):
    def losses(device, compile_it):
        torch.manual_seed(0)
        model = channels_last_net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = cl(4, 3, 12, 12, seed=1).to(device)
        y = torch.randint(0, 5, (4,), generator=g(2)).to(device)

        def step():
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if compile_it:
            torch._dynamo.reset()
            step = torch.compile(step, backend="tpu")
        out = [step().item() for _ in range(4)]
        return out, model[0].weight.stride()

    cpu, cpu_stride = losses("cpu", False)
    tpu, tpu_stride = losses("tpu", compiled)
    assert tpu == pytest.approx(cpu, rel=1e-4)
    assert tpu_stride == cpu_stride
