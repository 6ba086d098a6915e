// The boxed kernel every computing op reaches: it flattens the operator's
// arguments into TpuArg records, hands them to the Rust engine, and pushes
// the engine's results back. Optionally runs unlowered ops on the CPU.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "tpu_common.h"

namespace torch_tpu {

TpuTensor describe(const at::Tensor& t);

namespace {

// Storage for one call's flattened arguments, at stable addresses. Lists
// (not deques, which allocate even when empty) for the rare kinds: the
// common call, tensors and numbers only, allocates just the two vectors.
struct Marshal {
  std::vector<TpuArg> args;
  std::vector<TpuTensor> singles;  // one per Tensor argument at most: never reallocates
  std::list<std::vector<TpuTensor>> tensor_lists;
  std::list<std::vector<int64_t>> int_lists;
  std::list<std::vector<double>> float_lists;
  std::list<at::Tensor> keep_alive;  // contiguous copies of CPU tensors
  std::list<std::string> strings;

  explicit Marshal(size_t nargs) {
    args.reserve(nargs);
    singles.reserve(nargs);
  }

  TpuTensor tensor(const at::Tensor& t) {
    if (!t.defined()) {
      TpuTensor d{};
      d.dtype = -1;
      return d;
    }
    if (t.device().type() == kTpu) return describe(t);
    // A CPU tensor: the engine decides whether this op may take it.
    keep_alive.push_back(t.contiguous());
    const at::Tensor& c = keep_alive.back();
    TpuTensor d = describe(c);
    d.storage = nullptr;
    d.host_data = c.data_ptr();
    return d;
  }

  // A complex number has no f/i form: its (real, imaginary) parts go in floats.
  void add_complex(TpuArg& a, c10::complex<double> z) {
    float_lists.push_back({z.real(), z.imag()});
    a.floats = float_lists.back().data();
    a.len = 2;
  }

  void add(const c10::IValue& v, int32_t is_write) {
    TpuArg a{};
    a.is_write = is_write;
    if (v.isNone()) {
      a.kind = TPU_ARG_NONE;
    } else if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      TORCH_INTERNAL_ASSERT(singles.size() < singles.capacity());
      singles.push_back(tensor(t));
      a.tensors = &singles.back();
      a.len = 1;
      if (!t.defined()) {
        a.kind = TPU_ARG_NONE;
      } else if (t.device().type() != kTpu && t.dim() == 0) {
        a.kind = TPU_ARG_CPU_SCALAR;
        if (t.is_complex()) add_complex(a, t.item<c10::complex<double>>());
        else if (at::isFloatingType(t.scalar_type())) a.f = t.item<double>();
        else a.i = t.item<int64_t>();
      } else {
        a.kind = TPU_ARG_TENSOR;
      }
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      std::vector<TpuTensor> ts;
      ts.reserve(list.size());
      for (const at::Tensor& t : list) {
        if (t.defined() && t.device().type() != kTpu && t.dim() == 0) {
          // A CPU scalar in a list (AdamW's step counters in a compiled
          // optimizer step): moved to the device, as one number.
          keep_alive.push_back(t.to(c10::Device(kTpu, current_device())));
          ts.push_back(tensor(keep_alive.back()));
        } else {
          ts.push_back(tensor(t));
        }
      }
      tensor_lists.push_back(std::move(ts));
      a.kind = TPU_ARG_TENSOR_LIST;
      a.tensors = tensor_lists.back().data();
      a.len = static_cast<int64_t>(list.size());
    } else if (v.isOptionalTensorList()) {
      // Index lists (index, index_put_): like CUDA, CPU indices are moved
      // to the device.
      std::vector<TpuTensor> ts;
      for (const c10::IValue& e : v.toListRef()) {
        if (!e.isTensor() || !e.toTensor().defined()) {
          ts.push_back(tensor(at::Tensor()));
        } else if (e.toTensor().device().type() != kTpu) {
          keep_alive.push_back(e.toTensor().to(c10::Device(kTpu, current_device())));
          ts.push_back(tensor(keep_alive.back()));
        } else {
          ts.push_back(tensor(e.toTensor()));
        }
      }
      tensor_lists.push_back(std::move(ts));
      a.kind = TPU_ARG_TENSOR_LIST;
      a.tensors = tensor_lists.back().data();
      a.len = static_cast<int64_t>(tensor_lists.back().size());
    } else if (v.isBool()) {
      a.kind = TPU_ARG_BOOL;
      a.i = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.kind = TPU_ARG_INT;
      a.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
    } else if (v.isDouble()) {
      a.kind = TPU_ARG_FLOAT;
      a.f = v.toDouble();
    } else if (v.isComplexDouble()) {
      // A complex Scalar (`masked_fill(m, 1j)`, `addmm(.., alpha=1j)`).
      a.kind = TPU_ARG_COMPLEX;
      add_complex(a, v.toComplexDouble());
    } else if (v.isBoolList()) {
      std::vector<int64_t> xs;
      for (bool b : v.toBoolList()) xs.push_back(b);
      int_lists.push_back(std::move(xs));
      a.kind = TPU_ARG_BOOL_LIST;
      a.ints = int_lists.back().data();
      a.len = static_cast<int64_t>(int_lists.back().size());
    } else if (v.isList() && !v.isIntList() && !v.toListRef().empty() &&
               std::any_of(v.toListRef().begin(), v.toListRef().end(),
                           [](const c10::IValue& e) { return e.isDouble(); })) {
      // A number list with floats in it (Scalar[] such as [2, 3.5]).
      std::vector<double> xs;
      for (const c10::IValue& e : v.toListRef())
        xs.push_back(e.isDouble() ? e.toDouble() : e.isBool() ? double(e.toBool()) : double(e.toInt()));
      float_lists.push_back(std::move(xs));
      a.kind = TPU_ARG_FLOAT_LIST;
      a.floats = float_lists.back().data();
      a.len = static_cast<int64_t>(float_lists.back().size());
    } else if (v.isList() && !v.isIntList() && !v.toListRef().empty() &&
               std::all_of(v.toListRef().begin(), v.toListRef().end(),
                           [](const c10::IValue& e) { return e.isBool(); })) {
      std::vector<int64_t> xs;
      for (const c10::IValue& e : v.toListRef()) xs.push_back(e.toBool());
      int_lists.push_back(std::move(xs));
      a.kind = TPU_ARG_BOOL_LIST;
      a.ints = int_lists.back().data();
      a.len = static_cast<int64_t>(int_lists.back().size());
    } else if (v.isIntList() || (v.isList() && !v.toListRef().empty() &&
                                 (v.toListRef()[0].isInt() || v.toListRef()[0].isSymInt()))) {
      std::vector<int64_t> xs;
      for (const c10::IValue& e : v.toListRef())
        xs.push_back(e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__));
      int_lists.push_back(std::move(xs));
      a.kind = TPU_ARG_INT_LIST;
      a.ints = int_lists.back().data();
      a.len = static_cast<int64_t>(int_lists.back().size());
    } else if (v.isDoubleList()) {
      float_lists.push_back(v.toDoubleVector());
      a.kind = TPU_ARG_FLOAT_LIST;
      a.floats = float_lists.back().data();
      a.len = static_cast<int64_t>(float_lists.back().size());
    } else if (v.isList() && v.toListRef().empty()) {
      a.kind = TPU_ARG_INT_LIST;  // an empty list of anything
      a.len = 0;
    } else if (v.isString()) {
      strings.push_back(v.toStringRef());
      a.kind = TPU_ARG_STRING;
      a.str = strings.back().c_str();
    } else if (v.isGenerator()) {
      a.kind = TPU_ARG_GENERATOR;
      a.ptr = v.toGenerator().unsafeGetGeneratorImpl();
    } else if (v.isDevice()) {
      a.kind = TPU_ARG_DEVICE;
      a.i = v.toDevice().index();
      a.len = static_cast<int64_t>(v.toDevice().type());
    } else {
      a.kind = TPU_ARG_OTHER;
      strings.push_back(v.tagKind());
      a.str = strings.back().c_str();
    }
    args.push_back(a);
  }
};

at::Tensor wrap_new_tensor(const TpuNewTensor& n) {
  c10::Device device(kTpu, static_cast<c10::DeviceIndex>(n.device_index));
  c10::Storage storage(c10::Storage::use_byte_size_t(), n.nbytes, make_data_ptr(n.storage, device.index()),
                       tpu_allocator(), /*resizable=*/true);
  auto dtype = static_cast<at::ScalarType>(n.dtype);
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef(n.sizes, n.ndim),
                                                 c10::IntArrayRef(n.strides, n.ndim),
                                                 n.storage_offset);
  return t;
}

}  // namespace

// What engine_kernel reads from an operator's schema, worked out once per
// operator (per thread, so no lock) instead of on every call.
struct OpInfo {
  std::string base, overload;  // to recognize a schema at a reused address
  const void* arguments = nullptr;  // the schema's argument array, likewise
  std::string name;            // "aten::add.Tensor"
  std::vector<int32_t> write;  // per argument: 1 a mutated input (self of add_), 2 an out= argument
  std::vector<uint8_t> scalar_param;  // per argument: a Scalar, Scalar? or Scalar[] (a runtime input)
  std::vector<int32_t> ret_alias, ret_kind;
  int32_t flags = 0;
};

OpInfo describe_op(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  OpInfo info;
  info.base = schema.name();
  info.overload = schema.overload_name();
  info.arguments = schema.arguments().data();
  info.name = info.overload.empty() ? info.base : info.base + "." + info.overload;
  const auto nargs = schema.arguments().size();
  for (size_t i = 0; i < nargs; ++i) {
    const auto& arg = schema.arguments()[i];
    const auto* alias = arg.alias_info();
    info.write.push_back(alias != nullptr && alias->isWrite() ? (arg.kwarg_only() ? 2 : 1) : 0);
    auto type = arg.real_type();
    if (type->kind() == c10::TypeKind::OptionalType)
      type = type->castRaw<c10::OptionalType>()->getElementType();
    if (type->kind() == c10::TypeKind::ListType)
      type = type->castRaw<c10::ListType>()->getElementType();
    info.scalar_param.push_back(type->kind() == c10::TypeKind::NumberType);
  }
  const auto& returns = schema.returns();
  info.ret_alias.assign(returns.size(), -1);
  info.ret_kind.assign(returns.size(), 3);
  for (size_t r = 0; r < returns.size(); ++r) {
    const auto kind = returns[r].real_type()->kind();
    info.ret_kind[r] = kind == c10::TypeKind::TensorType ? 0
                       : kind == c10::TypeKind::ListType ? 1
                       : (kind == c10::TypeKind::NumberType || kind == c10::TypeKind::IntType ||
                          kind == c10::TypeKind::FloatType || kind == c10::TypeKind::BoolType ||
                          kind == c10::TypeKind::SymIntType || kind == c10::TypeKind::SymFloatType ||
                          kind == c10::TypeKind::SymBoolType)
                           ? 2
                           : 3;
    const auto* ralias = returns[r].alias_info();
    if (ralias == nullptr) continue;
    for (size_t i = 0; i < nargs; ++i) {
      const auto* aalias = schema.arguments()[i].alias_info();
      if (aalias != nullptr && aalias->beforeSets() == ralias->beforeSets()) {
        info.ret_alias[r] = static_cast<int32_t>(i);
        break;
      }
    }
  }
  info.flags = op.hasTag(at::Tag::pointwise) ? TPU_DISPATCH_POINTWISE : 0;
  return info;
}

const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> known;
  const auto& schema = op.schema();
  auto it = known.find(&schema);
  // An operator deregistered (a torch.library test op) may leave its
  // address to another: the name and argument count must match too.
  if (it == known.end() || it->second.arguments != schema.arguments().data() ||
      it->second.base != schema.name() || it->second.overload != schema.overload_name() ||
      it->second.write.size() != schema.arguments().size())
    it = known.insert_or_assign(&schema, describe_op(op)).first;
  return it->second;
}

void engine_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  const auto nargs = info.write.size();
  const std::string& name = info.name;

  Marshal m(nargs);
  auto ivalues = torch::jit::last(*stack, nargs);
  for (size_t i = 0; i < nargs; ++i) {
    m.add(ivalues[i], info.write[i]);
    // Scalar, Scalar? and Scalar[] values are runtime inputs, not attributes.
    m.args.back().is_scalar_param = info.scalar_param[i];
  }
  const auto& ret_alias = info.ret_alias;
  const auto& ret_kind = info.ret_kind;
  const auto nrets = ret_kind.size();

  TpuResults res{};
  int32_t status = tpu_engine_dispatch(name.c_str(), m.args.data(),
                                       static_cast<int64_t>(m.args.size()), ret_alias.data(),
                                       ret_kind.data(), static_cast<int64_t>(nrets), info.flags,
                                       &res);
  if (status == TPU_NOT_LOWERED && tpu_engine_fallback_enabled()) {
    if (tpu_engine_note_fallback(name.c_str()))
      TORCH_WARN("torch_tpu_rs: ", name,
                 " has no tpu lowering and runs on the CPU (TORCH_TPU_CPU_FALLBACK=1); "
                 "this is slow. torch_tpu_rs.metrics()['fallbacks'] counts these.");
    at::native::cpu_fallback(op, stack);
    return;
  }
  check_status(status);

  std::vector<c10::IValue> inputs = torch::jit::pop(*stack, nargs);
  for (int64_t r = 0; r < res.num_rets; ++r) {
    const TpuRet& ret = res.rets[r];
    switch (ret.kind) {
      case TPU_RET_NONE: stack->emplace_back(); break;
      case TPU_RET_UNDEFINED: stack->emplace_back(at::Tensor()); break;
      case TPU_RET_TENSOR: stack->emplace_back(wrap_new_tensor(res.new_tensors[ret.first])); break;
      case TPU_RET_ALIAS: stack->push_back(inputs[ret.arg]); break;
      case TPU_RET_TENSOR_LIST: {
        std::vector<at::Tensor> ts;
        for (int64_t k = 0; k < ret.len; ++k) ts.push_back(wrap_new_tensor(res.new_tensors[ret.first + k]));
        stack->emplace_back(c10::List<at::Tensor>(ts));
        break;
      }
      case TPU_RET_INT: stack->emplace_back(c10::Scalar(ret.i)); break;
      case TPU_RET_FLOAT: stack->emplace_back(c10::Scalar(ret.f)); break;
      case TPU_RET_COMPLEX: stack->emplace_back(c10::Scalar(c10::complex<double>(ret.f, ret.imag))); break;
      case TPU_RET_BOOL: stack->emplace_back(c10::Scalar(ret.i != 0)); break;
      case TPU_RET_RESIZE_COPY: {
        at::Tensor out = inputs[ret.arg].toTensor();
        at::Tensor value = wrap_new_tensor(res.new_tensors[ret.first]);
        if (out.numel() == 0 && out.dtype() == value.dtype() && out.storage().nbytes() == 0) {
          // The usual case: structured ops hand us an empty out= tensor.
          // It holds no data, so it can simply adopt the result's storage.
          // (An empty view into a real storage, such as `r[3:3]`, must
          // instead grow in place, at its offset, as on the CPU.)
          out.set_(value);
        } else {
          out.resize_(value.sizes());
          // A resized out= takes the result's layout, which the engine chose
          // as the CPU's TensorIterator would (a transposed input gives a
          // transposed result); resize_ alone would make it contiguous.
          if (!value.is_contiguous()) out.as_strided_(value.sizes(), value.strides());
          out.copy_(value);
        }
        stack->push_back(inputs[ret.arg]);
        break;
      }
      default: TORCH_CHECK(false, "torch_tpu_rs: engine returned unknown result kind ", ret.kind);
    }
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&engine_kernel>());
}

// Sparse layouts have no tpu kernels. Without this the dispatcher's generic
// "Could not run ... 'Sparsetpu' backend" is all a user sees, at backward
// time for nn.Embedding(sparse=True).
void sparse_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().operator_name(),
                              ": sparse tensors are not supported on the tpu device. Keep them on the CPU, "
                              "or use dense tensors (nn.Embedding and nn.EmbeddingBag with sparse=False, "
                              "the default; torch.optim.SparseAdam needs sparse gradients).");
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_kernel>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_kernel>());
}

}  // namespace torch_tpu

// Ops that PyTorch implements for every backend as a composite (the
// `_foreach_*` family loops over tensors one op at a time) never reach the
// fallback. Registering the engine kernel for them explicitly lets the
// engine run each such call as one program. Called once at import, after
// all of torch's operators are registered; returns how many were taken.
extern "C" int64_t tpu_glue_register_engine_kernels(const char* prefix) {
  static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  int64_t n = 0;
  const std::string want = std::string("aten::") + prefix;
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind(want, 0) != 0) continue;
    std::string full = name.name;
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    if (!tpu_engine_has_lowering(full.c_str())) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    std::string impl = name.name.substr(6);
    if (!name.overload_name.empty()) impl += "." + name.overload_name;
    lib.impl(impl.c_str(), torch::CppFunction::makeFromBoxedFunction<&torch_tpu::engine_kernel>());
    ++n;
  }
  return n;
}
