"""torch.tpu, torch.accelerator and Dynamo's device interface."""
import pytest
import torch

import torch_tpu_rs


def test_module_shape_like_cuda():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    assert torch.tpu.get_device_name() == "XLA CPU"
    torch.tpu.synchronize()


def test_set_device_and_context_manager():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices: the XLA CPU plugin exposes one per core, or TORCH_TPU_CPU_DEVICE_COUNT")
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        x = torch.ones(2, device="tpu")
        assert x.device == torch.device("tpu", 1)
        assert (x + 1).cpu().tolist() == [2.0, 2.0]
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(1)
    assert torch.tpu.current_device() == 1
    torch.tpu.set_device(0)
    # RuntimeError, as CUDA's "invalid device ordinal".
    with pytest.raises(RuntimeError, match="invalid tpu device index 99"):
        torch.tpu.set_device(99)
    with pytest.raises(RuntimeError, match="invalid tpu device index 99"):
        torch.ones(1, device="tpu:99")
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="16 bytes, got 3"):
        torch.Generator(device="tpu").set_state(torch.zeros(3, dtype=torch.uint8))
    # Every torch.tpu function that takes a device refuses one that is not there.
    for query in (torch.tpu.synchronize, torch.tpu.get_device_name, torch.tpu.get_device_properties,
                  torch.tpu.memory_stats, torch.tpu.memory_allocated, torch.tpu.mem_get_info):
        with pytest.raises(RuntimeError, match="invalid tpu device index -5"):
            query(-5)
        with pytest.raises(RuntimeError, match="invalid tpu device index 99"):
            query("tpu:99")
    with torch.tpu.device(-1):  # -1 leaves the device alone, as torch.cuda.device(-1)
        assert torch.tpu.current_device() == 0


def test_tensor_on_second_device_computes():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices")
    a = torch.arange(4.0, device="tpu:1")
    assert a.device.index == 1
    assert (a * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_copy_between_devices(mode):
    """x.to("tpu:1") and copy_ across devices (through the host), into
    strided views and with dtype conversion, from non-contiguous and pending
    sources; the bytes land on the destination device."""
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices: the XLA CPU plugin exposes one per core, or TORCH_TPU_CPU_DEVICE_COUNT")
    ref = torch.arange(12.0).view(3, 4)
    a = ref.to("tpu")
    b = (a * 2).to("tpu:1")  # a pending value in Fused Eager
    assert b.device == torch.device("tpu", 1)
    torch.testing.assert_close(b.cpu(), ref * 2)
    before = torch.tpu.memory_allocated(1)
    c = b.t().to("tpu:0")
    assert c.device.index == 0 and c.stride() == ref.t().clone().stride()  # .to() keeps the layout, as on CPU
    torch.testing.assert_close(c.cpu(), (ref * 2).t())
    d = torch.zeros(4, 3, dtype=torch.float64, device="tpu:0")
    d.t().copy_(b)
    torch.testing.assert_close(d.cpu(), (ref * 2).t().double())
    assert torch.tpu.memory_allocated(1) == before  # the temporary copies are freed
    assert torch.tpu.memory_allocated(0) >= d.nbytes + c.nbytes


@pytest.mark.parametrize("op", ["mm", "cat"])
def test_an_op_mixing_devices_names_both(op, mode):
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices")
    a, b = torch.ones(2, 2, device="tpu"), torch.ones(2, 2, device="tpu:1")
    pending = a + 1
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, .* tpu:0 and tpu:1"):
        torch.mm(a, b) if op == "mm" else torch.cat([a, b])
        torch.tpu.synchronize()
    assert pending.cpu().tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.synchronize()


def test_memory_stats_follow_allocations():
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    x = torch.empty(1024, device="tpu")
    assert torch.tpu.memory_allocated() == base + 4096
    assert torch.tpu.max_memory_allocated() >= base + 4096
    del x
    assert torch.tpu.memory_allocated() == base
    assert torch.tpu.max_memory_allocated() >= base + 4096
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    assert torch.accelerator.memory_allocated() == base


def test_accelerator_capability_lists_the_dtypes_tensors_can_have():
    supported = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.complex64, torch.int64, torch.bool} <= supported
    for dtype in supported:
        x = torch.ones(3, dtype=dtype)
        assert torch.equal(x.to("tpu").cpu(), x), dtype
    for dtype in (torch.uint16, torch.float8_e4m3fn, torch.complex32):
        assert dtype not in supported
        with pytest.raises(TypeError, match=str(dtype)):
            torch.ones(3).to(dtype).to("tpu")
    # Dynamo's device interface agrees.
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("tpu")
    assert all(interface.is_dtype_supported(d) for d in supported)
    assert not interface.is_dtype_supported(torch.uint16)


def test_accelerator_memory_matches_torch_tpu():
    x = torch.empty(256, 1024, device="tpu")
    torch.tpu.synchronize()
    stats = torch.tpu.memory_stats()
    # torch.cuda's keys, with the same meaning where tpu has the concept.
    assert set(torch.accelerator.memory_stats()) <= set(stats)
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated() >= x.nbytes
    assert stats["reserved_bytes.all.current"] == torch.tpu.memory_reserved()
    assert stats["reserved_bytes.all.peak"] == torch.tpu.max_memory_reserved()
    assert stats["allocation.all.current"] >= 1
    assert torch.accelerator.memory_reserved() == torch.tpu.memory_reserved()
    assert torch.accelerator.max_memory_allocated() == torch.tpu.max_memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total == torch.tpu.mem_get_info()[1]


def test_manual_seed_roundtrip():
    torch.tpu.manual_seed(123)
    assert torch.tpu.initial_seed() == 123
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    torch.tpu.manual_seed_all(7)
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 123
    torch.manual_seed(5)
    assert torch.tpu.initial_seed() == 5


def test_generator_on_device():
    g = torch.Generator(device="tpu")
    g.manual_seed(3)
    assert g.initial_seed() == 3
    assert g.device.type == "tpu"


def test_dynamo_interface_reports_platform_dtypes():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("tpu")
    assert iface.is_available()
    # Upstream's TpuInterface rejects these; the XLA platform supports them.
    assert iface.is_dtype_supported(torch.float64)
    assert iface.is_dtype_supported(torch.float16)
    assert iface.is_dtype_supported(torch.bfloat16)
    assert iface.is_dtype_supported(torch.complex64)


def test_metrics_keys():
    m = torch_tpu_rs.metrics()
    for key in [
        "compiles", "compile_seconds", "cache_hits_memory", "cache_hits_disk", "executions",
        "host_syncs", "graph_flushes", "fallbacks", "recompile_reasons",
    ]:
        assert key in m
    assert "compiles" in torch_tpu_rs.metrics_report()


def test_import_torch_alone_loads_the_device():
    import subprocess
    import sys

    code = "import torch; x = torch.ones(2, device='tpu'); print((x + x).cpu().tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0]"


IMPORT_ORDERS = {
    # import torch alone must not import Dynamo (about 2 s); compiling later still finds our backend and interface
    "torch, then compile": "import torch, sys\nassert 'torch._dynamo' not in sys.modules\n",
    "Dynamo before torch_tpu_rs": "import torch._dynamo, torch_tpu_rs\n",
    "inductor before compile": "import torch, torch._inductor.utils\n",
}


@pytest.mark.parametrize("order", list(IMPORT_ORDERS))
def test_dynamo_registration_in_any_import_order(order):
    import subprocess
    import sys

    code = IMPORT_ORDERS[order] + (
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "f = torch.compile(lambda x: x * 2 + 1, backend='tpu')\n"
        "print(f(torch.ones(2, device='tpu')).cpu().tolist(), get_interface_for_device('tpu').__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "[3.0, 3.0] TpuRsInterface"


def test_non_blocking_copy_to_cpu_and_pin_memory_allocator():
    """`.to("cpu", non_blocking=True)` stages through the hooks' pinned-memory
    allocator (engine/src/pinned_host.rs) and gives the same values."""
    x = torch.randn(5, 3)
    y = x.to("tpu").to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(y, x)
    z = x.to("tpu").to("cpu", torch.float64, non_blocking=True, copy=True)
    torch.tpu.synchronize()
    assert z.dtype == torch.float64 and torch.equal(z, x.double())


def test_streams_are_the_device_queue():
    s = torch.tpu.current_stream()
    assert s.device == torch.device("tpu", 0)
    assert torch.tpu.default_stream() == s
    other = torch.tpu.Stream()
    assert torch.Stream(device="tpu").device == torch.device("tpu", 0)
    x = torch.arange(6.0, device="tpu")
    with torch.tpu.stream(other):
        y = x * 2
    s.wait_stream(other)
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert other.query() and s.query()
    other.synchronize()
    y.record_stream(other)  # one queue per device: accepted, nothing to track
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_events_time_the_work_between_them():
    import time

    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    x = torch.randn(64, 64, device="tpu")
    start.record()
    for _ in range(5):
        x = torch.tanh(x @ x)
    time.sleep(0.05)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    # Recording waits for the queued work, so the host's sleep is inside.
    assert end.elapsed_time(start) <= 0 <= start.elapsed_time(end)
    assert start.elapsed_time(end) >= 50.0
    torch.tpu.current_stream().wait_event(end)
    assert torch.isfinite(x).all().item()


def test_memory_helpers_like_cuda():
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    assert torch.tpu.max_memory_reserved() >= torch.tpu.memory_reserved() >= 0


def test_more_torch_cuda_helpers():
    """The rest of torch.cuda's everyday surface exists and behaves."""
    props = torch.tpu.get_device_properties(0)
    assert props.name == "XLA CPU" and props.total_memory == torch.tpu.mem_get_info()[1]
    assert torch.tpu.get_arch_list() == []
    torch.tpu.ipc_collect()
    assert torch.tpu.OutOfMemoryError is torch.cuda.OutOfMemoryError
    # device_of follows a tensor's device, and leaves CPU tensors alone.
    if torch.tpu.device_count() >= 2:
        with torch.tpu.device_of(torch.ones(1, device="tpu:1")):
            assert torch.tpu.current_device() == 1
        assert torch.tpu.current_device() == 0
    with torch.tpu.device_of(torch.ones(1)):
        assert torch.tpu.current_device() == 0
    # Streams: set_stream and StreamContext are no-ops on the one queue.
    torch.tpu.set_stream(torch.tpu.current_stream())
    with torch.tpu.StreamContext(torch.tpu.Stream()):
        y = torch.arange(3.0, device="tpu") + 1
    assert y.cpu().tolist() == [1.0, 2.0, 3.0]
    # Memory: the summary reports what memory_stats() holds, in MiB.
    x = torch.empty(3 * 2**20 // 4, device="tpu").fill_(1)  # 3 MiB
    summary = torch.tpu.memory_summary()
    assert "XLA CPU" in summary and "MiB" in summary
    assert torch.tpu.memory_allocated() >= x.nbytes
    torch.tpu.reset_max_memory_allocated()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()


def test_per_process_memory_fraction_caps_allocations():
    total = torch.tpu.get_device_properties(0).total_memory
    held = torch.tpu.memory_allocated()
    x = torch.ones(4, device="tpu")
    try:
        # Room for what is held now plus 1 MiB.
        torch.tpu.set_per_process_memory_fraction((held + x.nbytes + 2**20) / total)
        assert torch.tpu.get_per_process_memory_fraction() > 0
        y = torch.empty(2**18 - 16, device="tpu")  # just under 1 MiB fits
        with pytest.raises(torch.OutOfMemoryError, match=r"tried to allocate 2.00 MiB on tpu:0.*limited to"):
            torch.empty(2**19, device="tpu")
        assert (x * 2).cpu().tolist() == [2.0] * 4  # the device keeps working
        del y
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.tpu.get_per_process_memory_fraction() == 1.0
    assert torch.empty(2**19, device="tpu").numel() == 2**19
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        torch.tpu.set_per_process_memory_fraction(1.5)


def test_legacy_torch_cuda_spellings():
    """Names older CUDA scripts use: torch.cuda.amp, default_generators,
    memory_cached."""
    x = torch.randn(4, 4, device="tpu")
    with torch.tpu.amp.autocast():
        assert (x @ x).dtype == torch.bfloat16
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert (x @ x).dtype == torch.float16
    with torch.tpu.amp.autocast(enabled=False):
        assert (x @ x).dtype == torch.float32
    scaler = torch.tpu.amp.GradScaler(init_scale=8.0)
    assert scaler.scale(x.sum()).item() == pytest.approx(8 * x.sum().item(), rel=1e-6)

    class Double(torch.autograd.Function):
        @staticmethod
        @torch.tpu.amp.custom_fwd
        def forward(ctx, a):
            return a * 2

        @staticmethod
        @torch.tpu.amp.custom_bwd
        def backward(ctx, g):
            return g * 2

    a = torch.ones(2, device="tpu", requires_grad=True)
    Double.apply(a).sum().backward()
    assert a.grad.cpu().tolist() == [2.0, 2.0]

    gens = torch.tpu.default_generators
    assert len(gens) == torch.tpu.device_count()
    gens[0].manual_seed(11)
    first = torch.randn(3, device="tpu").cpu()
    torch.tpu.manual_seed(11)
    assert torch.equal(torch.randn(3, device="tpu").cpu(), first)
    assert torch.tpu.memory_cached() == torch.tpu.memory_reserved()
    assert torch.tpu.max_memory_cached() == torch.tpu.max_memory_reserved()
    with pytest.raises(AttributeError, match="no attribute 'not_a_thing'"):
        torch.tpu.not_a_thing


def test_pinned_memory_is_reported_as_on_cuda():
    x = torch.randn(64)
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and torch.equal(p, x)
    assert p[5:].is_pinned()  # a view into the pinned block
    assert not x.is_pinned() and not torch.randn(64).is_pinned()
    assert torch.empty(3, pin_memory=True).is_pinned()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 2)), batch_size=4, pin_memory=True)
    batch = next(iter(loader))[0]
    assert batch.is_pinned()
    y = batch.to("tpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(y.cpu(), batch)


def test_sync_debug_mode_reports_implicit_host_syncs():
    import warnings

    x = torch.arange(6.0, device="tpu")
    assert torch.tpu.get_sync_debug_mode() == 0
    try:
        torch.tpu.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            total = x.sum().item()
            host = x.cpu()
            nz = x.nonzero()
            torch.tpu.synchronize()  # asked for: never reported
        messages = [str(w.message) for w in caught]
        assert len(messages) == 3, messages
        assert all("called a synchronizing tpu operation" in m for m in messages)
        assert ".item()" in messages[0] and "data-dependent" in messages[2]
        assert total == 15.0 and host.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and nz.shape == (5, 1)

        torch.tpu.set_sync_debug_mode(2)
        assert torch.tpu.get_sync_debug_mode() == 2
        y = x * 2  # no sync: runs
        with pytest.raises(RuntimeError, match=r"synchronizing tpu operation: \.item\(\)"):
            y.sum().item()
        with pytest.raises(RuntimeError, match="synchronizing tpu operation"):
            print(y)
        with pytest.raises(RuntimeError, match="expected one of"):
            torch.tpu.set_sync_debug_mode("loud")
    finally:
        torch.tpu.set_sync_debug_mode("default")
    # Nothing was lost: the refused reads work once the mode is off.
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_stream_and_event_are_types_for_isinstance():
    e, s = torch.tpu.Event(enable_timing=True), torch.tpu.Stream()
    assert isinstance(e, torch.tpu.Event) and isinstance(e, torch.Event) and e.device.type == "tpu"
    assert isinstance(s, torch.tpu.Stream) and isinstance(torch.tpu.current_stream(), torch.tpu.Stream)
    assert not isinstance(torch.Event(device="cpu"), torch.tpu.Event)
    assert not isinstance(e, torch.tpu.Stream) and not isinstance(torch.ones(1), torch.tpu.Event)
