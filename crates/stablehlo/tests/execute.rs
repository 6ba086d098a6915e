//! Execution tests: programs built with [`stablehlo::Builder`] are compiled and
//! run on the PJRT CPU plugin and compared with values computed on the host.
//! Each test skips (printing why) only when no plugin file exists.

mod common;

use common::*;
use stablehlo::{Builder, CompareDir, DType, TensorType};

fn t(d: DType, s: &[i64]) -> TensorType {
    TensorType::new(d, s)
}

#[test]
fn add() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[4]));
    let y = b.arg(t(DType::F32, &[4]));
    let s = b.add(x, y).unwrap();
    let out = run(
        &c,
        &b,
        &[s],
        &[
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4], &[10., 20., 30., 40.]),
        ],
    );
    assert_eq!(as_f32(&out[0].bytes), vec![11., 22., 33., 44.]);
}

#[test]
fn compare_select() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[5]));
    let y = b.arg(t(DType::F32, &[5]));
    let lt = b.compare(x, y, CompareDir::Lt).unwrap();
    let m = b.select(lt, x, y).unwrap();
    let xs = [1., 5., -3., 2., 7.];
    let ys = [2., 4., -3., 9., 0.];
    let out = run(&c, &b, &[m, lt], &[f32s(&[5], &xs), f32s(&[5], &ys)]);
    assert_eq!(as_f32(&out[0].bytes), vec![1., 4., -3., 2., 0.]);
    assert_eq!(
        as_bool(&out[1].bytes),
        vec![true, false, false, true, false]
    );
}

#[test]
fn broadcast_mul() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3]));
    let y = b.arg(t(DType::F32, &[3]));
    let yb = b.broadcast_to(y, &[2, 3]).unwrap();
    let m = b.mul(x, yb).unwrap();
    let out = run(
        &c,
        &b,
        &[m],
        &[
            f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
            f32s(&[3], &[10., 100., 1000.]),
        ],
    );
    assert_eq!(
        as_f32(&out[0].bytes),
        vec![10., 200., 3000., 40., 500., 6000.]
    );
}

#[test]
fn dot_general_batched() {
    let c = client_or_skip!();
    let (bs, m, k, n) = (2usize, 3usize, 4usize, 5usize);
    let lhs: Vec<f32> = (0..bs * m * k).map(|i| (i as f32) * 0.5 - 3.0).collect();
    let rhs: Vec<f32> = (0..bs * k * n)
        .map(|i| ((i * 7 % 11) as f32) - 5.0)
        .collect();
    let mut want = vec![0f32; bs * m * n];
    for bi in 0..bs {
        for i in 0..m {
            for j in 0..n {
                want[(bi * m + i) * n + j] = (0..k)
                    .map(|p| lhs[(bi * m + i) * k + p] * rhs[(bi * k + p) * n + j])
                    .sum();
            }
        }
    }
    let mut b = Builder::new();
    let l = b.arg(t(DType::F32, &[2, 3, 4]));
    let r = b.arg(t(DType::F32, &[2, 4, 5]));
    let d = b.dot_general(l, r, &[0], &[0], &[2], &[1], None).unwrap();
    assert_eq!(b.shape(d), &[2, 3, 5]);
    let out = run(
        &c,
        &b,
        &[d],
        &[f32s(&[2, 3, 4], &lhs), f32s(&[2, 4, 5], &rhs)],
    );
    assert_close(&as_f32(&out[0].bytes), &want, 1e-5);
}

#[test]
fn reduce_sum_and_max() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3]));
    let s = b.reduce_sum(x, &[1]).unwrap();
    let m = b.reduce_max(x, &[0]).unwrap();
    let mn = b.reduce_min(x, &[0, 1]).unwrap();
    let xs = [1., -2., 3., 4., 5., -6.];
    let out = run(&c, &b, &[s, m, mn], &[f32s(&[2, 3], &xs)]);
    assert_eq!(as_f32(&out[0].bytes), vec![2., 3.]);
    assert_eq!(as_f32(&out[1].bytes), vec![4., 5., 3.]);
    assert_eq!(as_f32(&out[2].bytes), vec![-6.]);
    assert_eq!(out[2].shape, Vec::<i64>::new());
}

#[test]
fn integer_and_bool_reductions() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::I32, &[2, 3]));
    let p = b.reduce_prod(x, &[1]).unwrap();
    let mx = b.reduce_max(x, &[1]).unwrap();
    let mn = b.reduce_min(x, &[1]).unwrap();
    let zero = b.splat(DType::I32, 0.0, &[2, 3]).unwrap();
    let pos = b.compare(x, zero, CompareDir::Gt).unwrap();
    let all = b.reduce_and(pos, &[1]).unwrap();
    let any = b.reduce_or(pos, &[1]).unwrap();
    let out = run(
        &c,
        &b,
        &[p, mx, mn, all, any],
        &[i32s(&[2, 3], &[1, 2, 3, -4, -5, -6])],
    );
    assert_eq!(as_i32(&out[0].bytes), vec![6, -120]);
    assert_eq!(as_i32(&out[1].bytes), vec![3, -4]);
    assert_eq!(as_i32(&out[2].bytes), vec![1, -6]);
    assert_eq!(as_bool(&out[3].bytes), vec![true, false]);
    assert_eq!(as_bool(&out[4].bytes), vec![true, false]);
}

#[test]
fn argmax_two_operand_reduce() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 4]));
    let idx = b.iota(DType::I32, &[2, 4], 1).unwrap();
    let init_v = b.constant_f64(DType::F32, f64::NEG_INFINITY);
    let init_i = b.constant_i64(DType::I32, 0);
    let r = b
        .reduce(&[x, idx], &[init_v, init_i], &[1], |b, l, r| {
            let gt = b.compare(l[0], r[0], CompareDir::Gt)?;
            let eq = b.compare(l[0], r[0], CompareDir::Eq)?;
            let first = b.compare(l[1], r[1], CompareDir::Lt)?;
            let tie = b.and(eq, first)?;
            let take_l = b.or(gt, tie)?;
            Ok(vec![
                b.select(take_l, l[0], r[0])?,
                b.select(take_l, l[1], r[1])?,
            ])
        })
        .unwrap();
    let out = run(
        &c,
        &b,
        &r,
        &[f32s(&[2, 4], &[1., 5., 3., 5., 7., 2., 9., 0.])],
    );
    assert_eq!(as_f32(&out[0].bytes), vec![5., 9.]);
    assert_eq!(as_i32(&out[1].bytes), vec![1, 2]);
}

#[test]
fn sort_with_indices() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[6]));
    let idx = b.iota(DType::I32, &[6], 0).unwrap();
    let s = b
        .sort(&[x, idx], 0, true, |b, a| {
            b.compare(a[0], a[1], CompareDir::Lt)
        })
        .unwrap();
    let out = run(&c, &b, &s, &[f32s(&[6], &[3., 1., 2., 1., 0.5, 9.])]);
    assert_eq!(as_f32(&out[0].bytes), vec![0.5, 1., 1., 2., 3., 9.]);
    assert_eq!(as_i32(&out[1].bytes), vec![4, 1, 3, 2, 0, 5]);
}

#[test]
fn gather_rows_and_elements() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let table = b.arg(t(DType::F32, &[5, 3]));
    let vec = b.arg(t(DType::F32, &[5]));
    let ids = b.arg(t(DType::I32, &[4]));
    let rows = stablehlo::GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let g = b.gather(table, ids, &rows, &[1, 3], false).unwrap();
    let elems = stablehlo::GatherDims {
        offset_dims: vec![],
        ..rows.clone()
    };
    let e = b.gather(vec, ids, &elems, &[1], false).unwrap();
    assert_eq!((b.shape(g), b.shape(e)), (&[4i64, 3][..], &[4i64][..]));
    let tab: Vec<f32> = (0..15).map(|i| i as f32).collect();
    let out = run(
        &c,
        &b,
        &[g, e],
        &[
            f32s(&[5, 3], &tab),
            f32s(&[5], &[10., 20., 30., 40., 50.]),
            i32s(&[4], &[4, 0, 2, 2]),
        ],
    );
    assert_eq!(
        as_f32(&out[0].bytes),
        vec![12., 13., 14., 0., 1., 2., 6., 7., 8., 6., 7., 8.]
    );
    assert_eq!(as_f32(&out[1].bytes), vec![50., 10., 30., 30.]);
}

#[test]
fn scatter_add_and_assign() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let base = b.arg(t(DType::F32, &[5]));
    let ids = b.arg(t(DType::I32, &[4]));
    let upd = b.arg(t(DType::F32, &[4]));
    let dims = stablehlo::ScatterDims {
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let acc = b
        .scatter(base, ids, upd, &dims, |b, cur, new| {
            Ok(vec![b.add(cur[0], new[0])?])
        })
        .unwrap();
    // Row assignment into a matrix with explicit index vectors of length 1.
    let m = b.arg(t(DType::F32, &[4, 3]));
    let row_ids = b.arg(t(DType::I32, &[2, 1]));
    let rows = b.arg(t(DType::F32, &[2, 3]));
    let row_dims = stablehlo::ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let assigned = b
        .scatter(m, row_ids, rows, &row_dims, |_, _, new| Ok(vec![new[0]]))
        .unwrap();
    let out = run(
        &c,
        &b,
        &[acc, assigned],
        &[
            f32s(&[5], &[0.; 5]),
            i32s(&[4], &[0, 2, 2, 4]),
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4, 3], &[0.; 12]),
            i32s(&[2, 1], &[3, 1]),
            f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
        ],
    );
    assert_eq!(as_f32(&out[0].bytes), vec![1., 0., 5., 0., 4.]);
    assert_eq!(
        as_f32(&out[1].bytes),
        vec![0., 0., 0., 4., 5., 6., 0., 0., 0., 1., 2., 3.]
    );
}

#[test]
fn dynamic_slice_and_update() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::I32, &[4, 5]));
    let i = b.arg(t(DType::I32, &[]));
    let j = b.arg(t(DType::I32, &[]));
    let s = b.dynamic_slice(x, &[i, j], &[2, 3]).unwrap();
    let ones = b.splat(DType::I32, -1.0, &[2, 2]).unwrap();
    let u = b.dynamic_update_slice(x, ones, &[i, j]).unwrap();
    let xs: Vec<i32> = (0..20).collect();
    let out = run(
        &c,
        &b,
        &[s, u],
        &[i32s(&[4, 5], &xs), scalar_i32(1), scalar_i32(2)],
    );
    assert_eq!(as_i32(&out[0].bytes), vec![7, 8, 9, 12, 13, 14]);
    let mut want = xs.clone();
    for (r, col) in [(1, 2), (1, 3), (2, 2), (2, 3)] {
        want[r * 5 + col] = -1;
    }
    assert_eq!(as_i32(&out[1].bytes), want);
    // Out-of-range starts are clamped so the block stays inside.
    let out = run(
        &c,
        &b,
        &[s, u],
        &[i32s(&[4, 5], &xs), scalar_i32(3), scalar_i32(9)],
    );
    assert_eq!(as_i32(&out[0].bytes), vec![12, 13, 14, 17, 18, 19]);
}

#[test]
fn pad_concatenate_iota_reverse() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 2]));
    let y = b.arg(t(DType::F32, &[2, 1]));
    let nine = b.constant_f64(DType::F32, 9.0);
    let p = b.pad(x, nine, &[1, 0], &[0, -1], &[1, 1]).unwrap();
    let cat = b.concatenate(&[x, y], 1).unwrap();
    let io = b.iota(DType::I32, &[2, 3], 1).unwrap();
    let iof = b.iota(DType::F32, &[3, 2], 0).unwrap();
    let rev = b.reverse(cat, &[1]).unwrap();
    let tr = b.transpose(cat, &[1, 0]).unwrap();
    let sl = b.slice(tr, &[0, 1], &[3, 2], &[2, 1]).unwrap();
    let rs = b.reshape(sl, &[2]).unwrap();
    let out = run(
        &c,
        &b,
        &[p, cat, io, iof, rev, rs],
        &[f32s(&[2, 2], &[1., 2., 3., 4.]), f32s(&[2, 1], &[5., 6.])],
    );
    assert_eq!(out[0].shape, vec![4, 2]);
    assert_eq!(as_f32(&out[0].bytes), vec![9., 9., 1., 9., 9., 9., 3., 9.]);
    assert_eq!(as_f32(&out[1].bytes), vec![1., 2., 5., 3., 4., 6.]);
    assert_eq!(as_i32(&out[2].bytes), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(as_f32(&out[3].bytes), vec![0., 0., 1., 1., 2., 2.]);
    assert_eq!(as_f32(&out[4].bytes), vec![5., 2., 1., 6., 4., 3.]);
    assert_eq!(as_f32(&out[5].bytes), vec![3., 6.]);
}

#[test]
fn convert_through_bf16() {
    use stablehlo::literal::{f64_to_float_bits, float_bits_to_f64};
    let c = client_or_skip!();
    let xs = [
        1.0f32, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -3.3, 1e-3, 65504.0, 3.0e38, -0.0,
    ];
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[8]));
    let h = b.convert(x, DType::BF16).unwrap();
    let back = b.convert(h, DType::F32).unwrap();
    let i = b.convert(x, DType::I32).unwrap();
    let out = run(&c, &b, &[back, i], &[f32s(&[8], &xs)]);
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| float_bits_to_f64(f64_to_float_bits(v as f64, 8, 7), 8, 7) as f32)
        .collect();
    assert_eq!(as_f32(&out[0].bytes), want);
    assert_eq!(as_i32(&out[1].bytes)[..5], [1, 1, 1, -3, 0]);
}

#[test]
fn bitcast_f32_u8_roundtrip() {
    let c = client_or_skip!();
    let xs = [1.5f32, -2.25, f32::INFINITY];
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[3]));
    let bytes = b.bitcast_convert(x, DType::U8).unwrap();
    assert_eq!(b.shape(bytes), &[3, 4]);
    let back = b.bitcast_convert(bytes, DType::F32).unwrap();
    let words = b.bitcast_convert(x, DType::I32).unwrap();
    let out = run(&c, &b, &[bytes, back, words], &[f32s(&[3], &xs)]);
    let want: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(out[0].bytes, want);
    assert_eq!(as_f32(&out[1].bytes), xs.to_vec());
    assert_eq!(
        as_i32(&out[2].bytes),
        xs.iter().map(|v| v.to_bits() as i32).collect::<Vec<_>>()
    );
}

#[test]
fn rng_bit_generator_is_deterministic() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let state = b.arg(t(DType::U64, &[2]));
    let (new_state, bits) = b
        .rng_bit_generator(
            stablehlo::RngAlgorithm::ThreeFry,
            state,
            &[4, 5],
            DType::U32,
        )
        .unwrap();
    let (_, bits64) = b
        .rng_bit_generator(stablehlo::RngAlgorithm::Default, state, &[3], DType::U64)
        .unwrap();
    let run_with = |s: [u64; 2]| run(&c, &b, &[new_state, bits, bits64], &[u64s(&[2], &s)]);
    let a = run_with([42, 7]);
    let a2 = run_with([42, 7]);
    let other = run_with([43, 7]);
    assert_eq!(a[1].shape, vec![4, 5]);
    assert_eq!(as_u32(&a[1].bytes), as_u32(&a2[1].bytes));
    assert_eq!(as_u64(&a[2].bytes), as_u64(&a2[2].bytes));
    assert_ne!(as_u32(&a[1].bytes), as_u32(&other[1].bytes));
    assert_ne!(as_u64(&a[0].bytes), vec![42, 7], "state must advance");
    let distinct: std::collections::HashSet<u32> = as_u32(&a[1].bytes).into_iter().collect();
    assert!(distinct.len() > 15, "bits look constant");
}

#[test]
fn mixed_precision_dot_and_f16_shapes() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let l = b.arg(t(DType::F32, &[2, 3]));
    let r = b.arg(t(DType::F32, &[3, 2]));
    let (lb, rb) = (
        b.convert(l, DType::BF16).unwrap(),
        b.convert(r, DType::BF16).unwrap(),
    );
    let d = b
        .dot_general(lb, rb, &[], &[], &[1], &[0], Some(DType::F32))
        .unwrap();
    let h = b.convert(l, DType::F16).unwrap();
    let one = b.constant_f64(DType::F16, 1.0);
    let padded = b.pad(h, one, &[0, 1], &[1, -1], &[0, 1]).unwrap();
    let back = b.convert(padded, DType::F32).unwrap();
    let k = b
        .constant_tensor_f64(DType::F64, &[2], &[0.5, f64::NAN])
        .unwrap();
    let out = run(
        &c,
        &b,
        &[d, back, k],
        &[
            f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
            f32s(&[3, 2], &[1., 0., 0., 1., 1., 1.]),
        ],
    );
    assert_eq!(as_f32(&out[0].bytes), vec![4., 5., 10., 11.]);
    assert_eq!(out[1].shape, vec![3, 5]);
    assert_eq!(
        as_f32(&out[1].bytes),
        vec![1., 1., 1., 2., 1., 1., 4., 1., 5., 1., 1., 1., 1., 1., 1.]
    );
    let k = as_f64(&out[2].bytes);
    assert!(k[0] == 0.5 && k[1].is_nan());
}

#[test]
fn complex_parts_and_arithmetic() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let re = b.arg(t(DType::F32, &[2]));
    let im = b.arg(t(DType::F32, &[2]));
    let z = b.complex(re, im).unwrap();
    assert_eq!(b.ty(z).to_string(), "tensor<2xcomplex<f32>>");
    let sq = b.mul(z, z).unwrap(); // (a + bi)^2 = a^2 - b^2 + 2abi
    let two = b.splat(DType::C64, 2.0, &[2]).unwrap();
    let half = b.div(sq, two).unwrap();
    let (r, i) = (b.real(half).unwrap(), b.imag(half).unwrap());
    let out = run(&c, &b, &[r, i, z], &[f32s(&[2], &[1., 3.]), f32s(&[2], &[2., -1.])]);
    assert_eq!(as_f32(&out[0].bytes), vec![-1.5, 4.]);
    assert_eq!(as_f32(&out[1].bytes), vec![2., -3.]);
    // A complex buffer holds (re, im) pairs.
    assert_eq!(as_f32(&out[2].bytes), vec![1., 2., 3., -1.]);
}

#[test]
fn reduce_precision_rounds_to_half() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[4]));
    let r = b.reduce_precision(x, 5, 10).unwrap();
    // 1 + 2^-11 is a tie (to even: 1), 1 + 3 * 2^-11 rounds up, 1e5 overflows f16.
    let xs = [1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 1e5, 0.1];
    let out = run(&c, &b, &[r], &[f32s(&[4], &xs)]);
    assert_eq!(as_f32(&out[0].bytes), vec![1.0, 1.0 + 2f32.powi(-9), f32::INFINITY, 0.099975586]);
}
