"""nn.DataParallel over the tpu devices (the CPU plugin exposes several):
the batch is scattered, the module replicated, the replicas run in threads,
outputs gathered and gradients summed back, and all of it must equal one CPU
module on the whole batch."""
import pytest
import torch
from torch import nn
from torch.nn.parallel import comm

from conftest import assert_same

pytestmark = pytest.mark.skipif(torch.tpu.device_count() < 2, reason="needs two tpu devices")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.norm = nn.LayerNorm(16)  # BatchNorm would use per-replica statistics
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, scale=1.0):
        return self.fc2(torch.relu(self.norm(self.fc1(x)))) * scale


def make():
    torch.manual_seed(0)
    return Net()


# 5 rows leave fewer chunks than devices. PyTorch then hands the unused
# replicas empty inputs but the keyword arguments (on CUDA too), so that case
# passes its number positionally.
@pytest.mark.parametrize("batch,as_keyword", [(8, True), (5, False)])
def test_training_matches_one_cpu_module(mode, batch, as_keyword):
    cpu = make()
    model = make().to("tpu")
    dp = nn.DataParallel(model)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(batch, 6, generator=g)
        y = torch.randn(batch, 3, generator=g)
        out = dp(x.to("tpu"), scale=2.0) if as_keyword else dp(x.to("tpu"), 2.0)
        loss = nn.functional.mse_loss(out, y.to("tpu"))
        loss.backward()
        opt.step()
        opt.zero_grad()
        cpu_loss = nn.functional.mse_loss(cpu(x, scale=2.0), y)
        cpu_loss.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        assert out.device == torch.device("tpu", 0)
        assert_same(loss, cpu_loss, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), cpu.parameters()):
        assert_same(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


def test_fused_eager_keeps_one_graph_per_device_and_stops_compiling():
    """The replicas record in threads at once; each device has its own
    pending graph, so they do not cut each other's, and steady-state steps
    reuse their programs."""
    import torch_tpu_rs

    torch_tpu_rs.set_eager_mode("fused")
    cpu = make()
    model = make().to("tpu")
    dp = nn.DataParallel(model, device_ids=[0, 1])
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(2)
    for step in range(8):
        if step == 4:
            before = torch_tpu_rs.metrics()
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
        loss = nn.functional.mse_loss(dp(x.to("tpu")), y.to("tpu"))
        loss.backward()
        opt.step()
        opt.zero_grad()
        cpu_loss = nn.functional.mse_loss(cpu(x), y)
        cpu_loss.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        assert_same(loss, cpu_loss, rtol=1e-5, atol=1e-6)
    after = torch_tpu_rs.metrics()
    assert after["compiles"] == before["compiles"]
    assert after["graph_flushes"] - before["graph_flushes"] <= 4 * 8  # measured: 6 per step


def test_fused_graphs_of_two_devices_stay_pending_side_by_side():
    import torch_tpu_rs

    torch_tpu_rs.set_eager_mode("fused")
    x0, x1 = torch.arange(4.0, device="tpu:0"), torch.arange(4.0, device="tpu:1")
    torch.tpu.synchronize()
    before = torch_tpu_rs.metrics()["graph_flushes"]
    a = x0 * 2  # alternate devices: neither graph is cut
    b = x1 * 3
    a = a + 1
    b = b + 1
    assert torch_tpu_rs.metrics()["graph_flushes"] == before
    assert torch.equal(a.cpu(), torch.arange(4.0) * 2 + 1)  # runs device 0's graph only
    assert torch_tpu_rs.metrics()["graph_flushes"] == before + 1
    assert torch.equal(b.cpu(), torch.arange(4.0) * 3 + 1)
    assert torch_tpu_rs.metrics()["graph_flushes"] == before + 2
    c = x1 - 1
    torch.tpu.synchronize()  # every device
    assert torch_tpu_rs.metrics()["graph_flushes"] == before + 3
    assert torch.equal(c.cpu(), torch.arange(4.0) - 1)


def test_cpu_input_and_another_output_device():
    cpu = make().eval()
    dp = nn.DataParallel(make().to("tpu").eval(), output_device=1)
    x = torch.randn(7, 6)
    out = dp(x)
    assert out.device == torch.device("tpu", 1)
    assert_same(out.to("tpu:0"), cpu(x), rtol=1e-5, atol=1e-6)


def test_replicas_run_on_each_device():
    seen = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x):
            seen.append((x.device, self.w.device))
            return x * self.w

    dp = nn.DataParallel(Probe().to("tpu"), device_ids=[0, 1])
    out = dp(torch.arange(8.0).reshape(4, 2).to("tpu"))
    assert sorted(str(d) for d, _ in seen) == ["tpu:0", "tpu:1"]
    assert all(a == b for a, b in seen)
    assert_same(out, torch.arange(8.0).reshape(4, 2))


def test_comm_functions_match_their_cuda_contract():
    x = torch.arange(10.0).reshape(5, 2)
    t = x.to("tpu")
    parts = comm.scatter(t, [0, 1], chunk_sizes=[2, 3])
    assert [p.device for p in parts] == [torch.device("tpu", 0), torch.device("tpu", 1)]
    assert_same(parts[1].to("tpu:0"), x[2:])
    assert_same(comm.gather(parts, dim=0, destination=0), x)
    assert comm.gather(parts, dim=0, destination="cpu").device.type == "cpu"
    copies = comm.broadcast_coalesced([t, t[0]], [0, 1])
    assert copies[0][0] is t  # the source device keeps its tensors
    assert copies[1][0].device == torch.device("tpu", 1)
    assert_same(copies[1][1].to("tpu:0"), x[0])
    summed = comm.reduce_add([t, copies[1][0]], destination=0)
    assert_same(summed, 2 * x)
    out = [torch.empty(5, 2, device="tpu:1")]
    comm.broadcast(t, out=out)
    assert_same(out[0].to("tpu:0"), x)


def test_bad_input_is_a_clear_error():
    t = torch.ones(5, 2, device="tpu")
    with pytest.raises(RuntimeError, match="chunk sizes"):
        comm.scatter(t, [0, 1], chunk_sizes=[2, 2])
    with pytest.raises(RuntimeError, match="devices\\[0\\]"):
        comm.broadcast_coalesced([t.to("tpu:1")], [0, 1])
    assert_same(t + 1, torch.full((5, 2), 2.0))


def test_cpu_tensors_still_reach_pytorch():
    # The CPU has no broadcast of its own: PyTorch's error, not ours.
    with pytest.raises(RuntimeError):
        comm.broadcast_coalesced([torch.ones(2)], [0, 1])
