//! Hand-written `#[repr(C)]` declarations for the subset of the PJRT C API
//! (`pjrt_c_api.h`, API version 0.81) that this crate uses.
//!
//! Nothing here is generated: every struct mirrors the header's field order
//! exactly, and every argument struct implements [`PjrtArgs`], whose
//! `STRUCT_SIZE` is the header's `PJRT_STRUCT_SIZE(type, last_field)` (the
//! offset of the last field plus its size, i.e. *without* trailing padding).
//! The unit tests at the bottom pin those sizes to the values computed by a C
//! compiler from the reference header on x86_64 Linux.
//!
//! C enums are represented as plain `i32` aliases so that any value the plugin
//! writes is a valid Rust value. Function pointers in [`PJRT_Api`] that this
//! crate does not call are declared as opaque [`Unused`] placeholders; the
//! field order of `PJRT_Api` is append-only, so declaring the prefix we need is
//! enough, provided the plugin's `struct_size` covers it (checked at load).

#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code
)]

use std::ffi::c_char;
use std::ffi::c_void;

/// The API version these declarations were written against.
pub const PJRT_API_MAJOR: i32 = 0;
/// The API version these declarations were written against.
pub const PJRT_API_MINOR: i32 = 81;

/// Implemented by every PJRT argument struct: `STRUCT_SIZE` is the value the
/// C header's `PJRT_STRUCT_SIZE` macro yields for it.
pub trait PjrtArgs: Sized {
    const STRUCT_SIZE: usize;

    /// An all-zero instance with `struct_size` filled in. All fields of PJRT
    /// argument structs are integers, bools, raw pointers or optional function
    /// pointers, for which all-zero is a valid (null / false / 0) value.
    fn new() -> Self {
        // SAFETY: see above; every implementor is a `#[repr(C)]` struct whose
        // fields are all valid when zeroed, and whose first field is a
        // `usize` named `struct_size`.
        unsafe {
            let mut v: Self = std::mem::zeroed();
            *(&mut v as *mut Self as *mut usize) = Self::STRUCT_SIZE;
            v
        }
    }
}

#[doc(hidden)]
pub const fn size_of_pointee<T>(_p: *const T) -> usize {
    std::mem::size_of::<T>()
}

/// Declares `impl PjrtArgs for $ty` with `STRUCT_SIZE =
/// offset_of!($ty, $last) + size_of(field $last)`.
macro_rules! pjrt_args {
    ($($ty:ident => $last:ident),* $(,)?) => {$(
        impl PjrtArgs for $ty {
            const STRUCT_SIZE: usize = {
                let u = std::mem::MaybeUninit::<$ty>::uninit();
                let p = u.as_ptr();
                // SAFETY: only the address of the field is computed; nothing
                // is read.
                std::mem::offset_of!($ty, $last)
                    + size_of_pointee(unsafe { std::ptr::addr_of!((*p).$last) })
            };
        }
    )*};
}

// ----------------------------------------------------------------------------
// Opaque handle types.

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    PJRT_Error,
    PJRT_Event,
    PJRT_Client,
    PJRT_Device,
    PJRT_Memory,
    PJRT_DeviceDescription,
    PJRT_Executable,
    PJRT_LoadedExecutable,
    PJRT_Buffer,
    PJRT_ExecuteContext,
    PJRT_SerializedExecutable,
    PJRT_SendCallbackInfo,
    PJRT_RecvCallbackInfo,
);

/// `PJRT_Extension_Base` (only ever passed as a null pointer by this crate).
#[repr(C)]
pub struct PJRT_Extension_Base {
    pub struct_size: usize,
    pub type_: i32,
    pub next: *mut PJRT_Extension_Base,
}

// C enums.
pub type PJRT_Error_Code = i32;
pub type PJRT_Buffer_Type = i32;
pub type PJRT_HostBufferSemantics = i32;
pub type PJRT_NamedValue_Type = i32;

pub const PJRT_HostBufferSemantics_kImmutableOnlyDuringCall: PJRT_HostBufferSemantics = 0;

/// Placeholder for a function-pointer field of [`PJRT_Api`] this crate never
/// calls. Same size and alignment as any C function pointer.
pub type Unused = Option<unsafe extern "C" fn()>;

/// A PJRT function taking `*mut Args` and returning an owned `PJRT_Error*`
/// (null on success).
pub type PjrtFn<A> = Option<unsafe extern "C" fn(args: *mut A) -> *mut PJRT_Error>;

// ----------------------------------------------------------------------------
// Version and errors.

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PJRT_Api_Version {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub major_version: i32,
    pub minor_version: i32,
}

#[repr(C)]
pub struct PJRT_Error_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *mut PJRT_Error,
}

#[repr(C)]
pub struct PJRT_Error_Message_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    pub message: *const c_char,
    pub message_size: usize,
}

#[repr(C)]
pub struct PJRT_Error_GetCode_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    pub code: PJRT_Error_Code,
}

// ----------------------------------------------------------------------------
// Named values and plugin.

#[repr(C)]
#[derive(Clone, Copy)]
pub union PJRT_NamedValue_Value {
    pub string_value: *const c_char,
    pub int64_value: i64,
    pub int64_array_value: *const i64,
    pub float_value: f32,
    pub bool_value: bool,
}

#[repr(C)]
pub struct PJRT_NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub name: *const c_char,
    pub name_size: usize,
    pub type_: PJRT_NamedValue_Type,
    pub value: PJRT_NamedValue_Value,
    pub value_size: usize,
}

#[repr(C)]
pub struct PJRT_Plugin_Initialize_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
}

#[repr(C)]
pub struct PJRT_Plugin_Attributes_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub attributes: *const PJRT_NamedValue,
    pub num_attributes: usize,
}

// ----------------------------------------------------------------------------
// Events.

#[repr(C)]
pub struct PJRT_Event_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_Event_IsReady_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
    pub is_ready: bool,
}

#[repr(C)]
pub struct PJRT_Event_Error_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_Event_Await_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
}

// ----------------------------------------------------------------------------
// Client.

#[repr(C)]
pub struct PJRT_Client_Create_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub create_options: *const PJRT_NamedValue,
    pub num_options: usize,
    pub kv_get_callback: Unused,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: Unused,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut PJRT_Client,
    pub kv_try_get_callback: Unused,
    pub kv_try_get_user_arg: *mut c_void,
}

#[repr(C)]
pub struct PJRT_Client_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
}

#[repr(C)]
pub struct PJRT_Client_PlatformName_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub platform_name: *const c_char,
    pub platform_name_size: usize,
}

#[repr(C)]
pub struct PJRT_Client_PlatformVersion_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub platform_version: *const c_char,
    pub platform_version_size: usize,
}

#[repr(C)]
pub struct PJRT_Client_AddressableDevices_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub addressable_devices: *const *mut PJRT_Device,
    pub num_addressable_devices: usize,
}

#[repr(C)]
pub struct PJRT_Program {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

#[repr(C)]
pub struct PJRT_Client_Compile_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub program: *const PJRT_Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut PJRT_LoadedExecutable,
}

#[repr(C)]
pub struct PJRT_Client_BufferFromHostBuffer_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub data: *const c_void,
    pub type_: PJRT_Buffer_Type,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: PJRT_HostBufferSemantics,
    pub device: *mut PJRT_Device,
    pub memory: *mut PJRT_Memory,
    /// `PJRT_Buffer_MemoryLayout*`; always null here (dense major-to-minor).
    pub device_layout: *mut c_void,
    pub done_with_host_buffer: *mut PJRT_Event,
    pub buffer: *mut PJRT_Buffer,
}

// ----------------------------------------------------------------------------
// Devices.

#[repr(C)]
pub struct PJRT_DeviceDescription_Id_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device_description: *mut PJRT_DeviceDescription,
    pub id: i32,
}

#[repr(C)]
pub struct PJRT_DeviceDescription_Kind_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device_description: *mut PJRT_DeviceDescription,
    pub device_kind: *const c_char,
    pub device_kind_size: usize,
}

#[repr(C)]
pub struct PJRT_DeviceDescription_ToString_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device_description: *mut PJRT_DeviceDescription,
    pub to_string: *const c_char,
    pub to_string_size: usize,
}

#[repr(C)]
pub struct PJRT_Device_GetDescription_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device: *mut PJRT_Device,
    pub device_description: *mut PJRT_DeviceDescription,
}

#[repr(C)]
pub struct PJRT_Device_LocalHardwareId_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device: *mut PJRT_Device,
    pub local_hardware_id: i32,
}

/// Every field up to `peak_pool_bytes_is_set`, the newest in the headers
/// of 2025; a plugin built against an older header fills a prefix (it reads
/// `struct_size`).
#[repr(C)]
pub struct PJRT_Device_MemoryStats_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub device: *mut PJRT_Device,
    pub bytes_in_use: i64,
    pub peak_bytes_in_use: i64,
    pub peak_bytes_in_use_is_set: bool,
    pub num_allocs: i64,
    pub num_allocs_is_set: bool,
    pub largest_alloc_size: i64,
    pub largest_alloc_size_is_set: bool,
    pub bytes_limit: i64,
    pub bytes_limit_is_set: bool,
    pub bytes_reserved: i64,
    pub bytes_reserved_is_set: bool,
    pub peak_bytes_reserved: i64,
    pub peak_bytes_reserved_is_set: bool,
    pub bytes_reservable_limit: i64,
    pub bytes_reservable_limit_is_set: bool,
    pub largest_free_block_bytes: i64,
    pub largest_free_block_bytes_is_set: bool,
    pub pool_bytes: i64,
    pub pool_bytes_is_set: bool,
    pub peak_pool_bytes: i64,
    pub peak_pool_bytes_is_set: bool,
}

// ----------------------------------------------------------------------------
// Executables.

#[repr(C)]
pub struct PJRT_Executable_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_LoadedExecutable,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_GetExecutable_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub loaded_executable: *mut PJRT_LoadedExecutable,
    pub executable: *mut PJRT_Executable,
}

#[repr(C)]
pub struct PJRT_Executable_NumOutputs_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
    pub num_outputs: usize,
}

#[repr(C)]
pub struct PJRT_Executable_OutputElementTypes_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
    pub output_types: *mut PJRT_Buffer_Type,
    pub num_output_types: usize,
}

#[repr(C)]
pub struct PJRT_Executable_OutputDimensions_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
    pub num_outputs: usize,
    pub dims: *const i64,
    pub dim_sizes: *const usize,
}

#[repr(C)]
pub struct PJRT_Executable_Serialize_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *const PJRT_Executable,
    /// Valid only until `serialized_executable_deleter` runs.
    pub serialized_bytes: *const c_char,
    pub serialized_bytes_size: usize,
    /// Backs `serialized_bytes`; freed (once) by the deleter.
    pub serialized_executable: *mut PJRT_SerializedExecutable,
    pub serialized_executable_deleter:
        Option<unsafe extern "C" fn(exec: *mut PJRT_SerializedExecutable)>,
}

#[repr(C)]
pub struct PJRT_Executable_DeserializeAndLoad_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub serialized_executable: *const c_char,
    pub serialized_executable_size: usize,
    pub loaded_executable: *mut PJRT_LoadedExecutable,
    /// Serialized `CompileOptionsProto`, or null to use the ones stored in
    /// the serialized executable.
    pub overridden_serialized_compile_options: *const c_char,
    pub overridden_serialized_compile_options_size: usize,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_AddressableDevices_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_LoadedExecutable,
    pub addressable_devices: *const *mut PJRT_Device,
    pub num_addressable_devices: usize,
}

#[repr(C)]
pub struct PJRT_ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub send_callbacks: *mut *mut PJRT_SendCallbackInfo,
    pub recv_callbacks: *mut *mut PJRT_RecvCallbackInfo,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: i32,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut PJRT_ExecuteContext,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut i32,
    pub incarnation_ids: *mut i64,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_Execute_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_LoadedExecutable,
    pub options: *mut PJRT_ExecuteOptions,
    pub argument_lists: *const *const *mut PJRT_Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    pub output_lists: *const *mut *mut PJRT_Buffer,
    pub device_complete_events: *mut *mut PJRT_Event,
    pub execute_device: *mut PJRT_Device,
}

// ----------------------------------------------------------------------------
// Buffers.

#[repr(C)]
pub struct PJRT_Buffer_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
}

#[repr(C)]
pub struct PJRT_Buffer_ElementType_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub type_: PJRT_Buffer_Type,
}

#[repr(C)]
pub struct PJRT_Buffer_Dimensions_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub dims: *const i64,
    pub num_dims: usize,
}

#[repr(C)]
pub struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub on_device_size_in_bytes: usize,
}

#[repr(C)]
pub struct PJRT_Buffer_IsDeleted_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub is_deleted: bool,
}

#[repr(C)]
pub struct PJRT_Buffer_Device_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub device: *mut PJRT_Device,
}

#[repr(C)]
pub struct PJRT_Buffer_ToHostBuffer_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub src: *mut PJRT_Buffer,
    /// `PJRT_Buffer_MemoryLayout*`; always null here (the buffer's layout).
    pub host_layout: *mut c_void,
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_Buffer_ReadyEvent_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub event: *mut PJRT_Event,
}

pjrt_args! {
    PJRT_Api_Version => minor_version,
    PJRT_Error_Destroy_Args => error,
    PJRT_Error_Message_Args => message_size,
    PJRT_Error_GetCode_Args => code,
    PJRT_NamedValue => value_size,
    PJRT_Plugin_Initialize_Args => extension_start,
    PJRT_Plugin_Attributes_Args => num_attributes,
    PJRT_Event_Destroy_Args => event,
    PJRT_Event_IsReady_Args => is_ready,
    PJRT_Event_Error_Args => event,
    PJRT_Event_Await_Args => event,
    PJRT_Client_Create_Args => kv_try_get_user_arg,
    PJRT_Client_Destroy_Args => client,
    PJRT_Client_PlatformName_Args => platform_name_size,
    PJRT_Client_PlatformVersion_Args => platform_version_size,
    PJRT_Client_AddressableDevices_Args => num_addressable_devices,
    PJRT_Program => format_size,
    PJRT_Client_Compile_Args => executable,
    PJRT_Client_BufferFromHostBuffer_Args => buffer,
    PJRT_DeviceDescription_Id_Args => id,
    PJRT_DeviceDescription_Kind_Args => device_kind_size,
    PJRT_DeviceDescription_ToString_Args => to_string_size,
    PJRT_Device_GetDescription_Args => device_description,
    PJRT_Device_LocalHardwareId_Args => local_hardware_id,
    PJRT_Device_MemoryStats_Args => peak_pool_bytes_is_set,
    PJRT_Executable_Destroy_Args => executable,
    PJRT_LoadedExecutable_Destroy_Args => executable,
    PJRT_LoadedExecutable_GetExecutable_Args => executable,
    PJRT_Executable_NumOutputs_Args => num_outputs,
    PJRT_Executable_OutputElementTypes_Args => num_output_types,
    PJRT_Executable_OutputDimensions_Args => dim_sizes,
    PJRT_LoadedExecutable_AddressableDevices_Args => num_addressable_devices,
    PJRT_Executable_Serialize_Args => serialized_executable_deleter,
    PJRT_Executable_DeserializeAndLoad_Args => overridden_serialized_compile_options_size,
    PJRT_ExecuteOptions => incarnation_ids,
    PJRT_LoadedExecutable_Execute_Args => execute_device,
    PJRT_Buffer_Destroy_Args => buffer,
    PJRT_Buffer_ElementType_Args => type_,
    PJRT_Buffer_Dimensions_Args => num_dims,
    PJRT_Buffer_OnDeviceSizeInBytes_Args => on_device_size_in_bytes,
    PJRT_Buffer_IsDeleted_Args => is_deleted,
    PJRT_Buffer_Device_Args => device,
    PJRT_Buffer_ToHostBuffer_Args => event,
    PJRT_Buffer_ReadyEvent_Args => event,
}

// ----------------------------------------------------------------------------
// The API table.

/// `PJRT_Api`, declared up to `PJRT_Executable_OutputDimensions` (the last
/// field this crate uses). Field order follows the header exactly.
#[repr(C)]
pub struct PJRT_Api {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub pjrt_api_version: PJRT_Api_Version,

    pub PJRT_Error_Destroy: Option<unsafe extern "C" fn(args: *mut PJRT_Error_Destroy_Args)>,
    pub PJRT_Error_Message: Option<unsafe extern "C" fn(args: *mut PJRT_Error_Message_Args)>,
    pub PJRT_Error_GetCode: PjrtFn<PJRT_Error_GetCode_Args>,

    pub PJRT_Plugin_Initialize: PjrtFn<PJRT_Plugin_Initialize_Args>,
    pub PJRT_Plugin_Attributes: PjrtFn<PJRT_Plugin_Attributes_Args>,

    pub PJRT_Event_Destroy: PjrtFn<PJRT_Event_Destroy_Args>,
    pub PJRT_Event_IsReady: PjrtFn<PJRT_Event_IsReady_Args>,
    pub PJRT_Event_Error: PjrtFn<PJRT_Event_Error_Args>,
    pub PJRT_Event_Await: PjrtFn<PJRT_Event_Await_Args>,
    pub PJRT_Event_OnReady: Unused,

    pub PJRT_Client_Create: PjrtFn<PJRT_Client_Create_Args>,
    pub PJRT_Client_Destroy: PjrtFn<PJRT_Client_Destroy_Args>,
    pub PJRT_Client_PlatformName: PjrtFn<PJRT_Client_PlatformName_Args>,
    pub PJRT_Client_ProcessIndex: Unused,
    pub PJRT_Client_PlatformVersion: PjrtFn<PJRT_Client_PlatformVersion_Args>,
    pub PJRT_Client_Devices: Unused,
    pub PJRT_Client_AddressableDevices: PjrtFn<PJRT_Client_AddressableDevices_Args>,
    pub PJRT_Client_LookupDevice: Unused,
    pub PJRT_Client_LookupAddressableDevice: Unused,
    pub PJRT_Client_AddressableMemories: Unused,
    pub PJRT_Client_Compile: PjrtFn<PJRT_Client_Compile_Args>,
    pub PJRT_Client_DefaultDeviceAssignment: Unused,
    pub PJRT_Client_BufferFromHostBuffer: PjrtFn<PJRT_Client_BufferFromHostBuffer_Args>,

    pub PJRT_DeviceDescription_Id: PjrtFn<PJRT_DeviceDescription_Id_Args>,
    pub PJRT_DeviceDescription_ProcessIndex: Unused,
    pub PJRT_DeviceDescription_Attributes: Unused,
    pub PJRT_DeviceDescription_Kind: PjrtFn<PJRT_DeviceDescription_Kind_Args>,
    pub PJRT_DeviceDescription_DebugString: Unused,
    pub PJRT_DeviceDescription_ToString: PjrtFn<PJRT_DeviceDescription_ToString_Args>,

    pub PJRT_Device_GetDescription: PjrtFn<PJRT_Device_GetDescription_Args>,
    pub PJRT_Device_IsAddressable: Unused,
    pub PJRT_Device_LocalHardwareId: PjrtFn<PJRT_Device_LocalHardwareId_Args>,
    pub PJRT_Device_AddressableMemories: Unused,
    pub PJRT_Device_DefaultMemory: Unused,
    pub PJRT_Device_MemoryStats: PjrtFn<PJRT_Device_MemoryStats_Args>,

    pub PJRT_Memory_Id: Unused,
    pub PJRT_Memory_Kind: Unused,
    pub PJRT_Memory_DebugString: Unused,
    pub PJRT_Memory_ToString: Unused,
    pub PJRT_Memory_AddressableByDevices: Unused,

    pub PJRT_Executable_Destroy: PjrtFn<PJRT_Executable_Destroy_Args>,
    pub PJRT_Executable_Name: Unused,
    pub PJRT_Executable_NumReplicas: Unused,
    pub PJRT_Executable_NumPartitions: Unused,
    pub PJRT_Executable_NumOutputs: PjrtFn<PJRT_Executable_NumOutputs_Args>,
    pub PJRT_Executable_SizeOfGeneratedCodeInBytes: Unused,
    pub PJRT_Executable_GetCostAnalysis: Unused,
    pub PJRT_Executable_OutputMemoryKinds: Unused,
    pub PJRT_Executable_OptimizedProgram: Unused,
    pub PJRT_Executable_Serialize: PjrtFn<PJRT_Executable_Serialize_Args>,

    pub PJRT_LoadedExecutable_Destroy: PjrtFn<PJRT_LoadedExecutable_Destroy_Args>,
    pub PJRT_LoadedExecutable_GetExecutable: PjrtFn<PJRT_LoadedExecutable_GetExecutable_Args>,
    pub PJRT_LoadedExecutable_AddressableDevices:
        PjrtFn<PJRT_LoadedExecutable_AddressableDevices_Args>,
    pub PJRT_LoadedExecutable_Delete: Unused,
    pub PJRT_LoadedExecutable_IsDeleted: Unused,
    pub PJRT_LoadedExecutable_Execute: PjrtFn<PJRT_LoadedExecutable_Execute_Args>,
    pub PJRT_Executable_DeserializeAndLoad: PjrtFn<PJRT_Executable_DeserializeAndLoad_Args>,
    pub PJRT_LoadedExecutable_Fingerprint: Unused,

    pub PJRT_Buffer_Destroy: PjrtFn<PJRT_Buffer_Destroy_Args>,
    pub PJRT_Buffer_ElementType: PjrtFn<PJRT_Buffer_ElementType_Args>,
    pub PJRT_Buffer_Dimensions: PjrtFn<PJRT_Buffer_Dimensions_Args>,
    pub PJRT_Buffer_UnpaddedDimensions: Unused,
    pub PJRT_Buffer_DynamicDimensionIndices: Unused,
    pub PJRT_Buffer_GetMemoryLayout: Unused,
    pub PJRT_Buffer_OnDeviceSizeInBytes: PjrtFn<PJRT_Buffer_OnDeviceSizeInBytes_Args>,
    pub PJRT_Buffer_Device: PjrtFn<PJRT_Buffer_Device_Args>,
    pub PJRT_Buffer_Memory: Unused,
    pub PJRT_Buffer_Delete: Unused,
    pub PJRT_Buffer_IsDeleted: PjrtFn<PJRT_Buffer_IsDeleted_Args>,
    pub PJRT_Buffer_CopyToDevice: Unused,
    pub PJRT_Buffer_ToHostBuffer: PjrtFn<PJRT_Buffer_ToHostBuffer_Args>,
    pub PJRT_Buffer_IsOnCpu: Unused,
    pub PJRT_Buffer_ReadyEvent: PjrtFn<PJRT_Buffer_ReadyEvent_Args>,
    pub PJRT_Buffer_UnsafePointer: Unused,
    pub PJRT_Buffer_IncreaseExternalReferenceCount: Unused,
    pub PJRT_Buffer_DecreaseExternalReferenceCount: Unused,
    pub PJRT_Buffer_OpaqueDeviceMemoryDataPointer: Unused,

    pub PJRT_CopyToDeviceStream_Destroy: Unused,
    pub PJRT_CopyToDeviceStream_AddChunk: Unused,
    pub PJRT_CopyToDeviceStream_TotalBytes: Unused,
    pub PJRT_CopyToDeviceStream_GranuleSize: Unused,
    pub PJRT_CopyToDeviceStream_CurrentBytes: Unused,

    pub PJRT_TopologyDescription_Create: Unused,
    pub PJRT_TopologyDescription_Destroy: Unused,
    pub PJRT_TopologyDescription_PlatformName: Unused,
    pub PJRT_TopologyDescription_PlatformVersion: Unused,
    pub PJRT_TopologyDescription_GetDeviceDescriptions: Unused,
    pub PJRT_TopologyDescription_Serialize: Unused,
    pub PJRT_TopologyDescription_Attributes: Unused,

    pub PJRT_Compile: Unused,

    pub PJRT_Executable_OutputElementTypes: PjrtFn<PJRT_Executable_OutputElementTypes_Args>,
    pub PJRT_Executable_OutputDimensions: PjrtFn<PJRT_Executable_OutputDimensions_Args>,
    // Later fields (PJRT_Buffer_CopyToMemory, ...) are not declared.
}

/// Bytes of `PJRT_Api` this crate reads: the plugin's `struct_size` must be at
/// least this large.
pub const PJRT_API_USED_SIZE: usize =
    std::mem::offset_of!(PJRT_Api, PJRT_Executable_OutputDimensions)
        + std::mem::size_of::<PjrtFn<PJRT_Executable_OutputDimensions_Args>>();

/// Signature of the plugin entry point `GetPjrtApi`.
pub type GetPjrtApiFn = unsafe extern "C" fn() -> *const PJRT_Api;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// Expected `PJRT_STRUCT_SIZE` values, computed with gcc from the
    /// reference header (API 0.81) on x86_64 Linux.
    #[test]
    fn struct_sizes_match_header() {
        assert_eq!(PJRT_Api_Version::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Error_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Error_Message_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Error_GetCode_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_Plugin_Initialize_Args::STRUCT_SIZE, 16);
        assert_eq!(PJRT_Plugin_Attributes_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_NamedValue::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Event_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Event_IsReady_Args::STRUCT_SIZE, 25);
        assert_eq!(PJRT_Event_Error_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Event_Await_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Client_Create_Args::STRUCT_SIZE, 88);
        assert_eq!(PJRT_Client_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Client_PlatformName_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Client_PlatformVersion_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Client_AddressableDevices_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Program::STRUCT_SIZE, 48);
        assert_eq!(PJRT_Client_Compile_Args::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Client_BufferFromHostBuffer_Args::STRUCT_SIZE, 120);
        assert_eq!(PJRT_DeviceDescription_Id_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_DeviceDescription_Kind_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_DeviceDescription_ToString_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Device_GetDescription_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_Device_LocalHardwareId_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_Executable_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Executable_NumOutputs_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_Executable_OutputElementTypes_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Executable_OutputDimensions_Args::STRUCT_SIZE, 48);
        assert_eq!(
            PJRT_LoadedExecutable_AddressableDevices_Args::STRUCT_SIZE,
            40
        );
        assert_eq!(PJRT_LoadedExecutable_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Executable_Serialize_Args::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Executable_DeserializeAndLoad_Args::STRUCT_SIZE, 64);
        assert_eq!(PJRT_LoadedExecutable_GetExecutable_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_ExecuteOptions::STRUCT_SIZE, 112);
        assert_eq!(PJRT_LoadedExecutable_Execute_Args::STRUCT_SIZE, 80);
        assert_eq!(PJRT_Buffer_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Buffer_ElementType_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_Buffer_Dimensions_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Buffer_OnDeviceSizeInBytes_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_Buffer_IsDeleted_Args::STRUCT_SIZE, 25);
        assert_eq!(PJRT_Buffer_ToHostBuffer_Args::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Buffer_ReadyEvent_Args::STRUCT_SIZE, 32);
        assert_eq!(PJRT_Buffer_Device_Args::STRUCT_SIZE, 32);
    }

    #[test]
    fn api_table_offsets_match_header() {
        assert_eq!(offset_of!(PJRT_Api, PJRT_Client_Compile), 200);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_NumOutputs), 392);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_Serialize), 432);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_DeserializeAndLoad), 488);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Buffer_Device), 560);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Buffer_ReadyEvent), 616);
        assert_eq!(
            offset_of!(PJRT_Api, PJRT_Executable_OutputElementTypes),
            760
        );
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_OutputDimensions), 768);
        assert_eq!(PJRT_API_USED_SIZE, 776);
    }

    #[test]
    fn new_sets_struct_size_and_zeroes() {
        let a = PJRT_Buffer_ElementType_Args::new();
        assert_eq!(a.struct_size, 28);
        assert!(a.buffer.is_null());
        assert_eq!(a.type_, 0);
    }
}
