//! The two ops behind `torch.amp.GradScaler`: unscaling gradients while
//! spotting infs/NaNs, and updating the loss scale. Both mutate their
//! arguments; the lowering returns the new values (the written list first,
//! then `found_inf`; the new scale, then the growth tracker) and the engine
//! writes them back.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::wide;
use crate::args::Args;
use crate::dtypes::{to_torch, torch_name};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("_amp_foreach_non_finite_check_and_unscale_", non_finite_check_and_unscale),
    op!("_amp_update_scale_", update_scale),
];

/// A one-element tensor of `dtype` (scale, inv_scale, found_inf, the growth
/// tracker) as a rank-0 value, with its own shape to write it back in.
fn one_element(lx: &mut Lower, args: &Args, i: usize, what: &str, dtype: DType) -> Result<(Value, Vec<i64>)> {
    let t = args.tensor(i)?;
    if t.shape.iter().product::<i64>() != 1 || t.dtype != dtype {
        bail!(
            Runtime,
            "{}: {what} must be a 1-element {} tensor, got shape {:?} and {}",
            lx.op,
            torch_name(to_torch(dtype)),
            t.shape,
            torch_name(to_torch(t.dtype))
        );
    }
    let (v, shape) = (t.value, t.shape.clone());
    Ok((lx.b.reshape(v, &[])?, shape))
}

/// _amp_foreach_non_finite_check_and_unscale_(self[], found_inf, inv_scale):
/// self[i] *= inv_scale; found_inf = 1 if any self[i] held an inf or NaN
/// (it is only ever raised, never cleared).
fn non_finite_check_and_unscale(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let ts = args.tensors(0)?;
    let (found, found_shape) = one_element(lx, args, 1, "found_inf", DType::F32)?;
    let (inv_scale, _) = one_element(lx, args, 2, "inv_scale", DType::F32)?;
    let mut out = Vec::with_capacity(ts.len() + 1);
    let mut any = found;
    for t in &ts {
        if !t.dtype.is_float() {
            bail!(Runtime, "{}: expected floating point gradients, got {}", lx.op, super::elementwise::type_name(t.dtype));
        }
        // In the dtype's compute precision, as the CPU kernel (f64 stays f64).
        let x = lx.cast(t.value, wide(t.dtype))?;
        let finite = lx.b.is_finite(x)?;
        let dims: Vec<i64> = (0..t.shape.len() as i64).collect();
        let all_finite = if dims.is_empty() { finite } else { lx.b.reduce_and(finite, &dims)? };
        let (no, yes) = (lx.b.constant_f64(DType::F32, 0.0), lx.b.constant_f64(DType::F32, 1.0));
        let flag = lx.b.select(all_finite, no, yes)?;
        any = lx.b.max(any, flag)?;
        let s = lx.cast(inv_scale, wide(t.dtype))?;
        let s = lx.expand(s, &t.shape)?;
        let y = lx.b.mul(x, s)?;
        out.push(lx.cast(y, t.dtype)?);
    }
    lx.list_len = Some(ts.len());
    out.push(lx.b.reshape(any, &found_shape)?);
    Ok(out)
}

/// _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
/// backoff_factor, growth_interval): after an inf, scale *= backoff and the
/// tracker resets; otherwise the tracker counts up and, every
/// `growth_interval` clean steps, scale *= growth (if that stays finite).
fn update_scale(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (scale, scale_shape) = one_element(lx, args, 0, "the scale", DType::F32)?;
    let (tracker, tracker_shape) = one_element(lx, args, 1, "growth_tracker", DType::I32)?;
    let (found, _) = one_element(lx, args, 2, "found_inf", DType::F32)?;
    let (growth, backoff, interval) = (args.float(3)?, args.float(4)?, args.int(5)?);

    let zero_f = lx.b.constant_f64(DType::F32, 0.0);
    let inf_seen = lx.b.compare(found, zero_f, CompareDir::Ne)?;
    let one = lx.b.constant_i64(DType::I32, 1);
    let zero = lx.b.constant_i64(DType::I32, 0);
    let counted = lx.b.add(tracker, one)?;
    let interval = lx.b.constant_i64(DType::I32, interval);
    let at_interval = lx.b.compare(counted, interval, CompareDir::Eq)?;
    let growth = lx.b.constant_f64(DType::F32, growth);
    let grown = lx.b.mul(scale, growth)?;
    let grown_ok = lx.b.is_finite(grown)?;
    let grown = lx.b.select(grown_ok, grown, scale)?;
    let clean_scale = lx.b.select(at_interval, grown, scale)?;
    let clean_tracker = lx.b.select(at_interval, zero, counted)?;
    let backoff = lx.b.constant_f64(DType::F32, backoff);
    let backed_off = lx.b.mul(scale, backoff)?;
    let new_scale = lx.b.select(inf_seen, backed_off, clean_scale)?;
    let new_tracker = lx.b.select(inf_seen, zero, clean_tracker)?;
    Ok(vec![lx.b.reshape(new_scale, &scale_shape)?, lx.b.reshape(new_tracker, &tracker_shape)?])
}
