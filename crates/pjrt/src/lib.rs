//! `pjrt`: a safe Rust wrapper over the PJRT C API, with the plugin loaded at
//! run time (`dlopen`) and hand-written C declarations (no bindgen, no headers).
//!
//! ```no_run
//! use pjrt::{Api, Client, ElementType};
//! # fn main() -> pjrt::Result<()> {
//! let path = pjrt::default_plugin_path().expect("no PJRT plugin found");
//! let client = Client::new(Api::load(&path)?)?;
//! let dev = client.addressable_devices()[0];
//! let exe = client.compile(
//!     "module { func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
//!        %0 = stablehlo.add %a, %a : tensor<2xf32>
//!        return %0 : tensor<2xf32> } }",
//! )?;
//! let x: Vec<u8> = [1f32, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
//! let a = client.buffer_from_host(&x, ElementType::F32, &[2], dev)?;
//! let out = exe.execute(&[&a], None)?;
//! let bytes = out[0].to_host_vec()?;
//! # Ok(()) }
//! ```
//!
//! All handle types are `Send + Sync`. Plugin errors never panic; they become
//! [`Error`] values carrying the plugin's code and message.

pub mod ffi;

mod api;
mod buffer;
mod buffer_memory;
mod client;
mod device;
mod error;
mod event;
mod executable;
mod types;

pub use api::{default_plugin_path, Api, NamedValue, CPU_PLUGIN_SUBPATH, PLUGIN_ENV_VAR};
pub use buffer::Buffer;
pub use buffer_memory::{buffer_memory, reset_buffer_memory_peak};
pub use client::{Client, ClientOption, DEVICE0_COMPILE_OPTIONS, PORTABLE_COMPILE_OPTIONS};
pub use device::{Device, MemoryStats};
pub use error::{code, Error, Result};
pub use event::Event;
pub use executable::Executable;
pub use types::ElementType;

#[cfg(test)]
mod send_sync {
    use super::*;

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Api>();
        check::<Client>();
        check::<Device>();
        check::<Buffer>();
        check::<Executable>();
        check::<Event>();
        check::<Error>();
    }
}
