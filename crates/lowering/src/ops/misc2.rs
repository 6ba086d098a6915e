//! More OpInfo-coverage ops: index_reduce, nonzero_static, put, angle,
//! channel_shuffle, logcumsumexp, histc, gcd/lcm, frexp, segment_reduce,
//! embedding_bag.
//!
//! - `misc2/segment.rs`: segment_reduce and its backward;
//! - `misc2/embedding_bag.rs`: _embedding_bag and its two backward ops;
//! - `misc2/index.rs`: index_reduce, nonzero_static, put;
//! - `misc2/pointwise.rs`: angle, frexp;
//! - `misc2/shuffle.rs`: channel_shuffle;
//! - `misc2/logcumsumexp.rs`: logcumsumexp;
//! - `misc2/histc.rs`: histc;
//! - `misc2/gcd.rs`: gcd, lcm;
//! - here: the table and the helpers the files share.
use stablehlo::{CompareDir, ScatterDims, Value};

use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod gcd;
mod histc;
mod index;
mod logcumsumexp;
mod pointwise;
mod embedding_bag;
mod segment;
mod shuffle;
use gcd::{gcd, lcm};
use histc::histc;
use index::{index_reduce, nonzero_static, put};
use logcumsumexp::logcumsumexp;
use pointwise::{angle, frexp};
use embedding_bag::{embedding_bag, embedding_bag_backward, embedding_bag_per_sample_weights_backward};
use segment::{segment_reduce, segment_reduce_backward};
use shuffle::channel_shuffle;

type R = Result<Vec<Value>>;
type V = Value;

pub const OPS: &[OpEntry] = &[
    op!("index_reduce", index_reduce),
    op!("nonzero_static", nonzero_static),
    op!("put", put),
    op!("angle", angle),
    op!("channel_shuffle", channel_shuffle),
    op!("native_channel_shuffle", channel_shuffle),
    op!("logcumsumexp", logcumsumexp),
    op!("_logcumsumexp", logcumsumexp),
    op!("histc", histc, static),
    op!("gcd", gcd),
    op!("lcm", lcm),
    op!("frexp", frexp),
    op!("segment_reduce", segment_reduce),
    op!("_segment_reduce_backward", segment_reduce_backward),
    op!("_embedding_bag_forward_only", embedding_bag),
    op!("_embedding_bag", embedding_bag),
    op!("_embedding_bag_backward", embedding_bag_backward),
    op!("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward),
];

pub(super) fn cmp(lx: &mut Lower, a: V, x: f64, dir: CompareDir) -> Result<V> {
    let c = lx.full_like(a, x)?;
    Ok(lx.b.compare(a, c, dir)?)
}

/// Scatters `upd` ([n]) into `init` ([m]) at `slot` ([n] i64; out-of-range dropped).
fn scatter_1d(lx: &mut Lower, init: V, slot: V, upd: V, add: bool) -> Result<V> {
    let n = lx.shape(slot)[0];
    let slot = lx.b.reshape(slot, &[n, 1])?;
    let dims = ScatterDims::points_1d();
    Ok(lx.b.scatter(init, slot, upd, &dims, move |rb, cur, u| {
        Ok(vec![if add { rb.add(cur[0], u[0])? } else { u[0] }])
    })?)
}
