//! `torch_tpu_rs._C`: the Python extension module. It links the C++
//! dispatcher glue (registered with PyTorch when the module loads) and the
//! Rust engine, and exposes the engine's controls to Python.
use std::collections::BTreeMap;
use std::ffi::c_void;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use engine::metrics::Metrics;
use engine::mode;

// The engine's own allocations (not PyTorch's, not the plugin's): Fused
// Eager lowers every op of every step into program text, many small
// strings and vectors, where glibc's malloc took a fifth of the recording
// thread's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    fn tpu_glue_generator_next(
        generator: *mut c_void,
        device: i32,
        increment: u64,
        seed: *mut u64,
        offset: *mut u64,
        error: *mut std::ffi::c_char,
        error_len: usize,
    ) -> i32;
    fn tpu_glue_manual_seed(device: i32, seed: u64);
    fn tpu_glue_register_engine_kernels(prefix: *const std::ffi::c_char) -> i64;
    fn tpu_glue_initial_seed(device: i32) -> u64;
    fn tpu_glue_get_state(device: i32, seed: *mut u64, offset: *mut u64);
    fn tpu_glue_set_state(device: i32, seed: u64, offset: u64);
    fn tpu_glue_warn(message: *const std::ffi::c_char);
}

fn check_device(device: i32) -> PyResult<()> {
    let n = engine::engine().map(|e| e.devices.len()).unwrap_or(0) as i32;
    if device < 0 || device >= n {
        return Err(PyRuntimeError::new_err(format!("invalid tpu device index {device}: {n} device(s) available")));
    }
    Ok(())
}

/// Seeds the default generator of `device`.
#[pyfunction]
fn manual_seed(device: i32, seed: u64) -> PyResult<()> {
    check_device(device)?;
    unsafe { tpu_glue_manual_seed(device, seed) };
    Ok(())
}

#[pyfunction]
fn initial_seed(device: i32) -> PyResult<u64> {
    check_device(device)?;
    Ok(unsafe { tpu_glue_initial_seed(device) })
}

/// (seed, offset) of the default generator of `device`.
#[pyfunction]
fn get_rng_state(device: i32) -> PyResult<(u64, u64)> {
    check_device(device)?;
    let (mut s, mut o) = (0, 0);
    unsafe { tpu_glue_get_state(device, &mut s, &mut o) };
    Ok((s, o))
}

#[pyfunction]
fn set_rng_state(device: i32, seed: u64, offset: u64) -> PyResult<()> {
    check_device(device)?;
    unsafe { tpu_glue_set_state(device, seed, offset) };
    Ok(())
}

fn generator_next(generator: *mut c_void, device: i32, count: u64) -> Result<(u64, u64), String> {
    let (mut seed, mut offset) = (0u64, 0u64);
    let mut error = [0 as std::ffi::c_char; 512];
    let status = unsafe {
        tpu_glue_generator_next(generator, device, count, &mut seed, &mut offset, error.as_mut_ptr(), error.len())
    };
    if status != 0 {
        let message = unsafe { std::ffi::CStr::from_ptr(error.as_ptr()) };
        return Err(message.to_string_lossy().into_owned());
    }
    Ok((seed, offset))
}

fn engine() -> PyResult<&'static engine::Engine> {
    engine::engine().map_err(|e| PyRuntimeError::new_err(e.message))
}

/// Number of devices the PJRT plugin exposes (0 if it cannot start).
#[pyfunction]
fn device_count() -> usize {
    engine::runtime::device_count()
}

/// Whether this process was forked after the engine started, so it cannot
/// use tpu (`torch.tpu._is_in_bad_fork()`).
#[pyfunction]
fn in_bad_fork() -> bool {
    engine::fork::in_forked_child()
}

/// Why the engine could not start, or None.
#[pyfunction]
fn start_error() -> Option<String> {
    engine::engine().err().map(|e| e.message)
}

#[pyfunction]
fn platform_name() -> PyResult<String> {
    Ok(engine()?.platform_name())
}

#[pyfunction]
fn plugin_path() -> PyResult<String> {
    Ok(engine()?.plugin_path.display().to_string())
}

#[pyfunction]
fn synchronize(py: Python<'_>) -> PyResult<()> {
    let e = engine()?;
    py.allow_threads(|| engine::sync::synchronize(e, "torch.tpu.synchronize()")).map_err(engine_err)
}

#[pyfunction]
fn set_eager_mode(name: &str) -> PyResult<()> {
    match mode::parse(name) {
        Some(m) => {
            // Whatever Fused Eager recorded runs before the mode changes.
            if let Some(e) = engine::runtime::started() {
                engine::fused::flush_if_pending(e, "mode change").map_err(|err| PyRuntimeError::new_err(err.message))?;
            }
            mode::set(m);
            Ok(())
        }
        None => Err(PyValueError::new_err(format!(
            "unknown eager mode {name:?}; expected \"strict\" (default, asynchronous), \"debug\" (synchronous) or \"fused\" (deferred and fused)"
        ))),
    }
}

/// End of a training step (called after every optimizer step): in Fused
/// Eager the step's graph runs now, so each step is the same program.
#[pyfunction]
fn step_boundary(py: Python<'_>) -> PyResult<()> {
    if mode::current() != mode::Mode::Fused {
        return Ok(());
    }
    let Some(e) = engine::runtime::started() else { return Ok(()) };
    py.allow_threads(|| engine::fused::flush_if_pending(e, "end of an optimizer step"))
        .map_err(|err| PyRuntimeError::new_err(err.message))
}

/// Runs whatever Fused Eager has recorded, now (`reason` goes to metrics).
#[pyfunction]
fn flush(py: Python<'_>, reason: &str) -> PyResult<()> {
    let e = engine()?;
    py.allow_threads(|| engine::fused::flush_if_pending(e, reason)).map_err(|err| PyRuntimeError::new_err(err.message))
}

/// While `on`, Fused Eager does not look for repeating op sequences: the
/// caller (a compiled graph) flushes at its own end. Returns the previous value.
#[pyfunction]
fn set_explicit_graph_boundaries(on: bool) -> bool {
    engine::fused::set_explicit_boundaries(on)
}

/// Installs (or with None removes) Fused Eager's bucket hook: a callable
/// `(device, storage handles, cached, new_sizes) -> bool` (see
/// engine/src/fused.rs, `BucketHook`). An exception in it counts as false.
#[pyfunction]
fn set_bucket_hook(hook: Option<PyObject>) {
    engine::fused::set_bucket_hook(hook.map(|h| -> engine::fused::BucketHook {
        std::sync::Arc::new(move |device: i32, handles: &[usize], cached: bool, new_sizes: bool| {
            Python::with_gil(|py| match h.call1(py, (device, handles.to_vec(), cached, new_sizes)) {
                Ok(r) => r.extract::<bool>(py).unwrap_or(false),
                Err(err) => {
                    err.print(py);
                    false
                }
            })
        })
    }));
}

/// While on, the bucket hook sees every flush and a repeating op sequence
/// does not cut the graph inside an op.
#[pyfunction]
fn set_region_tracing(on: bool) {
    engine::fused::set_region_tracing(on)
}

/// Gives the storage `dst` the current buffer (not a pending value) of the
/// storage `src`, both data pointers of tpu tensors the caller holds, of
/// the same byte size; `dst` is then no longer pending.
#[pyfunction]
fn share_buffer(dst: usize, src: usize) -> PyResult<()> {
    // SAFETY: the caller passes data pointers of tpu tensors it holds.
    let s = unsafe { storages(&[dst, src])? };
    let (d, s) = (s[0], s[1]);
    if d.nbytes != s.nbytes {
        return Err(PyRuntimeError::new_err(format!(
            "internal error: share_buffer between storages of {} and {} bytes",
            d.nbytes, s.nbytes
        )));
    }
    d.share_value_of(s);
    d.pending.store(false, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Storages behind tpu tensors' `untyped_storage().data_ptr()` values.
///
/// # Safety
/// Each pointer must be the data pointer of a live tpu storage (the caller
/// holds the tensors for the duration of the call); 0 is refused.
unsafe fn storages<'a>(ptrs: &[usize]) -> PyResult<Vec<&'a engine::storage::Storage>> {
    ptrs.iter()
        .map(|&p| {
            if p == 0 {
                Err(PyRuntimeError::new_err("internal error: a null tpu storage"))
            } else {
                Ok(engine::storage::Storage::from_handle(p as *const c_void))
            }
        })
        .collect()
}

/// `torch.<path>(message)`, or a RuntimeError if torch lacks it (both
/// exceptions torch has for these derive from RuntimeError).
fn torch_error(path: &[&str], message: String) -> PyErr {
    Python::with_gil(|py| {
        let mut cls = py.import("torch").map(|m| m.into_any());
        for name in path {
            cls = cls.and_then(|c| c.getattr(*name));
        }
        match cls.ok().and_then(|c| c.downcast_into::<pyo3::types::PyType>().ok()) {
            Some(cls) => PyErr::from_type(cls, message),
            None => PyRuntimeError::new_err(message),
        }
    })
}

/// The Python exception an engine error becomes (as the C++ glue maps them).
fn engine_err(err: engine::EngineError) -> PyErr {
    use engine::error::ErrorKind;
    match err.kind {
        ErrorKind::Index => pyo3::exceptions::PyIndexError::new_err(err.message),
        ErrorKind::Type => pyo3::exceptions::PyTypeError::new_err(err.message),
        ErrorKind::Value => pyo3::exceptions::PyValueError::new_err(err.message),
        ErrorKind::NotImplemented => pyo3::exceptions::PyNotImplementedError::new_err(err.message),
        ErrorKind::OutOfMemory => torch_error(&["OutOfMemoryError"], err.message),
        ErrorKind::LinAlg => torch_error(&["linalg", "LinAlgError"], err.message),
        ErrorKind::Runtime => PyRuntimeError::new_err(err.message),
    }
}

/// Starts recording a compiled graph (see engine/src/replay.rs); returns a mark for capture_end.
#[pyfunction]
fn capture_begin(py: Python<'_>) -> PyResult<(u64, u64)> {
    let e = engine()?;
    let mark = py.allow_threads(|| engine::replay::capture_begin(e)).map_err(engine_err)?;
    Ok(mark.into())
}

/// Runs the recorded graph; returns (plan id or -1, why it cannot be
/// replayed, indices of the arguments it updates in place). `args` and
/// `outputs` are storage data pointers of tensors the caller holds.
#[pyfunction]
fn capture_end(
    py: Python<'_>,
    mark: (u64, u64),
    args: Vec<usize>,
    outputs: Vec<usize>,
    reason: &str,
) -> PyResult<(i64, String, Vec<usize>)> {
    let e = engine()?;
    // SAFETY: the caller passes data pointers of tpu tensors it holds.
    let (a, o) = unsafe { (storages(&args)?, storages(&outputs)?) };
    let r = py.allow_threads(|| engine::replay::capture_end(e, mark.into(), &a, &o, reason)).map_err(engine_err)?;
    Ok(match r {
        Ok(plan) => (plan as i64, String::new(), engine::replay::updated_args(plan)),
        Err(why) => (-1, why, Vec::new()),
    })
}

/// Ends a capture whose recording raised (graphs stop being captures).
#[pyfunction]
fn capture_cancel() {
    engine::replay::capture_cancel()
}

/// Forgets a captured plan (its graph died or was recorded again).
#[pyfunction]
fn drop_plan(plan: usize) {
    engine::replay::drop_plan(plan)
}

/// Runs a captured plan on new storages; False if they no longer match it.
#[pyfunction]
fn replay(py: Python<'_>, plan: usize, args: Vec<usize>, outputs: Vec<usize>) -> PyResult<bool> {
    let e = engine()?;
    // SAFETY: the caller passes data pointers of tpu tensors it holds.
    let (a, o) = unsafe { (storages(&args)?, storages(&outputs)?) };
    py.allow_threads(|| engine::replay::replay(e, plan, &a, &o)).map_err(engine_err)
}

#[pyfunction]
fn get_eager_mode() -> &'static str {
    mode::name(mode::current())
}

#[pyfunction]
fn set_cpu_fallback(enabled: bool) {
    engine::ffi::FALLBACK.store(enabled as u8, std::sync::atomic::Ordering::Relaxed);
}

#[pyfunction]
fn cpu_fallback_enabled() -> bool {
    engine::ffi::fallback_enabled()
}

#[pyfunction]
fn memory_stats(device: i32) -> (i64, i64, i64) {
    engine::storage::MEMORY.get(device)
}

#[pyfunction]
fn set_memory_limit(device: i32, bytes: i64) {
    engine::storage::MEMORY.set_limit(device, bytes);
}

#[pyfunction]
fn reset_peak_memory_stats(device: i32) {
    engine::storage::MEMORY.reset_peak(device);
    engine::reset_buffer_memory_peak();
}

/// (free, total) bytes of a device, where the platform reports them.
#[pyfunction]
fn memory_info(device: i32) -> PyResult<Option<(u64, u64)>> {
    Ok(engine::device_memory::free_and_total(engine()?, device))
}

/// (bytes held by live PJRT buffers, peak): what the device really holds,
/// which donation lowers (storages sharing a buffer count it once).
#[pyfunction]
fn buffer_memory() -> (i64, i64) {
    engine::buffer_memory()
}

fn map_to_dict<'py>(py: Python<'py>, m: BTreeMap<String, u64>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Engine counters (see torch_tpu_rs.metrics()).
#[pyfunction]
fn metrics(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let Some(e) = engine::runtime::started() else {
        for k in ["compiles", "cache_hits_memory", "cache_hits_disk", "cache_disk_corrupt", "executions", "donated_buffers", "host_syncs", "graph_flushes", "graph_replays", "bucketed_regions"] {
            d.set_item(k, 0)?;
        }
        d.set_item("compile_seconds", 0.0)?;
        d.set_item("disk_cache_mode", engine::disk_cache::mode())?;
        for k in ["fallbacks", "recompile_reasons", "host_sync_sources", "flush_reasons"] {
            d.set_item(k, PyDict::new(py))?;
        }
        d.set_item("cached_programs", 0)?;
        d.set_item("evicted_programs", 0)?;
        d.set_item("replay_plans", 0)?;
        return Ok(d);
    };
    let m = &e.metrics;
    d.set_item("compiles", Metrics::get(&m.compiles))?;
    d.set_item("compile_seconds", Metrics::get(&m.compile_nanos) as f64 * 1e-9)?;
    d.set_item("cache_hits_memory", Metrics::get(&m.cache_hits_memory))?;
    d.set_item("cache_hits_disk", Metrics::get(&m.cache_hits_disk))?;
    d.set_item("cache_disk_corrupt", Metrics::get(&m.cache_disk_corrupt))?;
    d.set_item("disk_cache_mode", engine::disk_cache::mode())?;
    d.set_item("executions", Metrics::get(&m.executions))?;
    d.set_item("donated_buffers", Metrics::get(&m.donated_buffers))?;
    d.set_item("host_syncs", Metrics::get(&m.host_syncs))?;
    d.set_item("graph_flushes", Metrics::get(&m.graph_flushes))?;
    d.set_item("graph_replays", Metrics::get(&m.graph_replays))?;
    d.set_item("bucketed_regions", Metrics::get(&m.bucketed_regions))?;
    d.set_item("replay_plans", engine::replay::live_plans())?;
    d.set_item("flush_reasons", map_to_dict(py, Metrics::snapshot_map(&m.flush_reasons))?)?;
    d.set_item("fallbacks", map_to_dict(py, Metrics::snapshot_map(&m.fallbacks))?)?;
    d.set_item("recompile_reasons", map_to_dict(py, Metrics::snapshot_map(&m.recompile_reasons))?)?;
    d.set_item("host_sync_sources", map_to_dict(py, Metrics::snapshot_map(&m.sync_sources))?)?;
    d.set_item("cached_programs", e.cache.len())?;
    d.set_item("evicted_programs", e.cache.evictions())?;
    Ok(d)
}

fn warn(message: &str) {
    if let Ok(c) = std::ffi::CString::new(message) {
        unsafe { tpu_glue_warn(c.as_ptr()) };
    }
}

/// torch.tpu.set_sync_debug_mode: 0 off, 1 warn, 2 error.
#[pyfunction]
fn set_sync_debug_mode(mode: u8) {
    engine::sync_debug::set_mode(mode);
}

#[pyfunction]
fn get_sync_debug_mode() -> u8 {
    engine::sync_debug::mode()
}

/// Names of the ATen ops with a tpu lowering.
#[pyfunction]
fn lowered_ops() -> Vec<&'static str> {
    lowering::table::names()
}

#[pymodule]
fn _C(m: &Bound<'_, PyModule>) -> PyResult<()> {
    engine::dispatch::set_generator_hook(generator_next);
    engine::python_warning::set_hook(warn);
    // Ops whose default kernel on PrivateUse1 is a composite or a stub, so
    // the fallback never sees them: the `_foreach_*` family (a per-tensor
    // loop), layer norm (goes through batch norm), and convolution.
    unsafe {
        tpu_glue_register_engine_kernels(c"_foreach_".as_ptr());
        tpu_glue_register_engine_kernels(c"native_layer_norm".as_ptr());
        // On PrivateUse1 convolution routes to these, whose default throws.
        tpu_glue_register_engine_kernels(c"convolution_".as_ptr());
        // Fused SDPA (default kernel throws); reached once the PrivateUse1
        // _fused_sdp_choice_stub returns SDPBackend::overrideable.
        tpu_glue_register_engine_kernels(c"_scaled_dot_product_fused_attention_overrideable".as_ptr());
        // Its CompositeExplicitAutograd kernel calls batch_norm_cpu directly.
        tpu_glue_register_engine_kernels(c"_batch_norm_no_update".as_ptr());
        // Its CompositeExplicitAutograd kernel calls a CPU/CUDA-only stub.
        tpu_glue_register_engine_kernels(c"conj_physical_".as_ptr());
        // Their CompositeExplicitAutograd kernels are decompositions: group
        // norm in the input's dtype (less exact than the CPU in bfloat16)
        // and logsumexp in nine programs, addr/isinf/constant_pad_nd in two
        // or three; the lowerings run each as one program.
        // kaiser_window's calls a CPU/CUDA-only stub (an internal assert).
        for prefix in [c"native_group_norm", c"logsumexp", c"addr", c"isinf", c"constant_pad_nd", c"kaiser_window"] {
            tpu_glue_register_engine_kernels(prefix.as_ptr());
        }
    }
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(set_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(start_error, m)?)?;
    m.add_function(wrap_pyfunction!(in_bad_fork, m)?)?;
    m.add_function(wrap_pyfunction!(platform_name, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_path, m)?)?;
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(set_eager_mode, m)?)?;
    m.add_function(wrap_pyfunction!(get_eager_mode, m)?)?;
    m.add_function(wrap_pyfunction!(step_boundary, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(capture_begin, m)?)?;
    m.add_function(wrap_pyfunction!(capture_end, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(capture_cancel, m)?)?;
    m.add_function(wrap_pyfunction!(drop_plan, m)?)?;
    m.add_function(wrap_pyfunction!(set_explicit_graph_boundaries, m)?)?;
    m.add_function(wrap_pyfunction!(set_bucket_hook, m)?)?;
    m.add_function(wrap_pyfunction!(set_region_tracing, m)?)?;
    m.add_function(wrap_pyfunction!(share_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(buffer_memory, m)?)?;
    m.add_function(wrap_pyfunction!(set_cpu_fallback, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_fallback_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memory_info, m)?)?;
    m.add_function(wrap_pyfunction!(set_sync_debug_mode, m)?)?;
    m.add_function(wrap_pyfunction!(get_sync_debug_mode, m)?)?;
    m.add_function(wrap_pyfunction!(reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(metrics, m)?)?;
    m.add_function(wrap_pyfunction!(lowered_ops, m)?)?;
    m.add_function(wrap_pyfunction!(manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(initial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(get_rng_state, m)?)?;
    m.add_function(wrap_pyfunction!(set_rng_state, m)?)?;
    Ok(())
}
