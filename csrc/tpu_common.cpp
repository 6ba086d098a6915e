// Engine status to PyTorch exception mapping; storage handle wrapping.
#include "tpu_common.h"

namespace torch_tpu {

static void release_handle(void* handle) { tpu_engine_storage_release(handle); }

c10::DataPtr make_data_ptr(void* handle, c10::DeviceIndex device) {
  // The handle is both the data pointer and the deleter context: PyTorch never
  // dereferences device pointers, it only compares and offsets them.
  return c10::DataPtr(handle, handle, &release_handle, c10::Device(kTpu, device));
}

void check_status(int32_t status) {
  if (status == TPU_OK) return;
  const char* msg = tpu_engine_last_error();
  std::string m = msg ? msg : "unknown torch_tpu_rs engine error";
  switch (status) {
    case TPU_ERR_INDEX: TORCH_CHECK_INDEX(false, m);
    case TPU_ERR_TYPE: TORCH_CHECK_TYPE(false, m);
    case TPU_ERR_VALUE: TORCH_CHECK_VALUE(false, m);
    case TPU_ERR_OUT_OF_MEMORY: TORCH_CHECK_WITH(OutOfMemoryError, false, m);
    case TPU_ERR_LINALG: TORCH_CHECK_LINALG(false, m);
    case TPU_NOT_LOWERED:
    case TPU_ERR_NOT_IMPL: TORCH_CHECK_NOT_IMPLEMENTED(false, m);
    default: TORCH_CHECK(false, m);
  }
}

}  // namespace torch_tpu

extern "C" void tpu_glue_warn(const char* message) { TORCH_WARN(message); }
