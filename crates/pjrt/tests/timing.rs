//! Timing sanity check (prints, never asserts on speed): median latency of
//! executing the tiny 4-element add, over 1000 runs. Run with `--nocapture`.

mod common;

use std::time::Instant;

use common::*;
use pjrt::ElementType;

fn median_us(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn measure(label: &str, exe: &pjrt::Executable, a: &pjrt::Buffer, b: &pjrt::Buffer) {
    for _ in 0..50 {
        exe.execute(&[a, b], None).unwrap()[0].ready().unwrap();
    }
    // execute() alone (asynchronous enqueue); outputs kept alive until after.
    let mut enqueue = Vec::with_capacity(1000);
    let mut keep = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let t = Instant::now();
        let out = exe.execute(&[a, b], None).unwrap();
        enqueue.push(t.elapsed().as_secs_f64() * 1e6);
        keep.push(out);
    }
    for o in &keep {
        o[0].ready().unwrap();
    }
    drop(keep);
    // execute() + ready() + drop of the output.
    let mut round = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let t = Instant::now();
        let out = exe.execute(&[a, b], None).unwrap();
        out[0].ready().unwrap();
        drop(out);
        round.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // execute() + to_host() of the 16-byte result.
    let mut host = Vec::with_capacity(1000);
    let mut dst = [0u8; 16];
    for _ in 0..1000 {
        let t = Instant::now();
        let out = exe.execute(&[a, b], None).unwrap();
        out[0].to_host(&mut dst).unwrap();
        host.push(t.elapsed().as_secs_f64() * 1e6);
    }
    assert_eq!(f32_from(&dst), vec![6., 8., 10., 12.]);
    println!(
        "TIMING {label} tiny add, median of 1000: execute {:.1} us | execute+ready {:.1} us | execute+to_host {:.1} us",
        median_us(enqueue),
        median_us(round),
        median_us(host)
    );
}

#[test]
fn tiny_add_execute_latency() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let a = client
        .buffer_from_host(&f32_bytes(&[1., 2., 3., 4.]), ElementType::F32, &[4], dev)
        .unwrap();
    let b = client
        .buffer_from_host(&f32_bytes(&[5., 6., 7., 8.]), ElementType::F32, &[4], dev)
        .unwrap();
    let exe = client.compile(ADD_MLIR).unwrap();
    measure("portable (compile)", &exe, &a, &b);
    let exe = client
        .compile_with_options(ADD_MLIR, pjrt::DEVICE0_COMPILE_OPTIONS)
        .unwrap();
    measure("device-bound", &exe, &a, &b);
}
