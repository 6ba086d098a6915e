//! The C ABI the C++ dispatcher glue calls (csrc/engine_api.h). The structs
//! mirror that header field for field. Every entry point catches panics and
//! reports errors through a status code plus `tpu_engine_last_error`, so no
//! Rust unwinding ever crosses into C++.
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use stablehlo::DType;

use crate::call::{complex_scalar, Call, CallArg, CallValue, MathBits, TensorRef};
use crate::dispatch::{run, NewTensor, RetValue};
use crate::error::{EngineError, ErrorKind, Result};
use crate::runtime::engine;
use crate::storage::{Storage, MEMORY};

pub const TPU_OK: i32 = 0;
pub const TPU_NOT_LOWERED: i32 = 1;
pub const TPU_ERR_RUNTIME: i32 = 2;
pub const TPU_ERR_INDEX: i32 = 3;
pub const TPU_ERR_TYPE: i32 = 4;
pub const TPU_ERR_VALUE: i32 = 5;
pub const TPU_ERR_NOT_IMPL: i32 = 6;
pub const TPU_ERR_OUT_OF_MEMORY: i32 = 7;
pub const TPU_ERR_LINALG: i32 = 8;

const ARG_NONE: i32 = 0;
const ARG_TENSOR: i32 = 1;
const ARG_TENSOR_LIST: i32 = 2;
const ARG_INT: i32 = 3;
const ARG_FLOAT: i32 = 4;
const ARG_BOOL: i32 = 5;
const ARG_INT_LIST: i32 = 6;
const ARG_FLOAT_LIST: i32 = 7;
const ARG_BOOL_LIST: i32 = 8;
const ARG_STRING: i32 = 9;
const ARG_GENERATOR: i32 = 10;
const ARG_DEVICE: i32 = 11;
const ARG_CPU_SCALAR: i32 = 12;
const ARG_COMPLEX: i32 = 14;

const RET_NONE: i32 = 0;
const RET_TENSOR: i32 = 1;
const RET_ALIAS: i32 = 2;
const RET_TENSOR_LIST: i32 = 3;
const RET_INT: i32 = 4;
const RET_FLOAT: i32 = 5;
const RET_BOOL: i32 = 6;
const RET_RESIZE_COPY: i32 = 7;
const RET_COMPLEX: i32 = 8;
const RET_UNDEFINED: i32 = 9;

/// `flags` of tpu_engine_dispatch: PyTorch tags the op `pointwise`.
const DISPATCH_POINTWISE: i32 = 1;

#[repr(C)]
pub struct TpuTensor {
    pub storage: *mut c_void,
    pub host_data: *mut c_void,
    pub dtype: i32,
    pub device_type: i32,
    pub device_index: i32,
    pub is_wrapped_number: i32,
    pub ndim: i64,
    pub sizes: *const i64,
    pub strides: *const i64,
    pub storage_offset: i64,
    pub storage_nbytes: usize,
    pub math_bits: i32,
    pub reserved: i32,
}

#[repr(C)]
pub struct TpuArg {
    pub kind: i32,
    pub is_write: i32,
    pub is_scalar_param: i32,
    pub reserved: i32,
    pub len: i64,
    pub i: i64,
    pub f: f64,
    pub tensors: *const TpuTensor,
    pub ints: *const i64,
    pub floats: *const f64,
    pub str_: *const c_char,
    pub ptr: *mut c_void,
}

#[repr(C)]
pub struct TpuNewTensor {
    pub storage: *mut c_void,
    pub nbytes: usize,
    pub dtype: i32,
    pub device_index: i32,
    pub ndim: i64,
    pub sizes: *const i64,
    pub strides: *const i64,
    pub storage_offset: i64,
}

#[repr(C)]
pub struct TpuRet {
    pub kind: i32,
    pub arg: i32,
    pub first: i64,
    pub len: i64,
    pub i: i64,
    pub f: f64,
    pub imag: f64,
}

#[repr(C)]
pub struct TpuResults {
    pub num_rets: i64,
    pub rets: *const TpuRet,
    pub new_tensors: *const TpuNewTensor,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static ARENA: RefCell<Arena> = RefCell::new(Arena::default());
}

/// Results of the last dispatch on this thread, kept alive for C++.
#[derive(Default)]
struct Arena {
    rets: Vec<TpuRet>,
    tensors: Vec<TpuNewTensor>,
    shapes: Vec<(Vec<i64>, Vec<i64>)>,
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn status_of(e: &EngineError) -> i32 {
    if e.not_lowered {
        return TPU_NOT_LOWERED;
    }
    match e.kind {
        ErrorKind::Runtime => TPU_ERR_RUNTIME,
        ErrorKind::Index => TPU_ERR_INDEX,
        ErrorKind::Type => TPU_ERR_TYPE,
        ErrorKind::Value => TPU_ERR_VALUE,
        ErrorKind::NotImplemented => TPU_ERR_NOT_IMPL,
        ErrorKind::OutOfMemory => TPU_ERR_OUT_OF_MEMORY,
        ErrorKind::LinAlg => TPU_ERR_LINALG,
    }
}

/// Runs `f`, turning errors and panics into a status code.
fn guarded(f: impl FnOnce() -> Result<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => TPU_OK,
        Ok(Err(e)) => {
            set_error(&e.message);
            status_of(&e)
        }
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            set_error(&format!("torch_tpu_rs internal error (please report): {what}"));
            TPU_ERR_RUNTIME
        }
    }
}

#[no_mangle]
pub extern "C" fn tpu_engine_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn tpu_engine_device_count() -> i32 {
    catch_unwind(|| crate::runtime::device_count() as i32).unwrap_or(0)
}

/// A new storage of `nbytes` in `*out`.
#[no_mangle]
pub unsafe extern "C" fn tpu_engine_storage_new(nbytes: usize, device_index: i32, out: *mut *mut c_void) -> i32 {
    guarded(|| {
        crate::device_memory::check_capacity(nbytes, device_index)?;
        *out = Storage::new(nbytes, device_index).into_handle();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_storage_release(storage: *mut c_void) {
    let _ = catch_unwind(|| Storage::release(storage));
}

/// Pinned host memory (`pin_memory()`): see `pinned_host.rs`.
#[no_mangle]
pub extern "C" fn tpu_engine_pinned_alloc(nbytes: usize) -> *mut c_void {
    catch_unwind(|| crate::pinned_host::allocate(nbytes)).unwrap_or(std::ptr::null_mut()) as *mut c_void
}

#[no_mangle]
pub extern "C" fn tpu_engine_pinned_free(p: *mut c_void) {
    let _ = catch_unwind(|| crate::pinned_host::free(p as *mut u8));
}

#[no_mangle]
pub extern "C" fn tpu_engine_is_pinned(p: *const c_void) -> i32 {
    catch_unwind(|| crate::pinned_host::contains(p as *const u8) as i32).unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_storage_resize(storage: *mut c_void, new_nbytes: usize, out: *mut *mut c_void) -> i32 {
    guarded(|| {
        let old = Storage::from_handle(storage);
        crate::device_memory::check_capacity(new_nbytes, old.device)?;
        let new = Storage::new(new_nbytes, old.device);
        let st = old.state();
        if st.buffer.is_some() && old.nbytes > 0 {
            // Copy the leading bytes: read the old storage as bytes and write
            // them into the first bytes of the new one.
            let keep = old.nbytes.min(new_nbytes);
            let src = TensorRef {
                storage: old,
                dtype: DType::U8,
                sizes: vec![keep as i64].into(),
                strides: vec![1].into(),
                offset: 0,
                wrapped: false,
                math: MathBits::NONE,
            };
            let mut bytes = vec![0u8; keep];
            crate::transfer::download(&src, &mut bytes)?;
            let dst = TensorRef { storage: &new, ..src };
            crate::transfer::upload(&dst, &bytes)?;
        }
        *out = new.into_handle();
        Ok(())
    })
}

fn dtype_of(code: i32, op: &str) -> Result<DType> {
    let dtype = lowering::dtypes::from_torch(code);
    if let Some(d) = dtype.filter(|d| d.is_complex() && !lowering::accepts_complex(op)) {
        // Counts as unlowered: TORCH_TPU_CPU_FALLBACK=1 runs it on the CPU.
        let mut e = EngineError::new(
            ErrorKind::NotImplemented,
            format!(
                "{op} does not support {} tensors on the tpu device yet (the ops that do are listed \
                 in the README under \"Complex tensors\"). Split the tensor with torch.view_as_real, \
                 move it to the CPU, or set TORCH_TPU_CPU_FALLBACK=1 to run such ops on the CPU.",
                lowering::dtypes::name(d)
            ),
        );
        e.not_lowered = true;
        return Err(e);
    }
    dtype.ok_or_else(|| {
        EngineError::new(
            ErrorKind::Type,
            format!(
                "{op}: dtype {} is not supported on the tpu device (supported: float32, float64, \
                 float16, bfloat16, complex64, complex128, int64, int32, int16, int8, uint8, bool). Convert the tensor \
                 with .to(torch.float32) or keep it on the CPU.",
                lowering::dtypes::torch_name(code)
            ),
        )
    })
}

unsafe fn slice<'a, T>(ptr: *const T, len: i64) -> &'a [T] {
    if ptr.is_null() || len <= 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len as usize)
    }
}

/// The (real, imaginary) parts of a complex number argument.
unsafe fn complex_parts(a: &TpuArg) -> (f64, f64) {
    let parts = slice(a.floats, a.len);
    (parts.first().copied().unwrap_or(0.0), parts.get(1).copied().unwrap_or(0.0))
}

unsafe fn tensor_ref<'a>(t: &TpuTensor, op: &str) -> Result<TensorRef<'a>> {
    Ok(TensorRef {
        storage: Storage::from_handle(t.storage),
        dtype: dtype_of(t.dtype, op)?,
        sizes: slice(t.sizes, t.ndim).into(),
        strides: slice(t.strides, t.ndim).into(),
        offset: t.storage_offset,
        wrapped: t.is_wrapped_number != 0,
        math: MathBits(t.math_bits as u8),
    })
}

/// Ops that may take CPU tensors with dimensions (PyTorch moves them).
fn accepts_host_tensors(op: &str) -> bool {
    let base = op.strip_prefix("aten::").unwrap_or(op);
    let base = base.split('.').next().unwrap_or(base);
    matches!(
        base,
        "index" | "index_put" | "index_put_" | "_index_put_impl_" | "_index_put_impl"
            // torch requires the per-tensor `scalars` of these on the CPU
            | "_foreach_addcmul" | "_foreach_addcmul_" | "_foreach_addcdiv" | "_foreach_addcdiv_"
    )
}

unsafe fn host_tensor<'a>(t: &TpuTensor, op: &str) -> Result<CallValue<'a>> {
    if !accepts_host_tensors(op) {
        return Err(EngineError::runtime(format!(
            "{op}: Expected all tensors to be on the same device, but found at least two devices, \
             tpu:0 and cpu! (a CPU tensor of shape {:?} was passed; move it with .to('tpu'))",
            slice(t.sizes, t.ndim)
        )));
    }
    let dtype = dtype_of(t.dtype, op)?;
    let sizes = slice(t.sizes, t.ndim).to_vec();
    let n: i64 = sizes.iter().product();
    let bytes = slice(t.host_data as *const u8, n * dtype.size_bytes() as i64);
    Ok(CallValue::HostTensor { dtype, sizes, bytes })
}

unsafe fn call_value<'a>(a: &TpuArg, op: &str) -> Result<CallValue<'a>> {
    Ok(match a.kind {
        ARG_NONE => CallValue::None,
        ARG_TENSOR => {
            let t = &*a.tensors;
            if t.storage.is_null() {
                host_tensor(t, op)?
            } else {
                CallValue::Tensor(tensor_ref(t, op)?)
            }
        }
        ARG_TENSOR_LIST => {
            let mut list = Vec::with_capacity(a.len as usize);
            for t in slice(a.tensors, a.len) {
                if t.dtype < 0 {
                    list.push(None);
                } else if t.storage.is_null() {
                    // A CPU tensor inside a list (indices of index/index_put).
                    match host_tensor(t, op)? {
                        CallValue::HostTensor { .. } => {
                            return Err(EngineError::runtime(format!(
                                "{op}: CPU index tensors are not supported yet; move them with .to('tpu')"
                            )))
                        }
                        _ => unreachable!(),
                    }
                } else {
                    list.push(Some(tensor_ref(t, op)?));
                }
            }
            CallValue::TensorList(list)
        }
        ARG_INT if a.is_scalar_param != 0 => CallValue::Scalar { dtype: DType::I64, f: a.i as f64, i: a.i, from_tensor: false },
        ARG_FLOAT if a.is_scalar_param != 0 => CallValue::Scalar { dtype: DType::F64, f: a.f, i: a.f as i64, from_tensor: false },
        ARG_BOOL if a.is_scalar_param != 0 => CallValue::Scalar { dtype: DType::Bool, f: a.i as f64, i: a.i, from_tensor: false },
        ARG_INT => CallValue::Int(a.i),
        ARG_FLOAT => CallValue::Float(a.f),
        ARG_BOOL => CallValue::Bool(a.i != 0),
        ARG_INT_LIST if a.is_scalar_param != 0 => CallValue::ScalarList {
            dtype: DType::I64,
            values: slice(a.ints, a.len).iter().map(|&i| (i as f64, i)).collect(),
        },
        ARG_FLOAT_LIST if a.is_scalar_param != 0 => CallValue::ScalarList {
            dtype: DType::F64,
            values: slice(a.floats, a.len).iter().map(|&f| (f, f as i64)).collect(),
        },
        ARG_BOOL_LIST if a.is_scalar_param != 0 => CallValue::ScalarList {
            dtype: DType::Bool,
            values: slice(a.ints, a.len).iter().map(|&i| (i as f64, i)).collect(),
        },
        ARG_INT_LIST => CallValue::IntList(slice(a.ints, a.len).to_vec()),
        ARG_FLOAT_LIST => CallValue::FloatList(slice(a.floats, a.len).to_vec()),
        ARG_BOOL_LIST => CallValue::BoolList(slice(a.ints, a.len).iter().map(|x| *x != 0).collect()),
        ARG_STRING => CallValue::Str(CStr::from_ptr(a.str_).to_string_lossy().into_owned()),
        ARG_GENERATOR => CallValue::Generator(a.ptr),
        ARG_DEVICE => CallValue::Device(a.i),
        ARG_COMPLEX => {
            // Only ops whose lowerings handle complex numbers may take one.
            let dtype = dtype_of(lowering::dtypes::to_torch(DType::C128), op)?;
            let (re, im) = complex_parts(a);
            complex_scalar(dtype, re, im, false)
        }
        ARG_CPU_SCALAR => {
            let t = &*a.tensors;
            let dtype = dtype_of(t.dtype, op)?;
            let from_tensor = t.is_wrapped_number == 0;
            if dtype.is_complex() {
                let (re, im) = complex_parts(a);
                return Ok(complex_scalar(dtype, re, im, from_tensor));
            }
            let (f, i) = if dtype.is_float() { (a.f, a.f as i64) } else { (a.i as f64, a.i) };
            CallValue::Scalar { dtype, f, i, from_tensor }
        }
        _ => CallValue::Other(if a.str_.is_null() {
            "unknown".into()
        } else {
            CStr::from_ptr(a.str_).to_string_lossy().into_owned()
        }),
    })
}

/// Ops whose schema does not mark arguments they update in place:
/// native_batch_norm(input, weight, bias, running_mean, running_var,
/// training, ...) updates the running statistics when training.
fn mark_hidden_mutations(op: &str, args: &mut [CallArg]) {
    let base = op.strip_prefix("aten::").unwrap_or(op);
    if base == "native_batch_norm" || base == "native_batch_norm.out" {
        let training = matches!(args.get(5).map(|a| &a.value), Some(CallValue::Bool(true)));
        if training {
            for i in [3, 4] {
                if let Some(a) = args.get_mut(i) {
                    if matches!(a.value, CallValue::Tensor(_)) {
                        a.write = 1;
                    }
                }
            }
        }
    }
}

/// The fused optimizer steps take their hyperparameters as `float`s, which
/// would otherwise be cache-key constants: a learning-rate schedule would
/// compile a new program every step. They become runtime numbers instead,
/// like Python scalars.
fn floats_as_runtime_numbers(op: &str, args: &mut [CallArg]) {
    let base = op.strip_prefix("aten::").unwrap_or(op);
    let name = base.split('.').next().unwrap_or(base);
    if !lowering::RUNTIME_FLOAT_OPS.contains(&name) {
        return;
    }
    for a in args.iter_mut() {
        if let CallValue::Float(f) = a.value {
            a.value = CallValue::Scalar { dtype: DType::F64, f, i: f as i64, from_tensor: false };
        }
    }
}

fn push_tensor(arena: &mut Arena, t: NewTensor) -> i64 {
    arena.shapes.push((t.sizes, t.strides));
    let (sizes, strides) = arena.shapes.last().map(|(a, b)| (a.as_ptr(), b.as_ptr())).unwrap_or((std::ptr::null(), std::ptr::null()));
    let ndim = arena.shapes.last().map(|s| s.0.len()).unwrap_or(0) as i64;
    arena.tensors.push(TpuNewTensor {
        storage: t.storage,
        nbytes: t.nbytes,
        dtype: lowering::dtypes::to_torch(t.dtype),
        device_index: t.device,
        ndim,
        sizes,
        strides,
        storage_offset: 0,
    });
    arena.tensors.len() as i64 - 1
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_dispatch(
    op_name: *const c_char,
    args: *const TpuArg,
    nargs: i64,
    ret_alias: *const i32,
    ret_kind: *const i32,
    nrets: i64,
    flags: i32,
    out: *mut TpuResults,
) -> i32 {
    guarded(|| {
        let op = CStr::from_ptr(op_name).to_str().unwrap_or("aten::<non-utf8 name>");
        let mut call_args = Vec::with_capacity(nargs.max(0) as usize);
        for a in slice(args, nargs) {
            call_args.push(CallArg { value: call_value(a, op)?, write: a.is_write.clamp(0, 2) as u8 });
        }
        mark_hidden_mutations(op, &mut call_args);
        floats_as_runtime_numbers(op, &mut call_args);
        let call = Call {
            op,
            args: call_args,
            ret_alias: slice(ret_alias, nrets).into(),
            ret_kind: slice(ret_kind, nrets).into(),
            pointwise: flags & DISPATCH_POINTWISE != 0,
        };
        let rets = run(&call)?;
        ARENA.with(|arena| {
            let mut arena = arena.borrow_mut();
            arena.rets.clear();
            arena.tensors.clear();
            arena.shapes.clear();
            for r in rets {
                let blank = TpuRet { kind: RET_NONE, arg: -1, first: 0, len: 0, i: 0, f: 0.0, imag: 0.0 };
                let ret = match r {
                    RetValue::None => blank,
                    RetValue::Undefined => TpuRet { kind: RET_UNDEFINED, ..blank },
                    RetValue::Tensor(t) => TpuRet { kind: RET_TENSOR, first: push_tensor(&mut arena, t), ..blank },
                    RetValue::TensorList(ts) => {
                        let len = ts.len() as i64;
                        let mut first = arena.tensors.len() as i64;
                        for (k, t) in ts.into_iter().enumerate() {
                            let idx = push_tensor(&mut arena, t);
                            if k == 0 {
                                first = idx;
                            }
                        }
                        TpuRet { kind: RET_TENSOR_LIST, first, len, ..blank }
                    }
                    RetValue::Alias(a) => TpuRet { kind: RET_ALIAS, arg: a as i32, ..blank },
                    RetValue::Int(i) => TpuRet { kind: RET_INT, i, ..blank },
                    RetValue::Float(f) => TpuRet { kind: RET_FLOAT, f, ..blank },
                    RetValue::Complex(f, imag) => TpuRet { kind: RET_COMPLEX, f, imag, ..blank },
                    RetValue::Bool(b) => TpuRet { kind: RET_BOOL, i: b as i64, ..blank },
                    RetValue::ResizeCopy { arg, tensor } => {
                        TpuRet { kind: RET_RESIZE_COPY, arg: arg as i32, first: push_tensor(&mut arena, tensor), ..blank }
                    }
                };
                arena.rets.push(ret);
            }
            (*out).num_rets = arena.rets.len() as i64;
            (*out).rets = arena.rets.as_ptr();
            (*out).new_tensors = arena.tensors.as_ptr();
        });
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_upload(dst: *const TpuTensor, src: *const c_void, nbytes: usize) -> i32 {
    guarded(|| {
        crate::fork::refuse_in_child()?;
        let t = tensor_ref(&*dst, "aten::copy_ (cpu -> tpu)")?;
        let bytes = slice(src as *const u8, nbytes as i64);
        crate::transfer::upload(&t, bytes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_download(src: *const TpuTensor, dst: *mut c_void, nbytes: usize) -> i32 {
    guarded(|| {
        crate::fork::refuse_in_child()?;
        let t = tensor_ref(&*src, "aten::copy_ (tpu -> cpu)")?;
        let out = if dst.is_null() || nbytes == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(dst as *mut u8, nbytes)
        };
        crate::transfer::download(&t, out)
    })
}

#[no_mangle]
pub extern "C" fn tpu_engine_synchronize(device_index: i32) -> i32 {
    guarded(|| {
        let engine = engine()?;
        if device_index < 0 {
            return crate::sync::synchronize(engine, "torch.tpu.synchronize()");
        }
        crate::sync::synchronize_device(engine, device_index, "stream or event synchronize")
    })
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_memory_stats(device_index: i32, allocated: *mut i64, peak: *mut i64, num_allocs: *mut i64) {
    let (a, p, n) = MEMORY.get(device_index);
    *allocated = a;
    *peak = p;
    *num_allocs = n;
}

/// A device's (free, total) memory in bytes: returns 1 and fills both where
/// the plugin or platform reports them, else 0.
#[no_mangle]
pub unsafe extern "C" fn tpu_engine_memory_info(device_index: i32, free: *mut u64, total: *mut u64) -> i32 {
    let info = catch_unwind(|| engine().ok().and_then(|e| crate::device_memory::free_and_total(e, device_index)));
    match info {
        Ok(Some((f, t))) => {
            *free = f;
            *total = t;
            1
        }
        _ => 0,
    }
}

/// Whether tensors of this c10::ScalarType code can live on the device.
#[no_mangle]
pub extern "C" fn tpu_engine_dtype_supported(code: i32) -> i32 {
    lowering::dtypes::from_torch(code).is_some() as i32
}

#[no_mangle]
pub extern "C" fn tpu_engine_reset_peak(device_index: i32) {
    MEMORY.reset_peak(device_index);
}

/// The CPU fallback is on when TORCH_TPU_CPU_FALLBACK=1 (or set from Python).
pub fn fallback_enabled() -> bool {
    match FALLBACK.load(std::sync::atomic::Ordering::Relaxed) {
        0 => false,
        1 => true,
        _ => {
            let on = matches!(std::env::var("TORCH_TPU_CPU_FALLBACK").as_deref(), Ok("1") | Ok("true") | Ok("True"));
            FALLBACK.store(on as u8, std::sync::atomic::Ordering::Relaxed);
            on
        }
    }
}

pub static FALLBACK: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(255);

#[no_mangle]
pub extern "C" fn tpu_engine_fallback_enabled() -> i32 {
    fallback_enabled() as i32
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_has_lowering(op_name: *const c_char) -> i32 {
    let op = CStr::from_ptr(op_name).to_string_lossy();
    lowering::lookup(&op).is_some() as i32
}

#[no_mangle]
pub unsafe extern "C" fn tpu_engine_note_fallback(op_name: *const c_char) -> i32 {
    let op = CStr::from_ptr(op_name).to_string_lossy();
    match engine() {
        Ok(e) => (crate::metrics::Metrics::bump(&e.metrics.fallbacks, &op) == 1) as i32,
        Err(_) => 1,
    }
}
