//! `_assert_async` (`torch._assert_async`, and the range check that
//! `F.one_hot`'s decomposition emits under torch.compile): a deferred
//! check, like an index check, that raises RuntimeError at the next host
//! sync (at once in Debug Eager) when the one-element tensor is zero.
use stablehlo::{CompareDir, DType, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[op!("_assert_async", assert_async)];

/// _assert_async(self) / _assert_async.msg(self, assert_msg) -> ()
fn assert_async(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let n: i64 = t.shape.iter().product();
    if n != 1 {
        let what = if n == 0 { "no values" } else { "more than one value" };
        bail!(Runtime, "Boolean value of Tensor with {what} is ambiguous");
    }
    let v = lx.b.reshape(t.value, &[])?;
    let zero_of = |lx: &mut Lower, v: Value| -> Result<Value> {
        let z = lx.full_like(v, 0.0)?;
        Ok(lx.b.compare(v, z, CompareDir::Eq)?)
    };
    let bad = if t.dtype.is_complex() {
        let (re, im) = (lx.b.real(v)?, lx.b.imag(v)?);
        let (a, b) = (zero_of(lx, re)?, zero_of(lx, im)?);
        lx.b.and(a, b)?
    } else if t.dtype == DType::Bool {
        lx.b.not(v)?
    } else {
        zero_of(lx, v)?
    };
    let message = match args.opt_str(1) {
        Some("") => "Assertion is failed".to_string(),
        Some(m) => m.to_string(),
        None => "Expected Tensor with single nonzero value, but got zero".to_string(),
    };
    lx.check_runtime(bad, message);
    Ok(vec![])
}
