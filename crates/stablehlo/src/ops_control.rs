//! Control flow: `stablehlo.while`.
//!
//! Region bodies are built on fresh region [`Builder`]s: they can only use
//! their block arguments (the loop-carried values) and values they create
//! themselves, never values of the enclosing builder; pass everything a loop
//! needs through its carried values.

use crate::builder::{Builder, Value};
use crate::error::{bail, Error, Result};
use crate::types::TensorType;
use crate::DType;

impl Builder {
    /// `stablehlo.while` over the carried values `inits`.
    /// `cond(region, carried)` returns a rank-0 `i1` (keep looping while true);
    /// `body(region, carried)` returns the next carried values (same types).
    /// Returns the carried values after the last iteration.
    /// The closures may fail with any error type that a stablehlo [`Error`]
    /// converts into (e.g. a caller's own error type); that error is returned
    /// as is.
    pub fn while_loop<E: From<Error>>(
        &mut self,
        inits: &[Value],
        cond: impl FnOnce(&mut Builder, &[Value]) -> std::result::Result<Value, E>,
        body: impl FnOnce(&mut Builder, &[Value]) -> std::result::Result<Vec<Value>, E>,
    ) -> std::result::Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.while";
        let types = self.carried_types(OP, inits)?;
        let mut user_err: Option<E> = None;
        let cond_region = self.region(OP, &types, |b, a| match cond(b, a) {
            Ok(v) => Ok(vec![v]),
            Err(e) => {
                user_err = Some(e);
                Err(Error::new(OP, "condition failed"))
            }
        });
        if let Some(e) = user_err.take() {
            return Err(e);
        }
        let (cond_region, cond_ret) = cond_region?;
        if cond_ret != [TensorType::scalar(DType::Bool)] {
            return Err(Error::new(OP, format!("condition must return one tensor<i1>, got {cond_ret:?}")).into());
        }
        let body_region = self.region(OP, &types, |b, a| match body(b, a) {
            Ok(v) => Ok(v),
            Err(e) => {
                user_err = Some(e);
                Err(Error::new(OP, "body failed"))
            }
        });
        if let Some(e) = user_err.take() {
            return Err(e);
        }
        let (body_region, body_ret) = body_region?;
        if body_ret != types {
            return Err(Error::new(OP, format!("body must return the carried types {types:?}, got {body_ret:?}")).into());
        }
        Ok(self.emit(OP, inits, &[cond_region, body_region], &[], types))
    }

    fn carried_types(&self, op: &'static str, inits: &[Value]) -> Result<Vec<TensorType>> {
        if inits.is_empty() {
            bail!(op, "needs at least one carried value");
        }
        inits.iter().map(|&v| self.type_of(op, v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CompareDir;

    #[test]
    fn counting_loop() {
        let mut b = Builder::new();
        let x = b.arg(TensorType::new(DType::F32, [3]));
        let i0 = b.constant_i64(DType::I64, 0);
        let out = b
            .while_loop::<Error>(
                &[i0, x],
                |r, a| {
                    let n = r.constant_i64(DType::I64, 4);
                    r.compare(a[0], n, CompareDir::Lt)
                },
                |r, a| {
                    let one = r.constant_i64(DType::I64, 1);
                    Ok(vec![r.add(a[0], one)?, r.add(a[1], a[1])?])
                },
            )
            .unwrap();
        assert_eq!(b.ty(out[1]).to_string(), "tensor<3xf32>");
        let text = b.finish(&[out[1]]);
        assert!(text.contains("\"stablehlo.while\"(%"), "{text}");
        assert!(text.contains("stablehlo.return"), "{text}");
        let bad = b.while_loop::<Error>(
            &[i0],
            |r, a| {
                let z = r.constant_i64(DType::I64, 0);
                r.compare(a[0], z, CompareDir::Lt)
            },
            |r, _| Ok(vec![r.constant_i64(DType::I32, 0)]),
        );
        assert!(bad.is_err());
    }
}
