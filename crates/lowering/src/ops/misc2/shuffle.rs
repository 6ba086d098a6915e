//! channel_shuffle (and native_channel_shuffle).
use super::R;
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;

/// channel_shuffle(self, groups): [N, g, C/g, *] → [N, C/g, g, *].
pub(super) fn channel_shuffle(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let g = args.int(1)?;
    if g <= 0 {
        bail!(Runtime, "{}: Number of groups to divide channels in must be positive. Value of groups:{g}", lx.op);
    }
    if t.shape.len() < 3 {
        bail!(
            Runtime,
            "{}: channel_shuffle expects input to have at least 3 dimensions, but got input with sizes {:?}",
            lx.op,
            t.shape
        );
    }
    let c = t.shape[1];
    if c % g != 0 {
        bail!(Runtime, "{}: Number of channels must be divisible by groups. Got {c} channels and {g} groups.", lx.op);
    }
    let mut s = vec![t.shape[0], g, c / g];
    s.extend_from_slice(&t.shape[2..]);
    let v = lx.b.reshape(t.value, &s)?;
    let mut perm: Vec<i64> = vec![0, 2, 1];
    perm.extend(3..s.len() as i64);
    let v = lx.b.transpose(v, &perm)?;
    Ok(vec![lx.b.reshape(v, &t.shape)?])
}
