// PrivateUse1 hooks: availability, device count, generators, and growing a
// storage in place (resize_ on a tpu tensor).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Logging.h>

#include <cstdlib>
#include <string>

#include "tpu_common.h"

namespace torch_tpu {

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return tpu_engine_device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(kTpu, current_device());
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(tpu_engine_device_count());
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  // Host staging memory for non_blocking copies and pin_memory(): the
  // engine's pinned blocks (pinned_host.rs), so is_pinned() answers as on CUDA.
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  bool isPinnedPtr(const void* p) const override { return tpu_engine_is_pinned(p) != 0; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    void* old_handle = impl->data_ptr().get();
    void* new_handle = nullptr;
    check_status(tpu_engine_storage_resize(old_handle, newsize, &new_handle));
    auto device = impl->device().index();
    impl->set_data_ptr_noswap(make_data_ptr(new_handle, device));
    impl->set_nbytes(newsize);
  }
};

struct Register {
  Register() {
    at::RegisterPrivateUse1HooksInterface(new TpuHooks());
    // c10::Error unwinds the whole stack to record a C++ backtrace, which
    // PyTorch shows only with TORCH_SHOW_CPP_STACKTRACES=1. Skip that walk
    // otherwise: our errors already name the op, and the walk once crashed
    // inside libgcc's unwinder (_Unwind_Find_FDE) late in a long test run.
    const char* show = std::getenv("TORCH_SHOW_CPP_STACKTRACES");
    if (show == nullptr || std::string(show) != "1") {
      c10::SetStackTraceFetcher([]() -> std::string { return std::string(); });
    }
  }
} g_register;

}  // namespace
}  // namespace torch_tpu
