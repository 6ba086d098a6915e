//! Shared helpers for the integration tests: locating the XLA CPU PJRT plugin,
//! one process-wide client, and byte conversions for host data.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use pjrt::{Api, Client};

/// `$TORCH_TPU_PJRT_PLUGIN`, else the plugin under /tmp/pjrt, else the one in
/// the repository's virtualenv, else [`pjrt::default_plugin_path`].
pub fn plugin_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TORCH_TPU_PJRT_PLUGIN") {
        if !p.is_empty() {
            return Some(PathBuf::from(p));
        }
    }
    for p in [
        "/tmp/pjrt/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
        "/work/main/.venv/lib/python3.11/site-packages/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
    ] {
        if std::path::Path::new(p).is_file() {
            return Some(PathBuf::from(p));
        }
    }
    pjrt::default_plugin_path()
}

/// One client shared by all tests of a test binary (also exercises
/// concurrent use from the test harness's threads). `None` = no plugin here.
pub fn client() -> Option<Arc<Client>> {
    static CLIENT: OnceLock<Option<Arc<Client>>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let path = plugin_path()?;
            let api =
                Api::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
            Some(Client::new(api).unwrap_or_else(|e| panic!("creating client: {e}")))
        })
        .clone()
}

/// Evaluates to the shared client, or returns from the test (printing why)
/// when no PJRT plugin is available on this machine.
#[macro_export]
macro_rules! require_client {
    () => {
        match common::client() {
            Some(c) => c,
            None => {
                eprintln!("SKIPPED: no PJRT CPU plugin found (set TORCH_TPU_PJRT_PLUGIN)");
                return;
            }
        }
    };
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}
pub fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}
pub fn i64_from(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}
pub fn i32_from(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

pub const ADD_MLIR: &str = r#"
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"#;
