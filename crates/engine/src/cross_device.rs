//! Ops whose tensors live on more than one tpu device.
//!
//! A PJRT executable runs on one device and takes only that device's
//! buffers, so `copy_` between devices (`x.to("tpu:1")`) goes through the
//! host: the source is read back, uploaded to the destination's device, and
//! copied from there like any same-device copy (dtype conversion,
//! broadcasting, strided views). Any other op with tensors on two devices
//! fails as on CUDA, naming both devices.
use crate::call::{Call, CallArg, CallValue, TensorRef};
use crate::dispatch::RetValue;
use crate::error::{EngineError, Result};
use crate::transfer::{dense_view, download, storage_from_host};

/// The first two distinct devices among the call's tensors, if there are two.
/// (Runs for every op: no allocation.)
fn two_devices(call: &Call) -> Option<(i32, i32)> {
    let mut first: Option<i32> = None;
    for a in &call.args {
        let mut check = |t: &TensorRef| match first {
            None => {
                first = Some(t.storage.device);
                None
            }
            Some(d) if d != t.storage.device => Some((d, t.storage.device)),
            _ => None,
        };
        let found = match &a.value {
            CallValue::Tensor(t) => check(t),
            CallValue::TensorList(ts) => ts.iter().flatten().find_map(check),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Runs `copy_` across devices, or rejects an op mixing devices. `None`:
/// every tensor is on one device and the call goes on as usual.
pub fn handle(call: &Call, run: impl FnOnce(&Call) -> Result<Vec<RetValue>>) -> Result<Option<Vec<RetValue>>> {
    let Some((first, second)) = two_devices(call) else {
        return Ok(None);
    };
    let base = call.op.strip_prefix("aten::").unwrap_or(call.op);
    if base != "copy_" {
        return Err(EngineError::runtime(format!(
            "{}: Expected all tensors to be on the same device, but found at least two devices, tpu:{} and tpu:{}! \
             Move them to one device with .to()",
            call.op, first, second
        )));
    }
    let (dst, src) = match (&call.args[0].value, &call.args[1].value) {
        (CallValue::Tensor(d), CallValue::Tensor(s)) => (d, s),
        _ => return Err(EngineError::runtime("aten::copy_: expected (self, src) tensors (internal error)")),
    };
    let numel = src.numel();
    let nbytes = numel.max(0) as usize * src.dtype.size_bytes();
    let mut bytes = vec![0u8; nbytes];
    download(src, &mut bytes)?;
    let moved = storage_from_host(&bytes, src.dtype, dst.storage.device)?;
    let local = TensorRef { wrapped: src.wrapped, ..dense_view(&moved, src.dtype, &src.sizes) };
    let mut args: Vec<CallArg> = call.args.clone();
    args[1].value = CallValue::Tensor(local);
    let local_call = Call { op: call.op, args, ret_alias: call.ret_alias.clone(), ret_kind: call.ret_kind.clone(), pointwise: call.pointwise };
    run(&local_call).map(Some)
}
