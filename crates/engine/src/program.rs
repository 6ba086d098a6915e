//! Turning one op call into a StableHLO program.
//!
//! The program takes each distinct storage the call touches as a 1-D buffer,
//! reads every tensor view out of it, runs the op's lowering, and returns new
//! tensors as 1-D buffers and updated storages whole. `signature` captures
//! everything the program depends on (shapes, dtypes, layouts, static
//! attributes, which storages alias) and nothing else, so it is the cache key.
use std::collections::HashMap;

use lowering::views::{box_plan, read_view, storage_as, write_view, BoxPlan, ViewSpec};
use lowering::{Arg, Args, ErrorKind, Lower, ScalarArg, TensorArg};
use stablehlo::{Builder, DType, TensorType, Value};

use crate::call::{Call, CallValue, MathBits, TensorRef, RET_LIST, RET_NUMBER, RET_TENSOR};
use crate::error::{EngineError, Result};
use crate::storage::Storage;
use crate::transfer::contiguous_strides;

/// Where each program input comes from at execution time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The buffer of distinct storage `slot` (1-D of `dtype`, `n` elements).
    Slot { slot: usize, dtype: DType, n: i64 },
    /// The storage offset (i64) of the `k`-th tensor view of the call.
    Offset { view: usize },
    /// The runtime value of the scalar argument at `arg`.
    Scalar { arg: usize, dtype: DType },
    /// A CPU tensor argument uploaded as is.
    Host { arg: usize },
    /// The values of the `Scalar[]` argument at `arg`, as a 1-D array.
    ScalarList { arg: usize, dtype: DType },
    /// (seed, offset) of the op's generator; `count` values are drawn.
    Rng { count: u64 },
}

/// What each program output is.
#[derive(Clone, Debug)]
pub enum Output {
    /// A fresh tensor: 1-D buffer of `dtype`, viewed with `shape` and
    /// `strides` (contiguous, or the inputs' layout for pointwise ops).
    New { dtype: DType, shape: Vec<i64>, strides: Vec<i64> },
    /// The new contents of storage `slot`, now of `dtype`.
    Slot { slot: usize, dtype: DType },
    /// A rank-0 number to return to Python (a host sync).
    Number { dtype: DType },
    /// A rank-0 flag that is true when the input was bad; the message says why.
    Check { message: String },
}

/// How each schema return is produced from the outputs.
#[derive(Clone, Debug)]
pub enum Ret {
    New(usize),
    NewList(Vec<usize>),
    Alias(usize),
    /// An out= argument whose shape differs: resize it, copy output in.
    ResizeCopy { arg: usize, output: usize },
    Number(usize),
    None,
    /// A tensor return the lowering marked as not computed (output_mask).
    Undefined,
}

/// A compiled op program plus how to feed it and use its results.
pub struct Program {
    pub text: String,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub rets: Vec<Ret>,
}

/// The distinct storages of a call, in first-use order, with each tensor
/// view's slot. Views are numbered in argument order (lists flattened).
pub struct Slots<'a> {
    pub storages: Vec<&'a Storage>,
    pub views: Vec<(usize, TensorRef<'a>, u8 /*write*/, usize /*arg*/)>,
}

pub fn collect_slots<'a>(call: &Call<'a>) -> Slots<'a> {
    let mut storages: Vec<&'a Storage> = Vec::new();
    let mut views = Vec::new();
    let slot_of = |s: &'a Storage, storages: &mut Vec<&'a Storage>| -> usize {
        match storages.iter().position(|x| std::ptr::eq(*x, s)) {
            Some(i) => i,
            None => {
                storages.push(s);
                storages.len() - 1
            }
        }
    };
    for (ai, a) in call.args.iter().enumerate() {
        match &a.value {
            CallValue::Tensor(t) => {
                let slot = slot_of(t.storage, &mut storages);
                views.push((slot, t.clone(), a.write, ai));
            }
            CallValue::TensorList(ts) => {
                for t in ts.iter().flatten() {
                    let slot = slot_of(t.storage, &mut storages);
                    views.push((slot, t.clone(), a.write, ai));
                }
            }
            _ => {}
        }
    }
    Slots { storages, views }
}

fn dtype_code(d: DType) -> i64 {
    lowering::dtypes::to_torch(d) as i64
}

/// The state a storage will be read in: its buffer's dtype and length, or
/// (never written) zeros of the reading view's dtype.
pub fn slot_layout(storage: &Storage, reader: DType) -> (DType, i64) {
    let st = storage.state();
    let dtype = if st.buffer.is_some() { st.dtype } else { reader };
    (dtype, (storage.nbytes / dtype.size_bytes()) as i64)
}

/// Whether the program must read the storage's current contents: some view
/// of it is read, or written only in part.
fn slot_is_read(slots: &Slots, slot: usize) -> bool {
    slots.views.iter().any(|(s, t, w, _)| *s == slot && (*w != 2 || !t.is_whole()))
}

/// The cache key of a call: everything the program depends on.
/// The device is not part of it: executables are portable across devices.
pub fn signature(call: &Call, slots: &Slots, static_scalars: bool) -> Vec<i64> {
    let mut sig: Vec<i64> = Vec::with_capacity(128);
    for (slot, storage) in slots.storages.iter().enumerate() {
        let reader = slots.views.iter().find(|v| v.0 == slot).map(|v| v.1.dtype).unwrap_or(DType::U8);
        let (dt, n) = slot_layout(storage, reader);
        let written = storage.state().buffer.is_some();
        sig.extend([-1, dtype_code(dt), n, slot_is_read(slots, slot) as i64, written as i64]);
    }
    let mut vi = 0;
    for a in &call.args {
        sig.push(a.write as i64);
        match &a.value {
            CallValue::None => sig.push(0),
            CallValue::Tensor(_) => {
                push_view(&mut sig, slots, vi);
                vi += 1;
            }
            CallValue::TensorList(ts) => {
                sig.extend([2, ts.len() as i64]);
                for t in ts {
                    if t.is_some() {
                        push_view(&mut sig, slots, vi);
                        vi += 1;
                    } else {
                        sig.push(-2);
                    }
                }
            }
            CallValue::HostTensor { dtype, sizes, .. } => {
                sig.extend([3, dtype_code(*dtype), sizes.len() as i64]);
                sig.extend(sizes);
            }
            CallValue::Scalar { dtype, f, i, from_tensor } => {
                sig.extend([4, dtype_code(*dtype), *from_tensor as i64]);
                if static_scalars {
                    sig.push(if dtype.is_float() || dtype.is_complex() { f.to_bits() as i64 } else { *i });
                    if dtype.is_complex() {
                        sig.push(*i); // the imaginary part's bits
                    }
                }
            }
            CallValue::ScalarList { dtype, values } => {
                sig.extend([15, dtype_code(*dtype), values.len() as i64]);
                if static_scalars {
                    sig.extend(values.iter().map(|(f, i)| if dtype.is_float() { f.to_bits() as i64 } else { *i }));
                }
            }
            CallValue::Int(v) => sig.extend([5, *v]),
            CallValue::Float(v) => sig.extend([6, v.to_bits() as i64]),
            CallValue::Bool(v) => sig.extend([7, *v as i64]),
            CallValue::IntList(v) => {
                sig.extend([8, v.len() as i64]);
                sig.extend(v);
            }
            CallValue::FloatList(v) => {
                sig.extend([9, v.len() as i64]);
                sig.extend(v.iter().map(|x| x.to_bits() as i64));
            }
            CallValue::BoolList(v) => {
                sig.extend([10, v.len() as i64]);
                sig.extend(v.iter().map(|x| *x as i64));
            }
            CallValue::Str(s) => {
                sig.extend([11, s.len() as i64]);
                sig.extend(s.bytes().map(|b| b as i64));
            }
            CallValue::Generator(_) => sig.push(12),
            CallValue::Device(d) => sig.extend([13, *d]),
            CallValue::Other(_) => sig.push(14),
        }
    }
    sig
}

/// The box layout of a view (see lowering::views::box_plan), for its
/// storage read in the view's dtype.
pub fn view_box(t: &TensorRef) -> Option<BoxPlan> {
    if t.is_whole() {
        return None;
    }
    let n = (t.storage.nbytes / t.dtype.size_bytes()) as i64;
    let spec = ViewSpec { dtype: t.dtype, sizes: t.sizes.to_vec(), strides: t.strides.to_vec() };
    box_plan(&spec, n, t.offset)
}

fn push_view(sig: &mut Vec<i64>, slots: &Slots, vi: usize) {
    let (slot, t, _, _) = &slots.views[vi];
    let boxed = view_box(t).is_some() as i64;
    sig.extend([
        1,
        *slot as i64,
        dtype_code(t.dtype),
        t.wrapped as i64,
        t.is_whole() as i64,
        t.is_whole_permuted() as i64,
        boxed,
        t.math.0 as i64,
        t.sizes.len() as i64,
    ]);
    sig.extend(t.sizes.iter());
    sig.extend(t.strides.iter());
}

/// How the storages of a call enter the program being built: as arguments
/// (Strict and Debug Eager), or as values already in a pending graph or
/// captured buffers (Fused Eager).
pub trait SlotSource {
    /// The current contents of storage `slot` as a 1-D value, and its dtype.
    /// `reader` is the dtype of the first view reading it (used when the
    /// storage was never written).
    fn read(&mut self, b: &mut Builder, slots: &Slots, slot: usize, reader: DType) -> Result<(Value, DType)>;
    /// Whether Python numbers and view offsets are constants of the program
    /// instead of arguments: a compiled graph's are fixed, and XLA folds
    /// them (static slices, folded scales). Eager ops keep them arguments
    /// so that `x*2.0` and `x*3.0` share one executable.
    fn constants_are_static(&self) -> bool {
        false
    }
    /// Whether view offsets are program constants (implied by
    /// `constants_are_static`). A Fused Eager graph's usually are: XLA then
    /// slices statically and fuses across the slice.
    fn offsets_are_static(&self) -> bool {
        self.constants_are_static()
    }
}

/// Strict Eager: each storage read becomes an argument of the op's program.
pub struct SlotArgs<'i> {
    pub inputs: &'i mut Vec<Input>,
}

impl SlotSource for SlotArgs<'_> {
    fn read(&mut self, b: &mut Builder, slots: &Slots, slot: usize, reader: DType) -> Result<(Value, DType)> {
        let storage = slots.storages[slot];
        let (dtype, n) = slot_layout(storage, reader);
        let v = if storage.state().buffer.is_some() {
            self.inputs.push(Input::Slot { slot, dtype, n });
            b.arg(TensorType::new(dtype, [n]))
        } else {
            // Never written (torch.empty): its contents are undefined, so
            // zeros made in the program do, with no upload.
            b.splat(dtype, 0.0, &[n])?
        };
        Ok((v, dtype))
    }
}

/// An op recorded into a builder: its outputs (fresh tensors, updated
/// storages, checks, numbers) and how they map onto the schema's returns.
pub struct Recorded {
    pub outputs: Vec<Output>,
    pub results: Vec<Value>,
    pub rets: Vec<Ret>,
}

/// Builds the program of a call (on a cache miss).
pub fn build(call: &Call, slots: &Slots, entry: &lowering::OpEntry, dynamic_size: Option<i64>) -> Result<Program> {
    let mut b = Builder::new();
    let mut inputs = Vec::new();
    let mut slot_inputs = Vec::new();
    let rec = {
        let mut source = SlotArgs { inputs: &mut slot_inputs };
        record(&mut b, call, slots, entry, dynamic_size, &mut source, &mut inputs)?
    };
    // Slot arguments were created first (see `record`), then the rest.
    slot_inputs.extend(inputs);
    let text = b.finish(&rec.results);
    Ok(Program { text, inputs: slot_inputs, outputs: rec.outputs, rets: rec.rets })
}

/// Records one op into `b`. Storage reads go through `source` (which may
/// add arguments); every other argument this adds is pushed to `inputs`, in
/// the order the arguments are created.
pub fn record(
    b: &mut Builder,
    call: &Call,
    slots: &Slots,
    entry: &lowering::OpEntry,
    dynamic_size: Option<i64>,
    source: &mut dyn SlotSource,
    inputs: &mut Vec<Input>,
) -> Result<Recorded> {
    // Storages that the op reads, in slot order.
    let mut slot_args: Vec<Option<(Value, DType)>> = Vec::new();
    for slot in 0..slots.storages.len() {
        if slot_is_read(slots, slot) {
            let reader = slots.views.iter().find(|v| v.0 == slot).map(|v| v.1.dtype).unwrap_or(DType::U8);
            slot_args.push(Some(source.read(b, slots, slot, reader)?));
        } else {
            slot_args.push(None);
        }
    }
    let mut typed: HashMap<(usize, DType), Value> = HashMap::new();

    // Views: an offset input where the view is not its whole storage.
    let static_constants = source.constants_are_static();
    let static_offsets = source.offsets_are_static();
    let mut view_offsets: Vec<Option<Value>> = Vec::new();
    let mut view_values: Vec<Option<Value>> = Vec::new();
    for (vi, (slot, t, write, _)) in slots.views.iter().enumerate() {
        let offset = if t.is_whole() || t.is_whole_permuted() {
            None
        } else if static_offsets {
            Some(b.constant_i64(DType::I64, t.offset))
        } else {
            inputs.push(Input::Offset { view: vi });
            Some(b.arg(TensorType::scalar(DType::I64)))
        };
        view_offsets.push(offset);
        if *write != 0 && t.math != MathBits::NONE {
            return Err(written_math_view(call, t.math));
        }
        if *write == 2 {
            view_values.push(None);
            continue;
        }
        let storage = typed_slot(b, &slot_args, &mut typed, *slot, t.dtype)?;
        let spec = ViewSpec { dtype: t.dtype, sizes: t.sizes.to_vec(), strides: t.strides.to_vec() };
        let plan = view_box(t);
        let mut value = read_view(b, storage, &spec, offset, plan.as_ref())?;
        if t.math.conj() && t.dtype.is_complex() {
            value = b.conj(value)?;
        }
        if t.math.neg() {
            value = b.neg(value)?;
        }
        view_values.push(Some(value));
    }

    // Lowering arguments.
    let mut complex_scalars = Vec::new();
    let mut largs = Args { op: call.op.to_string(), items: Vec::with_capacity(call.args.len()) };
    let mut vi = 0;
    for (ai, a) in call.args.iter().enumerate() {
        let item = match &a.value {
            CallValue::None => Arg::None,
            CallValue::Tensor(t) => {
                let v = view_values[vi];
                vi += 1;
                match v {
                    Some(value) => Arg::Tensor(TensorArg {
                        value,
                        dtype: t.dtype,
                        shape: t.sizes.to_vec(),
                        wrapped_number: t.wrapped,
                        contiguous: t.is_contiguous(),
                    }),
                    None => Arg::None,
                }
            }
            CallValue::TensorList(ts) => {
                let mut list = Vec::with_capacity(ts.len());
                for t in ts {
                    match t {
                        Some(t) => {
                            let v = view_values[vi];
                            vi += 1;
                            list.push(v.map(|value| TensorArg {
                                value,
                                dtype: t.dtype,
                                shape: t.sizes.to_vec(),
                                wrapped_number: t.wrapped,
                                contiguous: t.is_contiguous(),
                            }));
                        }
                        None => list.push(None),
                    }
                }
                if a.write == 2 {
                    Arg::None
                } else {
                    Arg::TensorList(list)
                }
            }
            CallValue::HostTensor { dtype, sizes, .. } => {
                inputs.push(Input::Host { arg: ai });
                let value = b.arg(TensorType::new(*dtype, sizes.clone()));
                Arg::Tensor(TensorArg { value, dtype: *dtype, shape: sizes.clone(), wrapped_number: false, contiguous: true })
            }
            CallValue::Scalar { dtype, f, i, from_tensor } => {
                // A CPU tensor's value stays an argument: it changes between calls.
                let value = if static_constants && !*from_tensor {
                    if let Some(part) = dtype.complex_part() {
                        let re = b.constant_f64(part, *f);
                        let im = b.constant_f64(part, crate::call::imag_part(*i));
                        b.complex(re, im)?
                    } else if dtype.is_float() {
                        b.constant_f64(*dtype, *f)
                    } else {
                        b.constant_i64(*dtype, *i)
                    }
                } else {
                    inputs.push(Input::Scalar { arg: ai, dtype: *dtype });
                    b.arg(TensorType::scalar(*dtype))
                };
                if dtype.is_complex() {
                    complex_scalars.push(value);
                }
                Arg::Scalar(ScalarArg {
                    value,
                    dtype: *dtype,
                    from_tensor: *from_tensor,
                    literal: if dtype.is_float() || dtype.is_complex() { *f } else { *i as f64 },
                })
            }
            CallValue::ScalarList { dtype, values } => {
                let all = if static_constants {
                    None
                } else {
                    inputs.push(Input::ScalarList { arg: ai, dtype: *dtype });
                    Some(b.arg(TensorType::new(*dtype, [values.len() as i64])))
                };
                let mut list = Vec::with_capacity(values.len());
                for (k, (f, i)) in values.iter().enumerate() {
                    let value = match all {
                        Some(all) => {
                            let one = b.slice(all, &[k as i64], &[k as i64 + 1], &[1])?;
                            b.reshape(one, &[])?
                        }
                        None if dtype.is_float() => b.constant_f64(*dtype, *f),
                        None => b.constant_i64(*dtype, *i),
                    };
                    list.push(ScalarArg {
                        value,
                        dtype: *dtype,
                        from_tensor: false,
                        literal: if dtype.is_float() { *f } else { *i as f64 },
                    });
                }
                Arg::ScalarList(list)
            }
            CallValue::Int(v) => Arg::Int(*v),
            CallValue::Float(v) => Arg::Float(*v),
            CallValue::Bool(v) => Arg::Bool(*v),
            CallValue::IntList(v) => Arg::IntList(v.clone()),
            CallValue::FloatList(v) => Arg::FloatList(v.clone()),
            CallValue::BoolList(v) => Arg::BoolList(v.clone()),
            CallValue::Str(s) => Arg::Str(s.clone()),
            CallValue::Generator(_) => Arg::Generator,
            CallValue::Device(d) => Arg::Device(*d),
            CallValue::Other(s) => Arg::Other(s.clone()),
        };
        largs.items.push(item);
    }

    let mut lx = Lower::new(b, call.op);
    lx.dynamic_size = dynamic_size;
    lx.complex_scalars = complex_scalars;
    lx.out_dtype = call.args.iter().find_map(|a| match &a.value {
        CallValue::Tensor(t) if a.write == 2 => Some(t.dtype),
        _ => None,
    });
    let values = (entry.lower)(&mut lx, &largs)?;
    let checks = std::mem::take(&mut lx.checks);
    let list_len = lx.list_len;
    let undefined_returns = std::mem::take(&mut lx.undefined_returns);
    if let Some((_, count)) = lx.rng {
        inputs.push(Input::Rng { count });
    }
    drop(lx);

    // Map values onto returns and written arguments.
    let mut outputs: Vec<Output> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let mut rets = Vec::new();
    let mut current: HashMap<usize, (Value, DType)> = HashMap::new();
    let mut next = 0usize;
    let mut take = |op: &str| -> Result<Value> {
        let v = values.get(next).copied().ok_or_else(|| {
            EngineError::runtime(format!("{op}: the lowering produced too few results (internal error)"))
        })?;
        next += 1;
        Ok(v)
    };
    let mut aliased = vec![false; call.args.len()];
    for (r, &alias) in call.ret_alias.iter().enumerate() {
        if alias >= 0 {
            aliased[alias as usize] = true;
        }
        let kind = call.ret_kind.get(r).copied().unwrap_or(0);
        if alias >= 0 {
            let arg = alias as usize;
            let v = take(call.op)?;
            let ret = write_arg(b, call, slots, arg, &[v], &view_offsets, &slot_args, &mut typed, &mut current, &mut outputs, &mut results)?;
            rets.push(ret);
        } else if kind == RET_NUMBER {
            let v = take(call.op)?;
            outputs.push(Output::Number { dtype: b.ty(v).dtype });
            results.push(v);
            rets.push(Ret::Number(outputs.len() - 1));
        } else if kind == RET_LIST {
            let n = list_len.unwrap_or(values.len().saturating_sub(call.ret_alias.len() - 1));
            let mut idx = Vec::with_capacity(n);
            for _ in 0..n {
                let v = take(call.op)?;
                idx.push(push_new(b, call, v, &mut outputs, &mut results)?);
            }
            rets.push(Ret::NewList(idx));
        } else if kind == RET_TENSOR {
            let v = take(call.op)?;
            if undefined_returns.contains(&r) {
                rets.push(Ret::Undefined); // its value is dead: XLA drops it
            } else {
                rets.push(Ret::New(push_new(b, call, v, &mut outputs, &mut results)?));
            }
        } else {
            rets.push(Ret::None);
        }
    }
    // Written arguments no return stands for (void in-place ops, running stats).
    for (ai, a) in call.args.iter().enumerate() {
        if a.write == 0 || aliased[ai] {
            continue;
        }
        let n = match &a.value {
            CallValue::Tensor(_) => 1,
            CallValue::TensorList(ts) => ts.iter().flatten().count(),
            _ => 0,
        };
        if n == 0 {
            continue;
        }
        let mut vs = Vec::with_capacity(n);
        for _ in 0..n {
            vs.push(take(call.op)?);
        }
        write_arg(b, call, slots, ai, &vs, &view_offsets, &slot_args, &mut typed, &mut current, &mut outputs, &mut results)?;
    }
    // Updated storages come out whole.
    let mut written: Vec<_> = current.into_iter().collect();
    written.sort_by_key(|(slot, _)| *slot);
    for (slot, (v, dtype)) in written {
        outputs.push(Output::Slot { slot, dtype });
        results.push(v);
    }
    for (flag, message) in checks {
        outputs.push(Output::Check { message });
        results.push(flag);
    }
    Ok(Recorded { outputs, results, rets })
}

/// A write into a view that still carries a lazy conjugate/negative bit
/// would store the wrong values (the bit applies to every later read).
fn written_math_view(call: &Call, math: MathBits) -> EngineError {
    let what = if math.conj() { "conjugate (z.conj())" } else { "negative (_neg_view())" };
    EngineError::new(
        ErrorKind::Runtime,
        format!(
            "{}: cannot write into a {what} view on tpu; materialize it first with \
             .resolve_conj() / .resolve_neg(), or write into the original tensor",
            call.op
        ),
    )
}

/// Makes `v` a new output tensor. A pointwise op's output takes its inputs'
/// layout (so do a few untagged ones, such as flip), and convolutions,
/// batch norm, pooling and resampling keep a channels-last input
/// channels-last (`layout.rs`): the value is then stored in that order.
fn push_new(b: &mut Builder, call: &Call, v: Value, outputs: &mut Vec<Output>, results: &mut Vec<Value>) -> Result<usize> {
    let ty = b.ty(v).clone();
    let layout = if call.pointwise {
        crate::layout::pointwise_strides(call, &ty.shape)
    } else if !crate::fused::in_compiled_graph() {
        // Compiled graphs keep what the fake tensors that traced them
        // predicted: contiguous, as upstream's meta kernels decide for
        // devices other than cuda and cpu.
        crate::layout::untagged_pointwise_strides(call, &ty.shape)
            .or_else(|| crate::layout::channels_last_strides_of(call, &ty.shape))
    } else {
        None
    };
    let (stored, strides) = match layout {
        Some(strides) => (b.transpose(v, &crate::layout::storage_order(&strides, &ty.shape))?, strides),
        None => (v, contiguous_strides(&ty.shape)),
    };
    // (A size past usize counts as too large, not as a wrapped small one.)
    let nbytes = (ty.numel().max(0) as usize).checked_mul(ty.dtype.size_bytes()).unwrap_or(usize::MAX);
    crate::device_memory::check_capacity(nbytes, call.device()).map_err(|e| crate::dispatch::with_context(call, e))?;
    let flat = b.reshape(stored, &[ty.numel()])?;
    outputs.push(Output::New { dtype: ty.dtype, shape: ty.shape, strides });
    results.push(flat);
    Ok(outputs.len() - 1)
}

fn typed_slot(
    b: &mut Builder,
    slot_args: &[Option<(Value, DType)>],
    typed: &mut HashMap<(usize, DType), Value>,
    slot: usize,
    dtype: DType,
) -> Result<Value> {
    if let Some(v) = typed.get(&(slot, dtype)) {
        return Ok(*v);
    }
    let (arg, from) = slot_args[slot]
        .ok_or_else(|| EngineError::runtime("internal error: a storage that is read was not made an input"))?;
    let v = storage_as(b, arg, from, dtype)?;
    typed.insert((slot, dtype), v);
    Ok(v)
}

/// Writes `values` into the written tensor (or tensor list) argument `arg`.
#[allow(clippy::too_many_arguments)]
fn write_arg(
    b: &mut Builder,
    call: &Call,
    slots: &Slots,
    arg: usize,
    values: &[Value],
    view_offsets: &[Option<Value>],
    slot_args: &[Option<(Value, DType)>],
    typed: &mut HashMap<(usize, DType), Value>,
    current: &mut HashMap<usize, (Value, DType)>,
    outputs: &mut Vec<Output>,
    results: &mut Vec<Value>,
) -> Result<Ret> {
    let targets: Vec<usize> = (0..slots.views.len()).filter(|&vi| slots.views[vi].3 == arg).collect();
    if targets.len() != values.len() {
        return Err(EngineError::runtime(format!(
            "{}: the lowering produced {} values for {} written tensors (internal error)",
            call.op,
            values.len(),
            targets.len()
        )));
    }
    for (&vi, &value) in targets.iter().zip(values) {
        let (slot, t, write, _) = &slots.views[vi];
        let vty = b.ty(value).clone();
        // Ops with several out= tensors (sort, topk, max.dim, ...) take each
        // at exactly its result's dtype on the CPU: an index is never cast.
        if *write == 2 && vty.dtype != t.dtype && call.args.iter().filter(|a| a.write == 2).count() > 1 {
            return Err(EngineError::new(
                ErrorKind::Runtime,
                format!(
                    "{}: Expected out tensor to have dtype {}, but got {} instead",
                    call.op,
                    c10_name(vty.dtype),
                    c10_name(t.dtype)
                ),
            ));
        }
        if !lowering::promote::can_cast(vty.dtype, t.dtype) {
            // torch.cat words this its own way, and raises TypeError.
            let (kind, what) = if call.op.starts_with("aten::cat") {
                (ErrorKind::Type, "torch.cat(): input types".to_string())
            } else {
                (ErrorKind::Runtime, format!("result type {}", short_name(vty.dtype)))
            };
            return Err(EngineError::new(
                kind,
                format!("{}: {what} can't be cast to the desired output type {}", call.op, short_name(t.dtype)),
            ));
        }
        if vty.shape[..] != t.sizes[..] {
            if *write == 2 && targets.len() == 1 {
                let cast = if vty.dtype != t.dtype { b.convert(value, t.dtype)? } else { value };
                let output = push_new(b, call, cast, outputs, results)?;
                return Ok(Ret::ResizeCopy { arg, output });
            }
            return Err(EngineError::new(
                ErrorKind::Runtime,
                format!(
                    "{}: output with shape {:?} doesn't match the broadcast shape {:?}",
                    call.op, t.sizes, vty.shape
                ),
            ));
        }
        let value = if vty.dtype != t.dtype {
            if t.dtype == DType::Bool {
                let zero = b.splat(vty.dtype, 0.0, &vty.shape)?;
                b.compare(value, zero, stablehlo::CompareDir::Ne)?
            } else {
                b.convert(value, t.dtype)?
            }
        } else {
            value
        };
        let spec = ViewSpec { dtype: t.dtype, sizes: t.sizes.to_vec(), strides: t.strides.to_vec() };
        let new_storage = if t.is_whole() {
            b.reshape(value, &[t.numel()])?
        } else {
            let base = match current.get(slot) {
                Some((v, d)) if *d == t.dtype => *v,
                Some((v, d)) => storage_as(b, *v, *d, t.dtype)?,
                None => typed_slot(b, slot_args, typed, *slot, t.dtype)?,
            };
            write_view(b, base, &spec, view_offsets[vi], value, view_box(t).as_ref())?
        };
        current.insert(*slot, (new_storage, t.dtype));
    }
    Ok(Ret::Alias(arg))
}

/// A dtype as c10 prints it in its out= messages ("float", "long int").
fn c10_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::I64 => "long int",
        DType::I32 => "int",
        DType::I16 => "short int",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
        DType::C64 => "c10::complex<float>",
        DType::C128 => "c10::complex<double>",
        _ => "another dtype",
    }
}

fn short_name(d: DType) -> String {
    let n = lowering::dtypes::name(d);
    let n = n.trim_start_matches("torch.");
    // torch prints ScalarType names here: Float, Long, ...
    match n {
        "float32" => "Float",
        "float64" => "Double",
        "float16" => "Half",
        "bfloat16" => "BFloat16",
        "int64" => "Long",
        "int32" => "Int",
        "int16" => "Short",
        "int8" => "Char",
        "uint8" => "Byte",
        "bool" => "Bool",
        other => other,
    }
    .to_string()
}
