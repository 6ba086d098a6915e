//! Host<->device copies of tensor views. Uploads and downloads of whole
//! dense storages move bytes directly. Other views are written through a
//! small program (cached like any op); they are read by gathering on the host
//! from the whole storage, unless the view is a small part of a large storage.
use std::sync::Arc;

use stablehlo::DType;

use crate::call::{Call, CallArg, CallValue, MathBits, TensorRef, RET_TENSOR};
use crate::dispatch::{run_now, RetValue};
use crate::error::{EngineError, Result};
use crate::runtime::engine;
use crate::storage::Storage;

pub fn element_type(d: DType) -> pjrt::ElementType {
    use pjrt::ElementType as E;
    match d {
        DType::Bool => E::Pred,
        DType::U8 => E::U8,
        DType::U32 => E::U32,
        DType::U64 => E::U64,
        DType::I8 => E::S8,
        DType::I16 => E::S16,
        DType::I32 => E::S32,
        DType::I64 => E::S64,
        DType::F16 => E::F16,
        DType::BF16 => E::BF16,
        DType::F32 => E::F32,
        DType::F64 => E::F64,
        DType::C64 => E::C64,
        DType::C128 => E::C128,
    }
}

/// Copies contiguous host bytes (dst's dtype and sizes) into the view `dst`.
pub fn upload(dst: &TensorRef, bytes: &[u8]) -> Result<()> {
    let engine = engine()?;
    // Held to the end, so no thread records an op on `dst` between the check
    // below and the new buffer landing.
    let _held = crate::graph_lock::hold();
    // A whole-buffer upload into a storage the pending graph does not write
    // needs no flush (see fused::host_overwrite_needs_flush).
    if !dst.is_whole() || crate::fused::host_overwrite_needs_flush(dst.storage) {
        crate::fused::flush_device_if_pending(engine, dst.storage.device, "host write")?;
    }
    let numel = dst.numel();
    let need = numel as usize * dst.dtype.size_bytes();
    if bytes.len() != need {
        return Err(EngineError::runtime(format!(
            "upload of {} bytes into a tpu view of shape {:?} ({}) that needs {need}",
            bytes.len(),
            dst.sizes,
            lowering::dtypes::name(dst.dtype)
        )));
    }
    if dst.is_whole() {
        let device = engine.device(dst.storage.device)?;
        let buffer = Arc::new(engine.client.buffer_from_host(bytes, element_type(dst.dtype), &[numel], device)?);
        dst.storage.set(buffer, dst.dtype);
        return Ok(());
    }
    // Partial view: write through copy_ from a temporary storage.
    let tmp = storage_from_host(bytes, dst.dtype, dst.storage.device)?;
    let src = dense_view(&tmp, dst.dtype, &dst.sizes);
    let call = Call {
        op: "aten::copy_",
        args: vec![
            CallArg { value: CallValue::Tensor(dst.clone()), write: 1 },
            CallArg { value: CallValue::Tensor(src), write: 0 },
        ],
        ret_alias: vec![0].into(),
        ret_kind: vec![RET_TENSOR].into(),
        pointwise: false,
    };
    run_now(&call)?;
    Ok(())
}

/// A new storage on `device` holding `bytes`, a dense tensor of `dtype`.
pub fn storage_from_host(bytes: &[u8], dtype: DType, device: i32) -> Result<Storage> {
    let engine = engine()?;
    let numel = (bytes.len() / dtype.size_bytes()) as i64;
    let buffer = engine.client.buffer_from_host(bytes, element_type(dtype), &[numel], engine.device(device)?)?;
    Ok(Storage::with_buffer(Arc::new(buffer), dtype, bytes.len(), device))
}

/// The contiguous view of shape `sizes` over the start of `storage`.
pub fn dense_view<'a>(storage: &'a Storage, dtype: DType, sizes: &[i64]) -> TensorRef<'a> {
    TensorRef { storage, dtype, sizes: sizes.to_vec().into(), strides: contiguous_strides(sizes).into(), offset: 0, wrapped: false, math: MathBits::NONE }
}

/// Copies the view `src` into contiguous host bytes. A host sync.
pub fn download(src: &TensorRef, out: &mut [u8]) -> Result<()> {
    let engine = engine()?;
    crate::sync_debug::implicit_host_sync(engine, "tensor read (.cpu(), .item(), print)")?;
    crate::fused::flush_device_if_pending(engine, src.storage.device, "host read (.cpu(), print, save)")?;
    engine.checks.drain()?;
    let need = src.numel() as usize * src.dtype.size_bytes();
    if out.len() != need {
        return Err(EngineError::runtime(format!(
            "download of a tpu view of shape {:?} needs {need} bytes, got a buffer of {}",
            src.sizes,
            out.len()
        )));
    }
    if need == 0 {
        return Ok(());
    }
    let st = src.storage.state();
    if let (true, Some(buffer)) = (src.is_whole() && st.dtype == src.dtype, st.buffer.as_ref()) {
        buffer.to_host(out)?;
        return Ok(());
    }
    if let Some(buffer) = st.buffer.as_ref().filter(|_| st.dtype == src.dtype) {
        let small = buffer.element_count() * src.dtype.size_bytes() <= HOST_GATHER_MAX_RATIO * need + HOST_GATHER_SLACK;
        if small && view_fits(src, buffer.element_count()) {
            let whole = buffer.to_host_vec()?;
            gather_view(&whole, src, out);
            return Ok(());
        }
    }
    // A small view of a large storage: materialize it densely on the device first.
    let call = Call {
        op: "aten::clone",
        args: vec![CallArg { value: CallValue::Tensor(src.clone()), write: 0 }, CallArg { value: CallValue::None, write: 0 }],
        ret_alias: vec![-1].into(),
        ret_kind: vec![RET_TENSOR].into(),
        pointwise: false,
    };
    let rets = run_now(&call)?;
    match rets.into_iter().next() {
        Some(RetValue::Tensor(t)) => {
            let storage = unsafe { Storage::from_handle(t.storage) };
            let buffer = storage.state().buffer;
            let result = match buffer {
                Some(b) => b.to_host(out).map_err(EngineError::from),
                None => Err(EngineError::runtime("internal error: clone produced no buffer")),
            };
            unsafe { Storage::release(t.storage) };
            result
        }
        _ => Err(EngineError::runtime("internal error: clone returned no tensor")),
    }
}

/// A partial view is read by downloading its whole storage and gathering on
/// the host when the storage is at most this many times the view (plus the
/// slack): a transfer compiles nothing, whereas a device-side gather compiles
/// a program per view shape (e.g. per narrowed output of a bucketed graph).
const HOST_GATHER_MAX_RATIO: usize = 8;
const HOST_GATHER_SLACK: usize = 1 << 20;

/// Whether every element of the view lies inside a storage of `count` elements.
fn view_fits(src: &TensorRef, count: usize) -> bool {
    let last = src.sizes.iter().zip(src.strides.iter()).map(|(n, s)| (n - 1) * s).sum::<i64>() + src.offset;
    src.offset >= 0 && src.strides.iter().all(|&s| s >= 0) && (last as usize) < count
}

/// Copies the elements of the strided view `src` out of its storage's bytes
/// `storage` into the dense row-major `out`.
fn gather_view(storage: &[u8], src: &TensorRef, out: &mut [u8]) {
    let es = src.dtype.size_bytes();
    let rank = src.sizes.len();
    let mut index = vec![0i64; rank];
    for chunk in out.chunks_exact_mut(es) {
        let at = (src.offset + index.iter().zip(src.strides.iter()).map(|(i, s)| i * s).sum::<i64>()) as usize * es;
        chunk.copy_from_slice(&storage[at..at + es]);
        for d in (0..rank).rev() {
            index[d] += 1;
            if index[d] < src.sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
    }
    strides
}
