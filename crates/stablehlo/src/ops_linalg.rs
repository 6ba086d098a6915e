//! Dense linear-algebra ops: `stablehlo.cholesky` and `stablehlo.triangular_solve`.

use crate::builder::{Builder, Value};
use crate::error::{bail, Result};

/// What `triangular_solve` applies to A before solving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transpose {
    No,
    Transpose,
    /// The conjugate transpose (the plain transpose for real A).
    Adjoint,
}

impl Builder {
    /// `stablehlo.cholesky` of a batch of square matrices `[..., n, n]`
    /// (float or complex, Hermitian). `lower`: the result is L (A = L L^H),
    /// else U (A = U^H U); the other triangle of the result is
    /// implementation-defined. Non-positive-
    /// definite inputs give NaNs (XLA) rather than an error.
    pub fn cholesky(&mut self, a: Value, lower: bool) -> Result<Value> {
        const OP: &str = "stablehlo.cholesky";
        let t = self.type_of(OP, a)?;
        let r = t.shape.len();
        if r < 2 || t.shape[r - 1] != t.shape[r - 2] {
            bail!(OP, "operand must be a batch of square matrices, got {t}");
        }
        if !t.dtype.is_float() && !t.dtype.is_complex() {
            bail!(OP, "operand must be floating-point or complex, got {t}");
        }
        Ok(self.emit1(OP, &[a], &[("lower", lower.to_string())], t))
    }

    /// `stablehlo.triangular_solve`: solves op(A) X = B (`left_side`) or
    /// X op(A) = B, A `[..., n, n]` triangular (`lower`), B `[..., m, k]` with
    /// the same batch dims; `transpose_a` is op;
    /// `unit_diagonal` assumes ones on A's diagonal. Returns X (shape of B).
    pub fn triangular_solve(
        &mut self,
        a: Value,
        b: Value,
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose_a: Transpose,
    ) -> Result<Value> {
        const OP: &str = "stablehlo.triangular_solve";
        let (ta, tb) = (self.type_of(OP, a)?, self.type_of(OP, b)?);
        let r = ta.shape.len();
        if r < 2 || ta.shape[r - 1] != ta.shape[r - 2] || tb.shape.len() != r {
            bail!(OP, "a must be [..., n, n] and b of the same rank (a {ta}, b {tb})");
        }
        if ta.dtype != tb.dtype || !(ta.dtype.is_float() || ta.dtype.is_complex()) {
            bail!(OP, "a and b must share a floating-point or complex type (a {ta}, b {tb})");
        }
        if ta.shape[..r - 2] != tb.shape[..r - 2] {
            bail!(OP, "batch dims differ (a {ta}, b {tb})");
        }
        let n = ta.shape[r - 1];
        let dim = if left_side { tb.shape[r - 2] } else { tb.shape[r - 1] };
        if dim != n {
            bail!(OP, "b's {} dim must be {n} (a {ta}, b {tb})", if left_side { "row" } else { "column" });
        }
        let tr = match transpose_a {
            Transpose::No => "NO_TRANSPOSE",
            Transpose::Adjoint if ta.dtype.is_complex() => "ADJOINT",
            _ => "TRANSPOSE",
        };
        let attrs = [
            ("left_side", left_side.to_string()),
            ("lower", lower.to_string()),
            ("unit_diagonal", unit_diagonal.to_string()),
            ("transpose_a", format!("#stablehlo<transpose {tr}>")),
        ];
        Ok(self.emit1(OP, &[a, b], &attrs, tb))
    }
}
