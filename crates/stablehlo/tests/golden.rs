//! Golden-text tests: exact MLIR printed for small programs, plus inference
//! errors (mismatched inputs give `Err` naming both types). No plugin needed.

use stablehlo::{Builder, CompareDir, DType, GatherDims, RngAlgorithm, ScatterDims, TensorType};

fn t(d: DType, s: &[i64]) -> TensorType {
    TensorType::new(d, s)
}

#[test]
fn golden_elementwise() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[4]));
    let y = b.arg(t(DType::F32, &[4]));
    let s = b.add(x, y).unwrap();
    let lt = b.compare(s, y, CompareDir::Lt).unwrap();
    let m = b.select(lt, s, x).unwrap();
    let want = r#"module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.compare"(%0, %arg1) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %2 = "stablehlo.select"(%1, %0, %arg0) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%2, %1) : (tensor<4xf32>, tensor<4xi1>) -> ()
  }
}
"#;
    assert_eq!(b.finish(&[m, lt]), want);
}

#[test]
fn golden_reduce_and_splat() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3]));
    let s = b.reduce_sum(x, &[1]).unwrap();
    let z = b.splat(DType::F32, f64::INFINITY, &[2]).unwrap();
    let m = b.min(s, z).unwrap();
    let want = r#"module {
  func.func @main(%arg0: tensor<2x3xf32>) -> (tensor<2xf32>) {
    %0 = "stablehlo.constant"() {value = dense<0.0e0> : tensor<f32>} : () -> tensor<f32>
    %4 = "stablehlo.reduce"(%arg0, %0) ({
      ^bb0(%1: tensor<f32>, %2: tensor<f32>):
        %3 = "stablehlo.add"(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%3) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %5 = "stablehlo.constant"() {value = dense<0x7F800000> : tensor<f32>} : () -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2xf32>
    %7 = "stablehlo.minimum"(%4, %6) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%7) : (tensor<2xf32>) -> ()
  }
}
"#;
    assert_eq!(b.finish(&[m]), want);
}

#[test]
fn golden_dot_gather_rng_sort() {
    let mut b = Builder::new();
    let l = b.arg(t(DType::BF16, &[2, 3, 4]));
    let r = b.arg(t(DType::BF16, &[2, 4, 5]));
    let d = b
        .dot_general(l, r, &[0], &[0], &[2], &[1], Some(DType::F32))
        .unwrap();
    let ids = b.constant_tensor_i64(DType::I32, &[2], &[1, 0]).unwrap();
    let dims = GatherDims {
        offset_dims: vec![1, 2],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let g = b.gather(d, ids, &dims, &[1, 3, 5], false).unwrap();
    let state = b.constant_tensor_i64(DType::U64, &[2], &[1, 2]).unwrap();
    let (st, bits) = b
        .rng_bit_generator(RngAlgorithm::ThreeFry, state, &[3], DType::U32)
        .unwrap();
    let srt = b
        .sort(&[bits], -1, false, |b, a| {
            b.compare(a[0], a[1], CompareDir::Gt)
        })
        .unwrap();
    let want = r#"module {
  func.func @main(%arg0: tensor<2x3x4xbf16>, %arg1: tensor<2x4x5xbf16>) -> (tensor<2x3x5xf32>, tensor<2xui64>, tensor<3xui32>) {
    %0 = "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>} : (tensor<2x3x4xbf16>, tensor<2x4x5xbf16>) -> tensor<2x3x5xf32>
    %1 = "stablehlo.constant"() {value = dense<[1, 0]> : tensor<2xi32>} : () -> tensor<2xi32>
    %2 = "stablehlo.gather"(%0, %1) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3, 5>, indices_are_sorted = false} : (tensor<2x3x5xf32>, tensor<2xi32>) -> tensor<2x3x5xf32>
    %3 = "stablehlo.constant"() {value = dense<[1, 2]> : tensor<2xui64>} : () -> tensor<2xui64>
    %4:2 = "stablehlo.rng_bit_generator"(%3) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)
    %8 = "stablehlo.sort"(%4#1) ({
      ^bb0(%5: tensor<ui32>, %6: tensor<ui32>):
        %7 = "stablehlo.compare"(%5, %6) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type UNSIGNED>} : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
        "stablehlo.return"(%7) : (tensor<i1>) -> ()
    }) {dimension = 0 : i64, is_stable = false} : (tensor<3xui32>) -> tensor<3xui32>
    "func.return"(%2, %4#0, %8) : (tensor<2x3x5xf32>, tensor<2xui64>, tensor<3xui32>) -> ()
  }
}
"#;
    assert_eq!(b.finish(&[g, st, srt[0]]), want);
}

#[test]
fn golden_shape_ops_and_literals() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F16, &[2, 3]));
    let p = b.constant_f64(DType::F16, 1.0);
    let padded = b.pad(x, p, &[0, 1], &[1, -1], &[0, 1]).unwrap();
    let tr = b.transpose(padded, &[1, 0]).unwrap();
    let sl = b.slice(tr, &[0, 0], &[5, 3], &[2, 1]).unwrap();
    let cat = b.concatenate(&[sl, sl], 0).unwrap();
    let k = b
        .constant_tensor_f64(DType::F64, &[2, 2], &[0.5, -0.0, f64::NAN, 1e100])
        .unwrap();
    let bo = b.constant_i64(DType::Bool, 1);
    let want = r#"module {
  func.func @main(%arg0: tensor<2x3xf16>) -> (tensor<6x3xf16>, tensor<2x2xf64>, tensor<i1>) {
    %0 = "stablehlo.constant"() {value = dense<0x3C00> : tensor<f16>} : () -> tensor<f16>
    %1 = "stablehlo.pad"(%arg0, %0) {edge_padding_low = array<i64: 0, 1>, edge_padding_high = array<i64: 1, -1>, interior_padding = array<i64: 0, 1>} : (tensor<2x3xf16>, tensor<f16>) -> tensor<3x5xf16>
    %2 = "stablehlo.transpose"(%1) {permutation = array<i64: 1, 0>} : (tensor<3x5xf16>) -> tensor<5x3xf16>
    %3 = "stablehlo.slice"(%2) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 5, 3>, strides = array<i64: 2, 1>} : (tensor<5x3xf16>) -> tensor<3x3xf16>
    %4 = "stablehlo.concatenate"(%3, %3) {dimension = 0 : i64} : (tensor<3x3xf16>, tensor<3x3xf16>) -> tensor<6x3xf16>
    %5 = "stablehlo.constant"() {value = dense<[[5.0e-1, 0x8000000000000000], [0x7FF8000000000000, 1.0e100]]> : tensor<2x2xf64>} : () -> tensor<2x2xf64>
    %6 = "stablehlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    "func.return"(%4, %5, %6) : (tensor<6x3xf16>, tensor<2x2xf64>, tensor<i1>) -> ()
  }
}
"#;
    assert_eq!(b.finish(&[cat, k, bo]), want);
}

fn err_text<T: std::fmt::Debug>(r: stablehlo::Result<T>) -> String {
    r.expect_err("inference should fail").to_string()
}

#[test]
fn inference_errors_name_both_types() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3]));
    let y = b.arg(t(DType::F32, &[4, 5]));
    let z = b.arg(t(DType::F32, &[3]));
    let i = b.arg(t(DType::I32, &[2, 3]));

    let e = err_text(b.add(x, z));
    assert_eq!(
        e,
        "stablehlo.add: operands must have the same type, got tensor<2x3xf32> and tensor<3xf32>"
    );
    let e = err_text(b.add(x, i));
    assert!(
        e.contains("tensor<2x3xf32>") && e.contains("tensor<2x3xi32>"),
        "{e}"
    );
    let e = err_text(b.dot_general(x, y, &[], &[], &[1], &[0], None));
    assert_eq!(
        e,
        "stablehlo.dot_general: contracting dims have different sizes 3 and 4 (lhs tensor<2x3xf32>, rhs tensor<4x5xf32>)"
    );
    let e = err_text(b.broadcast_to(x, &[4, 3]));
    assert!(e.contains("tensor<2x3xf32>") && e.contains("[4, 3]"), "{e}");
    let e = err_text(b.concatenate(&[x, y], 0));
    assert!(
        e.contains("tensor<2x3xf32>") && e.contains("tensor<4x5xf32>"),
        "{e}"
    );
    let e = err_text(b.select(i, x, x));
    assert!(e.contains("i1") && e.contains("tensor<2x3xi32>"), "{e}");
    let e = err_text(b.reshape(x, &[5]));
    assert!(
        e.starts_with("stablehlo.reshape:") && e.contains("tensor<2x3xf32>"),
        "{e}"
    );
    let e = err_text(b.compare(x, i, CompareDir::Eq));
    assert!(
        e.contains("tensor<2x3xf32>") && e.contains("tensor<2x3xi32>"),
        "{e}"
    );
    let e = err_text(b.clamp(z, x, z));
    assert!(
        e.contains("tensor<3xf32>") && e.contains("tensor<2x3xf32>"),
        "{e}"
    );
}

#[test]
fn inference_errors_for_dtypes_and_dims() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3]));
    let i = b.arg(t(DType::I32, &[2, 3]));
    let bo = b.arg(t(DType::Bool, &[2, 3]));
    assert!(err_text(b.sqrt(i)).contains("floating-point"));
    assert!(err_text(b.and(x, x)).contains("tensor<2x3xf32>"));
    assert!(err_text(b.sub(bo, bo)).contains("tensor<2x3xi1>"));
    assert!(err_text(b.erf(i)).starts_with("erf:"));
    assert!(err_text(b.transpose(x, &[0, 0])).contains("appears twice"));
    assert!(err_text(b.reduce_sum(x, &[2])).contains("out of range"));
    assert!(err_text(b.slice(x, &[0, 2], &[2, 1], &[])).contains("dimension 1"));
    assert!(err_text(b.iota(DType::F32, &[3], 1)).contains("out of range"));
    assert!(err_text(b.bitcast_convert(x, DType::F64)).contains("last dimension must be 2"));
    assert!(err_text(b.splat(DType::F32, 0.0, &[-1])).contains("negative"));
    assert!(err_text(b.constant_tensor_i64(DType::I32, &[2], &[1])).contains("needs 2 elements"));
    let s = b.constant_f64(DType::F32, 0.0);
    assert!(err_text(b.dynamic_slice(x, &[s, s], &[1, 1])).contains("rank-0 integers"));
    assert!(
        err_text(b.reduce(&[x], &[s], &[0], |b, l, _| Ok(vec![b.compare(
            l[0],
            l[0],
            CompareDir::Eq
        )?])))
        .contains("body must return")
    );
    let ids = b.arg(t(DType::I32, &[4]));
    let bad = GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0, 1],
        index_vector_dim: 1,
        ..Default::default()
    };
    assert!(err_text(b.gather(x, ids, &bad, &[1, 3], false)).contains("start_index_map"));
    let upd = b.arg(t(DType::F32, &[5]));
    let sd = ScatterDims {
        inserted_window_dims: vec![0],
        update_window_dims: vec![1],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    assert!(b
        .scatter(x, ids, upd, &sd, |_, _, r| Ok(vec![r[0]]))
        .is_err());
    let st = b.arg(t(DType::U32, &[2]));
    assert!(
        err_text(b.rng_bit_generator(RngAlgorithm::ThreeFry, st, &[2], DType::U32))
            .contains("tensor<2xui32>")
    );
}

#[test]
fn result_types_are_inferred() {
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[2, 3, 4]));
    let r = b.arg(t(DType::F32, &[4, 5]));
    let d = b.dot_general(x, r, &[], &[], &[2], &[0], None).unwrap();
    assert_eq!(b.ty(d), &t(DType::F32, &[2, 3, 5]));
    let bc = b.broadcast_in_dim(r, &[3, 4, 5], &[1, 2]).unwrap();
    assert_eq!(b.shape(bc), &[3, 4, 5]);
    let c = b.bitcast_convert(x, DType::U8).unwrap();
    assert_eq!(b.ty(c), &t(DType::U8, &[2, 3, 4, 4]));
    let h = b.bitcast_convert(c, DType::F16).unwrap_err();
    assert!(h.to_string().contains("tensor<2x3x4x4xui8>"));
    let w = b.bitcast_convert(c, DType::U8).unwrap();
    assert_eq!(b.shape(w), &[2, 3, 4, 4]);
    let f = b.is_finite(x).unwrap();
    assert_eq!(b.dtype(f), DType::Bool);
    let ids = b.arg(t(DType::I64, &[7, 2]));
    let g = b
        .gather(
            x,
            ids,
            &GatherDims {
                offset_dims: vec![1],
                collapsed_slice_dims: vec![0, 1],
                start_index_map: vec![0, 1],
                index_vector_dim: 1,
                ..Default::default()
            },
            &[1, 1, 4],
            true,
        )
        .unwrap();
    assert_eq!(b.shape(g), &[7, 4]);
    let zero = b.constant_f64(DType::F32, 0.0);
    let w = b
        .reduce_window(
            &[x],
            &[zero],
            &[1, 2, 2],
            &[1, 2, 2],
            &[],
            &[],
            &[(0, 0), (0, 1), (1, 1)],
            |b, l, r| Ok(vec![b.add(l[0], r[0])?]),
        )
        .unwrap();
    assert_eq!(b.shape(w[0]), &[2, 2, 3]);
}

#[test]
fn truncate_forgets_a_half_recorded_op() {
    // What a caller does when a lowering fails after adding an argument and
    // an op: the printed program is exactly the one from before.
    let mut b = Builder::new();
    let x = b.arg(t(DType::F32, &[4]));
    let y = b.neg(x).unwrap();
    let before = b.finish(&[y]);
    let mark = b.mark();
    let s = b.arg(t(DType::F64, &[]));
    let _ = b.add(s, s).unwrap();
    assert_eq!(mark.values(), 2);
    b.truncate(mark);
    assert_eq!(b.finish(&[y]), before);
    assert_eq!(b.args().len(), 1);
    // Recording goes on with fresh names.
    let z = b.abs(y).unwrap();
    assert!(b.finish(&[z]).contains("%1 = \"stablehlo.abs\"(%0)"));
}
