//! Miscellaneous ops: `stablehlo.iota`, `stablehlo.rng_bit_generator` and
//! `stablehlo.sort`.

use crate::builder::{Builder, Value};
use crate::check::shape_valid;
use crate::error::{bail, Result};
use crate::types::TensorType;
use crate::DType;

/// Bit generator algorithm of `stablehlo.rng_bit_generator`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RngAlgorithm {
    /// Implementation-defined (XLA picks one; the state is ui64[n]).
    Default,
    /// Threefry; the state is `tensor<2xui64>`.
    ThreeFry,
    /// Philox; the state is `tensor<2xui64>` or `tensor<3xui64>`.
    Philox,
}

impl RngAlgorithm {
    pub fn mlir(self) -> &'static str {
        match self {
            RngAlgorithm::Default => "DEFAULT",
            RngAlgorithm::ThreeFry => "THREE_FRY",
            RngAlgorithm::Philox => "PHILOX",
        }
    }
}

impl Builder {
    /// `stablehlo.iota`: values `0, 1, 2, ...` along `dim`, constant along the
    /// other dimensions.
    pub fn iota(&mut self, dtype: DType, shape: &[i64], dim: i64) -> Result<Value> {
        const OP: &str = "stablehlo.iota";
        shape_valid(OP, shape)?;
        if dim < 0 || dim as usize >= shape.len() {
            bail!(OP, "iota_dimension {dim} out of range for shape {shape:?}");
        }
        if !(dtype.is_integer() || dtype.is_float()) {
            bail!(
                OP,
                "element type must be integer or floating-point, got {dtype}"
            );
        }
        let attrs = [("iota_dimension", format!("{dim} : i64"))];
        Ok(self.emit1(OP, &[], &attrs, TensorType::new(dtype, shape)))
    }

    /// `stablehlo.rng_bit_generator`: returns (new state, random bits of
    /// `shape`/`dtype`). Same state in → same bits out.
    pub fn rng_bit_generator(
        &mut self,
        algorithm: RngAlgorithm,
        state: Value,
        shape: &[i64],
        dtype: DType,
    ) -> Result<(Value, Value)> {
        const OP: &str = "stablehlo.rng_bit_generator";
        let st = self.type_of(OP, state)?;
        shape_valid(OP, shape)?;
        let ok_len = match algorithm {
            RngAlgorithm::ThreeFry => st.shape == [2],
            RngAlgorithm::Philox => st.shape == [2] || st.shape == [3],
            RngAlgorithm::Default => st.rank() == 1 && st.shape[0] > 0,
        };
        if st.dtype != DType::U64 || !ok_len {
            bail!(
                OP,
                "state {st} is not a valid {} state (ui64 vector of the algorithm's size)",
                algorithm.mlir()
            );
        }
        if !(dtype.is_integer() || dtype.is_float()) {
            bail!(
                OP,
                "output element type must be integer or floating-point, got {dtype}"
            );
        }
        let attrs = [(
            "rng_algorithm",
            format!("#stablehlo<rng_algorithm {}>", algorithm.mlir()),
        )];
        let out = self.emit(
            OP,
            &[state],
            &[],
            &attrs,
            vec![st, TensorType::new(dtype, shape)],
        );
        Ok((out[0], out[1]))
    }

    /// `stablehlo.sort` of same-shaped `inputs` along `dim` (negative counts from
    /// the end). `comparator(region, args)` gets `2 * inputs.len()` rank-0 values
    /// `[lhs0, rhs0, lhs1, rhs1, ...]` and returns an `i1` "lhs goes first".
    pub fn sort(
        &mut self,
        inputs: &[Value],
        dim: i64,
        is_stable: bool,
        comparator: impl FnOnce(&mut Builder, &[Value]) -> Result<Value>,
    ) -> Result<Vec<Value>> {
        const OP: &str = "stablehlo.sort";
        let Some(&first) = inputs.first() else {
            bail!(OP, "needs at least one input")
        };
        let t0 = self.type_of(OP, first)?;
        let mut types = Vec::new();
        for &v in inputs {
            let t = self.type_of(OP, v)?;
            if t.shape != t0.shape {
                bail!(OP, "inputs must have the same shape, got {t0} and {t}");
            }
            types.push(t);
        }
        let r = t0.rank() as i64;
        let d = if dim < 0 { dim + r } else { dim };
        if d < 0 || d >= r {
            bail!(OP, "dimension {dim} out of range for {t0}");
        }
        let scalars: Vec<TensorType> = types
            .iter()
            .flat_map(|t| [TensorType::scalar(t.dtype), TensorType::scalar(t.dtype)])
            .collect();
        let (region, ret) = self.region(OP, &scalars, |b, a| Ok(vec![comparator(b, a)?]))?;
        if ret != [TensorType::scalar(DType::Bool)] {
            bail!(OP, "comparator must return one tensor<i1>");
        }
        let attrs = [
            ("dimension", format!("{d} : i64")),
            ("is_stable", is_stable.to_string()),
        ];
        Ok(self.emit(OP, inputs, &[region], &attrs, types))
    }
}
