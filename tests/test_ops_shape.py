"""Shape ops on tpu against the CPU: views (metadata only: values, strides
and storage offsets must equal the CPU's, and writes through a view must
reach the base), and the ops that move data (cat/stack, flip, roll,
tril/triu, padding, repeat, ...), including gradients."""
import pytest
import torch

from conftest import assert_same, run_both

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool]


def make(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.randn(*shape) > 0
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-50, 50, shape, dtype=dtype)


# ------------------------------------------------------------------ views

VIEWS = {
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(2, 12),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "t_of_2d": lambda x: x[0].t(),
    "expand": lambda x: x[:, :1, :].expand(2, 5, 4),
    "slice": lambda x: x[:, 1:3, ::2],
    "neg_step_free_narrow": lambda x: x.narrow(2, 1, 2),
    "select": lambda x: x[1, :, 2],
    "split": lambda x: x.split(2, dim=2)[1],
    "chunk": lambda x: x.chunk(3, dim=1)[2],
    "unbind": lambda x: x.unbind(1)[1],
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "as_strided": lambda x: x.as_strided((3, 3), (5, 1), 2),
    "diagonal": lambda x: x.diagonal(0, 1, 2),
    "unfold": lambda x: x.unfold(2, 2, 1),
    "movedim": lambda x: x.movedim(0, -1),
    "flatten_contig": lambda x: x.flatten(),
    "real_view_of_view": lambda x: x[1:].transpose(1, 2)[:, 1],
}


@pytest.mark.parametrize("name", list(VIEWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_view_metadata_and_values(name, dtype):
    x = make(2, 3, 4, dtype=dtype)
    tpu, cpu = run_both(VIEWS[name], x)
    assert_same(tpu, cpu, check_strides=True)


@pytest.mark.parametrize("name", [n for n in VIEWS if n not in ("expand", "unfold")])
def test_inplace_on_view_updates_base(name):
    def f(x):
        x = x.clone()
        v = VIEWS[name](x)
        v.mul_(-2).add_(1)
        return x

    assert_same(*run_both(f, torch.randn(2, 3, 4)))


def test_inplace_through_chain_of_views():
    def f(x):
        x = x.clone()
        x.t()[1:3].fill_(7)
        x[:, 0].copy_(torch.arange(4.0, device=x.device))
        x.view(-1)[::5] = -1
        return x

    assert_same(*run_both(f, torch.randn(4, 5)))


def test_contiguous_of_views():
    x = torch.randn(3, 4, 5)
    for fn in (lambda x: x.transpose(0, 2).contiguous(), lambda x: x[:, ::2].reshape(-1),
               lambda x: x.permute(1, 2, 0).clone(), lambda x: x[:, :1].expand(3, 6, 5).contiguous()):
        tpu, cpu = run_both(fn, x)
        assert_same(tpu, cpu, check_strides=True)


# ------------------------------------------------------------------ cat/stack

@pytest.mark.parametrize("dtype", DTYPES)
def test_cat(dtype):
    a, b, c = make(2, 3, dtype=dtype), make(4, 3, dtype=dtype), make(1, 3, dtype=dtype)
    assert_same(*run_both(lambda a, b, c: torch.cat([a, b, c]), a, b, c))
    assert_same(*run_both(lambda a, b: torch.cat([a.t(), b.t()], dim=-1), a, b))
    assert_same(*run_both(lambda a, b: torch.stack([a, a * 1, a[:, :]], dim=1), a, b))
    assert_same(*run_both(lambda a, b: torch.hstack([a, a]), a, b))


def test_cat_empty_and_promotion():
    a, e = torch.randn(2, 3), torch.empty(0)
    assert_same(*run_both(lambda a, e: torch.cat([e, a, e]), a, e))
    assert_same(*run_both(lambda e: torch.cat([e, e]), e))
    z = torch.empty(0, 3)
    assert_same(*run_both(lambda a, z: torch.cat([z, a, z]), a, z))
    assert_same(*run_both(lambda z: torch.cat([z, z], 1), z))
    i = torch.arange(6).reshape(2, 3)
    assert_same(*run_both(lambda a, i: torch.cat([i, a]), a, i))
    assert_same(*run_both(lambda a, i: torch.cat([i.int(), i, (i > 2)]), a, i))
    assert_same(*run_both(lambda a: torch.cat([a.bfloat16(), a.half()]), a))


def test_cat_out_and_noncontiguous():
    a, b = torch.randn(3, 4), torch.randn(3, 2)

    def f(a, b):
        o = torch.empty(0, device=a.device)
        r = torch.cat([a[:, ::2], b], 1, out=o)
        assert r is o
        return o

    assert_same(*run_both(f, a, b))

    def f2(a, b):
        o = torch.zeros(3, 8, device=a.device)
        torch.cat([a, b], 1, out=o[:, 1:7])
        return o

    assert_same(*run_both(f2, a, b))


def test_cat_errors():
    for tensors, dim in [([torch.randn(2, 3), torch.randn(2, 4)], 0), ([torch.randn(2, 3), torch.randn(3)], 0),
                         ([torch.randn(2, 3), torch.randn(2, 3)], 2), ([torch.tensor(1.0)], 0)]:
        with pytest.raises(Exception) as cpu:
            torch.cat(tensors, dim)
        with pytest.raises(type(cpu.value)):
            torch.cat([t.to("tpu") for t in tensors], dim)


def test_cat_stack_backward():
    a, b = torch.randn(2, 3), torch.randn(4, 3)

    def f(a, b):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        y = torch.cat([a, b * 2])
        y.backward(torch.arange(18.0, device=y.device).reshape(6, 3))
        s = torch.stack([a, a])
        s.backward(torch.ones_like(s))
        return a.grad, b.grad

    assert_same(*run_both(f, a, b))


# ------------------------------------------------------------------ flip/roll/tril

@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll(dtype):
    x = make(3, 4, 5, dtype=dtype)
    for fn in (lambda x: x.flip(0), lambda x: x.flip(0, 2), lambda x: x.flip(-1), lambda x: x.fliplr(),
               lambda x: x.transpose(0, 2).flip(1), lambda x: torch.rot90(x, 1, (0, 1)),
               lambda x: x.roll(2), lambda x: x.roll(-7), lambda x: x.roll(1, 0), lambda x: x.roll((1, -2), (0, 2)),
               lambda x: x[:, ::2].roll(13, 1), lambda x: x.roll(0, 1)):
        assert_same(*run_both(fn, x))


def test_flip_roll_errors_and_backward():
    with pytest.raises(RuntimeError):
        torch.randn(2, 3).to("tpu").flip(0, 0)
    with pytest.raises(IndexError):
        torch.randn(2, 3).to("tpu").flip(2)

    def f(x):
        x = x.clone().requires_grad_()
        y = x.flip(1).roll(1, 0)
        y.backward(torch.arange(6.0, device=x.device).reshape(2, 3))
        return x.grad

    assert_same(*run_both(f, torch.randn(2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu(dtype):
    x = make(2, 4, 5, dtype=dtype)
    for k in [0, 1, -1, 3, -4]:
        assert_same(*run_both(lambda x: x.tril(k), x))
        assert_same(*run_both(lambda x: torch.triu(x, k), x))
    assert_same(*run_both(lambda x: x.transpose(1, 2).triu(1), x))


def test_tril_inplace_out_backward():
    x = torch.randn(4, 4)

    def f(x):
        x = x.clone()
        x.tril_(1)
        o = torch.empty(0, device=x.device)
        torch.triu(x, out=o)
        return x, o

    assert_same(*run_both(f, x))

    def g(x):
        x = x.clone().requires_grad_()
        x.triu(1).backward(torch.ones(4, 4, device=x.device))
        return x.grad

    assert_same(*run_both(g, x))
    with pytest.raises(RuntimeError):
        torch.randn(3).to("tpu").tril()


# ------------------------------------------------------------------ compositions

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_composite_shape_ops(dtype):
    x = make(3, 4, dtype=dtype)
    fns = [
        lambda x: x.repeat(2, 3), lambda x: x.repeat(2, 1, 1), lambda x: torch.tile(x, (2,)),
        lambda x: x.repeat_interleave(2, dim=1), lambda x: torch.nn.functional.pad(x, (1, 2, 0, 1), value=3),
        lambda x: torch.nn.functional.pad(x, (-1, 1)), lambda x: torch.constant_pad_nd(x, (2, -1), 5),
        lambda x: torch.narrow_copy(x, 1, 1, 2), lambda x: torch.diag(x), lambda x: torch.diag(x[0]),
        lambda x: torch.diag_embed(x), lambda x: torch.block_diag(x, x[:1]), lambda x: torch.kron(x, x[:2, :2]),
        lambda x: torch.meshgrid(x[0], x[:, 0], indexing="ij"), lambda x: x.t().flatten(),
        lambda x: torch.split_with_sizes_copy(x, [1, 3], 1), lambda x: torch.unbind_copy(x),
        lambda x: torch.slice_scatter(x, x[:1] * 2, 0, 1, 2), lambda x: torch.select_scatter(x, x[0], 0, 2),
        lambda x: torch.diagonal_scatter(x, x[0, :3], 0),
    ]
    for fn in fns:
        assert_same(*run_both(fn, x))


def test_pad_repeat_backward():
    x = torch.randn(2, 3)

    def f(x):
        x = x.clone().requires_grad_()
        y = torch.nn.functional.pad(x, (1, 1, 1, 0))
        y.backward(torch.arange(15.0, device=x.device).reshape(3, 5))
        z = x.repeat(2, 2)
        z.backward(torch.ones_like(z))
        return x.grad

    assert_same(*run_both(f, x))


REPEAT_INTERLEAVE = {
    "per column": lambda x, d: x.repeat_interleave(torch.tensor([1, 2, 0], device=d), dim=1),
    "with output_size": lambda x, d: x.repeat_interleave(torch.tensor([1, 2, 0], device=d), dim=1, output_size=3),
    "per row": lambda x, d: x.repeat_interleave(torch.tensor([2, 1], device=d), dim=0),
    "0-d repeats, flattened": lambda x, d: torch.repeat_interleave(x, torch.tensor(2, device=d)),
    "indices only": lambda x, d: torch.repeat_interleave(torch.tensor([3, 0, 2], device=d, dtype=torch.int32)),
    "empty": lambda x, d: torch.repeat_interleave(torch.tensor([], dtype=torch.long, device=d)),
}


@pytest.mark.parametrize("case", list(REPEAT_INTERLEAVE))
def test_repeat_interleave_with_tensor_repeats(case, mode):
    """The output size is the sum of the repeats: read from the device first
    (a host sync, as on CUDA)."""
    x = torch.arange(6.0).view(2, 3)
    f = REPEAT_INTERLEAVE[case]
    assert_same(f(x.to("tpu"), "tpu"), f(x, "cpu"))


def test_repeat_interleave_bad_repeats_raise_like_cpu():
    for d in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="repeats can not be negative"):
            torch.repeat_interleave(torch.tensor([1, -1], device=d)).cpu()
        with pytest.raises(RuntimeError, match="allocated size does not match required size"):
            torch.ones(2, 3, device=d).repeat_interleave(torch.tensor([1, 2, 0], device=d), dim=1, output_size=4)
    assert_same(torch.repeat_interleave(torch.tensor([2, 1], device="tpu")), torch.tensor([0, 0, 1]))
