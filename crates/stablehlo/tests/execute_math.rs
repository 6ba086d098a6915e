//! Execution tests for elementwise math, constants, erf and windowed ops on the
//! PJRT CPU plugin, against host-computed values. Skips only without a plugin file.

// Reference values are given to 17 digits on purpose.
#![allow(clippy::excessive_precision)]

mod common;

use common::*;
use stablehlo::{Builder, CompareDir, DType, TensorType};

fn t(d: DType, s: &[i64]) -> TensorType {
    TensorType::new(d, s)
}

/// erf reference values (computed with 30-digit arithmetic) at f32-exact points.
const ERF_TABLE: [(f32, f64); 34] = [
    (-6.0, -0.99999999999999998),
    (-4.5, -0.99999999980338396),
    (-3.9000000953674316, -0.99999996520777809),
    (-3.0, -0.99997790950300141),
    (-2.200000047683716, -0.99813715412745957),
    (-1.7000000476837158, -0.98379046158106976),
    (-1.0, -0.84270079294971487),
    (-0.9900000095367432, -0.83850807359371203),
    (-0.6000000238418579, -0.60385610961727169),
    (-0.25, -0.27632639016823693),
    (-0.0010000000474974513, -0.0011283788445643173),
    (-9.999999682655225e-21, -1.1283791312869893e-20),
    (0.0, 0.0),
    (9.999999974752427e-07, 1.1283791642462529e-6),
    (0.009999999776482582, 0.011283415303662439),
    (0.10000000149011612, 0.11246291768297051),
    (0.30000001192092896, 0.32862677175271542),
    (0.5, 0.52049987781304654),
    (0.699999988079071, 0.6778011855967799),
    (0.8500000238418579, 0.77066807067058422),
    (0.949999988079071, 0.82089080181803126),
    (0.9990000128746033, 0.84228527556153525),
    (1.0, 0.84270079294971487),
    (1.0010000467300415, 0.84311550483728943),
    (1.2000000476837158, 0.91031399097760652),
    (1.5, 0.96610514647531073),
    (1.899999976158142, 0.99279042850749091),
    (2.299999952316284, 0.99885682313136984),
    (2.799999952316284, 0.99992498678415305),
    (3.299999952316284, 0.99999694228920043),
    (3.700000047683716, 0.99999983284900309),
    (4.199999809265137, 0.99999999714450112),
    (5.5, 0.99999999999999264),
    (8.0, 1.0),
];

#[test]
fn erf_matches_reference() {
    let c = client_or_skip!();
    let n = ERF_TABLE.len() as i64;
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[n]));
    let e = b.erf(x).unwrap();
    let x64 = b.convert(x, DType::F64).unwrap();
    let e64 = b.erf(x64).unwrap();
    let xb = b.convert(x, DType::BF16).unwrap();
    let eb = b.erf(xb).unwrap();
    let special = b.arg(t(DType::F32, &[3]));
    let es = b.erf(special).unwrap();
    let xs: Vec<f32> = ERF_TABLE.iter().map(|p| p.0).collect();
    let out = run(
        &c,
        &b,
        &[e, e64, eb, es],
        &[
            f32s(&[n], &xs),
            f32s(&[3], &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN]),
        ],
    );
    let (got32, got64) = (as_f32(&out[0].bytes), as_f64(&out[1].bytes));
    for (i, &(x, want)) in ERF_TABLE.iter().enumerate() {
        let rel32 = (got32[i] as f64 - want).abs() / want.abs().max(1e-30);
        assert!(
            rel32 <= 2e-7 || (want == 0.0 && got32[i] == 0.0),
            "f32 erf({x}) = {}, want {want} (rel {rel32:e})",
            got32[i]
        );
        let err64 = (got64[i] - want).abs();
        assert!(
            err64 <= 1e-9 * want.abs(),
            "f64 erf({x}) = {}, want {want}",
            got64[i]
        );
    }
    assert_eq!(out[2].bytes.len(), 2 * ERF_TABLE.len());
    let s = as_f32(&out[3].bytes);
    assert_eq!((s[0], s[1]), (1.0, -1.0));
    assert!(s[2].is_nan());
}

#[test]
fn unary_float_math() {
    let c = client_or_skip!();
    let xs = [0.3f32, 1.7, 2.5, -0.5, -2.5, 4.0];
    type HostFn = fn(f32) -> f32;
    type DevFn = fn(&mut Builder, stablehlo::Value) -> stablehlo::Result<stablehlo::Value>;
    let cases: Vec<(&str, DevFn, HostFn)> = vec![
        ("neg", Builder::neg, |x| -x),
        ("abs", Builder::abs, f32::abs),
        ("exp", Builder::exp, f32::exp),
        ("expm1", Builder::exponential_minus_one, f32::exp_m1),
        ("log", Builder::log, |x| x.abs().ln()),
        ("log1p", Builder::log_plus_one, |x| x.abs().ln_1p()),
        ("sqrt", Builder::sqrt, |x| x.abs().sqrt()),
        ("rsqrt", Builder::rsqrt, |x| 1.0 / x.abs().sqrt()),
        ("cbrt", Builder::cbrt, f32::cbrt),
        ("tanh", Builder::tanh, f32::tanh),
        ("logistic", Builder::logistic, |x| 1.0 / (1.0 + (-x).exp())),
        ("sine", Builder::sine, f32::sin),
        ("cosine", Builder::cosine, f32::cos),
        ("tan", Builder::tan, f32::tan),
        ("floor", Builder::floor, f32::floor),
        ("ceil", Builder::ceil, f32::ceil),
        ("round_even", Builder::round_nearest_even, |x| {
            x.round_ties_even()
        }),
        ("round_afz", Builder::round_nearest_afz, f32::round),
        ("sign", Builder::sign, f32::signum),
    ];
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[6]));
    let ax = b.abs(x).unwrap();
    let mut results = Vec::new();
    for (name, dev, _) in &cases {
        // log/sqrt-like ops get |x| so every host value is finite.
        let input = if ["log", "log1p", "sqrt", "rsqrt"].contains(name) {
            ax
        } else {
            x
        };
        results.push(dev(&mut b, input).unwrap());
    }
    let out = run(&c, &b, &results, &[f32s(&[6], &xs)]);
    for ((name, _, host), o) in cases.iter().zip(&out) {
        let want: Vec<f32> = xs.iter().map(|&v| host(v)).collect();
        let got = as_f32(&o.bytes);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 2e-6 * w.abs().max(1.0),
                "{name}: got {got:?}, want {want:?}"
            );
        }
    }
}

#[test]
fn binary_and_integer_ops() {
    let c = client_or_skip!();
    let (xs, ys) = ([7.5f32, -3.0, 2.0, 0.5], [2.0f32, 2.0, -4.0, 3.0]);
    let (is, js) = ([12i32, -7, 255, 1 << 30], [3i32, 2, 4, 1]);
    let mut b = Builder::new();
    let (x, y) = (b.arg(t(DType::F32, &[4])), b.arg(t(DType::F32, &[4])));
    let (i, j) = (b.arg(t(DType::I32, &[4])), b.arg(t(DType::I32, &[4])));
    let f = vec![
        b.sub(x, y).unwrap(),
        b.div(x, y).unwrap(),
        b.rem(x, y).unwrap(),
        b.max(x, y).unwrap(),
        b.min(x, y).unwrap(),
        b.pow(x, y).unwrap(),
        b.atan2(x, y).unwrap(),
    ];
    let lo = b.constant_f64(DType::F32, -1.0);
    let hi = b.constant_f64(DType::F32, 1.0);
    let cl = b.clamp(lo, x, hi).unwrap();
    let n = vec![
        b.and(i, j).unwrap(),
        b.or(i, j).unwrap(),
        b.xor(i, j).unwrap(),
        b.not(i).unwrap(),
        b.shift_left(i, j).unwrap(),
        b.shift_right_arithmetic(i, j).unwrap(),
        b.shift_right_logical(i, j).unwrap(),
        b.popcnt(i).unwrap(),
        b.rem(i, j).unwrap(),
        b.div(i, j).unwrap(),
    ];
    let inf = b
        .constant_tensor_f64(DType::F32, &[4], &[1.0, f64::INFINITY, f64::NAN, -0.0])
        .unwrap();
    let fin = b.is_finite(inf).unwrap();
    let ge = b.compare(i, j, CompareDir::Ge).unwrap();
    let mut results = f.clone();
    results.push(cl);
    results.extend(&n);
    results.extend([fin, ge]);
    let out = run(
        &c,
        &b,
        &results,
        &[
            f32s(&[4], &xs),
            f32s(&[4], &ys),
            i32s(&[4], &is),
            i32s(&[4], &js),
        ],
    );
    let fhost: [fn(f32, f32) -> f32; 7] = [
        |a, b| a - b,
        |a, b| a / b,
        |a, b| a % b,
        f32::max,
        f32::min,
        f32::powf,
        f32::atan2,
    ];
    for (k, h) in fhost.iter().enumerate() {
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(&a, &b)| h(a, b)).collect();
        assert_close(&as_f32(&out[k].bytes), &want, 1e-6);
    }
    assert_eq!(as_f32(&out[7].bytes), vec![1.0, -1.0, 1.0, 0.5]);
    let ihost: [fn(i32, i32) -> i32; 10] = [
        |a, b| a & b,
        |a, b| a | b,
        |a, b| a ^ b,
        |a, _| !a,
        |a, b| a << b,
        |a, b| a >> b,
        |a, b| ((a as u32) >> b) as i32,
        |a, _| a.count_ones() as i32,
        |a, b| a % b,
        |a, b| a / b,
    ];
    for (k, h) in ihost.iter().enumerate() {
        let want: Vec<i32> = is.iter().zip(&js).map(|(&a, &b)| h(a, b)).collect();
        assert_eq!(as_i32(&out[8 + k].bytes), want, "integer op #{k}");
    }
    assert_eq!(as_bool(&out[18].bytes), vec![true, false, false, true]);
    assert_eq!(as_bool(&out[19].bytes), vec![true, false, true, true]);
}

#[test]
fn constants_of_every_dtype() {
    let c = client_or_skip!();
    let mut b = Builder::new();
    let f = b
        .constant_tensor_f64(
            DType::F32,
            &[5],
            &[0.1, -0.0, f64::INFINITY, 1e-45, 3.4028234663852886e38],
        )
        .unwrap();
    let d = b
        .constant_tensor_f64(DType::F64, &[2], &[0.1, f64::NEG_INFINITY])
        .unwrap();
    let h = b
        .constant_tensor_f64(DType::F16, &[2], &[1.0 / 3.0, 65504.0])
        .unwrap();
    let bf = b
        .constant_tensor_f64(DType::BF16, &[2], &[1.0 / 3.0, -1e30])
        .unwrap();
    let i = b
        .constant_tensor_i64(DType::I64, &[2, 2], &[i64::MIN, i64::MAX, 0, -1])
        .unwrap();
    let u = b.constant_tensor_i64(DType::U64, &[1], &[-1]).unwrap();
    let u8c = b
        .constant_tensor_i64(DType::U8, &[3], &[0, 255, 256])
        .unwrap();
    let bo = b.constant_tensor_i64(DType::Bool, &[2], &[0, 5]).unwrap();
    let sp = b.splat(DType::F32, f64::NAN, &[2, 3]).unwrap();
    let i16c = b.constant_i64(DType::I16, -300);
    let i8c = b.constant_f64(DType::I8, -1000.0);
    let empty = b.constant_tensor_f64(DType::F32, &[0, 2], &[]).unwrap();
    let out = run(
        &c,
        &b,
        &[f, d, h, bf, i, u, u8c, bo, sp, i16c, i8c, empty],
        &[],
    );
    let got = as_f32(&out[0].bytes);
    assert_eq!(got[0], 0.1f32);
    assert!(got[1] == 0.0 && got[1].is_sign_negative());
    assert_eq!(&got[2..], &[f32::INFINITY, 1e-45, f32::MAX]);
    assert_eq!(as_f64(&out[1].bytes), vec![0.1, f64::NEG_INFINITY]);
    assert_eq!(out[2].bytes, [0x55u8, 0x35, 0xFF, 0x7B]); // f16 1/3 = 0x3555, 65504 = 0x7BFF
    assert_eq!(out[3].bytes, [0xABu8, 0x3E, 0x4A, 0xF1]); // bf16 1/3 = 0x3EAB, -1e30 = 0xF14A
    let i64s: Vec<i64> = out[4]
        .bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(i64s, vec![i64::MIN, i64::MAX, 0, -1]);
    assert_eq!(as_u64(&out[5].bytes), vec![u64::MAX]);
    assert_eq!(out[6].bytes, [0u8, 255, 0]);
    assert_eq!(as_bool(&out[7].bytes), vec![false, true]);
    assert!(as_f32(&out[8].bytes).iter().all(|v| v.is_nan()) && out[8].shape == vec![2, 3]);
    assert_eq!(out[9].bytes, (-300i16).to_le_bytes());
    assert_eq!(out[10].bytes, [(-128i8) as u8]);
    assert!(out[11].bytes.is_empty() && out[11].shape == vec![0, 2]);
}

#[test]
fn max_pool_and_its_gradient() {
    let c = client_or_skip!();
    let xs: Vec<f32> = vec![
        1., 2., 5., 0., 3., 4., 1., 8., 0., 9., 2., 2., 7., 1., 6., 3.,
    ];
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[4, 4]));
    let ninf = b.constant_f64(DType::F32, f64::NEG_INFINITY);
    let pooled = b
        .reduce_window(&[x], &[ninf], &[2, 2], &[2, 2], &[], &[], &[], |b, l, r| {
            Ok(vec![b.max(l[0], r[0])?])
        })
        .unwrap()[0];
    // Padded, dilated sum window to exercise every attribute.
    let zero = b.constant_f64(DType::F32, 0.0);
    let sums = b
        .reduce_window(
            &[x],
            &[zero],
            &[2, 2],
            &[1, 3],
            &[1, 1],
            &[2, 1],
            &[(1, 0), (0, 1)],
            |b, l, r| Ok(vec![b.add(l[0], r[0])?]),
        )
        .unwrap()[0];
    let grad = b.arg(t(DType::F32, &[2, 2]));
    let scattered = b
        .select_and_scatter(
            x,
            grad,
            zero,
            &[2, 2],
            &[2, 2],
            &[],
            |b, a, c| b.compare(a, c, CompareDir::Ge),
            |b, a, c| b.add(a, c),
        )
        .unwrap();
    assert_eq!(b.shape(sums), &[3, 2]);
    let out = run(
        &c,
        &b,
        &[pooled, sums, scattered],
        &[f32s(&[4, 4], &xs), f32s(&[2, 2], &[10., 20., 30., 40.])],
    );
    assert_eq!(as_f32(&out[0].bytes), vec![4., 8., 9., 6.]);
    // Host reference for the padded/dilated window sums.
    let at = |r: i64, c: i64| {
        if (0..4).contains(&r) && (0..4).contains(&c) {
            xs[(r * 4 + c) as usize]
        } else {
            0.0
        }
    };
    let mut want = Vec::new();
    for orow in 0..3i64 {
        for ocol in 0..2i64 {
            let (r0, c0) = (orow - 1, ocol * 3);
            want.push(at(r0, c0) + at(r0, c0 + 1) + at(r0 + 2, c0) + at(r0 + 2, c0 + 1));
        }
    }
    assert_eq!(as_f32(&out[1].bytes), want);
    let mut g = vec![0f32; 16];
    g[5] = 10.;
    g[7] = 20.;
    g[9] = 30.;
    g[14] = 40.;
    assert_eq!(as_f32(&out[2].bytes), g);
}

#[test]
fn erfinv_inverts_erf() {
    let c = client_or_skip!();
    let xs = [
        -0.9999f32, -0.9, -0.5, -0.01, 0.0, 1e-6, 0.3, 0.7, 0.99, 0.999999, 1.0,
    ];
    let n = xs.len() as i64;
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[n]));
    let y = b.erfinv(x).unwrap();
    let x64 = b.convert(x, DType::F64).unwrap();
    let y64 = b.erfinv(x64).unwrap();
    let back64 = b.erf(y64).unwrap();
    let out = run(&c, &b, &[y, back64], &[f32s(&[n], &xs)]);
    let (y, back) = (as_f32(&out[0].bytes), as_f64(&out[1].bytes));
    assert_eq!(y[n as usize - 1], f32::INFINITY);
    assert_eq!(y[4], 0.0);
    // Known values: erfinv(0.5) = 0.4769362762044699, erfinv(-0.9) = -1.1630871536766743.
    assert!((y[2] as f64 + 0.4769362762044699).abs() < 2e-7 * 0.48);
    assert!((y[1] as f64 + 1.1630871536766743).abs() < 2e-7 * 1.17);
    for i in 0..(n as usize - 1) {
        let x = xs[i] as f64;
        assert!(
            (back[i] - x).abs() <= 1e-8 * x.abs() + 1e-12,
            "erf(erfinv({x})) = {}",
            back[i]
        );
    }
}

#[test]
fn erf_f32_dense_sweep() {
    let c = client_or_skip!();
    // The f64 path is accurate to ~1e-10, so it serves as the reference here.
    let xs: Vec<f32> = (-5000..=5000)
        .map(|i| i as f32 * 1e-3)
        .chain([1e-30, -3e-8, 0.9999999, 1.0000001])
        .collect();
    let n = xs.len() as i64;
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[n]));
    let e = b.erf(x).unwrap();
    let x64 = b.convert(x, DType::F64).unwrap();
    let e64 = b.erf(x64).unwrap();
    let out = run(&c, &b, &[e, e64], &[f32s(&[n], &xs)]);
    let (g, r) = (as_f32(&out[0].bytes), as_f64(&out[1].bytes));
    let worst = g
        .iter()
        .zip(&r)
        .map(|(&g, &r)| {
            if r == 0.0 {
                (g as f64).abs()
            } else {
                ((g as f64) - r).abs() / r.abs()
            }
        })
        .fold(0.0, f64::max);
    assert!(worst <= 2e-7, "worst relative error {worst:e}");
}
