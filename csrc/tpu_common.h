// Shared helpers of the C++ glue: turning engine statuses into PyTorch
// exceptions, and wrapping engine storage handles as c10 storages.
#pragma once
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include "engine_api.h"

namespace torch_tpu {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

// The device's allocator (tpu_allocator.cpp).
c10::Allocator* tpu_allocator();
// Host memory that pin_memory() allocates (reported by is_pinned()).
c10::Allocator* pinned_host_allocator();
// The calling thread's current device index (tpu_guard.cpp).
c10::DeviceIndex current_device();

// Raises the exception type that matches an engine status, carrying the
// engine's message. Does nothing for TPU_OK.
void check_status(int32_t status);

// A DataPtr owning an engine storage handle.
c10::DataPtr make_data_ptr(void* handle, c10::DeviceIndex device);

}  // namespace torch_tpu
