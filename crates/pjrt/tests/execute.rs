//! Compiling StableHLO text and executing it: values, multiple outputs,
//! matmul, chaining without readback, devices, donation, and error paths.

mod common;

use common::*;
use pjrt::{code, ElementType};

#[test]
fn add_program() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client.compile(ADD_MLIR).unwrap();
    assert_eq!(exe.num_outputs(), 1);
    assert_eq!(exe.output_shapes(), Some(vec![(ElementType::F32, vec![4])]));
    let a = client
        .buffer_from_host(&f32_bytes(&[1., 2., 3., 4.]), ElementType::F32, &[4], dev)
        .unwrap();
    let b = client
        .buffer_from_host(
            &f32_bytes(&[10., 20., 30., 40.]),
            ElementType::F32,
            &[4],
            dev,
        )
        .unwrap();
    let out = exe.execute(&[&a, &b], None).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].element_type(), ElementType::F32);
    assert_eq!(out[0].dims(), vec![4]);
    out[0].ready().unwrap();
    assert_eq!(
        f32_from(&out[0].to_host_vec().unwrap()),
        vec![11., 22., 33., 44.]
    );
    // Inputs are not donated by `execute`.
    assert_eq!(f32_from(&a.to_host_vec().unwrap()), vec![1., 2., 3., 4.]);
}

#[test]
fn two_outputs() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client
        .compile(
            r#"
module {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xi32>) {
    %0 = stablehlo.multiply %a, %b : tensor<2x3xf32>
    %1 = stablehlo.iota dim = 0 : tensor<3xi32>
    return %0, %1 : tensor<2x3xf32>, tensor<3xi32>
  }
}"#,
        )
        .unwrap();
    assert_eq!(exe.num_outputs(), 2);
    let a = client
        .buffer_from_host(
            &f32_bytes(&[1., 2., 3., 4., 5., 6.]),
            ElementType::F32,
            &[2, 3],
            dev,
        )
        .unwrap();
    let b = client
        .buffer_from_host(&f32_bytes(&[2.; 6]), ElementType::F32, &[2, 3], dev)
        .unwrap();
    let out = exe.execute(&[&a, &b], None).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].dims(), vec![2, 3]);
    assert_eq!(out[1].element_type(), ElementType::S32);
    assert_eq!(out[1].dims(), vec![3]);
    assert_eq!(
        f32_from(&out[0].to_host_vec().unwrap()),
        vec![2., 4., 6., 8., 10., 12.]
    );
    assert_eq!(i32_from(&out[1].to_host_vec().unwrap()), vec![0, 1, 2]);
}

#[test]
fn matmul_64_matches_host() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client
        .compile(
            r#"
module {
  func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    return %0 : tensor<64x64xf32>
  }
}"#,
        )
        .unwrap();
    const N: usize = 64;
    let a: Vec<f32> = (0..N * N)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25)
        .collect();
    let b: Vec<f32> = (0..N * N)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.5)
        .collect();
    let mut want = vec![0f32; N * N];
    for i in 0..N {
        for j in 0..N {
            let mut s = 0f64;
            for k in 0..N {
                s += a[i * N + k] as f64 * b[k * N + j] as f64;
            }
            want[i * N + j] = s as f32;
        }
    }
    let da = client
        .buffer_from_host(&f32_bytes(&a), ElementType::F32, &[64, 64], dev)
        .unwrap();
    let db = client
        .buffer_from_host(&f32_bytes(&b), ElementType::F32, &[64, 64], dev)
        .unwrap();
    let out = exe.execute(&[&da, &db], None).unwrap();
    let got = f32_from(&out[0].to_host_vec().unwrap());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn chained_executes_without_readback() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client.compile(ADD_MLIR).unwrap();
    let a = client
        .buffer_from_host(&f32_bytes(&[1., 2., 3., 4.]), ElementType::F32, &[4], dev)
        .unwrap();
    let mut acc = exe.execute(&[&a, &a], None).unwrap().pop().unwrap(); // 2a
    for _ in 0..10 {
        acc = exe.execute(&[&acc, &a], None).unwrap().pop().unwrap(); // + a
    }
    // 12 * a
    assert_eq!(
        f32_from(&acc.to_host_vec().unwrap()),
        vec![12., 24., 36., 48.]
    );
}

#[test]
fn runs_on_every_device() {
    let client = require_client!();
    let exe = client.compile(ADD_MLIR).unwrap();
    assert!(exe.is_portable());
    for dev in client.addressable_devices() {
        let x = [dev.id() as f32; 4];
        let a = client
            .buffer_from_host(&f32_bytes(&x), ElementType::F32, &[4], dev)
            .unwrap();
        let b = client
            .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], dev)
            .unwrap();
        for device in [None, Some(dev)] {
            let out = exe.execute(&[&a, &b], device).unwrap();
            assert_eq!(out[0].device(), dev);
            assert_eq!(out[0].query_device().unwrap(), dev);
            assert_eq!(
                f32_from(&out[0].to_host_vec().unwrap()),
                vec![dev.id() as f32 + 1.0; 4]
            );
        }
    }
}

#[test]
fn device_bound_executable() {
    let client = require_client!();
    let devs = client.addressable_devices();
    let exe = client
        .compile_with_options(ADD_MLIR, pjrt::DEVICE0_COMPILE_OPTIONS)
        .unwrap();
    assert!(!exe.is_portable());
    assert_eq!(exe.addressable_devices(), vec![devs[0]]);
    let a0 = client
        .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], devs[0])
        .unwrap();
    let out = exe.execute(&[&a0, &a0], Some(devs[0])).unwrap();
    assert_eq!(out[0].device(), devs[0]);
    assert_eq!(f32_from(&out[0].to_host_vec().unwrap()), vec![2.; 4]);
    if devs.len() > 1 {
        let e = exe.execute(&[&a0, &a0], Some(devs[1])).unwrap_err();
        assert_eq!(e.code, code::INVALID_ARGUMENT);
        assert!(e.message.contains("not portable"), "{e}");
        // Inputs on the wrong device: the plugin's own error, no panic.
        let a1 = client
            .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], devs[1])
            .unwrap();
        let e = exe.execute(&[&a1, &a1], None).unwrap_err();
        println!("plugin error for misplaced input: {e}");
        assert!(e.message.contains("device"), "{e}");
    }
    assert!(client.compile_with_options(ADD_MLIR, &[]).is_err());
}

#[test]
fn compile_error_then_client_still_works() {
    let client = require_client!();
    let e = client
        .compile("module { func.func @main( this is not mlir")
        .unwrap_err();
    println!("compile error: {e}");
    assert_ne!(e.code, code::OK);
    assert!(!e.message.is_empty());
    // A type error in otherwise well-formed MLIR.
    let e = client
        .compile(
            r#"module { func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
                 %0 = stablehlo.add %a, %a : tensor<5xf32>
                 return %0 : tensor<4xf32> } }"#,
        )
        .unwrap_err();
    println!("compile error: {e}");
    // The client keeps working.
    let dev = client.addressable_devices()[0];
    let exe = client.compile(ADD_MLIR).unwrap();
    let a = client
        .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], dev)
        .unwrap();
    let out = exe.execute(&[&a, &a], None).unwrap();
    assert_eq!(f32_from(&out[0].to_host_vec().unwrap()), vec![2.; 4]);
}

#[test]
fn bad_execute_arguments_are_errors() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client.compile(ADD_MLIR).unwrap();
    let a = client
        .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], dev)
        .unwrap();
    let e = exe.execute(&[&a], None).unwrap_err();
    println!("wrong arity: {e}");
    let i = client
        .buffer_from_host(&i64_bytes(&[1; 4]), ElementType::S64, &[4], dev)
        .unwrap();
    let e = exe.execute(&[&a, &i], None).unwrap_err();
    println!("wrong type: {e}");
    let s = client
        .buffer_from_host(&f32_bytes(&[1.; 5]), ElementType::F32, &[5], dev)
        .unwrap();
    let e = exe.execute(&[&a, &s], None).unwrap_err();
    println!("wrong shape: {e}");
    let e = exe.execute_donating(&[&a, &a], &[2], None).unwrap_err();
    assert_eq!(e.code, code::INVALID_ARGUMENT);
}

#[test]
fn scalar_and_zero_size_programs() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client
        .compile(
            r#"module { func.func @main(%a: tensor<f64>, %b: tensor<0x3xf32>) -> (tensor<f64>, tensor<0x3xf32>) {
                 %0 = stablehlo.multiply %a, %a : tensor<f64>
                 %1 = stablehlo.negate %b : tensor<0x3xf32>
                 return %0, %1 : tensor<f64>, tensor<0x3xf32> } }"#,
        )
        .unwrap();
    let a = client
        .buffer_from_host(&3.0f64.to_ne_bytes(), ElementType::F64, &[], dev)
        .unwrap();
    let b = client
        .buffer_from_host(&[], ElementType::F32, &[0, 3], dev)
        .unwrap();
    let out = exe.execute(&[&a, &b], None).unwrap();
    assert_eq!(out[0].dims(), Vec::<i64>::new());
    assert_eq!(out[0].to_host_vec().unwrap(), 9.0f64.to_ne_bytes().to_vec());
    assert_eq!(out[1].dims(), vec![0, 3]);
    assert!(out[1].to_host_vec().unwrap().is_empty());
}

#[test]
fn donation() {
    let client = require_client!();
    let dev = client.addressable_devices()[0];
    let exe = client
        .compile(
            r#"module { func.func @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<4xf32>) -> tensor<4xf32> {
                 %0 = stablehlo.add %a, %b : tensor<4xf32>
                 return %0 : tensor<4xf32> } }"#,
        )
        .unwrap();
    let a = client
        .buffer_from_host(&f32_bytes(&[1.; 4]), ElementType::F32, &[4], dev)
        .unwrap();
    let b = client
        .buffer_from_host(&f32_bytes(&[2.; 4]), ElementType::F32, &[4], dev)
        .unwrap();
    // Plain execute never donates, even though the program allows aliasing.
    let out = exe.execute(&[&a, &b], None).unwrap();
    assert_eq!(f32_from(&out[0].to_host_vec().unwrap()), vec![3.; 4]);
    assert_eq!(f32_from(&a.to_host_vec().unwrap()), vec![1.; 4]);
    // Donating input 0: the output is right and `a` is consumed.
    let out = exe.execute_donating(&[&a, &b], &[0], None).unwrap();
    assert_eq!(f32_from(&out[0].to_host_vec().unwrap()), vec![3.; 4]);
    let after = a.to_host_vec();
    println!("reading a donated input: {after:?}");
    assert!(after.is_err(), "donated input should be unusable");
    assert_eq!(f32_from(&b.to_host_vec().unwrap()), vec![2.; 4]);
}

#[test]
fn concurrent_executes() {
    let client = require_client!();
    let exe = client.compile(ADD_MLIR).unwrap();
    let devs = client.addressable_devices();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (client, exe, dev) = (client.clone(), &exe, devs[t % devs.len()]);
            s.spawn(move || {
                let a = client
                    .buffer_from_host(&f32_bytes(&[t as f32; 4]), ElementType::F32, &[4], dev)
                    .unwrap();
                let mut acc = exe.execute(&[&a, &a], None).unwrap().pop().unwrap();
                for _ in 0..200 {
                    acc = exe.execute(&[&acc, &a], None).unwrap().pop().unwrap();
                }
                assert_eq!(
                    f32_from(&acc.to_host_vec().unwrap()),
                    vec![202.0 * t as f32; 4]
                );
                assert_eq!(acc.device(), dev);
            });
        }
    });
}
