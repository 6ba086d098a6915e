//! Host <-> device round trips for several element types and shapes,
//! including scalars and zero-size arrays, plus argument validation.

mod common;

use common::*;
use pjrt::{code, ElementType};

fn round_trip(bytes: &[u8], ty: ElementType, dims: &[i64]) {
    let client = require_client!();
    for dev in client.addressable_devices() {
        let b = client.buffer_from_host(bytes, ty, dims, dev).unwrap();
        assert_eq!(b.element_type(), ty);
        assert_eq!(b.dims(), dims.to_vec());
        assert_eq!(b.device(), dev);
        assert_eq!(b.query_device().unwrap(), dev);
        b.ready().unwrap();
        assert_eq!(b.host_size().unwrap(), bytes.len());
        let mut out = vec![0xAAu8; bytes.len()];
        b.to_host(&mut out).unwrap();
        assert_eq!(out, bytes, "{ty:?} {dims:?} on {dev}");
    }
}

#[test]
fn f32_round_trip() {
    let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    round_trip(&f32_bytes(&v), ElementType::F32, &[2, 3, 4]);
}

#[test]
fn i64_round_trip() {
    let v = [i64::MIN, -1, 0, 1, i64::MAX, 42];
    round_trip(&i64_bytes(&v), ElementType::S64, &[6]);
}

#[test]
fn pred_round_trip() {
    round_trip(&[1, 0, 0, 1, 1, 0], ElementType::Pred, &[2, 3]);
}

#[test]
fn bf16_round_trip() {
    // Raw bf16 bit patterns: 1.0, -2.0, 0.5, +inf, a NaN, 3.140625.
    let bits: [u16; 6] = [0x3f80, 0xc000, 0x3f00, 0x7f80, 0x7fc1, 0x4049];
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_ne_bytes()).collect();
    round_trip(&bytes, ElementType::BF16, &[3, 2]);
}

#[test]
fn other_types_round_trip() {
    round_trip(&[1, 2, 3, 255], ElementType::U8, &[4]);
    round_trip(
        &(-5i32..3).flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>(),
        ElementType::S32,
        &[2, 4],
    );
    round_trip(
        &[0.25f64, -1e300]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect::<Vec<_>>(),
        ElementType::F64,
        &[2],
    );
    round_trip(&[0x00, 0x3c, 0x00, 0xc0], ElementType::F16, &[2]);
}

#[test]
fn scalar_round_trip() {
    round_trip(&f32_bytes(&[3.25]), ElementType::F32, &[]);
    round_trip(&i64_bytes(&[-7]), ElementType::S64, &[]);
}

#[test]
fn zero_size_round_trip() {
    // The XLA CPU plugin accepts zero-element arrays.
    round_trip(&[], ElementType::F32, &[0]);
    round_trip(&[], ElementType::F32, &[3, 0, 2]);
}

#[test]
fn on_device_size() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let b = client
        .buffer_from_host(&f32_bytes(&[0.0; 16]), ElementType::F32, &[4, 4], dev)
        .unwrap();
    let n = b.on_device_size().unwrap();
    println!("on_device_size of f32[4,4] = {n}");
    assert!(n >= 64);
}

#[test]
fn size_mismatches_are_errors() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let e = client
        .buffer_from_host(&[0u8; 12], ElementType::F32, &[4], dev)
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_ARGUMENT);
    assert!(e.message.contains("12 bytes"), "{e}");
    let e = client
        .buffer_from_host(&[], ElementType::F32, &[-1], dev)
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_ARGUMENT);
    let e = client
        .buffer_from_host(&[0u8; 2], ElementType::S4, &[4], dev)
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_ARGUMENT);

    let b = client
        .buffer_from_host(&f32_bytes(&[1.0; 4]), ElementType::F32, &[4], dev)
        .unwrap();
    let mut small = [0u8; 8];
    let e = b.to_host(&mut small).unwrap_err();
    assert_eq!(e.code, code::INVALID_ARGUMENT);
    let mut big = [0u8; 20];
    assert!(b.to_host(&mut big).is_err());
}

#[test]
fn buffers_from_many_threads() {
    let client = require_client!();
    let devs = client.addressable_devices();
    std::thread::scope(|s| {
        for t in 0..4 {
            let client = client.clone();
            let dev = devs[t % devs.len()];
            s.spawn(move || {
                for i in 0..50 {
                    let v: Vec<f32> = (0..8).map(|j| (t * 1000 + i * 10 + j) as f32).collect();
                    let b = client
                        .buffer_from_host(&f32_bytes(&v), ElementType::F32, &[8], dev)
                        .unwrap();
                    assert_eq!(f32_from(&b.to_host_vec().unwrap()), v);
                }
            });
        }
    });
}
