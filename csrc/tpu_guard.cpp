// The device guard: which `tpu` device the calling thread uses. One stream
// per device; ordering is the engine's job, so stream calls are trivial
// (every stream, new ones included, is the device's one in-order queue).
// Events: recording waits for the work queued so far, then stamps the host
// clock, so `elapsed_time` between two events is exact wall time on the
// device; recording is a host sync (the engine counts it).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

#include "tpu_common.h"

namespace torch_tpu {
namespace {
thread_local c10::DeviceIndex t_current_device = 0;
}

c10::DeviceIndex current_device() { return t_current_device; }

namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kTpu, t_current_device); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kTpu, "expected a tpu device, got ", d);
    auto count = deviceCount();
    TORCH_CHECK(d.index() >= 0 && d.index() < count, "invalid tpu device index ",
                static_cast<int>(d.index()), ": this process sees ",
                static_cast<int>(count), " tpu device(s)");
    t_current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current_device = d.index();
  }
  // Every stream is the device's one queue; a device without an index means
  // the current one.
  c10::Stream the_queue(c10::Device d) const {
    return c10::Stream(c10::Stream::DEFAULT, d.has_index() ? d : getDevice());
  }
  c10::Stream getStream(c10::Device d) const override { return the_queue(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return the_queue(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return the_queue(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return the_queue(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return the_queue(s.device()); }
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    check_status(tpu_engine_synchronize(s.device_index()));
    auto now = std::chrono::steady_clock::now();
    if (*event == nullptr) *event = new std::chrono::steady_clock::time_point(now);
    else *static_cast<std::chrono::steady_clock::time_point*>(*event) = now;
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<std::chrono::steady_clock::time_point*>(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "elapsed_time: both events must be recorded first");
    auto a = *static_cast<std::chrono::steady_clock::time_point*>(start);
    auto b = *static_cast<std::chrono::steady_clock::time_point*>(end);
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
  // The dtypes tensors can have on the device (torch.accelerator.get_device_capability).
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;
#define TPU_DTYPE_BIT(_, name)                              \
  cap.capability_data.supported_scalar_types.has_##name = \
      tpu_engine_dtype_supported(static_cast<int32_t>(c10::ScalarType::name)) != 0;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TPU_DTYPE_BIT)
#undef TPU_DTYPE_BIT
    return cap;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(tpu_engine_device_count());
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check_status(tpu_engine_synchronize(device_index));
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check_status(tpu_engine_synchronize(s.device_index()));
  }
  bool queryStream(const c10::Stream&) const override { return true; }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torch_tpu
