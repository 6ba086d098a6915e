//! Test harness: compiles built programs on the PJRT CPU plugin and moves data
//! between host vectors and device buffers.
//!
//! Tests call [`client`]; it returns `None` (after printing why) only when no
//! plugin file exists. A plugin that exists but fails to load is a test failure.

#![allow(dead_code)]

use pjrt::{Api, Client, ElementType};
use stablehlo::{Builder, DType, Value};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Where the CPU plugin is installed on the development machine.
const FALLBACK_PLUGIN: &str = "/tmp/pjrt/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so";

fn plugin_path() -> Option<PathBuf> {
    let candidates = pjrt::default_plugin_path()
        .into_iter()
        .chain([PathBuf::from(FALLBACK_PLUGIN)]);
    candidates.into_iter().find(|p| p.is_file())
}

/// The shared client, or `None` when no plugin file exists (the test should return).
pub fn client() -> Option<Arc<Client>> {
    static CLIENT: OnceLock<Option<Arc<Client>>> = OnceLock::new();
    let c = CLIENT.get_or_init(|| {
        let path = plugin_path()?;
        let api =
            Api::load(&path).unwrap_or_else(|e| panic!("loading plugin {}: {e}", path.display()));
        Some(Client::new(api).expect("creating PJRT client"))
    });
    if c.is_none() {
        eprintln!(
            "SKIPPED: no PJRT plugin file found (set ${} or install {FALLBACK_PLUGIN})",
            pjrt::PLUGIN_ENV_VAR
        );
    }
    c.clone()
}

/// Evaluates to the shared client or returns from the test (printing why).
#[macro_export]
macro_rules! client_or_skip {
    () => {
        match common::client() {
            Some(c) => c,
            None => return,
        }
    };
}

pub fn element_type(d: DType) -> ElementType {
    match d {
        DType::Bool => ElementType::Pred,
        DType::U8 => ElementType::U8,
        DType::U32 => ElementType::U32,
        DType::U64 => ElementType::U64,
        DType::I8 => ElementType::S8,
        DType::I16 => ElementType::S16,
        DType::I32 => ElementType::S32,
        DType::I64 => ElementType::S64,
        DType::F16 => ElementType::F16,
        DType::BF16 => ElementType::BF16,
        DType::F32 => ElementType::F32,
        DType::F64 => ElementType::F64,
        DType::C64 => ElementType::C64,
        DType::C128 => ElementType::C128,
    }
}

/// A host array: raw little-endian bytes, element type and shape.
#[derive(Clone, Debug)]
pub struct Host {
    pub bytes: Vec<u8>,
    pub dtype: DType,
    pub shape: Vec<i64>,
}

pub fn f32s(shape: &[i64], v: &[f32]) -> Host {
    Host {
        bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        dtype: DType::F32,
        shape: shape.to_vec(),
    }
}
pub fn i32s(shape: &[i64], v: &[i32]) -> Host {
    Host {
        bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        dtype: DType::I32,
        shape: shape.to_vec(),
    }
}
pub fn u64s(shape: &[i64], v: &[u64]) -> Host {
    Host {
        bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        dtype: DType::U64,
        shape: shape.to_vec(),
    }
}
pub fn scalar_i32(v: i32) -> Host {
    i32s(&[], &[v])
}

pub fn as_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn as_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn as_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn as_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn as_u64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn as_bool(b: &[u8]) -> Vec<bool> {
    b.iter().map(|&x| x != 0).collect()
}

/// Output of one program result: bytes plus the shape the device reported.
pub struct Out {
    pub bytes: Vec<u8>,
    pub shape: Vec<i64>,
}

/// Compiles `b.finish(results)`, runs it on `inputs` and checks that every
/// output has the type the builder inferred.
pub fn run(client: &Arc<Client>, b: &Builder, results: &[Value], inputs: &[Host]) -> Vec<Out> {
    let text = b.finish(results);
    let exe = client
        .compile(&text)
        .unwrap_or_else(|e| panic!("compile failed: {e}\n{text}"));
    let dev = client.addressable_devices()[0];
    let bufs: Vec<_> = inputs
        .iter()
        .map(|h| {
            client
                .buffer_from_host(&h.bytes, element_type(h.dtype), &h.shape, dev)
                .expect("upload")
        })
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let outs = exe
        .execute(&refs, None)
        .unwrap_or_else(|e| panic!("execute failed: {e}\n{text}"));
    assert_eq!(outs.len(), results.len());
    outs.iter()
        .zip(results)
        .map(|(o, &r)| {
            let shape = o.dims();
            assert_eq!(
                shape,
                b.shape(r),
                "device shape differs from inferred type\n{text}"
            );
            assert_eq!(
                o.element_type(),
                element_type(b.dtype(r)),
                "device dtype differs\n{text}"
            );
            Out {
                bytes: o.to_host_vec().expect("download"),
                shape,
            }
        })
        .collect()
}

pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: got {g}, want {w}\n{got:?}\n{want:?}"
        );
    }
}
