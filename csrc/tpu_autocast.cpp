// Autocast for `tpu`: `torch.autocast("tpu", dtype=torch.bfloat16)` casts
// the same ops the same way as on CUDA. PyTorch only registers a fallthrough
// for AutocastPrivateUse1; a backend lists its ops itself. The op lists and
// cast policies are PyTorch's own (ATen/autocast_mode.h), so they follow
// whatever torch version this is built against.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

using at::Tensor;
using c10::IntArrayRef;
using c10::Scalar;
using c10::ScalarType;

#define TPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// As CUDA's autocast does, refuse binary_cross_entropy (unsafe in 16 bits)
// and point at the fused form; the message is CUDA's.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_banned));
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
}

}  // namespace
}  // namespace torch_tpu
