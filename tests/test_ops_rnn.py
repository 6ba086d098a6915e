"""Recurrent layers on tpu vs CPU. On an accelerator PyTorch's LSTM and GRU
cells call the fused `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` ops
(the CPU computes them from plain ops), so outputs, states and every
gradient are compared with the CPU, in Strict and Fused Eager."""
import pytest
import torch
import torch.nn as nn

from conftest import assert_same


def run(make, inputs, device, dtype=torch.float32):
    """Forward, backward of a weighted sum; returns outputs and all grads."""
    torch.manual_seed(0)
    m = make().to(device=device, dtype=dtype)
    xs = [x.detach().to(device=device, dtype=dtype).requires_grad_() for x in inputs]
    out = m(*xs)
    flat = []
    for o in out if isinstance(out, tuple) else (out,):
        flat += list(o) if isinstance(o, tuple) else [o]
    loss = sum((o.float() * torch.linspace(-1, 1, o.numel(), device=device).view_as(o)).sum() for o in flat)
    loss.backward()
    grads = [x.grad for x in xs] + [p.grad for p in m.parameters()]
    return [o.detach() for o in flat] + grads


RECURRENT = {
    "lstm": (lambda: nn.LSTM(6, 5, batch_first=True), 6, False),
    "lstm_2layer_bidirectional": (lambda: nn.LSTM(6, 5, num_layers=2, bidirectional=True), 6, False),
    "lstm_no_bias_proj": (lambda: nn.LSTM(6, 5, bias=False, proj_size=3, batch_first=True), 6, False),
    "lstm_with_state": (lambda: nn.LSTM(6, 5, batch_first=True), 6, True),
    "gru": (lambda: nn.GRU(6, 5, batch_first=True), 6, False),
    "gru_2layer_bidirectional": (lambda: nn.GRU(6, 5, num_layers=2, bidirectional=True), 6, False),
    "gru_no_bias_with_state": (lambda: nn.GRU(6, 5, bias=False, batch_first=True), 6, True),
}


class WithState(nn.Module):
    """Calls an LSTM or LSTMCell with its state as separate tensors (h, c),
    so that `run` can take gradients with respect to both."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, h, c):
        return self.inner(x, (h, c))


@pytest.mark.parametrize("name", list(RECURRENT))
def test_recurrent_layer_matches_cpu(name, mode):
    make, n_in, with_state = RECURRENT[name]
    g = torch.Generator().manual_seed(1)
    m = make()
    inputs = [torch.randn(3, 4, n_in, generator=g)]  # (batch, seq) or (seq, batch): both 3 x 4
    if with_state:
        layers = m.num_layers * (2 if m.bidirectional else 1)
        inputs.append(torch.randn(layers, 3, m.proj_size or m.hidden_size, generator=g))
        if isinstance(m, nn.LSTM):
            inputs.append(torch.randn(layers, 3, m.hidden_size, generator=g))
            make = (lambda inner: lambda: WithState(inner()))(make)
    assert_same(run(make, inputs, "tpu"), run(make, inputs, "cpu"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cells_match_cpu(cell, dtype, mode):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, generator=g)
    h = torch.randn(4, 5, generator=g)
    if cell == "lstm":
        make, inputs = (lambda: WithState(nn.LSTMCell(3, 5))), [x, h, torch.randn(4, 5, generator=g)]
    else:
        make, inputs = (lambda: nn.GRUCell(3, 5)), [x, h]
    cpu, tpu = run(make, inputs, "cpu", dtype), run(make, inputs, "tpu", dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    assert_same(tpu, cpu, **tol)


def test_lstm_training_matches_cpu(mode):
    """A few SGD steps of an LSTM language model: losses and weights match."""
    def train(device):
        torch.manual_seed(0)
        emb, lstm, head = nn.Embedding(10, 6), nn.LSTM(6, 8, batch_first=True), nn.Linear(8, 10)
        mods = nn.ModuleList([emb, lstm, head]).to(device)
        opt = torch.optim.SGD(mods.parameters(), lr=0.5)
        tokens = torch.randint(0, 10, (4, 7), generator=torch.Generator().manual_seed(3)).to(device)
        losses = []
        for _ in range(4):
            out, _ = lstm(emb(tokens[:, :-1]))
            loss = nn.functional.cross_entropy(head(out).flatten(0, 1), tokens[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, lstm.weight_hh_l0.detach()

    (cpu_losses, cpu_w), (tpu_losses, tpu_w) = train("cpu"), train("tpu")
    assert tpu_losses == pytest.approx(cpu_losses, rel=1e-5)
    assert_same(tpu_w, cpu_w, rtol=1e-5, atol=1e-5)


def test_fused_cell_rejects_mismatched_shapes():
    gates = torch.randn(2, 20, device="tpu")
    with pytest.raises(RuntimeError, match=r"_thnn_fused_lstm_cell.*\[batch, 4 \* hidden\]"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.randn(2, 4, device="tpu"))
    # The device still works.
    assert_same(gates + 1, gates.cpu() + 1)
