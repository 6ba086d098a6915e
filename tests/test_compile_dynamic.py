"""Dynamic shapes under torch.compile(backend="tpu"): graphs with symbolic
sizes run at power-of-two buckets with masks (python/torch_tpu_rs/_bucketing.py).
Every output is compared with PyTorch on the CPU; compile counts come from
torch_tpu_rs.metrics()."""
from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu_rs
from conftest import assert_same
from torch_tpu_rs.models.llama import Llama, LlamaConfig


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _programs() -> int:
    """Programs made ready by XLA: compiled now or loaded from the disk cache."""
    m = torch_tpu_rs.metrics()
    return m["compiles"] + m["cache_hits_disk"]


def _close(tpu_out, cpu_out, tol=1e-5):
    torch.testing.assert_close(tpu_out.cpu(), cpu_out, rtol=tol, atol=tol)


def test_llama_forward_40_lengths_compiles_at_most_10_programs():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, dim=32, n_layers=1, n_heads=2, hidden_dim=48, max_seq_len=512)
    cpu = Llama(cfg).eval()
    model = Llama(cfg).to("tpu").eval()
    model.load_state_dict(cpu.state_dict())
    compiled = torch.compile(model, backend="tpu", dynamic=True)
    middle = (torch.randperm(510, generator=torch.Generator().manual_seed(1))[:38] + 2).tolist()
    lengths = sorted({1, 512, *middle})
    assert len(lengths) == 40
    before = _programs()
    with torch.no_grad():
        for n in lengths:
            tokens = torch.randint(0, cfg.vocab_size, (2, n))
            out = compiled(tokens.to("tpu"))
            assert out.shape == (2, n, cfg.vocab_size)
            _close(out, cpu(tokens))
    programs = _programs() - before
    bound = math.ceil(math.log2(512)) + 1
    assert 1 <= programs <= bound, f"{programs} programs for {len(lengths)} lengths (bound {bound})"
    assert torch_tpu_rs.metrics()["bucketed_graphs"] >= 1


def test_mark_dynamic_and_automatic_dynamic_are_bucketed():
    def f(x, w):
        return torch.softmax(x @ w, dim=-1).sum(1)

    w = torch.randn(8, 8)
    for how in ("mark_dynamic", "automatic"):
        torch._dynamo.reset()
        before = torch_tpu_rs.metrics()["bucketed_graphs"]
        g = torch.compile(f, backend="tpu")
        for n in (5, 6, 7, 9, 11):
            x = torch.randn(3, n, 8)
            xt = x.to("tpu")
            if how == "mark_dynamic":
                torch._dynamo.mark_dynamic(xt, 1)
            _close(g(xt, w.to("tpu")), f(x, w))
        assert torch_tpu_rs.metrics()["bucketed_graphs"] > before, how


def test_foreach_ops_on_fixed_size_tensors_beside_a_padded_dim_are_bucketed():
    """An optimizer-like foreach update of fixed-size tensors in a graph
    whose batch is padded: the lists are not padded, so the graph is
    bucketed as a whole (a traced training step holds both)."""
    def f(x, a, b):
        a2, b2 = torch._foreach_mul([a, b], 2.0)
        return x.sum(0) * a2.sum() + b2

    a, b = torch.randn(3, 4), torch.randn(5)
    before = torch_tpu_rs.metrics()["bucketed_graphs"]
    g = torch.compile(f, backend="tpu")
    for n in (5, 6, 9, 3):
        x = torch.randn(n, 5)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 0)
        _close(g(xt, a.to("tpu"), b.to("tpu")), f(x, a, b))
    assert torch_tpu_rs.metrics()["bucketed_graphs"] == before + 1


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "argmax", "softmax", "log_softmax", "logsumexp",
                                  "contract", "mean_all"])
def test_reductions_over_a_padded_dimension_ignore_the_padding(name):
    fns = {
        "sum": lambda x: x.sum(1),
        "mean": lambda x: x.mean(1, keepdim=True) * 2,
        "amax": lambda x: (-x.abs()).amax(1),
        "argmax": lambda x: (-x.abs()).argmax(1),
        "softmax": lambda x: torch.softmax(x, 1),
        "log_softmax": lambda x: torch.log_softmax(x, 1),
        "logsumexp": lambda x: torch.logsumexp(x, 1),
        "contract": lambda x: x.transpose(1, 2) @ x,
        "mean_all": lambda x: x.mean(),
    }
    f = fns[name]
    g = torch.compile(f, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()["bucketed_graphs"]
    for n in (3, 5, 6, 7, 13):
        x = torch.randn(2, n, 4) - 3  # negative: padding must not win a max
        _close(g(x.to("tpu")), f(x))
    assert torch_tpu_rs.metrics()["bucketed_graphs"] > before


@pytest.mark.parametrize("name", ["interleave", "sort_merged"])
def test_graphs_that_cannot_be_padded_run_at_exact_sizes(name):
    fns = {
        "interleave": lambda x: x.reshape(x.shape[0], 4, -1).sum(-1),
        "sort_merged": lambda x: torch.sort(x.flatten(0, 1), dim=0).values,
    }
    f = fns[name]
    g = torch.compile(f, backend="tpu", dynamic=True)
    before = sum(torch_tpu_rs.metrics()["exact_shape_graphs"].values())
    for n in (3, 5, 6):
        x = torch.randn(2, n, 4)
        _close(g(x.to("tpu")), f(x))
    after = sum(torch_tpu_rs.metrics()["exact_shape_graphs"].values())
    assert after > before, "the unpaddable graph should be counted with its reason"


SORTS = {
    "ascending": lambda h: torch.sort(h, dim=1),
    "descending": lambda h: torch.sort(h, dim=1, descending=True),
    "stable, descending": lambda h: torch.sort(h, dim=1, stable=True, descending=True),
    "argsort": lambda h: torch.argsort(h, 1) * 2,
    "int64": lambda h: torch.sort((h * 2).round().long(), 1),
    "int32, descending": lambda h: torch.sort((h * 2).round().int(), 1, descending=True),
    "bool": lambda h: torch.sort(h > 0, 1),
    # topk sorts alike, and k is at most the real length.
    "topk": lambda h: torch.topk(h, 2, dim=1),
    "topk, smallest": lambda h: torch.topk(h, 3, dim=1, largest=False),
    "topk of int64": lambda h: torch.topk((h * 2).round().long(), 2, 1),
}


@pytest.mark.parametrize("name", list(SORTS))
def test_a_sort_along_a_padded_dimension_is_bucketed(name):
    """The padding is filled with what sorts after every real value (NaN
    ascending, -inf descending), so real NaNs, infinities and ties must land
    where the CPU puts them, with the CPU's indices (a topk's too); the
    gradient goes back through them."""
    f = SORTS[name]
    g = torch.compile(f, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    for n in (3, 5, 6, 9, 12):
        x = torch.randn(2, n, 4).round()  # ties
        x[0, 1, 0] = x[0, 0, 3] = x[0, n - 1, 3] = float("nan")
        x[1, 0, 1], x[1, 2, 2], x[1, n - 1, 2] = float("-inf"), float("inf"), float("-inf")
        # PyTorch's CPU topk orders ties as it likes, and ours sorts
        # stably: a topk must give what the unpadded tpu program gives, and
        # the CPU's values.
        unpadded = name.startswith("topk")
        ref = x.to("tpu") if unpadded else x
        got, want = g(x.to("tpu")), f(ref)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert_same(a, b.cpu())
        if unpadded:
            assert_same(got[0], f(x)[0])
        if isinstance(want, tuple) and want[0].is_floating_point():
            # The backward scatters the gradient back at the sort's indices.
            xc, xt = ref.clone().requires_grad_(), x.to("tpu").requires_grad_()
            w = torch.randn(want[0].shape)
            (f(xc)[0] * w.to(xc.device)).nan_to_num().sum().backward()
            (g(xt)[0] * w.to("tpu")).nan_to_num().sum().backward()
            assert_same(xt.grad, xc.grad.cpu())
    after = torch_tpu_rs.metrics()
    assert after["bucketed_graphs"] > before["bucketed_graphs"]
    assert after["exact_shape_graphs"] == before["exact_shape_graphs"], after["exact_shape_graphs"]


def test_bucketed_graph_output_is_the_real_size_and_does_not_alias_padding():
    f = lambda x: (x * 2).sum(-1)  # noqa: E731
    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, 6)
        out = g(x.to("tpu"))
        assert out.shape == (n,)
        assert out.is_contiguous() or out.shape[0] == n
        _close(out + 1, f(x) + 1)


@pytest.mark.parametrize("how", ["mark_dynamic", "automatic", "dynamic_true"])
def test_llama_training_over_changing_lengths_compiles_once_per_bucket(how):
    """Forward, backward and AdamW at 14 sequence lengths: the forward and
    backward graphs are bucketed (the loss's shifted slices, cross-entropy
    over a flattened [batch, seq] and the embedding's backward are masked),
    losses and weights match CPU eager, and each new bucket compiles only
    its forward and backward programs. With `dynamic=True` the batch is
    symbolic too, so the backward's inputs merge two symbols (their layout
    comes from the forward graph's plan)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, dim=32, n_layers=1, n_heads=2, hidden_dim=48, max_seq_len=64)
    cpu = Llama(cfg)
    tpu = Llama(cfg).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu.loss, backend="tpu", **({"dynamic": True} if how == "dynamic_true" else {}))
    make_opt = lambda p: torch.optim.AdamW(p, lr=1e-2)  # noqa: E731
    batch = lambda n: (torch.randint(0, cfg.vocab_size, (2, n)),)  # noqa: E731
    mark = 1 if how == "mark_dynamic" else None
    opt_cpu, opt_tpu = make_opt(cpu.parameters()), make_opt(tpu.parameters())

    def train(lengths):
        for n in lengths:
            (tokens,) = batch(n)
            loss = cpu.loss(tokens)
            opt_cpu.zero_grad()
            loss.backward()
            opt_cpu.step()
            t = tokens.to("tpu")
            if mark is not None:
                torch._dynamo.mark_dynamic(t, 1)
            got = compiled(t)
            opt_tpu.zero_grad()
            got.backward()
            opt_tpu.step()
            _close(got, loss.detach())

    train([9, 13])  # a static graph, then (automatic dynamic) the symbolic one, at bucket 16
    before, exact_before = _programs(), dict(torch_tpu_rs.metrics()["exact_shape_calls"])
    lengths = [10, 15, 17, 20, 25, 31, 32, 33, 40, 47, 50, 60, 64, 11]
    train(lengths)
    programs = _programs() - before
    assert programs <= 4, f"{programs} programs for {len(lengths)} lengths in 2 new buckets (32, 64)"
    assert torch_tpu_rs.metrics()["exact_shape_calls"] == exact_before
    for a, b in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-4, atol=1e-5)


def test_mlp_training_with_a_changing_batch_size_is_bucketed():
    """`dynamic=True`, SGD, batch sizes 5..40 (a last partial batch): the
    forward and backward graphs are bucketed and match CPU eager."""
    from torch_tpu_rs.models import MLP

    torch.manual_seed(0)
    cpu = MLP(16, 32, 4, depth=2)
    tpu = MLP(16, 32, 4, depth=2).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    loss_fn = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)  # noqa: E731
    compiled = torch.compile(lambda x, y: loss_fn(tpu, x, y), backend="tpu", dynamic=True)
    opt_cpu, opt_tpu = torch.optim.SGD(cpu.parameters(), lr=0.1), torch.optim.SGD(tpu.parameters(), lr=0.1)
    bucketed = torch_tpu_rs.metrics()["bucketed_graphs"]
    for n in (5, 7, 12, 16, 23, 40, 9):
        x, y = torch.randn(n, 16), torch.randint(0, 4, (n,))
        loss = loss_fn(cpu, x, y)
        opt_cpu.zero_grad()
        loss.backward()
        opt_cpu.step()
        got = compiled(x.to("tpu"), y.to("tpu"))
        opt_tpu.zero_grad()
        got.backward()
        opt_tpu.step()
        _close(got, loss.detach())
    assert torch_tpu_rs.metrics()["bucketed_graphs"] - bucketed == 2  # forward and backward
    for a, b in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_a_mean_over_a_padded_dimension_as_the_graph_output_is_narrowed(train):
    """The graph's output is the mean itself (rewritten to sum / real count):
    it must still come back at its real size, with gradients to match."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    tpu = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16)).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(lambda x: tpu(x).mean(1), backend="tpu", dynamic=True)
    for n in (5, 6, 9):
        x = torch.randn(3, n, 16)
        with torch.set_grad_enabled(train):
            want, got = cpu(x).mean(1), compiled(x.to("tpu"))
        assert got.shape == want.shape == (3, 16)
        _close(got, want.detach())
        if train:
            want.pow(2).sum().backward()
            got.pow(2).sum().backward()
            for a, b in zip(cpu.parameters(), tpu.parameters()):
                torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)
    assert torch_tpu_rs.metrics()["bucketed_graphs"] >= 1


class _MseHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.nn.functional.mse_loss(self.lin(x), x[..., :4] * 0.5)


class _CausalAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, n, 16)


class _TriangleScores(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        a = self.lin(x) @ x.transpose(1, 2)
        upper = torch.triu(torch.ones_like(a), 1).bool()
        return torch.tril(a).masked_fill(upper, float("-inf")).softmax(-1).sum(-1)


class _MeanTimesLength(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.lin = torch.nn.LayerNorm(8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.norm(self.lin(x)).mean(1) * x.shape[1]


class _FullOfLength(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).sum(1) / torch.full((x.shape[0], 8), x.shape[1], device=x.device)


class _LearnedPositions(torch.nn.Module):
    """A learned position table sliced by the length (minGPT's `pos_emb[:, :t]`).
    The table is shorter than the next bucket of the longest input, so the
    bucket is capped to fit it."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 20, 8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        # Mean pooling: the gradient's padded positions are not zero.
        return self.lin(x + self.pos[:, :x.shape[1]]).mean(1)


class _TokensAroundTheSequence(torch.nn.Module):
    """Learned tokens concatenated before (a CLS token) and after the sequence,
    then attention over all of them."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Parameter(torch.randn(1, 1, 8))
        self.last = torch.nn.Parameter(torch.randn(1, 2, 8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        b = x.shape[0]
        h = torch.cat([self.first.expand(b, -1, -1), self.lin(x), self.last.expand(b, -1, -1)], 1)
        return torch.softmax(h @ h.transpose(1, 2) / 3, -1) @ h


class _ConvolutionsAlongTheSequence(torch.nn.Module):
    """Two 1-D convolutions along the sequence (the second dilated, its
    output shorter than its input), then mean pooling."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(8, 8, 3, padding=1)
        self.b = torch.nn.Conv1d(8, 6, 3, padding=1, dilation=2)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x.transpose(1, 2)))).mean(2)


class _StridedConvolutions(torch.nn.Module):
    """A downsampling stack along the sequence, as in an audio encoder: a
    convolution with stride 2 and padding, then one with stride 2 and
    dilation, then mean and max pooling. (Its lengths stay 2 or more for
    the test's sizes: PyTorch's contiguity checks guard on a length of 1.)"""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(8, 8, 3, stride=2, padding=1)
        self.b = torch.nn.Conv1d(8, 6, 2, stride=2, dilation=2, padding=1)

    def forward(self, x):
        h = self.b(torch.nn.functional.gelu(self.a(x.transpose(1, 2))))
        return h.mean(2) + h.amax(2)


TRAINED = {
    # name: (module, input shape with None for the changing size)
    "mse_loss_mean": (_MseHead, (None, 8)),
    "transformer_encoder_layer": (lambda: torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                                  (2, None, 32)),
    "causal_sdpa": (_CausalAttention, (2, None, 16)),
    "tril_triu_masked_softmax": (_TriangleScores, (2, None, 8)),
    "size_used_as_a_number": (_MeanTimesLength, (3, None, 8)),
    "size_as_a_fill_value": (_FullOfLength, (3, None, 8)),
    "learned_positions_sliced_by_length": (_LearnedPositions, (2, None, 8)),
    "learned_tokens_around_the_sequence": (_TokensAroundTheSequence, (2, None, 8)),
    "convolutions_along_the_sequence": (_ConvolutionsAlongTheSequence, (2, None, 8)),
    "strided_convolutions_along_the_sequence": (_StridedConvolutions, (2, None, 8)),
}


@pytest.mark.parametrize("name", list(TRAINED))
def test_training_graphs_with_these_ops_are_bucketed_and_match_cpu(name):
    """Each forward and backward graph is bucketed (no exact-size graph), and
    outputs and every gradient match CPU eager at each size."""
    make, shape = TRAINED[name]
    torch.manual_seed(0)
    cpu, tpu = make(), make().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    for n in (5, 6, 9, 17):
        x = torch.randn([n if d is None else d for d in shape])
        want, got = cpu(x), compiled(x.to("tpu"))
        _close(got, want.detach(), tol=1e-4)
        want.float().pow(2).mean().backward()
        got.float().pow(2).mean().backward()
        for a, b in zip(cpu.parameters(), tpu.parameters()):
            torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)
    after = torch_tpu_rs.metrics()
    assert after["exact_shape_graphs"] == before["exact_shape_graphs"]
    assert after["bucketed_graphs"] - before["bucketed_graphs"] == 2  # forward and backward


# Patterns that run bucketed (the rest run at exact sizes: a position whose
# cut length changes with padding). k % 5 reaches the program at its real
# value like k itself.
BUCKETED_POSITIONS = {"slice", "narrow", "arange index", "a view of the input", "modulo", "prefix", "from a fixed start"}

POSITIONS = {
    # A Python int that becomes symbolic (automatic dynamic) used as a
    # position: it must reach the program at its real value, never at its
    # bucket (x[k:k+3] read x[8:11] for k = 5).
    "slice": lambda x, k: x[k:k + 3] * 2,
    "narrow": lambda x, k: x.narrow(0, k, 3) * 1,
    "arange index": lambda x, k: x[torch.arange(k, k + 3, device=x.device)],
    "a view of the input": lambda x, k: x[k:k + 3],
    "length from the offset": lambda x, k: x[k:2 * k].sum(),
    "modulo": lambda x, k: x[k % 5:k % 5 + 2] * 1,
    "prefix": lambda x, k: x[:k] * 2,
    "from a fixed start": lambda x, k: x[2:k] * 2,
    "suffix": lambda x, k: x[-k:] * 2,
}


@pytest.mark.parametrize("name", list(POSITIONS))
def test_a_changing_int_used_as_a_position_is_passed_at_its_real_value(name):
    f = POSITIONS[name]
    g = torch.compile(f, backend="tpu")
    x = torch.arange(20.0)
    before = torch_tpu_rs.metrics()["bucketed_graphs"]
    for k in [1, 2, 3, 4, 5, 7, 9, 6]:
        _close(g(x.to("tpu"), k), f(x, k))
    bucketed = torch_tpu_rs.metrics()["bucketed_graphs"] > before
    assert bucketed == (name in BUCKETED_POSITIONS)


@pytest.mark.parametrize("name", ["remainder", "fmod", "trunc", "floor", "floor_divide"])
def test_integer_division_is_bucketed_and_still_refuses_a_real_zero(name):
    # Padded divisor positions hold 1: zeros there would trip the device's
    # ZeroDivisionError check on every call.
    fn = {"remainder": torch.remainder, "fmod": torch.fmod, "floor_divide": torch.floor_divide,
          "trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
          "floor": lambda x, y: torch.div(x, y, rounding_mode="floor")}[name]
    g = torch.compile(fn, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()["bucketed_graphs"]
    for n in [5, 6, 3, 9, 12]:
        x = torch.arange(1, n + 1) * 7 - 20
        y = torch.arange(1, n + 1)
        y = torch.where(y % 3 == 0, -y, y)
        assert torch.equal(g(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y))
    assert torch_tpu_rs.metrics()["bucketed_graphs"] > before
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        g(torch.tensor([1, 2, 3, 4, 5], device="tpu"), torch.tensor([1, 0, 1, 1, 1], device="tpu")).cpu()


@pytest.mark.parametrize(
    "f",
    [lambda w, k: (w[k] * w[k + 1]).sum(), lambda w, k: (w[k:k + 2] ** 2).sum(), lambda w, k: (w[:k] ** 2).sum()],
    ids=["select", "slice", "prefix"],
)
def test_gradients_land_at_the_real_positions(f):
    # The backward's select_backward/slice_backward place the gradient at an
    # index: at the bucket it went to the wrong rows while the loss matched.
    g = torch.compile(f, backend="tpu")
    for k in [1, 2, 3, 5, 6, 7]:
        w = torch.arange(30.0).view(10, 3).requires_grad_()
        wt = w.detach().to("tpu").requires_grad_()
        f(w, k).backward()
        g(wt, k).backward()
        _close(wt.grad, w.grad)


class _TokensToLoss(torch.nn.Module):
    """Embedding, a linear layer and a head, with the loss chosen by name."""

    def __init__(self, loss):
        super().__init__()
        self.loss = loss
        self.emb, self.mid, self.head = torch.nn.Embedding(11, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 11)

    def forward(self, ids):
        logits = self.head(torch.relu(self.mid(self.emb(ids))))
        if self.loss == "mse":
            return torch.nn.functional.mse_loss(logits, torch.full_like(logits, 0.5))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_bfloat16_training_graphs_are_bucketed_and_match_eager(loss):
    """bfloat16 products accumulate in float32. The masked backward graph of
    the mse case used to fail at run time on the XLA CPU plugin ("Unsupported
    element type for DotThunk::Execute: BF16 x BF16 = F32"): mixed-precision
    dots now widen their operands first."""
    torch.manual_seed(0)
    cpu = _TokensToLoss(loss).to(torch.bfloat16)
    eager = _TokensToLoss(loss).to("tpu", torch.bfloat16)
    tpu = _TokensToLoss(loss).to("tpu", torch.bfloat16)
    eager.load_state_dict(cpu.state_dict())
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    for n in (5, 6, 9, 12):
        ids = torch.randint(0, 11, (2, n))
        want, same, got = cpu(ids), eager(ids.to("tpu")), compiled(ids.to("tpu"))
        for m in (want, same, got):
            m.backward()
        # Against tpu eager (same kernels): only the padding may differ, and it must not show.
        _close(got, same.detach().cpu(), tol=1e-2)
        _close(got, want.detach(), tol=3e-2)
        for a, b, c in zip(cpu.parameters(), eager.parameters(), tpu.parameters()):
            torch.testing.assert_close(c.grad.cpu(), b.grad.cpu(), rtol=2e-2, atol=1e-3)
            torch.testing.assert_close(c.grad.cpu().float(), a.grad.float(), rtol=5e-2, atol=5e-3)
            a.grad = b.grad = c.grad = None
    after = torch_tpu_rs.metrics()
    assert after["exact_shape_graphs"] == before["exact_shape_graphs"]
    assert after["bucketed_graphs"] - before["bucketed_graphs"] == 2  # forward and backward


# Fixed positions, from the start or the end, and prefix scans along a
# padded dimension: bucketed.
FIXED_POSITIONS = {
    "first-token pooling": lambda h: h[:, 0] @ torch.ones(8, 3, device=h.device),
    "first-token slice": lambda h: h + h[:, :1],
    "a run of positions": lambda h: h[:, 1:3].sum(1, keepdim=True) * h,
    "position ids from cumsum": lambda h: h * (h > 0).long().cumsum(1).to(h.dtype),
    # Its backward is a reversed scan: flip, cumsum, flip.
    "cumsum with its gradient": lambda h: h.cumsum(1) * h,
    "cumsum, then a mean over it": lambda h: h.cumsum(1).mean(1),  # its gradient's padding is not zero
    # Its backward scans the flipped gradient.
    "logcumsumexp": lambda h: torch.logcumsumexp(h, 1),
    "cumprod": lambda h: torch.tanh(h).cumprod(1),
    # Positions from the end move with padding: they reach the program at
    # their real values. Their backward used to be bucketed with the
    # gradient placed in the padding (wrong gradients, right loss).
    "last-token pooling": lambda h: h[:, -1] @ torch.ones(8, 3, device=h.device),
    "last-token slice": lambda h: h + h[:, -1:],
    "a run from the end": lambda h: h[:, -3:-1] * h[:, :1],
}
# A cat along the padded dimension with one padded operand (what follows it
# is moved to right after its real positions), padding on either side,
# variances over it (rebuilt from sums over the real count), and max's
# backward: bucketed.
JOINS_AND_SPREADS = {
    "tokens before the sequence": lambda h: torch.cat([h[:, :2] + 1, h], 1).amax(1),
    "a token after the sequence": lambda h: torch.softmax(torch.cat([h, h[:, :1] * 2], 1), 1),
    "tokens on both sides": lambda h: torch.cat([h[:, 1:2], h.sin(), h[:, :2] * 3], 1).sum(1),
    # Operands of one padded size lie at the padded sizes as blocks of it,
    # each with its real positions first; the backward slices block by block.
    "a cat of two copies": lambda h: torch.cat([h, h * 2], 1).sum(1),
    "a cat of three copies, a softmax over it": lambda h: torch.cat([h, h.sin(), h * 2], 1).softmax(1),
    "a cat of two copies, rows merged": lambda h: torch.cat([h, h * 2], 1).flatten(0, 1).sum(0),
    "padding in front": lambda h: torch.nn.functional.pad(h, (0, 0, 2, 0), value=0.5).softmax(1),
    # Its fill is moved to right after the real positions.
    "padding after the sequence": lambda h: torch.nn.functional.pad(h, (0, 0, 0, 1), value=-1.0) * 2,
    "padding on both sides": lambda h: torch.nn.functional.pad(h, (0, 0, 1, 2), value=0.5).softmax(1),
    "var": lambda h: h - h.var(1, keepdim=True),
    "std without correction": lambda h: h.std(1, correction=0) * 2,
    "var_mean over two dims": lambda h: torch.var_mean(h, (1, 2))[0] + torch.var_mean(h, (1, 2))[1],
    # max's backward scatters at the positions the forward's masked max found.
    "max along it": lambda h: h + h.max(dim=1, keepdim=True).values,
    "min along it, dim dropped": lambda h: h * h.min(1).values[:, None],
    # Its padding is zeroed first, as the convolution's own zero padding;
    # with a stride its real outputs are still a prefix, (s + c) // stride
    # + 1 of them at either size.
    "a convolution along it": lambda h: torch.nn.functional.conv1d(
        h.transpose(1, 2).exp(), torch.linspace(-1, 1, 8 * 8 * 3, device=h.device).view(8, 8, 3), padding=2).sin(),
    "a convolution with a stride along it": lambda h: torch.nn.functional.conv1d(
        h.transpose(1, 2), torch.linspace(-1, 1, 4 * 8 * 3, device=h.device).view(4, 8, 3), stride=2).softmax(2),
    "a convolution with a stride, padding and dilation": lambda h: torch.nn.functional.conv1d(
        h.transpose(1, 2), torch.linspace(-1, 1, 4 * 8 * 3, device=h.device).view(4, 8, 3), stride=3,
        padding=2, dilation=2).sum(2),
    # Position o reads c + k*o: the real positions read real ones, first.
    "every other position": lambda h: h[:, ::2] * 2,
    "every third position from the second": lambda h: h[:, 1::3].softmax(1),
}
# Downsampled lengths of 1 make PyTorch's contiguity checks guard on them
# (`Eq((s + 1)//3, 1)`), so Dynamo would compile again for lengths past it:
# these start where every downsampled length is 2 or more.
LONGER = {
    "a convolution with a stride along it", "a convolution with a stride, padding and dilation",
    "every other position", "every third position from the second",
}
# A reduction over rows merged with the padded dimension: its backward
# broadcasts the gradient over [2*s0, ...], a size whose layout only the
# saved rows it meets tell.
MERGED_ROWS = {
    "a sum over merged rows": lambda h: h.flatten(0, 1).sin().sum(0),
    "a mean over merged rows": lambda h: (h.flatten(0, 1) * 2).mean(0, keepdim=True),
}
# A flip along the padded dimension gathers at (real size - 1 - k) mod the
# padded size: the real positions come first, reversed.
REVERSALS = {
    "a flip": lambda h: h.flip(1) * 2,
    "a scan of the reversed sequence": lambda h: h.flip(1).cumsum(1),
    "a flip of it and another dim": lambda h: h.flip(1, 2).softmax(1),
}
# The length in integer arithmetic, as a number: passed at its real value.
LENGTH_ARITHMETIC = {
    "the length modulo 3 as an exponent": lambda h: h.sum(1).pow(h.shape[1] % 3 + 1),
    "half the length as a factor": lambda h: h * (h.shape[1] // 2),
}
BUCKETED_ALONG = {**FIXED_POSITIONS, **JOINS_AND_SPREADS, **MERGED_ROWS, **REVERSALS, **LENGTH_ARITHMETIC}
# These run at exact sizes: a merged dim's scan or flip sees other rows'
# padding, a run from the end to a fixed position changes length with the
# size, a cat of 2*s0 - 1 positions is neither blocks of one size nor a sum
# of sizes, a computed scatter index could point anywhere, a transposed
# convolution spreads each position over several, and a strided run from a
# size-valued start (padding at the front) is not yet taken.
EXACT_SIZES = {
    "scan of a merged padded dimension": lambda h: h.flatten(0, 1).cumsum(0),
    "a flip of a merged padded dimension": lambda h: h.flatten(0, 1).flip(0) * 2,
    # Rows flattened in two orders meet; a broadcast in between must not
    # hide that (one of the two has the broadcast's own guessed order).
    "rows of two orders, through a broadcast": lambda h: (
        h[0, 0].expand(h.shape[0] * h.shape[1], 8) * h.flatten(0, 1) + h.transpose(0, 1).flatten(0, 1)),
    "rows of the other two orders, through a broadcast": lambda h: (
        h[0, 0].expand(h.shape[0] * h.shape[1], 8) * h.transpose(0, 1).flatten(0, 1) + h.flatten(0, 1)),
    "a run from the end to a fixed position": lambda h: h[:, -2:3] * 2,
    "a cat of the sequence and a shorter copy": lambda h: torch.cat([h, h[:, 1:] * 2], 1).sum(1),
    "a scatter at computed positions": lambda h: torch.zeros_like(h).scatter(
        1, h[:, :1].abs().long().clamp(max=2), h[:, :1]),
    "a transposed convolution along it": lambda h: torch.nn.functional.conv_transpose1d(
        h.transpose(1, 2), torch.linspace(-1, 1, 8 * 4 * 3, device=h.device).view(8, 4, 3), stride=2),
    "every other position from a start that is a size": lambda h: h[:, h.shape[1] % 2::2] * 2,
}


@pytest.mark.parametrize("name", list(BUCKETED_ALONG) + list(EXACT_SIZES))
def test_positions_scans_cats_and_variances_along_a_padded_dimension(name):
    f = BUCKETED_ALONG.get(name) or EXACT_SIZES[name]
    g = torch.compile(f, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    for n in (5, 6, 9, 12, 17) if name in LONGER else (3, 5, 6, 9, 12):
        x = torch.randn(2, n, 8)
        _close(g(x.to("tpu")), f(x), tol=1e-4)
        if name in BUCKETED_ALONG and name != "cumprod":
            # Gradients too: select_backward/slice_backward at a fixed position,
            # cat's slices, the reversed scans, max's scatter, var's scale.
            # (PyTorch's cumprod backward reads the length as an int while
            # AOTAutograd traces it: Dynamo then compiles a graph per length.)
            xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
            w = torch.randn_like(f(x))
            (f(xc) * w).sum().backward()
            (g(xt) * w.to("tpu")).sum().backward()
            _close(xt.grad, xc.grad, tol=1e-4)
    after = torch_tpu_rs.metrics()
    bucketed = after["bucketed_graphs"] > before["bucketed_graphs"]
    exact = after["exact_shape_graphs"] != before["exact_shape_graphs"]
    if name in BUCKETED_ALONG:
        assert bucketed and not exact, after["exact_shape_graphs"]
        # One graph for inference and one for training, whatever the length:
        # no guard on the length made Dynamo compile again.
        assert after["graph_recompiles"] - before["graph_recompiles"] <= 1, after["graph_recompile_reasons"]
    else:
        assert exact


def _compare_with_gradients(f, g, cpu: list):
    """g (compiled) against f on copies of `cpu` on the tpu: the output, and
    the gradients of a random weighting of it for the inputs that take one."""
    tpu = [t.detach().to("tpu").requires_grad_(t.requires_grad) for t in cpu]
    want, got = f(*cpu), g(*tpu)
    _close(got, want.detach(), tol=1e-4)
    w = torch.randn_like(want)
    (want * w).sum().backward()
    (got * w.to("tpu")).sum().backward()
    for a, b in zip(tpu, cpu):
        if b.requires_grad:
            _close(a.grad, b.grad, tol=1e-4)


def _assert_bucketed_once(before):
    after = torch_tpu_rs.metrics()
    assert after["bucketed_graphs"] > before["bucketed_graphs"]
    assert after["exact_shape_graphs"] == before["exact_shape_graphs"], after["exact_shape_graphs"]
    # One graph for inference and one for training: no guard on a length.
    assert after["graph_recompiles"] - before["graph_recompiles"] <= 1, after["graph_recompile_reasons"]


def _attend(past_k, past_v, x, wq, wk, wv):
    """Causal attention of new tokens over a cache and themselves, as in a
    chunked prefill: keys and values are a cat of two dynamic lengths."""
    q = x @ wq
    k = torch.cat([past_k, x @ wk], 1)
    v = torch.cat([past_v, x @ wv], 1)
    past, new = past_k.shape[1], x.shape[1]
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    query_at = torch.arange(new, device=x.device)[:, None] + past
    key_at = torch.arange(past + new, device=x.device)[None, :]
    return scores.masked_fill(key_at > query_at, float("-inf")).softmax(-1) @ v


def test_a_cat_of_a_cache_and_new_keys_of_two_lengths_is_bucketed():
    # The cat's length is the sum of two symbols: padded to the sum of their
    # buckets, with the new keys moved to right after the cache's real
    # positions; its backward cuts the cache's gradient as a prefix and the
    # new keys' from the real cache length on. Several pairs share buckets
    # (4, 8) with different cache lengths, so a stale position would show.
    g = torch.compile(_attend, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    torch.manual_seed(0)
    for past, new in [(3, 5), (4, 2), (3, 6), (4, 5), (2, 7), (5, 3), (6, 1), (8, 8), (12, 5)]:
        cpu = [torch.randn(2, past, 8), torch.randn(2, past, 8), torch.randn(2, new, 8, requires_grad=True)]
        cpu += [(torch.randn(8, 8) / 3).requires_grad_() for _ in range(3)]
        _compare_with_gradients(_attend, g, cpu)
    _assert_bucketed_once(before)


def test_a_cat_of_two_lengths_with_tokens_between_and_after_is_bucketed():
    # Each operand after the first padded one is written at its real start,
    # in order: the token after `a`, then `b` over the token's padding...
    def f(a, b, tok):
        return torch.cat([a, tok, b, tok * 2], 1).softmax(1) * torch.cat([b, a], 1).sum(1, keepdim=True)

    g = torch.compile(f, backend="tpu", dynamic=True)
    before = torch_tpu_rs.metrics()
    torch.manual_seed(0)
    for n, m in [(3, 5), (4, 6), (2, 7), (7, 2), (9, 3)]:
        cpu = [torch.randn(2, n, 4, requires_grad=True), torch.randn(2, m, 4, requires_grad=True),
               torch.randn(2, 1, 4, requires_grad=True)]
        _compare_with_gradients(f, g, cpu)
    _assert_bucketed_once(before)


# Pooling along the dynamic dimension (only it dynamic: under dynamic=True
# the static width would be padded too). The padding reads as the real
# pooling's own (-inf for a max, 0 for an average) and the backward zeroes
# the gradient's padding. A max's indices are flat positions in the plane,
# the same at either size only while the width is not padded; an average
# that does not count its padding counts its window alike only without it.
POOLINGS = {
    "a max pooling along it": lambda h: F.max_pool2d(h[:, None], (3, 1), stride=(2, 1), padding=(1, 0)).softmax(2),
    "a max pooling with dilation and ceil_mode": lambda h: F.max_pool2d(
        h[:, None] - 2, (2, 1), stride=(2, 1), dilation=(2, 1), ceil_mode=True) * 2,
    "an average pooling with padding": lambda h: F.avg_pool1d(h.transpose(1, 2), 3, stride=2, padding=1).softmax(2),
    "an average pooling not counting padding, without any": lambda h: F.avg_pool1d(
        h.transpose(1, 2), 2, stride=2, count_include_pad=False) * 2,
    # A sum's backward spreads the gradient over the padding too, and the
    # first padded window reads real positions: its gradient must add nothing.
    "a max pooling, then a sum along it": lambda h: F.max_pool2d(h[:, None], (3, 1), stride=1).sum(2),
    "an average pooling, then a sum along it": lambda h: F.avg_pool1d(h.transpose(1, 2), 3, stride=1).sum(2),
}
POOLINGS_AT_EXACT_SIZES = {
    "an average pooling not counting its padding": lambda h: F.avg_pool1d(
        h.transpose(1, 2), 3, stride=2, padding=1, count_include_pad=False) * 2,
    "a max pooling over a padded width": lambda h: F.max_pool2d(h.transpose(1, 2)[:, None], 2) * 2,
}


@pytest.mark.parametrize("name", list(POOLINGS) + list(POOLINGS_AT_EXACT_SIZES))
def test_pooling_along_a_padded_dimension(name):
    f = POOLINGS.get(name) or POOLINGS_AT_EXACT_SIZES[name]
    g = torch.compile(f, backend="tpu")
    before = torch_tpu_rs.metrics()
    torch.manual_seed(0)
    for n in (5, 6, 9, 12, 17):
        x = torch.randn(2, n, 8, requires_grad=True)
        xt = x.detach().to("tpu")
        torch._dynamo.mark_dynamic(xt, 1)
        xt.requires_grad_()
        want, got = f(x), g(xt)
        _close(got, want.detach(), tol=1e-5)
        w = torch.randn_like(want)
        (want * w).sum().backward()
        (got * w.to("tpu")).sum().backward()
        _close(xt.grad, x.grad, tol=1e-5)
    if name in POOLINGS:
        _assert_bucketed_once(before)
    else:
        assert torch_tpu_rs.metrics()["exact_shape_graphs"] != before["exact_shape_graphs"]
