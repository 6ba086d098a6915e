//! The program builder: owns the SSA values of one block, records ops as
//! MLIR generic-form text, and prints the finished `module { func.func @main }`.
//!
//! Invariants:
//! - A [`Value`] is an index into the `types`/`names` tables of the builder that
//!   created it; values of a region builder are only valid inside that region.
//! - SSA ids come from one counter shared (by hand-off) between a builder and the
//!   region builders it spawns, so every name in a function is unique.
//! - Every recorded op already passed shape/dtype inference; its text is complete
//!   except for the indentation of the enclosing block.

use crate::error::{bail, Result};
use crate::types::TensorType;
use crate::DType;

/// An SSA value (function argument, block argument or op result) of a [`Builder`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Value(u32);

impl Value {
    /// Position of this value in its builder's table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// How far a [`Builder`] had got (see [`Builder::mark`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    values: usize,
    args: usize,
    ops: usize,
    next_id: u32,
}

impl Mark {
    /// How many values existed: values made since have indices from here on.
    pub fn values(&self) -> usize {
        self.values
    }
}

/// Builds one function body (the top level `@main`, or a region block).
#[derive(Clone, Debug, Default)]
pub struct Builder {
    types: Vec<TensorType>,
    names: Vec<String>,
    args: Vec<Value>,
    /// Op texts in program order, without block indentation (may span lines).
    ops: Vec<String>,
    next_id: u32,
    in_region: bool,
}

impl Builder {
    pub fn new() -> Self {
        Builder::default()
    }

    /// Appends an argument (a function argument of `@main`; inside a region
    /// builder, a block argument).
    pub fn arg(&mut self, ty: TensorType) -> Value {
        let name = if self.in_region {
            self.fresh_id().to_string()
        } else {
            format!("arg{}", self.args.len())
        };
        let v = self.push_value(ty, format!("%{name}"));
        self.args.push(v);
        v
    }

    /// The arguments added so far, in order.
    pub fn args(&self) -> &[Value] {
        &self.args
    }

    /// The type of `v`. Panics if `v` does not belong to this builder.
    pub fn ty(&self, v: Value) -> &TensorType {
        self.types
            .get(v.index())
            .unwrap_or_else(|| panic!("stablehlo: {v:?} does not belong to this builder"))
    }

    pub fn dtype(&self, v: Value) -> DType {
        self.ty(v).dtype
    }

    pub fn shape(&self, v: Value) -> &[i64] {
        &self.ty(v).shape
    }

    /// A point to roll back to with [`Builder::truncate`].
    pub fn mark(&self) -> Mark {
        Mark { values: self.types.len(), args: self.args.len(), ops: self.ops.len(), next_id: self.next_id }
    }

    /// Forgets every value, argument and op recorded since `mark`: a caller
    /// that fails halfway through emitting an op leaves the builder as it was.
    /// Values created since then must no longer be used.
    pub fn truncate(&mut self, mark: Mark) {
        self.types.truncate(mark.values);
        self.names.truncate(mark.values);
        self.args.truncate(mark.args);
        self.ops.truncate(mark.ops);
        self.next_id = mark.next_id;
    }

    /// The whole module text, with `results` returned from `@main`.
    /// Panics if a result does not belong to this builder.
    pub fn finish(&self, results: &[Value]) -> String {
        self.finish_aliased(results, &[])
    }

    /// Like [`finish`](Self::finish), and declares that argument `a` may
    /// share its memory with result `r` for each `(a, r)` in `aliases`
    /// (`tf.aliasing_output`, which XLA turns into input/output aliasing:
    /// a donated argument buffer is reused for that result).
    pub fn finish_aliased(&self, results: &[Value], aliases: &[(usize, usize)]) -> String {
        let arg_list: Vec<String> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, &a)| match aliases.iter().find(|(arg, _)| *arg == i) {
                Some((_, r)) => format!("{}: {} {{tf.aliasing_output = {r} : i32}}", self.names[a.index()], self.ty(a)),
                None => format!("{}: {}", self.names[a.index()], self.ty(a)),
            })
            .collect();
        let result_types: Vec<String> = results.iter().map(|&r| self.ty(r).to_string()).collect();
        let mut out = String::from("module {\n");
        out.push_str(&format!(
            "  func.func @main({}) -> ({}) {{\n",
            arg_list.join(", "),
            result_types.join(", ")
        ));
        for op in &self.ops {
            push_indented(&mut out, op, "    ");
        }
        let ret = self.op_text("func.return", results, &[], &[], &[]);
        push_indented(&mut out, &ret, "    ");
        out.push_str("  }\n}\n");
        out
    }

    // ----- crate-internal machinery used by the op files -----

    fn fresh_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn push_value(&mut self, ty: TensorType, name: String) -> Value {
        let v = Value(self.types.len() as u32);
        self.types.push(ty);
        self.names.push(name);
        v
    }

    /// The type of `v`, or an error naming `op` when `v` is foreign.
    pub(crate) fn type_of(&self, op: &'static str, v: Value) -> Result<TensorType> {
        match self.types.get(v.index()) {
            Some(t) => Ok(t.clone()),
            None => bail!(op, "{v:?} does not belong to this builder"),
        }
    }

    fn op_text(
        &self,
        op: &str,
        operands: &[Value],
        regions: &[String],
        attrs: &[(&str, String)],
        results: &[TensorType],
    ) -> String {
        use std::fmt::Write;
        // One buffer, no intermediate strings: this runs for every op of
        // every Fused Eager step.
        let mut s = String::with_capacity(96 + 48 * operands.len());
        let _ = write!(s, "\"{op}\"(");
        for (i, v) in operands.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&self.names[v.index()]);
        }
        s.push(')');
        if !regions.is_empty() {
            let _ = write!(s, " ({})", regions.join(", "));
        }
        if !attrs.is_empty() {
            s.push_str(" {");
            for (i, (k, v)) in attrs.iter().enumerate() {
                let _ = write!(s, "{}{k} = {v}", if i > 0 { ", " } else { "" });
            }
            s.push('}');
        }
        s.push_str(" : (");
        for (i, v) in operands.iter().enumerate() {
            let _ = write!(s, "{}{}", if i > 0 { ", " } else { "" }, self.ty(*v));
        }
        s.push_str(") -> ");
        match results.len() {
            0 => s.push_str("()"),
            1 => {
                let _ = write!(s, "{}", results[0]);
            }
            _ => {
                s.push('(');
                for (i, t) in results.iter().enumerate() {
                    let _ = write!(s, "{}{t}", if i > 0 { ", " } else { "" });
                }
                s.push(')');
            }
        }
        s
    }

    /// Records an op whose operands/attributes were already checked and returns
    /// its result values (named `%N`, or `%N#i` for multi-result ops).
    pub(crate) fn emit(
        &mut self,
        op: &str,
        operands: &[Value],
        regions: &[String],
        attrs: &[(&str, String)],
        results: Vec<TensorType>,
    ) -> Vec<Value> {
        let text = self.op_text(op, operands, regions, attrs, &results);
        let id = self.fresh_id();
        let n = results.len();
        let line = if n == 1 {
            format!("%{id} = {text}")
        } else {
            format!("%{id}:{n} = {text}")
        };
        self.ops.push(line);
        results
            .into_iter()
            .enumerate()
            .map(|(i, ty)| {
                let name = if n == 1 {
                    format!("%{id}")
                } else {
                    format!("%{id}#{i}")
                };
                self.push_value(ty, name)
            })
            .collect()
    }

    /// [`Builder::emit`] for single-result ops.
    pub(crate) fn emit1(
        &mut self,
        op: &str,
        operands: &[Value],
        attrs: &[(&str, String)],
        result: TensorType,
    ) -> Value {
        self.emit(op, operands, &[], attrs, vec![result])[0]
    }

    /// Builds a region with one block whose arguments have `arg_types`; `body`
    /// fills it and returns the values to `stablehlo.return`. Returns the region
    /// text (`{ ^bb0(...): ... }`) and the returned types.
    pub(crate) fn region(
        &mut self,
        op: &'static str,
        arg_types: &[TensorType],
        body: impl FnOnce(&mut Builder, &[Value]) -> Result<Vec<Value>>,
    ) -> Result<(String, Vec<TensorType>)> {
        let mut child = Builder {
            next_id: self.next_id,
            in_region: true,
            ..Builder::default()
        };
        let args: Vec<Value> = arg_types.iter().map(|t| child.arg(t.clone())).collect();
        let returned = body(&mut child, &args)?;
        self.next_id = child.next_id;
        if returned.is_empty() {
            bail!(op, "region body returned no values");
        }
        let mut ret_types = Vec::new();
        for &r in &returned {
            ret_types.push(child.type_of(op, r)?);
        }
        let header: Vec<String> = args
            .iter()
            .map(|&a| format!("{}: {}", child.names[a.index()], child.ty(a)))
            .collect();
        let mut text = format!("{{\n  ^bb0({}):\n", header.join(", "));
        for op_text in &child.ops {
            push_indented(&mut text, op_text, "    ");
        }
        let ret = child.op_text("stablehlo.return", &returned, &[], &[], &[]);
        push_indented(&mut text, &ret, "    ");
        text.push('}');
        Ok((text, ret_types))
    }
}

fn push_indented(out: &mut String, text: &str, indent: &str) {
    for line in text.lines() {
        out.push_str(indent);
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_module() {
        let mut b = Builder::new();
        let x = b.arg(TensorType::new(DType::F32, [4]));
        assert_eq!(
            b.finish(&[x]),
            "module {\n  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {\n    \"func.return\"(%arg0) : (tensor<4xf32>) -> ()\n  }\n}\n"
        );
    }
}
