// The `tpu` random generator: a seed and a counter. Device programs derive
// their random bits from (seed, offset), so a seed reproduces a run exactly.
#include <ATen/core/Generator.h>
#include <ATen/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdio>
#include <mutex>
#include <vector>

#include "tpu_common.h"

namespace torch_tpu {

struct TpuGeneratorImpl final : public c10::GeneratorImpl {
  explicit TpuGeneratorImpl(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kTpu, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override { seed_ = seed; offset_ = 0; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    auto s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  // State is 16 bytes: seed then offset, as a CPU uint8 tensor (like CUDA's).
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                      "tpu generator state must be a uint8 tensor of 16 bytes, got ",
                      state.numel(), " elements");
    const auto* p = static_cast<const uint64_t*>(state.data());
    seed_ = p[0];
    offset_ = p[1];
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    auto* p = static_cast<uint64_t*>(t.data_ptr());
    p[0] = seed_;
    p[1] = offset_;
    return t.getIntrusivePtr();
  }
  uint64_t take(uint64_t increment) {
    uint64_t start = offset_;
    offset_ += increment;
    return start;
  }
  static c10::DeviceType device_type() { return kTpu; }

 private:
  TpuGeneratorImpl* clone_impl() const override {
    auto* g = new TpuGeneratorImpl(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = 67280421310721ULL;  // same default seed as CPU and CUDA
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    int n = std::max<int>(tpu_engine_device_count(), 1);
    for (int i = 0; i < n; ++i)
      generators.push_back(at::make_generator<TpuGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
  });
  if (device < 0) device = current_device();
  TORCH_CHECK(device < static_cast<c10::DeviceIndex>(generators.size()),
              "invalid tpu device index ", static_cast<int>(device));
  return generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  return at::make_generator<TpuGeneratorImpl>(device < 0 ? current_device() : device);
}

}  // namespace torch_tpu

// Called from Rust, so nothing may throw across it: failures come back as
// a nonzero return with the message in `error`.
extern "C" int32_t tpu_glue_generator_next(void* generator, int32_t device_index, uint64_t increment,
                                           uint64_t* seed, uint64_t* offset, char* error, size_t error_len) {
  try {
    at::Generator gen;
    auto* impl = static_cast<c10::GeneratorImpl*>(generator);
    if (impl == nullptr) {
      gen = torch_tpu::default_generator(static_cast<c10::DeviceIndex>(device_index));
      impl = gen.unsafeGetGeneratorImpl();
    }
    auto* tpu = dynamic_cast<torch_tpu::TpuGeneratorImpl*>(impl);
    if (tpu == nullptr) {
      // As CPU and CUDA ops refuse another device's generator.
      std::snprintf(error, error_len, "Expected a 'tpu' device type for generator but found '%s'",
                    c10::DeviceTypeName(impl->device().type(), /*lower_case=*/true).c_str());
      return 1;
    }
    std::lock_guard<std::mutex> lock(impl->mutex_);
    *seed = tpu->current_seed();
    *offset = tpu->take(increment);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_len, "%s", e.what());
    return 1;
  }
}

// Default-generator controls for torch.tpu.manual_seed and friends.
extern "C" void tpu_glue_manual_seed(int32_t device_index, uint64_t seed) {
  auto gen = torch_tpu::default_generator(static_cast<c10::DeviceIndex>(device_index));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

extern "C" uint64_t tpu_glue_initial_seed(int32_t device_index) {
  auto gen = torch_tpu::default_generator(static_cast<c10::DeviceIndex>(device_index));
  return gen.current_seed();
}

extern "C" void tpu_glue_get_state(int32_t device_index, uint64_t* seed, uint64_t* offset) {
  auto gen = torch_tpu::default_generator(static_cast<c10::DeviceIndex>(device_index));
  std::lock_guard<std::mutex> lock(gen.mutex());
  *seed = gen.current_seed();
  *offset = gen.get_offset();
}

extern "C" void tpu_glue_set_state(int32_t device_index, uint64_t seed, uint64_t offset) {
  auto gen = torch_tpu::default_generator(static_cast<c10::DeviceIndex>(device_index));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
  gen.set_offset(offset);
}
