"""Tensor semantics as on CPU: views, in-place ops, copies, printing,
save/load, random numbers."""
import io

import pytest
import torch

from conftest import assert_same, run_both


def test_views_share_storage_with_cpu_strides():
    base = torch.arange(24.0).reshape(2, 3, 4)
    views = [
        lambda x: x.transpose(0, 2),
        lambda x: x.permute(2, 0, 1),
        lambda x: x[:, 1:, ::2],
        lambda x: x[1],
        lambda x: x.select(2, 3),
        lambda x: x.view(6, 4),
        lambda x: x.reshape(4, 6),
        lambda x: x[:, :, :1].expand(2, 3, 5),
        lambda x: x.unsqueeze(1).squeeze(1),
        lambda x: x.narrow(1, 1, 2),
        lambda x: x.split(2, dim=2)[1],
        lambda x: x.chunk(3, dim=1)[2],
        lambda x: x.flatten()[5:17:3],
        lambda x: x.as_strided((2, 2), (5, 1), 3),
    ]
    for f in views:
        t, c = run_both(f, base)
        assert_same(t, c, check_strides=True)


def test_view_shares_data_with_base():
    x = torch.zeros(3, 4, device="tpu")
    v = x[1]
    assert v.data_ptr() == x.data_ptr() + 4 * 4
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_inplace_on_views_updates_base():
    def f(x):
        x = x.clone()
        x[1] += 5
        x[:, 2].mul_(2)
        x.t()[0].fill_(-1)
        x[0, 1:3] = torch.tensor([7.0, 8.0], device=x.device)
        return x

    assert_same(*run_both(f, torch.arange(12.0).reshape(3, 4)))


def test_copy_both_directions_noncontiguous():
    cpu = torch.arange(20.0).reshape(4, 5)
    dev = torch.zeros(5, 4, device="tpu")
    dev.copy_(cpu.t())  # non-contiguous source, host -> device
    assert torch.equal(dev.cpu(), cpu.t())
    back = torch.empty(4, 5)
    back.t().copy_(dev)  # device -> non-contiguous host destination
    assert torch.equal(back, cpu)
    dev2 = torch.zeros(4, 5, device="tpu")
    dev2.copy_(dev.t())  # device -> device, non-contiguous source
    assert torch.equal(dev2.cpu(), cpu)
    assert torch.equal(dev.t()[1:3].cpu(), cpu[1:3])


def test_to_and_dtype_conversion():
    cpu = torch.randn(3, 4)
    t = cpu.to("tpu", dtype=torch.float64)
    assert t.dtype == torch.float64 and t.device.type == "tpu"
    assert_same(t.to(torch.int32), cpu.double().to(torch.int32))
    assert_same(t.to(torch.bfloat16), cpu.double().to(torch.bfloat16))
    assert torch.equal(cpu.to("tpu").to("cpu"), cpu)


def test_printing():
    x = torch.tensor([[1.5, -2.0], [0.0, 3.25]], device="tpu")
    s = repr(x)
    assert "tensor([[ 1.5000, -2.0000]" in s and "device='tpu:0'" in s
    assert "device='tpu:0'" in repr(torch.arange(3, device="tpu"))


def test_save_load_roundtrip_and_map_location(tmp_path):
    model = torch.nn.Linear(4, 3).to("tpu")
    x = torch.randn(2, 5, device="tpu")[:, 1:]
    buf = io.BytesIO()
    torch.save({"state": model.state_dict(), "x": x}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["x"].device.type == "tpu"
    assert torch.equal(loaded["x"].cpu(), x.cpu())
    for k, v in model.state_dict().items():
        assert loaded["state"][k].device.type == "tpu"
        assert torch.equal(loaded["state"][k].cpu(), v.cpu())
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["x"].device.type == "cpu" and torch.equal(on_cpu["x"], x.cpu())
    path = tmp_path / "cpu.pt"
    torch.save({"w": torch.arange(6.0)}, path)
    to_tpu = torch.load(path, map_location="tpu")
    assert to_tpu["w"].device.type == "tpu" and torch.equal(to_tpu["w"].cpu(), torch.arange(6.0))


def test_rng_reproducible_under_manual_seed():
    torch.manual_seed(42)
    a = torch.randn(16, device="tpu")
    b = torch.rand(16, device="tpu")
    torch.manual_seed(42)
    a2 = torch.randn(16, device="tpu")
    b2 = torch.rand(16, device="tpu")
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    assert not torch.equal(a.cpu(), torch.randn(16, device="tpu").cpu())


def test_storage_resize_keeps_data():
    x = torch.arange(4.0, device="tpu")
    x.resize_(8)
    assert x.shape == (8,)
    assert x[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_empty_tensors():
    e = torch.empty(0, 3, device="tpu")
    assert e.shape == (0, 3)
    assert e.cpu().shape == (0, 3)
    assert (e + 1).shape == (0, 3)


class TiedLM(torch.nn.Module):
    """An embedding and an output head sharing one weight (GPT-2, Llama with
    tie_word_embeddings)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.emb(x))


def test_module_to_tpu_keeps_parameters_tied_and_optimizers_valid(mode):
    """As for CUDA, `module.to("tpu")` moves each Parameter's data in place:
    tied weights stay one Parameter, and an optimizer built before `.to()`
    updates the module."""
    cpu = TiedLM()
    model = TiedLM()
    weight = model.emb.weight
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)  # built before .to()
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=0.1)
    model.to("tpu")
    assert model.emb.weight is weight and model.head.weight is weight
    assert weight.device.type == "tpu" and len(list(model.parameters())) == 1
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    for _ in range(3):
        model(x.to("tpu")).square().mean().backward()
        opt.step()
        opt.zero_grad()
        cpu(x).square().mean().backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
    assert_same(model.head.weight.detach(), cpu.head.weight.detach(), rtol=1e-5, atol=1e-6)
    model.cpu()
    assert model.emb.weight is weight and weight.device.type == "cpu"
    torch.testing.assert_close(weight.detach(), cpu.emb.weight.detach(), rtol=1e-5, atol=1e-6)


def test_shallow_copy_compatibility_is_only_for_dense_tensors():
    cpu, tpu = torch.zeros(1), torch.zeros(1, device="tpu")
    assert torch._has_compatible_shallow_copy_type(cpu, tpu)
    assert torch._has_compatible_shallow_copy_type(tpu, cpu)
    assert not torch._has_compatible_shallow_copy_type(torch.zeros(1, device="meta"), tpu)
    assert not torch._has_compatible_shallow_copy_type(torch.zeros(2).to_sparse(), tpu)
    with torch.inference_mode():
        assert torch._has_compatible_shallow_copy_type(cpu, tpu)
    p = torch.nn.Parameter(torch.ones(2))
    p.data = torch.full((2,), 3.0, device="tpu")  # as `p.data = t.cuda()` works
    assert p.device.type == "tpu" and p.cpu().tolist() == [3.0, 3.0]


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_replays_the_random_state_so_dropout_masks_match(mode, reentrant):
    # torch.utils.checkpoint stashes the device's random state only when
    # torch.tpu._initialized says the device is up; without it the
    # recomputed dropout mask differed and the gradients were wrong.
    from torch.utils.checkpoint import checkpoint

    assert torch.tpu._initialized
    lin = torch.nn.Linear(32, 32).to("tpu")

    def block(t):
        return torch.nn.functional.dropout(lin(t), 0.5).relu()

    grads = []
    for use_checkpoint in (False, True):
        lin.zero_grad()
        torch.manual_seed(11)
        x = torch.ones(8, 32, device="tpu", requires_grad=True)
        y = checkpoint(block, x, use_reentrant=reentrant) if use_checkpoint else block(x)
        y.sum().backward()
        grads.append((y.cpu(), x.grad.cpu(), lin.weight.grad.cpu()))
    for plain, checkpointed in zip(*grads):
        assert torch.equal(plain, checkpointed)


@pytest.mark.parametrize(
    "write",
    [
        lambda r: torch.add(torch.ones(2, device=r.device), 1, out=r[3:3]),
        lambda r: torch.arange(3, out=r[2:2]),
        lambda r: torch.linspace(0, 1, 2, out=r[0:0]),
        lambda r: torch.mul(torch.full((2,), 3.0, device=r.device), 2, out=r[1:1]),
    ],
)
def test_out_into_an_empty_view_grows_in_place_at_its_offset(mode, write):
    # As on the CPU, resizing an empty out= view keeps its storage and
    # offset, so the result lands in the base tensor.
    def run(r):
        write(r)
        return r

    assert_same(*run_both(run, torch.arange(6.0)))


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dst", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool])
def test_float_to_int_conversion_wraps_like_the_cpu(mode, src, dst):
    # Out-of-range conversions are undefined in C++, but `(x * 255).to(torch.uint8)`
    # without a clamp is common: the CPU keeps the low bits of an int32
    # (an int64 for int64 and uint8) and gives the minimum for NaN and overflow.
    nan, inf = float("nan"), float("inf")
    v = torch.tensor([300.7, -1.5, 1e10 + 3, 255.5, -200.0, -0.9, 2.5e9, -3e9, nan, inf, -inf, 65535.9, 40000, 3e19, 9.3e18,
                      2.0**31 + 7, 2.0**40 + 300], dtype=torch.float64)
    v = v.to(src)
    assert_same(*run_both(lambda t: t.to(dst), v))

    def copy_into(t):
        out = torch.empty(t.shape, dtype=dst, device=t.device)
        return out.copy_(t)

    assert_same(*run_both(copy_into, v))
