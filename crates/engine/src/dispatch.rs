//! Running one op call: find its lowering, fetch or compile its program,
//! feed it the storages' buffers, execute, and apply the results.
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use stablehlo::DType;

use crate::cache::{hash_key, Compiled};
use crate::call::{Call, CallArg, CallValue};
use crate::error::{EngineError, ErrorKind, Result};
use crate::metrics::Metrics;
use crate::mode::{self, Mode};
use crate::program::{build, collect_slots, signature, slot_layout, Input, Output, Ret, Slots};
use crate::runtime::{engine, Engine};
use crate::scalars::scalar_buffer;
use crate::storage::Storage;
use crate::sync::read_flag;
use crate::transfer::element_type;

/// A tensor created by an op, handed to C++ to wrap.
pub struct NewTensor {
    pub storage: *mut c_void,
    pub nbytes: usize,
    pub dtype: DType,
    pub device: i32,
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
}

pub enum RetValue {
    None,
    /// An undefined tensor: a gradient the op's output_mask did not ask for.
    Undefined,
    Tensor(NewTensor),
    TensorList(Vec<NewTensor>),
    Alias(usize),
    Int(i64),
    Float(f64),
    /// (real, imaginary)
    Complex(f64, f64),
    Bool(bool),
    ResizeCopy { arg: usize, tensor: NewTensor },
}

/// Draws (seed, offset) for `count` random values from a generator
/// (NULL: the device's default one). Installed by the extension module.
pub type GeneratorHook = fn(*mut c_void, i32, u64) -> std::result::Result<(u64, u64), String>;
static GENERATOR_HOOK: OnceLock<GeneratorHook> = OnceLock::new();

pub fn set_generator_hook(hook: GeneratorHook) {
    let _ = GENERATOR_HOOK.set(hook);
}

fn draw_random(generator: *mut c_void, device: i32, count: u64) -> Result<(u64, u64)> {
    match GENERATOR_HOOK.get() {
        Some(h) => h(generator, device, count).map_err(EngineError::runtime),
        None => {
            static COUNTER: Mutex<u64> = Mutex::new(0);
            let mut c = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
            let start = *c;
            *c += count;
            Ok((0, start))
        }
    }
}

const MAX_PENDING_CHECKS: usize = 4096;

/// Completion events of the most recent executions. Executions may run
/// concurrently on the plugin's threads; waiting on all of these waits for
/// everything still in flight (older work has long finished). Events, not
/// buffers: holding output buffers would keep their memory from being
/// reused, which made a 64K-element op 4x slower.
static RECENT_EVENTS: Mutex<std::collections::VecDeque<pjrt::Event>> =
    Mutex::new(std::collections::VecDeque::new());
const RECENT_KEPT: usize = 32;

pub(crate) fn note_output(buf: &pjrt::Buffer) {
    let Ok(event) = buf.ready_event() else { return };
    let mut q = RECENT_EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    if q.len() >= RECENT_KEPT {
        q.pop_front();
    }
    q.push_back(event);
}

/// Waits for the most recent executions; returns the first error.
pub fn wait_recent() -> Result<()> {
    let events = std::mem::take(&mut *RECENT_EVENTS.lock().unwrap_or_else(|e| e.into_inner()));
    let mut first = None;
    for e in events {
        if let Err(err) = e.await_ready() {
            first.get_or_insert(err);
        }
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

pub fn not_lowered(call: &Call) -> EngineError {
    let mut e = EngineError::new(
        ErrorKind::NotImplemented,
        format!(
            "The operator '{}' is not lowered for the tpu device (inputs: {}). \
             Set TORCH_TPU_CPU_FALLBACK=1 to run it on the CPU instead (slow, counted in \
             torch_tpu_rs.metrics()['fallbacks']), or open an issue asking for a lowering.",
            call.op,
            call.describe()
        ),
    );
    e.not_lowered = true;
    e
}

/// The size lowering to run first when this call's output shape depends on
/// values (nonzero; index with a boolean mask), else None.
pub fn data_dependent(call: &Call, entry: &lowering::OpEntry) -> Option<lowering::table::LowerFn> {
    let size = entry.size?;
    match entry.size_when {
        Some(when) if !when(&call.arg_dtypes()) => None,
        _ => Some(size),
    }
}

/// Runs the call and returns one value per schema return.
pub fn run(call: &Call) -> Result<Vec<RetValue>> {
    run_in(call, mode::current() == Mode::Fused)
}

/// Runs the call now, whatever the mode (after any pending graph): for the
/// engine's own helpers that need a buffer at once (host transfers).
pub fn run_now(call: &Call) -> Result<Vec<RetValue>> {
    run_in(call, false)
}

fn run_in(call: &Call, fused_mode: bool) -> Result<Vec<RetValue>> {
    crate::fork::refuse_in_child()?;
    crate::write_overlap::check(call)?;
    if let Some(rets) = crate::cross_device::handle(call, |local| run_in(local, fused_mode))? {
        return Ok(rets);
    }
    if !fused_mode && !crate::fused::has_pending() {
        if let Some(rets) = share_buffer_copy(call) {
            return Ok(rets);
        }
    }
    let entry = lowering::lookup(call.op).ok_or_else(|| not_lowered(call))?;
    let engine = engine()?;
    if fused_mode && crate::fused::fusible(call, entry) {
        return crate::fused::record_op(engine, call, entry);
    }
    // The op touches its own device's storages only (see cross_device.rs).
    let device = call.device();
    let reason = if fused_mode { "op needing a value (.item(), data-dependent shape)" } else { "mode change" };
    crate::fused::flush_device_if_pending(engine, device, reason)?;
    let slots = collect_slots(call);
    let mut sig = signature(call, &slots, entry.static_scalars);
    let dynamic_size = match data_dependent(call, entry) {
        Some(size) => {
            let n = data_dependent_size(engine, call, entry, size)?;
            sig.push(n);
            Some(n)
        }
        None => None,
    };
    let hash = hash_key(call.op, &sig);
    let compiled = match engine.cache.get(hash, call.op, &sig) {
        Some(c) => {
            Metrics::inc(&engine.metrics.cache_hits_memory);
            c
        }
        None => {
            let c = Arc::new(compile(engine, call, &slots, entry, dynamic_size)?);
            engine.cache.insert(hash, call.op, sig, c.clone());
            c
        }
    };
    execute(engine, call, &slots, &compiled, device)
}

/// `copy_` of a whole dense storage into another of the same dtype and
/// size needs no program: PJRT buffers are immutable, so both storages can
/// hold the same buffer.
fn share_buffer_copy(call: &Call) -> Option<Vec<RetValue>> {
    if call.op != "aten::copy_" || call.args.len() < 2 {
        return None;
    }
    let (CallValue::Tensor(dst), CallValue::Tensor(src)) = (&call.args[0].value, &call.args[1].value) else {
        return None;
    };
    if !dst.is_whole() || !src.is_whole() || dst.dtype != src.dtype || dst.sizes != src.sizes {
        return None;
    }
    if dst.storage.device != src.storage.device {
        return None;
    }
    let st = src.storage.state();
    let buffer = st.buffer?;
    if st.dtype != src.dtype {
        return None;
    }
    dst.storage.set(buffer, dst.dtype);
    Some(vec![RetValue::Alias(0)])
}

pub(crate) fn with_context(call: &Call, e: EngineError) -> EngineError {
    if e.message.starts_with(call.op) || e.message.contains(call.op) {
        return e;
    }
    let inputs = call.describe();
    let message = if inputs.is_empty() {
        format!("{}: {}", call.op, e.message)
    } else {
        format!("{}: {} (inputs: {inputs})", call.op, e.message)
    };
    EngineError { message, ..e }
}

/// Runs an op's `size` lowering and reads the count back (a host sync).
fn data_dependent_size(engine: &Engine, call: &Call, entry: &lowering::OpEntry, size: lowering::table::LowerFn) -> Result<i64> {
    // Errors name the op as users know it, not its internal size program.
    count_of(engine, call, entry, size).map_err(|e| EngineError { message: e.message.replace("#size", ""), ..e })
}

fn count_of(engine: &Engine, call: &Call, entry: &lowering::OpEntry, size: lowering::table::LowerFn) -> Result<i64> {
    let op = format!("{}#size", call.op);
    // The count reads the inputs only: out= arguments are left out.
    let args = call
        .args
        .iter()
        .map(|a| if a.write == 2 { CallArg { value: CallValue::None, write: 0 } } else { CallArg { value: a.value.clone(), write: 0 } })
        .collect();
    let size_call = Call { op: &op, args, ret_alias: vec![-1].into(), ret_kind: vec![crate::call::RET_NUMBER].into(), pointwise: false };
    let size_entry = lowering::OpEntry { name: entry.name, lower: size, static_scalars: entry.static_scalars, size: None, size_when: None };
    let slots = collect_slots(&size_call);
    let sig = signature(&size_call, &slots, size_entry.static_scalars);
    let hash = hash_key(&op, &sig);
    let compiled = match engine.cache.get(hash, &op, &sig) {
        Some(c) => c,
        None => {
            let c = Arc::new(compile(engine, &size_call, &slots, &size_entry, None)?);
            engine.cache.insert(hash, &op, sig, c.clone());
            c
        }
    };
    match execute(engine, &size_call, &slots, &compiled, size_call.device())?.into_iter().next() {
        Some(RetValue::Int(n)) => Ok(n),
        _ => Err(EngineError::runtime(format!("{}: the size program returned no count (internal error)", call.op))),
    }
}

fn compile(engine: &Engine, call: &Call, slots: &Slots, entry: &lowering::OpEntry, dynamic_size: Option<i64>) -> Result<Compiled> {
    let program = build(call, slots, entry, dynamic_size).map_err(|e| {
        let mut e = with_context(call, e);
        // A lowering that cannot handle these arguments (e.g. a data-
        // dependent shape) counts as unlowered: the CPU fallback may take it.
        e.not_lowered |= e.kind == ErrorKind::NotImplemented;
        e
    })?;
    dump_ir(engine, call.op, &program.text);
    let reason = if engine.cache.has_op(call.op) { "new shapes or attributes" } else { "new op" };
    let start = Instant::now();
    // Portable executables: one compile serves every device. The disk cache
    // may hand back one an earlier process compiled (then nothing compiles).
    let (executable, from_disk) = crate::disk_cache::compile_cached(
        engine,
        &program.text,
        pjrt::PORTABLE_COMPILE_OPTIONS,
        || crate::compile_affinity::compile_for_size(&engine.platform, 1, || engine.client.compile(&program.text)),
    )
    .map_err(|e| {
        let mut msg = format!(
            "{}: XLA could not compile the lowered program (inputs: {}): {}",
            call.op,
            call.describe(),
            e
        );
        if std::env::var("TORCH_TPU_DEBUG_IR").is_ok() {
            msg.push_str("\n");
            msg.push_str(&program.text);
        }
        EngineError::runtime(msg)
    })?;
    let m = &engine.metrics;
    if !from_disk {
        Metrics::inc(&m.compiles);
        m.compile_nanos.fetch_add(start.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        Metrics::bump(&m.recompile_reasons, reason);
    }
    Ok(Compiled { program, executable })
}

fn zeros(engine: &Engine, dtype: DType, n: i64, device: i32) -> Result<Arc<pjrt::Buffer>> {
    let bytes = vec![0u8; n.max(0) as usize * dtype.size_bytes()];
    Ok(Arc::new(engine.client.buffer_from_host(&bytes, element_type(dtype), &[n], engine.device(device)?)?))
}

fn execute(engine: &Engine, call: &Call, slots: &Slots, compiled: &Compiled, device: i32) -> Result<Vec<RetValue>> {
    let program = &compiled.program;
    let mut bufs: Vec<Arc<pjrt::Buffer>> = Vec::with_capacity(program.inputs.len());
    for input in &program.inputs {
        bufs.push(resolve_input(engine, call, slots, input, device)?);
    }
    let refs: Vec<&pjrt::Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
    let target = if device == 0 { None } else { Some(engine.device(device)?) };
    let outs = compiled
        .executable
        .execute(&refs, target)
        .map_err(|e| EngineError::pjrt(&format!("{}: execution failed (inputs: {}): ", call.op, call.describe()), e))?;
    Metrics::inc(&engine.metrics.executions);
    let outs: Vec<Arc<pjrt::Buffer>> = outs.into_iter().map(Arc::new).collect();
    if outs.len() != program.outputs.len() {
        return Err(EngineError::runtime(format!(
            "{}: the program returned {} buffers, expected {}",
            call.op,
            outs.len(),
            program.outputs.len()
        )));
    }
    let debug = mode::current() == Mode::Debug;
    // Checks first, so that in Debug Eager bad input changes nothing.
    for (o, buf) in program.outputs.iter().zip(&outs) {
        if let Output::Check { message } = o {
            if debug {
                read_flag(buf, message)?;
            } else {
                engine.checks.push(buf.clone(), message.clone());
            }
        }
    }
    // A program that never syncs must not pile up flags without bound.
    if !debug && engine.checks.len() > MAX_PENDING_CHECKS {
        crate::sync_debug::implicit_host_sync(engine, "pending index checks")?;
        engine.checks.drain()?;
    }
    if debug {
        for buf in &outs {
            buf.ready().map_err(|e| EngineError::pjrt(&format!("{}: execution failed: ", call.op), e))?;
        }
    }
    if let Some(last) = outs.last() {
        note_output(last);
    }
    for (o, buf) in program.outputs.iter().zip(&outs) {
        if let Output::Slot { slot, dtype } = o {
            slots.storages[*slot].set(buf.clone(), *dtype);
        }
    }
    let new_tensor = |idx: usize| -> Result<NewTensor> {
        match &program.outputs[idx] {
            Output::New { dtype, shape, strides } => {
                let numel: i64 = shape.iter().product();
                let nbytes = numel.max(0) as usize * dtype.size_bytes();
                let storage = Storage::with_buffer(outs[idx].clone(), *dtype, nbytes, device);
                Ok(NewTensor {
                    storage: storage.into_handle(),
                    nbytes,
                    dtype: *dtype,
                    device,
                    sizes: shape.clone(),
                    strides: strides.clone(),
                })
            }
            _ => Err(EngineError::runtime("internal error: return is not a new tensor")),
        }
    };
    map_rets(&program.rets, new_tensor, |i| {
        let dtype = match &program.outputs[i] {
            Output::Number { dtype } => *dtype,
            _ => DType::F64,
        };
        read_number(engine, &outs[i], dtype, &number_source(call.op))
    })
}

/// Turns a program's return plan into return values; `new_tensor` makes the
/// fresh tensor of an output, `number` reads a number output.
pub(crate) fn map_rets(
    rets: &[Ret],
    mut new_tensor: impl FnMut(usize) -> Result<NewTensor>,
    mut number: impl FnMut(usize) -> Result<RetValue>,
) -> Result<Vec<RetValue>> {
    let mut out = Vec::with_capacity(rets.len());
    for r in rets {
        out.push(match r {
            Ret::New(i) => RetValue::Tensor(new_tensor(*i)?),
            Ret::NewList(is) => RetValue::TensorList(is.iter().map(|i| new_tensor(*i)).collect::<Result<_>>()?),
            Ret::Alias(a) => RetValue::Alias(*a),
            Ret::ResizeCopy { arg, output } => RetValue::ResizeCopy { arg: *arg, tensor: new_tensor(*output)? },
            Ret::Number(i) => number(*i)?,
            Ret::None => RetValue::None,
            Ret::Undefined => RetValue::Undefined,
        });
    }
    Ok(out)
}


/// The buffer fed to one program input.
pub fn resolve_input(engine: &Engine, call: &Call, slots: &Slots, input: &Input, device: i32) -> Result<Arc<pjrt::Buffer>> {
    Ok(match input {
        Input::Slot { slot, dtype, n } => {
            let storage = slots.storages[*slot];
            let st = storage.state();
            match st.buffer {
                Some(b) if st.dtype == *dtype => b,
                Some(_) => {
                    return Err(EngineError::runtime(format!(
                        "{}: internal error: storage layout changed while the op ran",
                        call.op
                    )))
                }
                None => {
                    let (dt, n2) = slot_layout(storage, *dtype);
                    debug_assert_eq!((dt, n2), (*dtype, *n));
                    let z = zeros(engine, *dtype, *n, storage.device)?;
                    storage.set(z.clone(), *dtype);
                    z
                }
            }
        }
        Input::Offset { view } => scalar_buffer(engine, device, DType::I64, 0.0, slots.views[*view].1.offset)?,
        Input::Scalar { arg, dtype } => match &call.args[*arg].value {
            CallValue::Scalar { f, i, .. } => scalar_buffer(engine, device, *dtype, *f, *i)?,
            _ => return Err(EngineError::runtime("internal error: scalar input is not a scalar")),
        },
        Input::Host { arg } => match &call.args[*arg].value {
            CallValue::HostTensor { dtype, sizes, bytes } => Arc::new(engine.client.buffer_from_host(
                bytes,
                element_type(*dtype),
                sizes,
                engine.device(device)?,
            )?),
            _ => return Err(EngineError::runtime("internal error: host input is not a host tensor")),
        },
        Input::ScalarList { arg, dtype } => match &call.args[*arg].value {
            CallValue::ScalarList { values, .. } => {
                let bytes: Vec<u8> = values
                    .iter()
                    .flat_map(|(f, i)| crate::scalars::scalar_bytes(*dtype, *f, *i))
                    .collect();
                Arc::new(engine.client.buffer_from_host(
                    &bytes,
                    element_type(*dtype),
                    &[values.len() as i64],
                    engine.device(device)?,
                )?)
            }
            _ => return Err(EngineError::runtime("internal error: scalar list input is not a list")),
        },
        Input::Rng { count } => {
            let generator = call
                .args
                .iter()
                .find_map(|a| match a.value {
                    CallValue::Generator(p) => Some(p),
                    _ => None,
                })
                .unwrap_or(std::ptr::null_mut());
            rng_buffer(engine, generator, device, *count)?
        }
    })
}

/// A fresh (seed, offset) pair for `count` random numbers, as a u64[2] buffer.
pub fn rng_buffer(engine: &Engine, generator: *mut c_void, device: i32, count: u64) -> Result<Arc<pjrt::Buffer>> {
    let (seed, offset) = draw_random(generator, device, count)?;
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&seed.to_le_bytes());
    bytes.extend_from_slice(&offset.to_le_bytes());
    Ok(Arc::new(engine.client.buffer_from_host(&bytes, pjrt::ElementType::U64, &[2], engine.device(device)?)?))
}

/// Why an op reads a number back, for `host_sync_sources` and the sync
/// debug mode.
fn number_source(op: &str) -> String {
    if op.ends_with("#size") {
        "data-dependent output size (nonzero, masked_select, x[mask])".to_string()
    } else if op.ends_with("_local_scalar_dense") {
        ".item()".to_string()
    } else {
        format!("{op} (returns a Python number)")
    }
}

/// Reads a rank-0 result to the host (`.item()`): a host sync.
fn read_number(engine: &Engine, buf: &pjrt::Buffer, dtype: DType, source: &str) -> Result<RetValue> {
    crate::sync_debug::implicit_host_sync(engine, source)?;
    engine.checks.drain()?;
    let mut bytes = vec![0u8; dtype.size_bytes()];
    buf.to_host(&mut bytes)?;
    let arr8 = |b: &[u8]| {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        a
    };
    Ok(match dtype {
        DType::Bool => RetValue::Bool(bytes[0] != 0),
        DType::F64 => RetValue::Float(f64::from_le_bytes(arr8(&bytes))),
        DType::F32 => RetValue::Float(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64),
        DType::F16 => RetValue::Float(f16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]])) as f64),
        DType::BF16 => RetValue::Float(f32::from_bits((u16::from_le_bytes([bytes[0], bytes[1]]) as u32) << 16) as f64),
        DType::I64 => RetValue::Int(i64::from_le_bytes(arr8(&bytes))),
        DType::I32 => RetValue::Int(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as i64),
        DType::I16 => RetValue::Int(i16::from_le_bytes([bytes[0], bytes[1]]) as i64),
        DType::I8 => RetValue::Int(bytes[0] as i8 as i64),
        DType::U8 => RetValue::Int(bytes[0] as i64),
        DType::U32 => RetValue::Int(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as i64),
        DType::U64 => RetValue::Int(u64::from_le_bytes(arr8(&bytes)) as i64),
        DType::C64 => {
            let part = |k: usize| f32::from_le_bytes(bytes[k..k + 4].try_into().expect("4 bytes")) as f64;
            RetValue::Complex(part(0), part(4))
        }
        DType::C128 => {
            let part = |k: usize| f64::from_le_bytes(bytes[k..k + 8].try_into().expect("8 bytes"));
            RetValue::Complex(part(0), part(8))
        }
    })
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f800000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// Debugging aid: with `TORCH_TPU_DUMP_IR=dir`, every program about to be
/// compiled is written to `dir`, one file per compile.
pub(crate) fn dump_ir(engine: &Engine, what: &str, text: &str) {
    if let Ok(dir) = std::env::var("TORCH_TPU_DUMP_IR") {
        let n = Metrics::get(&engine.metrics.compiles);
        let name = format!("{dir}/{n:05}-{}.mlir", what.replace("::", "_").replace(' ', "_"));
        let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(name, text));
    }
}
