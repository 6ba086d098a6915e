//! Per-op latency through the engine (no Python): `c = a * b` on n floats.
//! `cargo run --release -p engine --example op_latency -- 65536`
use std::time::Instant;

use engine::call::{Call, CallArg, CallValue, MathBits, TensorRef, RET_TENSOR};
use engine::dispatch::{run, RetValue};
use engine::storage::Storage;
use stablehlo::DType;

fn main() {
    let n: i64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(65536);
    let mk = || {
        let s = Storage::new(n as usize * 4, 0);
        let t = TensorRef { storage: &s, dtype: DType::F32, sizes: vec![n].into(), strides: vec![1].into(), offset: 0, wrapped: false, math: MathBits::NONE };
        engine::transfer::upload(&t, &vec![0u8; n as usize * 4]).expect("upload");
        s
    };
    let (a, b) = (mk(), mk());
    let view = |s: &Storage| TensorRef { storage: unsafe { &*(s as *const Storage) }, dtype: DType::F32, sizes: vec![n].into(), strides: vec![1].into(), offset: 0, wrapped: false, math: MathBits::NONE };
    let mut samples = Vec::new();
    for _ in 0..7 {
        let t0 = Instant::now();
        for _ in 0..300 {
            let call = Call {
                op: "aten::mul.Tensor",
                args: vec![
                    CallArg { value: CallValue::Tensor(view(&a)), write: 0 },
                    CallArg { value: CallValue::Tensor(view(&b)), write: 0 },
                ],
                ret_alias: vec![-1].into(),
                ret_kind: vec![RET_TENSOR].into(),
                pointwise: false,
            };
            if let Ok(mut r) = run(&call) {
                if let Some(RetValue::Tensor(t)) = r.pop() {
                    unsafe { Storage::release(t.storage) };
                }
            }
        }
        engine::sync::synchronize(engine::engine().unwrap(), "bench").unwrap();
        samples.push(t0.elapsed().as_secs_f64() / 300.0 * 1e6);
    }
    samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
    println!("n={n}: median {:.1} us per op through the engine", samples[3]);
}
