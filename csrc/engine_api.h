// The C ABI between the thin C++ dispatcher glue and the Rust engine.
//
// Everything the engine needs from a PyTorch call crosses here as plain data:
// tensors as (storage handle, dtype, sizes, strides, offset), scalars as
// numbers, lists as pointers. Functions named tpu_engine_* are implemented in
// Rust (crates/engine/src/ffi.rs); functions named tpu_glue_* are implemented
// in C++ and called back by the engine. Keep both sides in sync by hand: the
// Rust declarations mirror this file field for field.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Status codes returned by tpu_engine_* calls. The message of a non-OK status
// is read with tpu_engine_last_error() on the same thread.
enum TpuStatus {
  TPU_OK = 0,
  TPU_NOT_LOWERED = 1,    // no lowering: NotImplementedError, or the CPU fallback
  TPU_ERR_RUNTIME = 2,    // RuntimeError
  TPU_ERR_INDEX = 3,      // IndexError
  TPU_ERR_TYPE = 4,       // TypeError (e.g. a dtype the platform lacks)
  TPU_ERR_VALUE = 5,      // ValueError
  TPU_ERR_NOT_IMPL = 6,   // NotImplementedError that the fallback must not hide
  TPU_ERR_OUT_OF_MEMORY = 7,  // torch.OutOfMemoryError
  TPU_ERR_LINALG = 8,     // torch.linalg.LinAlgError
};

// Argument kinds, one per IValue shape the glue forwards.
enum TpuArgKind {
  TPU_ARG_NONE = 0,
  TPU_ARG_TENSOR = 1,       // tensors[0]
  TPU_ARG_TENSOR_LIST = 2,  // tensors[0..len]; entries with storage == NULL
                            // and dtype == -1 are None (optional lists)
  TPU_ARG_INT = 3,          // i (also ScalarType, Layout, MemoryFormat enums)
  TPU_ARG_FLOAT = 4,        // f
  TPU_ARG_BOOL = 5,         // i (0 or 1)
  TPU_ARG_INT_LIST = 6,     // ints[0..len]
  TPU_ARG_FLOAT_LIST = 7,   // floats[0..len]
  TPU_ARG_BOOL_LIST = 8,    // ints[0..len]
  TPU_ARG_STRING = 9,       // str
  TPU_ARG_GENERATOR = 10,   // ptr: the c10::GeneratorImpl*, never NULL
  TPU_ARG_DEVICE = 11,      // i: device index (-1 when unset), len: device type
  TPU_ARG_CPU_SCALAR = 12,  // a 0-dim CPU tensor: f or i (complex: floats[0..2]), per dtype; tensors[0] describes its dtype
  TPU_ARG_OTHER = 13,       // anything else (the engine reports it by name)
  TPU_ARG_COMPLEX = 14,     // a complex Scalar: floats[0..2] = (real, imaginary)
};

// One tensor. Sizes and strides are in elements, not bytes.
typedef struct {
  void* storage;            // engine storage handle; NULL for a CPU tensor
  void* host_data;          // CPU tensors only: data pointer at the tensor's offset
  int32_t dtype;            // c10::ScalarType as int; -1 for None in optional lists
  int32_t device_type;      // c10::DeviceType as int
  int32_t device_index;
  int32_t is_wrapped_number;
  int64_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t storage_offset;
  size_t storage_nbytes;
  int32_t math_bits;        // PyTorch's lazy bits: 1 conjugate (z.conj()), 2 negative (_neg_view)
  int32_t reserved;
} TpuTensor;

typedef struct {
  int32_t kind;             // TpuArgKind
  int32_t is_write;         // mutated (a!): 1 an input it also updates, 2 an out= argument
  int32_t is_scalar_param;  // declared as Scalar / Scalar? (a runtime value), not int/float
  int32_t reserved;
  int64_t len;              // number of list entries
  int64_t i;
  double f;
  const TpuTensor* tensors;
  const int64_t* ints;
  const double* floats;
  const char* str;
  void* ptr;
} TpuArg;

// Return kinds produced by the engine.
enum TpuRetKind {
  TPU_RET_NONE = 0,
  TPU_RET_TENSOR = 1,          // new_tensors[first]
  TPU_RET_ALIAS = 2,           // the argument at index `arg`, returned as is
  TPU_RET_TENSOR_LIST = 3,     // new_tensors[first .. first+len]
  TPU_RET_INT = 4,
  TPU_RET_FLOAT = 5,
  TPU_RET_BOOL = 6,
  TPU_RET_RESIZE_COPY = 7,     // resize argument `arg` to new_tensors[first]'s
                               // sizes and strides, copy that tensor in, return
                               // the argument
  TPU_RET_COMPLEX = 8,         // f + imag * 1j
  TPU_RET_UNDEFINED = 9,       // an undefined tensor (a gradient output_mask skips)
};

// A tensor the engine created. The glue wraps `storage` in a c10::Storage
// whose deleter calls tpu_engine_storage_release.
typedef struct {
  void* storage;
  size_t nbytes;
  int32_t dtype;
  int32_t device_index;
  int64_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t storage_offset;
} TpuNewTensor;

typedef struct {
  int32_t kind;
  int32_t arg;
  int64_t first;
  int64_t len;
  int64_t i;
  double f;
  double imag;
} TpuRet;

// Results of one dispatch; the arrays belong to the engine and stay valid
// until the next tpu_engine_dispatch call on the same thread.
typedef struct {
  int64_t num_rets;
  const TpuRet* rets;
  const TpuNewTensor* new_tensors;
} TpuResults;

// ---- implemented by the Rust engine -------------------------------------
const char* tpu_engine_last_error(void);
int32_t tpu_engine_device_count(void);
int32_t tpu_engine_storage_new(size_t nbytes, int32_t device_index, void** out);
void tpu_engine_storage_release(void* storage);
// Makes a storage of new_nbytes holding the old one's leading bytes.
int32_t tpu_engine_storage_resize(void* storage, size_t new_nbytes, void** out);
// Pinned host memory for pin_memory(): NULL when out of memory.
void* tpu_engine_pinned_alloc(size_t nbytes);
void tpu_engine_pinned_free(void* p);
int32_t tpu_engine_is_pinned(const void* p);
// ret_alias[r]: the argument index that return r aliases, or -1 for a fresh
// value; ret_kind[r]: 0 tensor, 1 tensor list, 2 number (int/float/bool/Scalar),
// 3 anything else. flags: TPU_DISPATCH_* bits.
#define TPU_DISPATCH_POINTWISE 1  // the op has PyTorch's `pointwise` tag
int32_t tpu_engine_dispatch(const char* op_name, const TpuArg* args, int64_t nargs,
                            const int32_t* ret_alias, const int32_t* ret_kind, int64_t nrets,
                            int32_t flags, TpuResults* out);
// Copies host bytes (contiguous, dst's dtype and sizes) into the device view dst.
int32_t tpu_engine_upload(const TpuTensor* dst, const void* src, size_t nbytes);
// Copies the device view src into contiguous host bytes of src's dtype.
int32_t tpu_engine_download(const TpuTensor* src, void* dst, size_t nbytes);
int32_t tpu_engine_synchronize(int32_t device_index);
// Memory statistics in bytes, for the DeviceAllocator.
void tpu_engine_memory_stats(int32_t device_index, int64_t* allocated, int64_t* peak,
                             int64_t* num_allocs);
void tpu_engine_reset_peak(int32_t device_index);
// A device's free and total bytes: 1 when known (both filled), else 0.
int32_t tpu_engine_memory_info(int32_t device_index, uint64_t* free, uint64_t* total);
// Whether tensors of a c10::ScalarType code can live on the device (1) or not (0).
int32_t tpu_engine_dtype_supported(int32_t scalar_type);
// The CPU fallback: whether it is on, and counting a use (returns 1 the
// first time an op falls back, so the glue warns once per op).
int32_t tpu_engine_fallback_enabled(void);
// Whether the lowering table has "aten::name.overload".
int32_t tpu_engine_has_lowering(const char* op_name);
int32_t tpu_engine_note_fallback(const char* op_name);

// ---- implemented by the C++ glue, called by the engine --------------------
// Reserves `increment` random values from a generator (NULL: the default one
// of `device_index`) and returns its seed and the offset to start from.
// Returns nonzero with a message in `error` for a generator of another device.
int32_t tpu_glue_generator_next(void* generator, int32_t device_index, uint64_t increment,
                                uint64_t* seed, uint64_t* offset, char* error, size_t error_len);

// The default generator of a device, for torch.tpu.manual_seed and the
// get/set_rng_state pair (state = seed, offset).
// Registers the engine kernel explicitly for PrivateUse1 on every lowered op
// whose name starts with `prefix` (e.g. "_foreach_"); see tpu_fallback.cpp.
int64_t tpu_glue_register_engine_kernels(const char* prefix);
void tpu_glue_manual_seed(int32_t device_index, uint64_t seed);
uint64_t tpu_glue_initial_seed(int32_t device_index);
void tpu_glue_get_state(int32_t device_index, uint64_t* seed, uint64_t* offset);
void tpu_glue_set_state(int32_t device_index, uint64_t seed, uint64_t offset);
// A UserWarning, from any thread (torch.tpu.set_sync_debug_mode("warn")).
void tpu_glue_warn(const char* message);

#ifdef __cplusplus
}
#endif
