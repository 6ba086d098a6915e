//! The eager engine behind the `tpu` device.
//!
//! C++ hands every op over as plain data (`ffi`); `dispatch` turns it into a
//! call: read the tensors' storage views, lower the op through the lowering
//! table, compile once per (op, shapes, dtypes, static attributes) in
//! `cache`, execute on the PJRT device and write results back into storages.
//! The host waits only when a value is needed (`transfer`, `sync`).
pub mod cache;
pub mod call;
pub mod compile_affinity;
pub mod cross_device;
pub mod device_memory;
pub mod disk_cache;
pub mod dispatch;
pub mod error;
pub mod ffi;
pub mod fork;
pub mod fused;
pub mod graph_history;
pub mod graph_lock;
pub mod host_heap;
pub mod layout;
pub mod metrics;
pub mod mode;
pub mod pinned_host;
pub mod program;
pub mod python_warning;
pub mod replay;
pub mod runtime;
pub mod scalars;
pub mod step_period;
pub mod storage;
pub mod sync;
pub mod sync_debug;
pub mod transfer;
pub mod write_overlap;
pub mod xla_cpu_devices;
pub mod xla_cpu_flags;

pub use error::{EngineError, Result};
pub use runtime::{engine, Engine};
/// Bytes held by live device buffers (see pjrt::buffer_memory).
pub use pjrt::{buffer_memory, reset_buffer_memory_peak};
