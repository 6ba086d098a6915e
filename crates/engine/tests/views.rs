//! Engine-level tests of strided views: reading any view of a storage and
//! writing into one, through the real plugin (no PyTorch involved).
use engine::call::{Call, CallArg, CallValue, MathBits, TensorRef, RET_TENSOR};
use engine::dispatch::{run, RetValue};
use engine::storage::Storage;
use engine::transfer::{download, upload};
use stablehlo::DType;

fn plugin_available() -> bool {
    if engine::runtime::plugin_path().map(|p| p.exists()).unwrap_or(false) {
        return true;
    }
    eprintln!("SKIPPED: no PJRT plugin found (set TORCH_TPU_PJRT_PLUGIN)");
    false
}

fn f32_storage(values: &[f32]) -> Storage {
    let s = Storage::new(values.len() * 4, 0);
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let whole = view(&s, &[values.len() as i64], &[1], 0);
    upload(&whole, &bytes).expect("upload");
    s
}

fn view<'a>(s: &'a Storage, sizes: &[i64], strides: &[i64], offset: i64) -> TensorRef<'a> {
    TensorRef { storage: s, dtype: DType::F32, sizes: sizes.to_vec().into(), strides: strides.to_vec().into(), offset, wrapped: false, math: MathBits::NONE }
}

fn read(t: &TensorRef) -> Vec<f32> {
    let n = t.numel() as usize;
    let mut bytes = vec![0u8; n * 4];
    download(t, &mut bytes).expect("download");
    bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The elements of a strided view, computed on the host.
fn expected(base: &[f32], sizes: &[i64], strides: &[i64], offset: i64) -> Vec<f32> {
    let n: i64 = sizes.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut idx = offset;
            for d in (0..sizes.len()).rev() {
                idx += (flat % sizes[d]) * strides[d];
                flat /= sizes[d];
            }
            base[idx as usize]
        })
        .collect()
}

#[test]
fn reads_every_kind_of_view() {
    if !plugin_available() {
        return;
    }
    let base: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let s = f32_storage(&base);
    let cases: &[(&[i64], &[i64], i64)] = &[
        (&[2, 3, 4], &[12, 4, 1], 0),  // whole
        (&[4, 3, 2], &[1, 4, 12], 0),  // permuted
        (&[3, 4], &[4, 1], 12),        // contiguous slice at an offset
        (&[2, 2], &[12, 1], 5),        // strided slice
        (&[3, 5], &[1, 0], 2),         // expanded
        (&[4], &[5], 1),               // step
        (&[2, 2], &[1, 1], 3),         // overlapping
        (&[6, 2], &[4, 1], 1),         // x.view(6, 4)[:, 1:3]
        (&[3, 2], &[8, 2], 1),         // x.view(3, 8)[:, 1::2][:, :2]
        (&[2, 3, 2], &[12, 4, 1], 2),  // x.view(2, 3, 4)[..., 2:]
        (&[2, 3], &[1, 8], 0),         // a transposed slice
    ];
    for (sizes, strides, offset) in cases {
        let v = view(&s, sizes, strides, *offset);
        assert_eq!(read(&v), expected(&base, sizes, strides, *offset), "view {sizes:?} {strides:?} +{offset}");
    }
}

#[test]
fn writes_into_a_strided_view_and_leaves_the_rest() {
    if !plugin_available() {
        return;
    }
    let base: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let s = f32_storage(&base);
    let column = view(&s, &[3], &[4], 2); // x.view(3, 4)[:, 2]
    let src = f32_storage(&[-1.0, -2.0, -3.0]);
    let call = Call {
        op: "aten::copy_",
        args: vec![
            CallArg { value: CallValue::Tensor(column.clone()), write: 1 },
            CallArg { value: CallValue::Tensor(view(&src, &[3], &[1], 0)), write: 0 },
        ],
        ret_alias: vec![0].into(),
        ret_kind: vec![RET_TENSOR].into(),
        pointwise: false,
    };
    let rets = run(&call).expect("copy_");
    assert!(matches!(rets[0], RetValue::Alias(0)));
    let mut want = base.clone();
    want[2] = -1.0;
    want[6] = -2.0;
    want[10] = -3.0;
    assert_eq!(read(&view(&s, &[12], &[1], 0)), want);
}

#[test]
fn writes_into_a_box_slice() {
    if !plugin_available() {
        return;
    }
    let base: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let s = f32_storage(&base);
    let target = view(&s, &[6, 2], &[4, 1], 2); // x.view(6, 4)[:, 2:]
    let src_vals: Vec<f32> = (0..12).map(|i| -(i as f32) - 1.0).collect();
    let src = f32_storage(&src_vals);
    let call = Call {
        op: "aten::copy_",
        args: vec![
            CallArg { value: CallValue::Tensor(target), write: 1 },
            CallArg { value: CallValue::Tensor(view(&src, &[6, 2], &[2, 1], 0)), write: 0 },
        ],
        ret_alias: vec![0].into(),
        ret_kind: vec![RET_TENSOR].into(),
        pointwise: false,
    };
    run(&call).expect("copy_");
    let mut want = base.clone();
    for r in 0..6 {
        for c in 0..2 {
            want[r * 4 + 2 + c] = src_vals[r * 2 + c];
        }
    }
    assert_eq!(read(&view(&s, &[24], &[1], 0)), want);
}

#[test]
fn reinterprets_bytes_like_an_untyped_storage() {
    if !plugin_available() {
        return;
    }
    let s = f32_storage(&[1.0, -2.5]);
    let bytes = TensorRef { dtype: DType::U8, ..view(&s, &[8], &[1], 0) };
    let mut got = vec![0u8; 8];
    download(&bytes, &mut got).expect("download as bytes");
    let want: Vec<u8> = [1.0f32, -2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(got, want);
}

#[test]
fn unknown_op_is_reported_as_not_lowered() {
    if !plugin_available() {
        return;
    }
    let s = f32_storage(&[1.0]);
    let call = Call {
        op: "aten::definitely_not_an_op",
        args: vec![CallArg { value: CallValue::Tensor(view(&s, &[1], &[1], 0)), write: 0 }],
        ret_alias: vec![-1].into(),
        ret_kind: vec![RET_TENSOR].into(),
        pointwise: false,
    };
    let err = run(&call).err().expect("must fail");
    assert!(err.not_lowered);
    assert!(err.message.contains("aten::definitely_not_an_op") && err.message.contains("[1]"));
}
