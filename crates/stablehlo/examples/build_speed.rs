//! How long the builder takes per op: Fused Eager lowers every op of every
//! step through it, so this is host time on each training step.
//! `cargo run --release -p stablehlo --example build_speed`
use std::time::Instant;

use stablehlo::{Builder, DType, TensorType};

/// One optimizer-like update per parameter, as a fused step records it:
/// flat storages reshaped to their sizes, a scalar broadcast, a few
/// elementwise ops, reshaped back.
fn build(params: usize) -> (String, usize) {
    let mut b = Builder::new();
    let mut results = Vec::new();
    for p in 0..params {
        let shape = [64 + p as i64 % 7, 256];
        let n = shape[0] * shape[1];
        let w = b.arg(TensorType::new(DType::F32, [n]));
        let g = b.arg(TensorType::new(DType::F32, [n]));
        let lr = b.arg(TensorType::scalar(DType::F64));
        let w2 = b.reshape(w, &shape).unwrap();
        let g2 = b.reshape(g, &shape).unwrap();
        let lr = b.convert(lr, DType::F32).unwrap();
        let lr = b.broadcast_in_dim(lr, &shape, &[]).unwrap();
        let step = b.mul(g2, lr).unwrap();
        let sq = b.mul(g2, g2).unwrap();
        let root = b.sqrt(sq).unwrap();
        let upd = b.div(step, root).unwrap();
        let out = b.sub(w2, upd).unwrap();
        results.push(b.reshape(out, &[n]).unwrap());
    }
    let ops = params * 9;
    (b.finish(&results), ops)
}

fn main() {
    let params = 200;
    let mut best = f64::MAX;
    let mut len = 0;
    for _ in 0..30 {
        let t0 = Instant::now();
        let (text, ops) = build(params);
        let us = t0.elapsed().as_secs_f64() * 1e6 / ops as f64;
        best = best.min(us);
        len = text.len();
    }
    println!("{{\"us_per_op\": {best:.3}, \"program_bytes\": {len}}}");
}
