"""Bad input raises a clear Python exception, and the device keeps working."""
import pytest
import torch

import torch_tpu_rs
from conftest import assert_same, run_both


def device_still_works():
    x = torch.arange(4.0, device="tpu")
    assert (x * 2 + 1).cpu().tolist() == [1.0, 3.0, 5.0, 7.0]


def test_mismatched_shapes():
    a, b = torch.ones(3, device="tpu"), torch.ones(4, device="tpu")
    with pytest.raises(RuntimeError, match="size of tensor"):
        a + b
    with pytest.raises(RuntimeError):
        torch.mm(torch.ones(2, 3, device="tpu"), torch.ones(4, 5, device="tpu"))
    device_still_works()


def test_cpu_tensor_mixed_with_tpu():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    device_still_works()


def test_zero_dim_cpu_tensor_is_a_scalar():
    # As on CUDA: a 0-dim CPU tensor mixes with device tensors.
    out = torch.ones(3, device="tpu") * torch.tensor(2.5)
    assert out.device.type == "tpu" and out.cpu().tolist() == [2.5, 2.5, 2.5]


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="complex32"):
        torch.ones(3, dtype=torch.complex32).to("tpu") + 1
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        torch.ones(3).to(torch.float8_e4m3fn).to("tpu")
    device_still_works()


@pytest.mark.parametrize("mode", ["debug", "strict"])
def test_out_of_range_index(mode):
    torch_tpu_rs.set_eager_mode(mode)
    w = torch.randn(5, 3, device="tpu")
    idx = torch.tensor([1, 7], device="tpu")
    with pytest.raises(IndexError, match="index_select|embedding|out of"):
        out = torch.index_select(w, 0, idx)
        out.cpu()  # strict: raised at the latest here, at the next host sync
    device_still_works()
    # The error is raised once, not again at later syncs.
    torch.tpu.synchronize()


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_out_of_memory_is_torch_out_of_memory_error(mode):
    """Asking for more than the device holds raises torch.OutOfMemoryError
    (what scripts written for CUDA catch as torch.cuda.OutOfMemoryError) at
    allocation, as on CUDA, and the device keeps working. (PJRT's own
    out-of-memory errors map to it too: crates/engine/src/error.rs tests.)"""
    torch_tpu_rs.set_eager_mode(mode)
    try:
        x = torch.arange(3.0, device="tpu")
        before = torch.tpu.memory_allocated()
        for make in (lambda: torch.empty(10**17, device="tpu"), lambda: torch.ones(10**17, device="tpu"),
                     lambda: x.resize_(10**17)):
            with pytest.raises(torch.cuda.OutOfMemoryError, match=r"out of memory: tried to allocate .* GiB on tpu:0"):
                make()
        assert torch.tpu.memory_allocated() == before
        # A failed resize_ leaves the tensor as it was.
        assert x.shape == (3,) and x.cpu().tolist() == [0.0, 1.0, 2.0]
    finally:
        torch_tpu_rs.set_eager_mode("strict")
    device_still_works()


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_an_op_whose_result_cannot_fit_is_refused_before_it_runs(mode):
    """New outputs are checked against the device's memory when the op is
    dispatched, not when its program fails: a program that failed for
    memory left the tensors it updated in place holding its error for good."""
    torch_tpu_rs.set_eager_mode(mode)
    p = torch.ones(3, device="tpu") * 2
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError, match=r"aten::eye.*out of memory: tried to allocate"):
        p.add_(torch.eye(10**7, device="tpu")[0, :3])
    with pytest.raises(torch.OutOfMemoryError, match=r"aten::multinomial.*out of memory"):
        torch.multinomial(torch.tensor([0.5, 0.5], device="tpu"), 10**12, replacement=True)
    torch.tpu.synchronize()  # nothing deferred is left to raise
    assert torch.tpu.memory_allocated() == before
    p.mul_(3)
    assert p.cpu().tolist() == [6.0, 6.0, 6.0]
    device_still_works()


def test_debug_eager_raises_at_the_failing_compiled_call():
    torch_tpu_rs.set_eager_mode("debug")
    w = torch.arange(30.0, device="tpu").reshape(10, 3)
    f = torch.compile(lambda w, i: w[i] * 2, backend="tpu")
    assert f(w, torch.tensor([1, 2], device="tpu")).cpu()[1, 0] == 12.0
    with pytest.raises(IndexError, match="index out of range"):
        f(w, torch.tensor([1, 12], device="tpu"))
    assert f(w, torch.tensor([3], device="tpu")).cpu().tolist() == [[18.0, 20.0, 22.0]]


def test_negative_index_wraps_like_cpu():
    w = torch.arange(10.0).reshape(5, 2)
    idx = torch.tensor([-1, 0])
    assert torch.equal(w.to("tpu")[idx.to("tpu")].cpu(), w[idx])


def test_unlowered_op_message():
    x = torch.randn(4, 4, device="tpu")
    with pytest.raises(NotImplementedError) as e:
        torch.linalg.eigvals(x)  # no lowering yet (see tests/test_fallback.py)
    msg = str(e.value)
    assert "tpu" in msg and "TORCH_TPU_CPU_FALLBACK=1" in msg
    assert "[4, 4]" in msg and "float32" in msg
    device_still_works()


BAD_VALUES = {
    # name: (the op on CPU tensors or tpu tensors, what the CPU says)
    "searchsorted sorter": (
        lambda d: torch.searchsorted(torch.tensor([1.0, 2.0, 3.0], device=d), torch.tensor([2.5], device=d),
                                     sorter=torch.tensor([0, 5, 1], device=d)),
        "sorter index out of range",
    ),
    "binary_cross_entropy": (
        lambda d: torch.nn.functional.binary_cross_entropy(torch.tensor([1.5], device=d), torch.ones(1, device=d)),
        "between 0 and 1",
    ),
    "multinomial": (lambda d: torch.multinomial(torch.tensor([-1.0, 2.0], device=d), 1), "element < 0"),
    "multi_margin_loss": (
        lambda d: torch.nn.functional.multi_margin_loss(torch.zeros(2, 3, device=d), torch.tensor([0, 5], device=d)),
        "target out of range",
    ),
    "embedding_bag first offset": (
        lambda d: torch.nn.functional.embedding_bag(
            torch.tensor([1, 2, 3, 4], device=d), torch.ones(10, 3, device=d), torch.tensor([1, 2], device=d)
        ),
        "offsets\\[0\\] has to be 0, .* However, got 1\\b",
    ),
    "embedding_bag index out of range": (
        lambda d: torch.nn.functional.embedding_bag(
            torch.tensor([0, 7, 9], device=d), torch.ones(3, 2, device=d), torch.tensor([0], device=d)
        ),
        "Index 1 of input takes value 7 which is not in the valid range \\[0, 3\\)",
    ),
    "lu_solve with a pivot below 1": (
        lambda d: torch.linalg.lu_solve(torch.eye(3, device=d), torch.tensor([1, 0, 3], dtype=torch.int32, device=d),
                                        torch.ones(3, 1, device=d)),
        "Pivots given to lu_solve must all be greater or equal to 1",
    ),
    "lu_solve with a pivot past n": (
        lambda d: torch.linalg.lu_solve(torch.eye(3, device=d), torch.tensor([1, 2, 4], dtype=torch.int32, device=d),
                                        torch.ones(3, 1, device=d)),
        "Pivots given to lu_solve must all be smaller or equal to LU.size\\(-2\\)",
    ),
    "conv_transpose2d with output_padding >= stride": (
        lambda d: torch.nn.functional.conv_transpose2d(torch.ones(1, 1, 3, 3, device=d), torch.ones(1, 1, 2, 2, device=d),
                                                       stride=(2, 1), output_padding=(1, 1)),
        "output padding must be smaller than either stride or dilation, but got output_padding_height: 1 "
        "output_padding_width: 1 stride_height: 2 stride_width: 1 dilation_height: 1 dilation_width: 1",
    ),
    "conv_transpose1d with output_padding >= stride": (
        lambda d: torch.nn.functional.conv_transpose1d(torch.ones(1, 1, 3, device=d), torch.ones(1, 1, 2, device=d),
                                                       stride=2, output_padding=2),
        "output_padding_height: 0 output_padding_width: 2 stride_height: 1 stride_width: 2",
    ),
    "embedding_bag last offset": (
        lambda d: torch.nn.functional.embedding_bag(
            torch.tensor([1, 2, 3, 4], device=d), torch.ones(10, 3, device=d), torch.tensor([0, 5], device=d)
        ),
        "offsets\\[-1\\] can not be greater than input's length 4 but got offsets\\[-1\\] of 5",
    ),
    # Integer division by zero (XLA would return garbage, as CUDA does).
    "floor_divide by zero": (lambda d: torch.tensor([5, -5], device=d) // torch.tensor([0, 2], device=d), "ZeroDivisionError"),
    "remainder by zero": (lambda d: torch.tensor([5, -5], device=d) % 0, "ZeroDivisionError"),
    "fmod by zero": (lambda d: torch.fmod(torch.tensor([5], device=d), torch.tensor([0], device=d)), "ZeroDivisionError"),
    "trunc division by zero": (
        lambda d: torch.div(torch.tensor([7, 1], device=d), torch.tensor([1, 0], device=d), rounding_mode="trunc"),
        "ZeroDivisionError",
    ),
    # Parameters of random draws, and numbers that have no integer value (they
    # computed silently: NaN into int64 wrote INT64_MIN).
    "normal with a negative std": (
        lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1.0, -1.0, 1.0], device=d)),
        "normal expects all elements of std >= 0.0",
    ),
    "normal with a NaN std": (
        lambda d: torch.normal(torch.zeros(2, device=d), torch.tensor([1.0, float("nan")], device=d)),
        "normal expects all elements of std >= 0.0",
    ),
    "fill_(2**63) into int64": (
        lambda d: torch.zeros(2, dtype=torch.long, device=d).fill_(2.0**63),
        "value cannot be converted to type int64_t without overflow",
    ),
    "normal with a negative float std": (
        lambda d: torch.normal(torch.zeros(3, device=d), -1.0), "normal expects std >= 0.0, but found std -1"),
    "bernoulli with p above 1": (
        lambda d: torch.bernoulli(torch.full((3,), 1.5, device=d)), "Expected p_in >= 0 && p_in <= 1"),
    "bernoulli_ with a NaN p tensor": (
        lambda d: torch.zeros(3, device=d).bernoulli_(torch.tensor([0.5, float("nan"), 0.5], device=d)),
        "Expected p_in >= 0 && p_in <= 1",
    ),
    "full(nan) as int64": (
        lambda d: torch.full((2,), float("nan"), dtype=torch.long, device=d),
        "value cannot be converted to type int64_t without overflow",
    ),
    "index_fill_(inf) into int32": (
        lambda d: torch.zeros(3, dtype=torch.int32, device=d).index_fill_(0, torch.tensor([0], device=d), float("inf")),
        "value cannot be converted to type int without overflow",
    ),
}


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_assert_async_checks_on_the_device(mode):
    torch_tpu_rs.set_eager_mode(mode)
    for ok in (torch.tensor(True), torch.tensor(2.0), torch.tensor(1j)):
        torch._assert_async(ok.to("tpu"))
    torch.tpu.synchronize()
    for bad, msg, expected in [
        (torch.tensor(0), None, "single nonzero value, but got zero"),
        (torch.tensor(False), "my check", "my check"),
        (torch.tensor(0j), None, "single nonzero value"),
    ]:
        with pytest.raises(RuntimeError, match=expected):
            torch._assert_async(bad.to("tpu")) if msg is None else torch.ops.aten._assert_async.msg(bad.to("tpu"), msg)
            torch.tpu.synchronize()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        torch._assert_async(torch.ones(2, device="tpu"))
    device_still_works()


def test_float_and_true_division_by_zero_still_give_inf():
    a, b = torch.tensor([5.0, -5.0, 0.0]), torch.tensor([0.0, 0.0, 0.0])
    assert_same(*run_both(lambda x, y: x // y, a, b))
    assert_same(*run_both(lambda x, y: x / y, a.long(), b.long()))


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_bad_values_seen_on_the_device_raise_what_the_cpu_raises(name, mode):
    """Checks of values (not indices) that the device computes are deferred
    like index checks, but raise RuntimeError, as on the CPU."""
    op, message = BAD_VALUES[name]
    with pytest.raises(RuntimeError, match=message):
        op("cpu")
    torch_tpu_rs.set_eager_mode(mode)
    with pytest.raises(RuntimeError, match=message) as raised:
        op("tpu")
        torch.tpu.synchronize()  # strict, fused: raised at the latest here
    assert type(raised.value) is RuntimeError  # not IndexError, nor a subclass such as NotImplementedError
    device_still_works()
    torch.tpu.synchronize()  # raised once, not again


def _T(v, d):
    return torch.tensor(v, device=d)


BAD_INDICES = {
    # name: (the op, what the CPU says, quoting the first bad value[, the
    # exception when not IndexError])
    "advanced indexing": (lambda d: torch.zeros(3, device=d)[_T([0, 5, 9], d)],
                          "index 5 is out of bounds for dimension 0 with size 3"),
    "advanced indexing, negative": (lambda d: torch.zeros(3, device=d)[_T([0, -5], d)],
                                    "index -5 is out of bounds for dimension 0 with size 3"),
    "index_put_": (lambda d: torch.zeros(3, device=d).index_put_((_T([7], d),), _T(1.0, d)),
                   "index 7 is out of bounds for dimension 0 with size 3"),
    "index_copy": (lambda d: torch.zeros(3, device=d).index_copy(0, _T([0, 5], d), torch.ones(2, device=d)),
                   "index 5 is out of bounds for dimension 0 with size 3"),
    "index_select": (lambda d: torch.zeros(3, device=d).index_select(0, _T([0, 5], d)), "index out of range in self"),
    "put_": (lambda d: torch.zeros(3, device=d).put_(_T([0, 5], d), torch.ones(2, device=d)),
             "tried to access index 5 on a tensor of 3 elements"),
    "gather": (lambda d: torch.zeros(3, device=d).gather(0, _T([0, 5], d)),
               "index 5 is out of bounds for dimension 0 with size 3", RuntimeError),
    "scatter_add": (lambda d: torch.zeros(3, device=d).scatter_add(0, _T([0, 5], d), torch.ones(2, device=d)),
                    "index 5 is out of bounds for dimension 0 with size 3", RuntimeError),
    "cross_entropy target": (
        lambda d: torch.nn.functional.cross_entropy(torch.zeros(3, 4, device=d), torch.tensor([0, 5, 9], device=d)),
        "Target 5 is out of bounds",
    ),
    "nll_loss negative target": (
        lambda d: torch.nn.functional.nll_loss(torch.zeros(3, 4, device=d), torch.tensor([0, -3, 9], device=d)),
        "Target -3 is out of bounds",
    ),
    "cross_entropy 2d target": (
        lambda d: torch.nn.functional.cross_entropy(
            torch.zeros(2, 3, 2, 2, device=d), torch.tensor([[[0, 1], [2, 1]], [[1, 1], [1, 7]]], device=d)),
        "Target 7 is out of bounds",
    ),
    "index_reduce_ index": (
        lambda d: torch.zeros(3, device=d).index_reduce_(0, torch.tensor([0, 5], device=d), torch.ones(2, device=d), "prod"),
        "index out of range in self",
    ),
}


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("name", list(BAD_INDICES))
def test_bad_indices_raise_the_cpus_error_and_quote_the_value(name, mode):
    op, message, *kind = BAD_INDICES[name]
    kind = kind[0] if kind else IndexError
    with pytest.raises(kind, match=message) as raised:
        op("cpu")
    assert type(raised.value) is kind
    torch_tpu_rs.set_eager_mode(mode)
    with pytest.raises(kind, match=message) as raised:
        op("tpu")
        torch.tpu.synchronize()
    assert type(raised.value) is kind
    device_still_works()
    torch.tpu.synchronize()


def test_embedding_bag_offsets_that_decrease_are_refused():
    # The CPU refuses them too, with messages that depend on the kernel path.
    with pytest.raises(RuntimeError):
        torch.nn.functional.embedding_bag(torch.tensor([1, 2, 3, 4]), torch.ones(10, 3), torch.tensor([0, 3, 2]))
    with pytest.raises(RuntimeError, match="offsets must not decrease"):
        torch.nn.functional.embedding_bag(
            torch.tensor([1, 2, 3, 4], device="tpu"), torch.ones(10, 3, device="tpu"), torch.tensor([0, 3, 2], device="tpu")
        ).cpu()
    device_still_works()


SINGULAR = {
    "solve_ex": lambda d: torch.linalg.solve_ex(torch.zeros(2, 2, device=d), torch.ones(2, device=d), check_errors=True),
    "inv_ex": lambda d: torch.linalg.inv_ex(torch.zeros(2, 2, device=d), check_errors=True),
    "cholesky_ex": lambda d: torch.linalg.cholesky_ex(-torch.eye(2, device=d), check_errors=True),
    # NaN input: LAPACK fails where Jacobi sweeps returned NaN.
    "svd of NaN": lambda d: torch.linalg.svd(torch.full((3, 3), float("nan"), device=d)),
    "pinv of NaN": lambda d: torch.linalg.pinv(torch.tensor([[1.0, float("nan")], [0.0, 1.0]], device=d)),
}


@pytest.mark.parametrize("mode", ["debug", "strict"])
@pytest.mark.parametrize("name", list(SINGULAR))
def test_singular_matrix_checks_raise_linalg_error(name, mode):
    with pytest.raises(torch.linalg.LinAlgError):
        SINGULAR[name]("cpu")
    torch_tpu_rs.set_eager_mode(mode)
    with pytest.raises(torch.linalg.LinAlgError):
        SINGULAR[name]("tpu")
        torch.tpu.synchronize()
    device_still_works()
    # lu_factor_ex's check is a plain RuntimeError on the CPU, and here.
    with pytest.raises(RuntimeError) as raised:
        torch.linalg.lu_factor_ex(torch.zeros(2, 2, device="tpu"), check_errors=True)
        torch.tpu.synchronize()
    assert type(raised.value) is RuntimeError


def test_sparse_tensors_get_a_clear_error_and_the_device_keeps_working():
    emb = torch.nn.Embedding(10, 3, sparse=True).to("tpu")
    with pytest.raises(NotImplementedError, match="sparse tensors are not supported on the tpu device.*sparse=False"):
        emb(torch.tensor([1, 2], device="tpu")).sum().backward()
    with pytest.raises(NotImplementedError, match="sparse tensors are not supported on the tpu device"):
        torch.ones(3, 3).to_sparse().to("tpu")
    dense = torch.nn.Embedding(10, 3).to("tpu")
    dense(torch.tensor([1, 2], device="tpu")).sum().backward()
    assert dense.weight.grad.cpu()[1:3].eq(1).all()


@pytest.mark.parametrize("case", ["copy_", "add", "copy_into_smaller", "solve_triangular_vector", "solve_triangular", "solve_triangular_right", "mode_empty", "unique_dim",
                                  "index_select_float_index", "masked_scatter_short_source", "sort_int32_indices",
                                  "topk_double_values", "max_dim_float_indices", "cat_into_long",
                                  "index_select_into_double", "index_select_into_long", "svd_driver",
                                  "arange_step_sign", "arange_zero_step", "kthvalue_k", "randint_empty_range",
                                  "layer_norm_shape", "max_of_empty", "masked_fill_float_mask"])
def test_messages_read_like_the_cpus(case):
    """Errors the lowering raises say what PyTorch's CPU kernels say, in
    PyTorch's terms (no StableHLO types, no internal op names), and raise
    the same exception type."""
    make = {
        "copy_": lambda d: torch.ones(3, 4, device=d).copy_(torch.ones(4, 5, device=d)),
        "add": lambda d: torch.ones(3, 4, device=d) + torch.ones(4, 5, device=d),
        "copy_into_smaller": lambda d: torch.zeros(1, 3, device=d).copy_(torch.zeros(2, 3, device=d)),
        "solve_triangular_vector": lambda d: torch.linalg.solve_triangular(torch.eye(3, device=d),
                                                                            torch.ones(3, device=d), upper=True),
        "solve_triangular": lambda d: torch.linalg.solve_triangular(torch.eye(3, device=d), torch.ones(4, 1, device=d),
                                                                     upper=True),
        "solve_triangular_right": lambda d: torch.linalg.solve_triangular(
            torch.eye(3, device=d), torch.ones(4, 2, device=d), upper=True, left=False),
        "mode_empty": lambda d: torch.mode(torch.empty(0, device=d)),
        "unique_dim": lambda d: torch.unique(torch.ones(3, 4, device=d), dim=3),
        "index_select_float_index": lambda d: torch.index_select(torch.ones(5, 3, device=d), 0,
                                                                 torch.tensor([1.0], device=d)),
        "masked_scatter_short_source": lambda d: torch.zeros(3, 4, device=d).masked_scatter_(
            torch.ones(3, 4, dtype=torch.bool, device=d), torch.ones(3, device=d)),
        # Several out= tensors are each taken at exactly their result's dtype.
        "sort_int32_indices": lambda d: torch.sort(torch.tensor([3.0, 1.0], device=d), out=(
            torch.empty(2, device=d), torch.empty(2, dtype=torch.int32, device=d))),
        "topk_double_values": lambda d: torch.topk(torch.tensor([3.0, 1.0], device=d), 1, out=(
            torch.empty(1, dtype=torch.double, device=d), torch.empty(1, dtype=torch.long, device=d))),
        "max_dim_float_indices": lambda d: torch.max(torch.ones(2, 2, device=d), 0, out=(
            torch.empty(2, device=d), torch.empty(2, device=d))),
        "cat_into_long": lambda d: torch.cat([torch.ones(2, device=d), torch.ones(2, device=d)],
                                             out=torch.empty(4, dtype=torch.long, device=d)),
        # index_select takes no cast into out=, even a widening one.
        "index_select_into_double": lambda d: torch.index_select(
            torch.ones(5, 3, device=d), 0, torch.tensor([1], device=d), out=torch.empty(1, 3, dtype=torch.double, device=d)),
        "index_select_into_long": lambda d: torch.index_select(
            torch.ones(5, 3, device=d), 0, torch.tensor([1], device=d), out=torch.empty(1, 3, dtype=torch.long, device=d)),
        # driver= is for cuSOLVER only.
        "svd_driver": lambda d: torch.linalg.svd(torch.ones(3, 2, device=d), driver="gesvd"),
        "arange_step_sign": lambda d: torch.arange(0, 10, -1, device=d),
        "arange_zero_step": lambda d: torch.arange(0, 10, 0, device=d),
        "kthvalue_k": lambda d: torch.zeros(3, device=d).kthvalue(5),
        "randint_empty_range": lambda d: torch.randint(5, 5, (3,), device=d),
        "layer_norm_shape": lambda d: torch.nn.functional.layer_norm(torch.zeros(2, 3, device=d), (4,)),
        "max_of_empty": lambda d: torch.zeros(0, device=d).max(),
        "masked_fill_float_mask": lambda d: torch.zeros(3, device=d).masked_fill(torch.zeros(3, device=d), 1.0),
    }[case]
    with pytest.raises(Exception) as cpu:
        make("cpu")
    with pytest.raises(Exception) as tpu:
        make("tpu")
        torch.tpu.synchronize()
    assert type(tpu.value) is type(cpu.value)
    cpu_message = str(cpu.value).splitlines()[0]
    assert cpu_message in str(tpu.value)
    for jargon in ("stablehlo", "tensor<", "#size"):
        assert jargon not in str(tpu.value)
    device_still_works()


LINALG_DTYPES = {
    "cholesky_half": (lambda d: torch.linalg.cholesky(torch.eye(3, device=d).half()), "Half"),
    "qr_half": (lambda d: torch.linalg.qr(torch.eye(3, device=d).half()), "Half"),
    "solve_half": (lambda d: torch.linalg.solve(torch.eye(3, device=d).half(), torch.ones(3, 1, device=d).half()), "Half"),
    "eigh_bfloat16": (lambda d: torch.linalg.eigh(torch.eye(3, device=d).bfloat16()), "BFloat16"),
    "matrix_exp_long": (lambda d: torch.linalg.matrix_exp(torch.eye(3, device=d).long()), "Long"),
}


@pytest.mark.parametrize("case", list(LINALG_DTYPES))
def test_linalg_on_dtypes_lapack_lacks_raises_not_implemented_like_the_cpu(case):
    """The CPU raises NotImplementedError for these dtypes; so does tpu,
    naming the dtype as torch does (Half, not F16)."""
    make, dtype_name = LINALG_DTYPES[case]
    with pytest.raises(NotImplementedError):
        make("cpu")
    with pytest.raises(NotImplementedError, match=f"Got {dtype_name}\\b"):
        make("tpu")
        torch.tpu.synchronize()
    device_still_works()


# Writes through a view whose elements share memory (an expanded tensor).
# PyTorch's CPU kernels refuse those that go through TensorIterator or check
# their result; the others write. `None`: the CPU writes, and the values
# depend on its write order (a reduction accumulating into its out=).
OVERLAPPING_WRITES = {
    "add out=": (lambda d, out: torch.add(torch.ones(2, 3, device=d), 1, out=out), True),
    "exp out=": (lambda d, out: torch.exp(torch.ones(2, 3, device=d), out=out), True),
    "where out=": (lambda d, out: torch.where(torch.ones(2, 3, device=d) > 0, torch.ones(2, 3, device=d),
                                              torch.zeros(2, 3, device=d), out=out), True),
    "mul_": (lambda d, out: out.mul_(2), True),
    "copy_": (lambda d, out: out.copy_(torch.ones(2, 3, device=d)), True),
    "copy_ from the CPU": (lambda d, out: out.copy_(torch.ones(2, 3)), True),
    "uniform_": (lambda d, out: out.uniform_(), True),
    "bernoulli_": (lambda d, out: out.bernoulli_(0.5), True),
    "mm out=": (lambda d, out: torch.mm(torch.ones(2, 4, device=d), torch.ones(4, 3, device=d), out=out), True),
    "cat out=": (lambda d, out: torch.cat([torch.ones(1, 3, device=d)] * 2, out=out), True),
    "fill_": (lambda d, out: out.fill_(1), False),
    "zero_": (lambda d, out: out.zero_(), False),
    "sum out=": (lambda d, out: torch.sum(torch.ones(2, 3, 4, device=d), -1, out=out), None),
}


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("case", list(OVERLAPPING_WRITES))
def test_writes_through_expanded_views_are_refused_where_the_cpu_refuses_them(case, mode):
    op, refused = OVERLAPPING_WRITES[case]
    message = "more than one element of the written-to tensor refers to a single memory location"
    cpu_base = torch.zeros(3)
    if refused:
        with pytest.raises(RuntimeError, match=message):
            op("cpu", cpu_base.expand(2, 3))
    else:
        op("cpu", cpu_base.expand(2, 3))
    torch_tpu_rs.set_eager_mode(mode)
    try:
        base = torch.zeros(3, device="tpu")
        if refused:
            with pytest.raises(RuntimeError, match=message):
                op("tpu", base.expand(2, 3))
            assert base.cpu().tolist() == [0.0, 0.0, 0.0]  # refused before writing anything
        else:
            op("tpu", base.expand(2, 3))
            if refused is False:
                assert torch.equal(base.cpu(), cpu_base), (base.cpu(), cpu_base)
    finally:
        torch_tpu_rs.set_eager_mode("strict")
    device_still_works()
