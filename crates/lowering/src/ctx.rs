//! `Lower`: what a lowering builds with. It wraps the program builder and
//! collects the side products the engine needs: deferred index checks and
//! the random-number state.
use stablehlo::{Builder, DType, TensorType, Value};

use crate::check_message;
use crate::error::{ErrorKind, Result};

pub struct Lower<'a> {
    pub b: &'a mut Builder,
    /// The full op name, e.g. "aten::add.Tensor", for error messages.
    pub op: &'a str,
    /// Scalar i1 values that are true when the op got bad input (e.g. an
    /// index out of range), each with the message to raise.
    pub checks: Vec<(Value, String)>,
    /// The u64[2] random state argument and how many values were drawn.
    pub rng: Option<(Value, u64)>,
    /// For ops returning a Tensor[]: how many of the values form the list.
    pub list_len: Option<usize>,
    /// The data-dependent output size, for ops with a `size` lowering.
    pub dynamic_size: Option<i64>,
    /// The values of complex Scalar arguments (`alpha=1j`): `cast` refuses
    /// to turn them into real numbers, as PyTorch does, rather than drop
    /// the imaginary part.
    pub complex_scalars: Vec<Value>,
    /// The dtype of the op's out= tensor, which lowerings otherwise never
    /// see: factories (linspace.out into an int64 tensor) compute in it.
    pub out_dtype: Option<DType>,
    /// Tensor returns (by position) to hand back undefined, as ATen's
    /// backward kernels do for the gradients their output_mask leaves out.
    /// The lowering still produces a value for each; it is discarded.
    pub undefined_returns: Vec<usize>,
}

impl<'a> Lower<'a> {
    pub fn new(b: &'a mut Builder, op: &'a str) -> Self {
        Lower { b, op, checks: Vec::new(), rng: None, list_len: None, dynamic_size: None, complex_scalars: Vec::new(), out_dtype: None, undefined_returns: Vec::new() }
    }

    /// Runs another op's lowering (from the table) on `items`, under that
    /// op's name (lowerings may read their overload from it).
    pub fn call(&mut self, name: &'static str, items: Vec<crate::args::Arg>) -> Result<Vec<Value>> {
        let Some(entry) = crate::table::lookup(name) else {
            crate::bail!(Runtime, "{}: {name} is not lowered (internal error)", self.op);
        };
        let args = crate::args::Args { op: name.to_string(), items };
        let saved = self.op;
        self.op = name;
        let r = (entry.lower)(self, &args);
        self.op = saved;
        r
    }

    /// Records a deferred check: `bad` (a rank-0 i1 value) true raises
    /// IndexError with `message` at the next host sync (at once in Debug Eager).
    pub fn check(&mut self, bad: Value, message: String) {
        self.checks.push((bad, message));
    }

    /// [`Lower::check`] for bad values that are not indices: raises
    /// RuntimeError, as the CPU does (the kind travels in the message, which
    /// the engine keeps as text; see `check_message`).
    pub fn check_runtime(&mut self, bad: Value, message: String) {
        self.checks.push((bad, check_message::encode(ErrorKind::Runtime, 0, &message)));
    }

    /// [`Lower::check`] for a singular or indefinite matrix: raises
    /// `torch.linalg.LinAlgError`, as the CPU does.
    pub fn check_linalg(&mut self, bad: Value, message: String) {
        self.checks.push((bad, check_message::encode(ErrorKind::LinAlg, 0, &message)));
    }

    /// A deferred check whose message quotes numbers only the device knows
    /// (the bad value, its position), as the CPU's messages do: `values`
    /// are rank-0 integers, and "{0}", "{1}", ... in `message` become them
    /// when `bad` is set. Flag and values travel as one i64 vector.
    pub fn check_quoting(&mut self, kind: ErrorKind, bad: Value, values: &[Value], message: String) -> Result<()> {
        let mut parts = vec![self.b.convert(bad, DType::I64)?];
        for &v in values {
            parts.push(self.b.convert(v, DType::I64)?);
        }
        let parts: Vec<Value> = parts.into_iter().map(|p| self.b.reshape(p, &[1])).collect::<std::result::Result<_, _>>()?;
        let packed = self.b.concatenate(&parts, 0)?;
        self.checks.push((packed, check_message::encode(kind, values.len(), &message)));
        Ok(())
    }

    /// The random state for this op, reserving `count` values of the stream.
    /// The engine fills it with (seed, offset) from the op's generator.
    pub fn rng_state(&mut self, count: u64) -> Value {
        match &mut self.rng {
            Some((v, n)) => {
                *n += count;
                *v
            }
            None => {
                let v = self.b.arg(TensorType::new(DType::U64, [2]));
                self.rng = Some((v, count));
                v
            }
        }
    }

    pub fn dtype(&self, v: Value) -> DType {
        self.b.ty(v).dtype
    }

    pub fn shape(&self, v: Value) -> Vec<i64> {
        self.b.ty(v).shape.clone()
    }

    /// Converts to `dtype`, or returns `v` when it already has it.
    pub fn cast(&mut self, v: Value, dtype: DType) -> Result<Value> {
        if self.dtype(v) == dtype {
            return Ok(v);
        }
        if self.dtype(v).is_complex() || dtype.is_complex() {
            if !dtype.is_complex() && self.complex_scalars.contains(&v) {
                crate::bail!(
                    Runtime,
                    "{}: a complex number can't be converted to {}: it is used with real tensors here (the CPU \
                     refuses this too; make the tensors complex first)",
                    self.op,
                    crate::dtypes::name(dtype)
                );
            }
            return self.cast_complex(v, dtype);
        }
        if dtype == DType::Bool {
            // torch: nonzero is true (a plain convert would too, but be explicit).
            let src = self.dtype(v);
            let zero = self.b.constant_f64(src, 0.0);
            let shape = self.shape(v);
            let zero = self.b.broadcast_in_dim(zero, &shape, &[])?;
            return Ok(self.b.compare(v, zero, stablehlo::CompareDir::Ne)?);
        }
        if self.dtype(v).is_float() && matches!(dtype, DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::I64) {
            return self.float_to_int(v, dtype);
        }
        Ok(self.b.convert(v, dtype)?)
    }

    /// Float to integer as the CPU converts (x86's truncating conversion
    /// through an int64 for int64 and uint8, an int32 otherwise): NaN and
    /// values outside that type give its minimum, and narrower types keep
    /// its low bits, so 300.7 as uint8 is 44 rather than XLA's saturated 255.
    fn float_to_int(&mut self, v: Value, dtype: DType) -> Result<Value> {
        let v = if matches!(self.dtype(v), DType::F16 | DType::BF16) { self.b.convert(v, DType::F32)? } else { v };
        let (wide, bits) = if matches!(dtype, DType::I64 | DType::U8) { (DType::I64, 63) } else { (DType::I32, 31) };
        let shape = self.shape(v);
        let fdt = self.dtype(v);
        let limit = (2f64).powi(bits);
        let hi = self.b.constant_f64(fdt, limit);
        let hi = self.b.broadcast_in_dim(hi, &shape, &[])?;
        let lo = self.b.constant_f64(fdt, -limit);
        let lo = self.b.broadcast_in_dim(lo, &shape, &[])?;
        let too_big = self.b.compare(v, hi, stablehlo::CompareDir::Ge)?;
        let too_small = self.b.compare(v, lo, stablehlo::CompareDir::Lt)?;
        let nan = self.b.compare(v, v, stablehlo::CompareDir::Ne)?;
        let bad = self.b.or(too_big, too_small)?;
        let bad = self.b.or(bad, nan)?;
        let c = self.b.convert(v, wide)?;
        let min = self.b.constant_i64(wide, if wide == DType::I64 { i64::MIN } else { i32::MIN as i64 });
        let min = self.b.broadcast_in_dim(min, &shape, &[])?;
        let r = self.b.select(bad, min, c)?;
        Ok(if dtype == wide { r } else { self.b.convert(r, dtype)? })
    }

    /// Casts to or from a complex type through the parts, as torch does:
    /// complex -> real keeps the real part, complex -> bool is "nonzero",
    /// real -> complex has a zero imaginary part.
    fn cast_complex(&mut self, v: Value, dtype: DType) -> Result<Value> {
        let from = self.dtype(v);
        let (re, im) = match from.complex_part() {
            Some(_) => (self.b.real(v)?, Some(self.b.imag(v)?)),
            None => (v, None),
        };
        match dtype.complex_part() {
            Some(part) => {
                let re = self.cast(re, part)?;
                let im = match im {
                    Some(im) => self.cast(im, part)?,
                    None => self.full(part, 0.0, &self.shape(v))?,
                };
                Ok(self.b.complex(re, im)?)
            }
            None if dtype == DType::Bool => {
                let re = self.cast(re, DType::Bool)?;
                let im = self.cast(im.expect("complex source"), DType::Bool)?;
                Ok(self.b.or(re, im)?)
            }
            None => self.cast(re, dtype),
        }
    }

    /// Broadcasts `v` (numpy rules) to `shape`.
    pub fn expand(&mut self, v: Value, shape: &[i64]) -> Result<Value> {
        if self.b.ty(v).shape == shape {
            return Ok(v);
        }
        Ok(self.b.broadcast_to(v, shape)?)
    }

    /// A constant of `dtype` filled with `x`, of `shape`.
    /// A backward op's `output_mask` argument `i`: the returns it leaves out
    /// come back undefined, as on the CPU (DTensor's sharding rules rely on
    /// it), and XLA drops their computation.
    pub fn honor_output_mask(&mut self, args: &crate::args::Args, i: usize) {
        if let Some(mask) = args.opt_bools(i) {
            self.undefined_returns.extend(mask.iter().enumerate().filter(|(_, &m)| !m).map(|(k, _)| k));
        }
    }

    pub fn full(&mut self, dtype: DType, x: f64, shape: &[i64]) -> Result<Value> {
        Ok(self.b.splat(dtype, x, shape)?)
    }

    /// A constant with the dtype and shape of `like`.
    pub fn full_like(&mut self, like: Value, x: f64) -> Result<Value> {
        let ty = self.b.ty(like).clone();
        self.full(ty.dtype, x, &ty.shape)
    }
}

