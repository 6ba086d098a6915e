//! linalg_matrix_exp: ATen's algorithm (Bader, Blanes, Casas 2019: optimized
//! Taylor polynomials of degree 1, 2, 4, 8, 12, 18, with scaling and squaring
//! for the degree-18 one). One matrix picks the degree from its 1-norm; a
//! batch of several always uses degree 18 with scaling and squaring, as ATen
//! does. The number of squarings is data-dependent: a `stablehlo.while` that
//! squares each matrix while the step is below its own count.
//! Complex matrices use the same polynomials, with real norms and thresholds.
//! float16/bfloat16 are computed in float32 (ATen's CPU kernel gives NaNs for
//! them: it reads its double coefficient tables as 16-bit floats).
#![allow(clippy::excessive_precision)]
use stablehlo::{CompareDir, DType, Value};

use super::{bmm, check_square, eye, flat3, unflat};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::{LowerError, Result};

type R = Result<Vec<Value>>;

const THETA_F32: [f64; 6] = [
    1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
    5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00,
];
const THETA_F64: [f64; 6] = [
    2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
    4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00,
];

const B12: [[f64; 4]; 4] = [
    [9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740],
    [5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989],
    [0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230],
    [-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359],
];

const B18: [[f64; 5]; 5] = [
    [0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.],
    [0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01, -6.37898194594723280150e-04],
    [-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02, -6.98210122488052056106e-03, 3.34975017086070470649e-05],
    [-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02, 2.95552570429315521194e-02, -1.39180257516060693404e-05],
    [0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05],
];

/// Sum of `c[i] * m[i]` (coefficients rounded to the matrices' dtype, as ATen does).
fn lin(lx: &mut Lower, c: &[f64], m: &[Value]) -> Result<Value> {
    let s = lx.shape(m[0]);
    let dt = lx.dtype(m[0]);
    let mut acc = lx.full(dt, 0.0, &s)?;
    for (&ci, &mi) in c.iter().zip(m) {
        let k = lx.full(dt, ci, &s)?;
        let t = lx.b.mul(k, mi)?;
        acc = lx.b.add(acc, t)?;
    }
    Ok(acc)
}

/// [I, A, A^2, A^3, A^6][..count]
fn powers(lx: &mut Lower, a: Value, count: usize) -> Result<Vec<Value>> {
    let s = lx.shape(a);
    let i = eye(lx, lx.dtype(a), &s)?;
    let mut v = vec![i, a];
    if count > 2 {
        let a2 = bmm(lx, a, a)?;
        v.push(a2);
    }
    if count > 3 {
        let a3 = bmm(lx, a, v[2])?;
        v.push(a3);
    }
    if count > 4 {
        let a6 = bmm(lx, v[3], v[3])?;
        v.push(a6);
    }
    Ok(v)
}

fn t1(lx: &mut Lower, a: Value) -> Result<Value> {
    let p = powers(lx, a, 2)?;
    lin(lx, &[1.0, 1.0], &p)
}

fn t2(lx: &mut Lower, a: Value) -> Result<Value> {
    let p = powers(lx, a, 3)?;
    lin(lx, &[1.0, 1.0, 0.5], &p)
}

fn t4(lx: &mut Lower, a: Value) -> Result<Value> {
    let p = powers(lx, a, 3)?;
    let c = lin(lx, &[1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0], &p)?;
    let q = bmm(lx, p[2], c)?;
    lin(lx, &[1.0, 1.0, 1.0], &[p[0], p[1], q])
}

fn t8(lx: &mut Lower, a: Value) -> Result<Value> {
    let sqrt_177: f64 = 0.1330413469565007072504e+2;
    let x3 = 2.0 / 3.0;
    let x1 = x3 * ((1.0 + sqrt_177) / 88.0);
    let x2 = x3 * ((1.0 + sqrt_177) / 352.0);
    let x4 = (-271.0 + 29.0 * sqrt_177) / (315.0 * x3);
    let x5 = (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3);
    let x6 = (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3);
    let x7 = (89.0 - sqrt_177) / (5040.0 * x3);
    let y2 = (857.0 - 58.0 * sqrt_177) / 630.0;
    let p = powers(lx, a, 3)?;
    let c = lin(lx, &[x1, x2], &p[1..3])?;
    let a4 = bmm(lx, p[2], c)?;
    let l = lin(lx, &[x3, 1.0], &[p[2], a4])?;
    let r = lin(lx, &[x4, x5, x6, x7], &[p[0], p[1], p[2], a4])?;
    let a8 = bmm(lx, l, r)?;
    lin(lx, &[1.0, 1.0, y2, 1.0], &[p[0], p[1], p[2], a8])
}

fn t12(lx: &mut Lower, a: Value) -> Result<Value> {
    let p = powers(lx, a, 4)?;
    let mut bs = Vec::new();
    for row in &B12 {
        bs.push(lin(lx, row, &p)?);
    }
    let sq = bmm(lx, bs[3], bs[3])?;
    let a6 = lx.b.add(bs[2], sq)?;
    let l = lx.b.add(bs[1], a6)?;
    let pr = bmm(lx, l, a6)?;
    Ok(lx.b.add(bs[0], pr)?)
}

fn t18(lx: &mut Lower, a: Value) -> Result<Value> {
    let p = powers(lx, a, 5)?;
    let mut bs = Vec::new();
    for row in &B18 {
        bs.push(lin(lx, row, &p)?);
    }
    let pr = bmm(lx, bs[0], bs[4])?;
    let a9 = lx.b.add(bs[3], pr)?;
    let l = lx.b.add(bs[2], a9)?;
    let pr = bmm(lx, l, a9)?;
    Ok(lx.b.add(bs[1], pr)?)
}

/// ceil(log2(x)) clamped to [0, hi] for x >= 0 (exact, from the float bits).
fn ceil_log2(lx: &mut Lower, x: Value, hi: i64) -> Result<Value> {
    let s = lx.shape(x);
    let (ity, mbits, bias) = match lx.dtype(x) {
        DType::F64 => (DType::I64, 52, 1023),
        _ => (DType::I32, 23, 127),
    };
    let bits = lx.b.bitcast_convert(x, ity)?;
    let sh = lx.full(ity, mbits as f64, &s)?;
    let e = lx.b.shift_right_logical(bits, sh)?;
    let biasv = lx.full(ity, bias as f64, &s)?;
    let e = lx.b.sub(e, biasv)?;
    let mask = lx.b.splat_i64(ity, (1i64 << mbits) - 1, &s)?;
    let frac = lx.b.and(bits, mask)?;
    let z = lx.full(ity, 0.0, &s)?;
    let exact = lx.b.compare(frac, z, CompareDir::Eq)?;
    let one = lx.full(ity, 1.0, &s)?;
    let up = lx.b.add(e, one)?;
    let c = lx.b.select(exact, e, up)?;
    let c = lx.cast(c, DType::I64)?;
    let lo = lx.full(DType::I64, 0.0, &s)?;
    let hiv = lx.full(DType::I64, hi as f64, &s)?;
    Ok(lx.b.clamp(lo, c, hiv)?)
}

/// 2^-s (s: i64 in [0, bias-1]) of `dt`, exactly.
fn pow2_neg(lx: &mut Lower, s: Value, dt: DType) -> Result<Value> {
    let sh = lx.shape(s);
    let (ity, mbits, bias) = match dt {
        DType::F64 => (DType::I64, 52, 1023),
        _ => (DType::I32, 23, 127),
    };
    let s = lx.cast(s, ity)?;
    let b = lx.full(ity, bias as f64, &sh)?;
    let e = lx.b.sub(b, s)?;
    let m = lx.full(ity, mbits as f64, &sh)?;
    let bits = lx.b.shift_left(e, m)?;
    Ok(lx.b.bitcast_convert(bits, dt)?)
}

/// Degree 18 on A / 2^s, squared s times (s per matrix from its norm).
fn t18_scale_square(lx: &mut Lower, a: Value, norm: Value, theta: f64) -> Result<Value> {
    let s = lx.shape(a);
    let (bt, n) = (s[0], s[1]);
    let dt = lx.dtype(a);
    let rt = dt.complex_part().unwrap_or(dt);
    let th = lx.full(rt, theta, &[bt])?;
    let q = lx.b.div(norm, th)?;
    let hi = if rt == DType::F64 { 1022 } else { 126 };
    let sc = ceil_log2(lx, q, hi)?;
    let p2 = pow2_neg(lx, sc, rt)?;
    let p2 = lx.cast(p2, dt)?;
    let p2 = lx.b.broadcast_in_dim(p2, &s, &[0])?;
    let a_scaled = lx.b.mul(a, p2)?;
    let m = t18(lx, a_scaled)?;
    let i0 = lx.b.constant_i64(DType::I64, 0);
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<LowerError>(
        &[i0, sc, m],
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let mx = l.b.reduce_max(c[1], &[0])?;
            Ok(l.b.compare(c[0], mx, CompareDir::Lt)?)
        },
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let sq = bmm(l, c[2], c[2])?;
            let ib = l.b.broadcast_in_dim(c[0], &[bt], &[])?;
            let more = l.b.compare(ib, c[1], CompareDir::Lt)?;
            let more = l.b.broadcast_in_dim(more, &[bt, n, n], &[0])?;
            let m = l.b.select(more, sq, c[2])?;
            let one = l.b.constant_i64(DType::I64, 1);
            let i = l.b.add(c[0], one)?;
            Ok(vec![i, c[1], m])
        },
    )?;
    Ok(out[2])
}

fn mexp(lx: &mut Lower, a: Value) -> Result<Value> {
    let s = lx.shape(a);
    let bt = s[0];
    let dt = lx.dtype(a);
    // The norm and its thresholds are real (complex64 uses float32's).
    let rt = dt.complex_part().unwrap_or(dt);
    let theta = if rt == DType::F64 { THETA_F64 } else { THETA_F32 };
    // operator 1-norm: max over columns of the column sums of |a|.
    let ab = crate::ops::complex::modulus(&mut lx.b, a)?;
    let cs = lx.b.reduce_sum(ab, &[1])?;
    let norm = lx.b.reduce_max(cs, &[1])?; // [bt]
    let nanv = lx.full(dt, f64::NAN, &s)?;
    let res = if bt > 1 {
        t18_scale_square(lx, a, norm, theta[5])?
    } else {
        let fs: [fn(&mut Lower, Value) -> Result<Value>; 5] = [t1, t2, t4, t8, t12];
        let mut res = nanv;
        let normb = lx.b.broadcast_in_dim(norm, &s, &[0])?;
        for (i, f) in fs.iter().enumerate() {
            let lo = if i == 0 { -1.0 } else { theta[i - 1] };
            let lov = lx.full(rt, lo, &s)?;
            let hiv = lx.full(rt, theta[i], &s)?;
            let c1 = lx.b.compare(lov, normb, CompareDir::Lt)?;
            let c2 = lx.b.compare(normb, hiv, CompareDir::Le)?;
            let c = lx.b.and(c1, c2)?;
            let t = f(lx, a)?;
            res = lx.b.select(c, t, res)?;
        }
        let big = lx.full(rt, theta[4], &s)?;
        let c = lx.b.compare(normb, big, CompareDir::Ge)?;
        let t = t18_scale_square(lx, a, norm, theta[5])?;
        lx.b.select(c, t, res)?
    };
    // A NaN or infinite norm gives NaN (ATen: NaN for NaN inputs).
    let fin = lx.b.is_finite(norm)?;
    let fin = lx.b.broadcast_in_dim(fin, &s, &[0])?;
    Ok(lx.b.select(fin, res, nanv)?)
}

/// linalg_matrix_exp(self)
pub(super) fn linalg_matrix_exp(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    check_square(lx, a, "linalg.matrix_exp")?;
    let work = match a.dtype {
        DType::F32 | DType::F64 | DType::C64 | DType::C128 => a.dtype,
        DType::F16 | DType::BF16 => DType::F32,
        d => bail!(NotImplemented, "linalg.matrix_exp: Expected a floating point or complex tensor as input. Got {} ({})", crate::ops::elementwise::type_name(d), lx.op),
    };
    let n = *a.shape.last().unwrap();
    let numel: i64 = a.shape.iter().product();
    if numel == 0 {
        return Ok(vec![a.value]);
    }
    let x = lx.cast(a.value, work)?;
    let r = if n == 1 {
        lx.b.exp(x)?
    } else {
        let (a3, batch) = flat3(lx, x)?;
        let e = mexp(lx, a3)?;
        unflat(lx, e, &batch)?
    };
    Ok(vec![lx.cast(r, a.dtype)?])
}
