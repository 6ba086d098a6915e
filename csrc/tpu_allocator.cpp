// The DeviceAllocator for `tpu`: each allocation is an engine storage handle
// (a PJRT buffer owned by Rust). Statistics come from the engine.
#include <c10/core/CachingDeviceAllocator.h>

#include "tpu_common.h"

namespace torch_tpu {
namespace {

struct TpuAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = current_device();
    void* handle = nullptr;
    check_status(tpu_engine_storage_new(nbytes, device, &handle));
    return make_data_ptr(handle, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied as raw bytes; use Tensor.copy_");
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  // No caching allocator sits between storages and PJRT buffers: reserved,
  // active and requested bytes are the allocated ones, each allocation its
  // own segment.
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    int64_t allocated = 0, peak = 0, count = 0;
    tpu_engine_memory_stats(device, &allocated, &peak, &count);
    c10::CachingDeviceAllocator::DeviceStats stats;
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    for (auto* bytes : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.requested_bytes}) {
      (*bytes)[all].current = allocated;
      (*bytes)[all].peak = peak;
    }
    for (auto* n : {&stats.allocation, &stats.segment, &stats.active}) {
      (*n)[all].current = count;
    }
    return stats;
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    uint64_t free = 0, total = 0;
    TORCH_CHECK_NOT_IMPLEMENTED(tpu_engine_memory_info(device, &free, &total),
                                "the PJRT plugin does not report tpu:", static_cast<int>(device),
                                "'s memory; torch.tpu.memory_allocated() gives what this process holds");
    return {static_cast<size_t>(free), static_cast<size_t>(total)};
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override { tpu_engine_reset_peak(device); }
};

TpuAllocator g_allocator;

// CPU memory from the engine's pinned blocks; the engine keeps the registry.
struct PinnedHostAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = tpu_engine_pinned_alloc(nbytes);
    if (p == nullptr) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu: out of host memory pinning ", nbytes, " bytes");
    }
    return {p, p, &tpu_engine_pinned_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &tpu_engine_pinned_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedHostAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &g_allocator; }
c10::Allocator* pinned_host_allocator() { return &g_pinned_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_tpu
