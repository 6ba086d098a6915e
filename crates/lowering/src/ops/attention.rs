//! Fused scaled-dot-product attention: `_scaled_dot_product_fused_attention_overrideable`
//! (softmax(Q K^T * scale + bias) V in one program) and its backward, which
//! recomputes the probabilities instead of storing them. Supports is_causal
//! (upper-left), float or bool bias, an explicit scale, and grouped-query
//! attention (key/value with fewer heads than query). dropout_p must be 0.
use stablehlo::{CompareDir, DType, Value};

use crate::args::{Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

type R = Result<Vec<Value>>;

pub const OPS: &[OpEntry] = &[
    op!("_scaled_dot_product_fused_attention_overrideable_backward", sdpa_backward),
    op!("_scaled_dot_product_fused_attention_overrideable", sdpa_forward),
    op!("_scaled_dot_product_flash_attention_for_cpu_backward", flash_cpu_backward),
    op!("_scaled_dot_product_flash_attention_for_cpu", flash_cpu_forward),
];

fn acc_type(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// Shapes checked; returns (q, k, v) cast to the accumulation type with
/// key/value heads repeated to the query's head count, plus the group size.
struct Prep {
    q: Value,
    k: Value,
    v: Value,
    group: i64,
    acc: DType,
    scale: f64,
}

fn prepare(lx: &mut Lower, q: &TensorArg, k: &TensorArg, v: &TensorArg, scale: Option<f64>) -> Result<Prep> {
    let r = q.shape.len();
    if r < 3 || k.shape.len() != r || v.shape.len() != r {
        bail!(Runtime, "{}: expected query, key and value of the same rank >= 3, got {:?}, {:?}, {:?}", lx.op, q.shape, k.shape, v.shape);
    }
    if q.dtype != k.dtype || q.dtype != v.dtype || !is_float(q.dtype) {
        bail!(Runtime, "{}: expected query, key and value to have the same floating dtype, got {:?}, {:?}, {:?}", lx.op, q.dtype, k.dtype, v.dtype);
    }
    let (hq, hk) = (q.shape[r - 3], k.shape[r - 3]);
    if q.shape[r - 1] != k.shape[r - 1] || k.shape[r - 2] != v.shape[r - 2] || v.shape[r - 3] != hk
        || q.shape[..r - 3] != k.shape[..r - 3] || k.shape[..r - 3] != v.shape[..r - 3]
        || hk == 0 || hq % hk != 0
    {
        bail!(Runtime, "{}: incompatible shapes query {:?}, key {:?}, value {:?}", lx.op, q.shape, k.shape, v.shape);
    }
    let acc = acc_type(q.dtype);
    let group = hq / hk;
    let qv = lx.cast(q.value, acc)?;
    let mut kv = lx.cast(k.value, acc)?;
    let mut vv = lx.cast(v.value, acc)?;
    if group > 1 {
        kv = repeat_heads(lx, kv, group)?;
        vv = repeat_heads(lx, vv, group)?;
    }
    let scale = scale.unwrap_or(1.0 / (q.shape[r - 1] as f64).sqrt());
    Ok(Prep { q: qv, k: kv, v: vv, group, acc, scale })
}

/// [.., Hk, S, E] -> [.., Hk*g, S, E], each head repeated g times (repeat_interleave).
fn repeat_heads(lx: &mut Lower, x: Value, g: i64) -> Result<Value> {
    let s = lx.shape(x);
    let r = s.len();
    let mut big = s[..r - 2].to_vec();
    big.push(g);
    big.extend_from_slice(&s[r - 2..]);
    let dims: Vec<i64> = (0..r as i64 - 2).chain([r as i64 - 1, r as i64]).collect();
    let b = lx.b.broadcast_in_dim(x, &big, &dims)?;
    let mut out = s.clone();
    out[r - 3] *= g;
    Ok(lx.b.reshape(b, &out)?)
}

/// Sums [.., Hk*g, S, E] back to [.., Hk, S, E].
fn sum_groups(lx: &mut Lower, x: Value, g: i64) -> Result<Value> {
    if g == 1 {
        return Ok(x);
    }
    let s = lx.shape(x);
    let r = s.len();
    let mut big = s[..r - 3].to_vec();
    big.extend([s[r - 3] / g, g, s[r - 2], s[r - 1]]);
    let x = lx.b.reshape(x, &big)?;
    Ok(lx.b.reduce_sum(x, &[r as i64 - 2])?)
}

/// Batched contraction over all leading dims: lhs dim `lc` with rhs dim `rc`.
fn bdot(lx: &mut Lower, a: Value, b: Value, lc: i64, rc: i64) -> Result<Value> {
    let r = lx.shape(a).len() as i64;
    let batch: Vec<i64> = (0..r - 2).collect();
    Ok(lx.b.dot_general(a, b, &batch, &batch, &[lc], &[rc], None)?)
}

/// Softmax probabilities of the masked, scaled scores: returns (p, lse).
/// Fully-masked rows give p = 0 (like torch's _safe_softmax) and lse = -inf.
fn probs(lx: &mut Lower, p: &Prep, bias: Option<&TensorArg>, causal: bool) -> Result<(Value, Value)> {
    let r = lx.shape(p.q).len() as i64;
    let s = bdot(lx, p.q, p.k, r - 1, r - 1)?; // [.., L, S]
    let shape = lx.shape(s);
    let sc = lx.full(p.acc, p.scale, &shape)?;
    let mut s = lx.b.mul(s, sc)?;
    let ninf = lx.full(p.acc, f64::NEG_INFINITY, &shape)?;
    if let Some(bias) = bias {
        let bv = lx.expand(bias.value, &shape)?;
        if bias.dtype == DType::Bool {
            s = lx.b.select(bv, s, ninf)?;
        } else {
            let bv = lx.cast(bv, p.acc)?;
            s = lx.b.add(s, bv)?;
        }
    }
    if causal {
        let row = lx.b.iota(DType::I64, &shape, r - 2)?;
        let col = lx.b.iota(DType::I64, &shape, r - 1)?;
        let keep = lx.b.compare(row, col, CompareDir::Ge)?;
        s = lx.b.select(keep, s, ninf)?;
    }
    let mut red = shape.clone();
    red.pop();
    let keep_dims: Vec<i64> = (0..r - 1).collect();
    let m = lx.b.reduce_max(s, &[r - 1])?;
    let fin = lx.b.is_finite(m)?;
    let zero_r = lx.full(p.acc, 0.0, &red)?;
    let m_safe = lx.b.select(fin, m, zero_r)?;
    let mb = lx.b.broadcast_in_dim(m_safe, &shape, &keep_dims)?;
    let e = lx.b.sub(s, mb)?;
    let e = lx.b.exp(e)?;
    let sum = lx.b.reduce_sum(e, &[r - 1])?;
    let logsum = lx.b.log(sum)?;
    let lse = lx.b.add(m_safe, logsum)?;
    let is_zero = lx.b.compare(sum, zero_r, CompareDir::Eq)?;
    let one_r = lx.full(p.acc, 1.0, &red)?;
    let denom = lx.b.select(is_zero, one_r, sum)?;
    let db = lx.b.broadcast_in_dim(denom, &shape, &keep_dims)?;
    let pr = lx.b.div(e, db)?;
    Ok((pr, lse))
}

fn opt_float(args: &Args, i: usize) -> Option<f64> {
    match args.get(i) {
        Arg::Float(f) => Some(*f),
        Arg::Int(n) => Some(*n as f64),
        _ => None,
    }
}

fn check_dropout(lx: &Lower, dropout: f64) -> Result<()> {
    if dropout != 0.0 {
        bail!(NotImplemented, "{}: dropout_p={dropout} is not supported on tpu (only 0)", lx.op);
    }
    Ok(())
}

/// (query, key, value, attn_bias?, dropout_p, is_causal, return_debug_mask, *, scale?)
/// -> (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask)
fn sdpa_forward(lx: &mut Lower, args: &Args) -> R {
    let (q, k, v) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    check_dropout(lx, args.float_or(4, 0.0)?)?;
    let (out, lse) = forward_core(lx, q, k, v, args.opt_tensor(3), args.bool_or(5, false)?, opt_float(args, 7))?;
    let lse = lx.cast(lse, DType::F32)?;
    let r = q.shape.len() as i64;
    let (lq, sk) = (q.shape[r as usize - 2], k.shape[r as usize - 2]);
    let empty_i = lx.full(DType::I64, 0.0, &[0])?;
    let max_q = lx.b.constant_i64(DType::I64, lq);
    let max_k = lx.b.constant_i64(DType::I64, sk);
    let seed = lx.full(DType::I64, 0.0, &[])?;
    let offset = lx.full(DType::I64, 0.0, &[])?;
    let debug = lx.full(q.dtype, 0.0, &[0])?;
    Ok(vec![out, lse, empty_i, empty_i, max_q, max_k, seed, offset, debug])
}

/// (output in q's dtype, logsumexp in the accumulation dtype).
fn forward_core(
    lx: &mut Lower,
    q: &TensorArg,
    k: &TensorArg,
    v: &TensorArg,
    bias: Option<&TensorArg>,
    causal: bool,
    scale: Option<f64>,
) -> Result<(Value, Value)> {
    let p = prepare(lx, q, k, v, scale)?;
    let (pr, lse) = probs(lx, &p, bias, causal)?;
    let r = q.shape.len() as i64;
    let out = bdot(lx, pr, p.v, r - 1, r - 2)?;
    Ok((lx.cast(out, q.dtype)?, lse))
}

/// (query, key, value, dropout_p, is_causal, *, attn_mask?, scale?) -> (output, logsumexp)
fn flash_cpu_forward(lx: &mut Lower, args: &Args) -> R {
    let (q, k, v) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    check_dropout(lx, args.float_or(3, 0.0)?)?;
    let (out, lse) = forward_core(lx, q, k, v, args.opt_tensor(5), args.bool_or(4, false)?, opt_float(args, 6))?;
    Ok(vec![out, lse])
}

/// (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask?, scale?)
fn flash_cpu_backward(lx: &mut Lower, args: &Args) -> R {
    let go = args.tensor(0)?;
    let (q, k, v) = (args.tensor(1)?, args.tensor(2)?, args.tensor(3)?);
    check_dropout(lx, args.float_or(6, 0.0)?)?;
    let g = backward_core(lx, go, q, k, v, args.opt_tensor(8), args.bool_or(7, false)?, opt_float(args, 9))?;
    Ok(g[..3].to_vec())
}

/// Sums `g` (shape of the scores) down to `target` (numpy-broadcast source shape).
fn reduce_to(lx: &mut Lower, g: Value, target: &[i64]) -> Result<Value> {
    let shape = lx.shape(g);
    if shape == target {
        return Ok(g);
    }
    let lead = shape.len() - target.len();
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &t) in target.iter().enumerate() {
        if t == 1 && shape[lead + i] != 1 {
            dims.push((lead + i) as i64);
        }
    }
    let s = lx.b.reduce_sum(g, &dims)?;
    Ok(lx.b.reshape(s, target)?)
}

/// (grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
///  cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale?)
/// -> (grad_query, grad_key, grad_value, grad_attn_bias)
fn sdpa_backward(lx: &mut Lower, args: &Args) -> R {
    let go = args.tensor(0)?;
    let (q, k, v) = (args.tensor(1)?, args.tensor(2)?, args.tensor(3)?);
    check_dropout(lx, args.float_or(12, 0.0)?)?;
    backward_core(lx, go, q, k, v, args.opt_tensor(4), args.bool_or(13, false)?, opt_float(args, 16))
}

/// (grad_query, grad_key, grad_value, grad_bias or an empty tensor).
#[allow(clippy::too_many_arguments)]
fn backward_core(
    lx: &mut Lower,
    go: &TensorArg,
    q: &TensorArg,
    k: &TensorArg,
    v: &TensorArg,
    bias: Option<&TensorArg>,
    causal: bool,
    scale: Option<f64>,
) -> R {
    let p = prepare(lx, q, k, v, scale)?;
    let (pr, _) = probs(lx, &p, bias, causal)?;
    let r = q.shape.len() as i64;
    let dout = lx.cast(go.value, p.acc)?; // [.., L, Ev]
    // dV = P^T dO
    let dv = bdot(lx, pr, dout, r - 2, r - 2)?; // [.., S, Ev]
    let dv = sum_groups(lx, dv, p.group)?;
    // dP = dO V^T ; dS = P * (dP - rowsum(P * dP))
    let dp = bdot(lx, dout, p.v, r - 1, r - 1)?; // [.., L, S]
    let pdp = lx.b.mul(pr, dp)?;
    let d = lx.b.reduce_sum(pdp, &[r - 1])?;
    let shape = lx.shape(dp);
    let keep_dims: Vec<i64> = (0..r - 1).collect();
    let db = lx.b.broadcast_in_dim(d, &shape, &keep_dims)?;
    let diff = lx.b.sub(dp, db)?;
    let ds = lx.b.mul(pr, diff)?;
    let sc = lx.full(p.acc, p.scale, &shape)?;
    let ds_s = lx.b.mul(ds, sc)?;
    let dq = bdot(lx, ds_s, p.k, r - 1, r - 2)?; // [.., L, E]
    let dk = bdot(lx, ds_s, p.q, r - 2, r - 2)?; // [.., S, E]
    let dk = sum_groups(lx, dk, p.group)?;
    let dq = lx.cast(dq, q.dtype)?;
    let dk = lx.cast(dk, k.dtype)?;
    let dv = lx.cast(dv, v.dtype)?;
    let dbias = match bias {
        Some(b) if is_float(b.dtype) => {
            let g = reduce_to(lx, ds, &b.shape)?;
            lx.cast(g, b.dtype)?
        }
        _ => lx.full(q.dtype, 0.0, &[0])?,
    };
    Ok(vec![dq, dk, dv, dbias])
}
