//! The ATen-op lowering table.
//!
//! Each lowering is a pure function from StableHLO values to StableHLO values
//! (`fn(&mut Lower, &Args) -> Result<Vec<Value>>`), with no torch types and no
//! knowledge of devices, storages or caching: the engine reads tensor views
//! into values before calling it and writes results back afterwards. Op
//! families live in `ops/`, one file each; `table` collects them.
pub mod args;
pub mod check_message;
pub mod ctx;
pub mod dtypes;
pub mod error;
pub mod promote;
pub mod table;
pub mod views;

mod ops;

pub use args::{Arg, Args, ScalarArg, TensorArg};
pub use ctx::Lower;
pub use error::{ErrorKind, LowerError, Result};
pub use ops::complex::accepts_complex;
pub use ops::optim::RUNTIME_FLOAT_OPS;
pub use table::{lookup, OpEntry};
