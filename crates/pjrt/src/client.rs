//! [`Client`]: an owned `PJRT_Client` with its platform info and addressable
//! devices, plus compilation of StableHLO text and host-to-device uploads.

use std::ffi::c_char;
use std::sync::Arc;

use crate::api::{pjrt_call, slice_from, string_from, Api};
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::executable::Executable;
use crate::ffi::{self, PjrtArgs};
use crate::types::{dense_byte_size, ElementType};

/// A PJRT client. Create it with [`Client::new`]; it is destroyed when the
/// last `Arc` (including those held by buffers and executables) goes away.
/// The value of a client creation option.
#[derive(Clone, Copy, Debug)]
pub enum ClientOption {
    Int(i64),
    Bool(bool),
}

pub struct Client {
    api: Arc<Api>,
    pub(crate) raw: *mut ffi::PJRT_Client,
    platform_name: String,
    platform_version: String,
    devices: Vec<Device>,
}

// SAFETY: PJRT clients are thread-safe.
unsafe impl Send for Client {}
unsafe impl Sync for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("platform_name", &self.platform_name)
            .field("platform_version", &self.platform_version)
            .field("devices", &self.devices)
            .finish()
    }
}

/// Serialized `CompileOptionsProto` used by [`Client::compile`]:
/// `executable_build_options { num_replicas: 1 num_partitions: 1 }
/// compile_portable_executable: true`.
///
/// A portable executable is not bound to a device at compile time: each
/// execution names its device (`execute_device`), so one compilation serves
/// every addressable device. (Setting `executable_build_options.device_ordinal`
/// instead is ignored by the XLA CPU plugin: the executable stays on device 0.)
pub const PORTABLE_COMPILE_OPTIONS: &[u8] = &[0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01];

/// Serialized `CompileOptionsProto` for an executable bound to the client's
/// default device (device 0): `executable_build_options { num_replicas: 1
/// num_partitions: 1 }`. Use with [`Client::compile_with_options`].
/// (An empty CompileOptionsProto makes the XLA CPU plugin abort, so some
/// options must always be given.)
pub const DEVICE0_COMPILE_OPTIONS: &[u8] = &[0x1a, 0x04, 0x20, 0x01, 0x28, 0x01];

impl Client {
    /// Creates a client (`PJRT_Client_Create` with no options) and reads its
    /// platform name, version and addressable devices.
    pub fn new(api: Arc<Api>) -> Result<Arc<Client>> {
        Self::with_options(api, &[])
    }

    /// A client created with plugin-specific options, e.g. the XLA CPU
    /// plugin's `("cpu_device_count", Int(4))`. Unknown names are the
    /// plugin's to reject.
    pub fn with_options(api: Arc<Api>, options: &[(&str, ClientOption)]) -> Result<Arc<Client>> {
        let mut named: Vec<ffi::PJRT_NamedValue> = Vec::with_capacity(options.len());
        for (name, value) in options {
            let mut nv: ffi::PJRT_NamedValue = ffi::PjrtArgs::new();
            nv.name = name.as_ptr() as *const std::ffi::c_char;
            nv.name_size = name.len();
            match value {
                ClientOption::Int(v) => {
                    nv.type_ = 1; // PJRT_NamedValue_kInt64
                    nv.value = ffi::PJRT_NamedValue_Value { int64_value: *v };
                    nv.value_size = 1;
                }
                ClientOption::Bool(v) => {
                    nv.type_ = 4; // PJRT_NamedValue_kBool
                    nv.value = ffi::PJRT_NamedValue_Value { bool_value: *v };
                    nv.value_size = 1;
                }
            }
            named.push(nv);
        }
        let mut args = ffi::PJRT_Client_Create_Args::new();
        args.create_options = if named.is_empty() { std::ptr::null() } else { named.as_ptr() };
        args.num_options = named.len();
        // SAFETY: valid argument struct; `named` and the option names outlive
        // the call; no key-value callbacks.
        unsafe { pjrt_call!(&api, PJRT_Client_Create, &mut args) }?;
        if args.client.is_null() {
            return Err(Error::internal("PJRT_Client_Create returned a null client"));
        }
        // From here on, Drop destroys the client if anything fails.
        let mut client = Client {
            api,
            raw: args.client,
            platform_name: String::new(),
            platform_version: String::new(),
            devices: Vec::new(),
        };

        let mut a = ffi::PJRT_Client_PlatformName_Args::new();
        a.client = client.raw;
        // SAFETY: valid client; the returned string lives as long as it.
        unsafe { pjrt_call!(&client.api, PJRT_Client_PlatformName, &mut a) }?;
        client.platform_name = unsafe { string_from(a.platform_name, a.platform_name_size) };

        let mut a = ffi::PJRT_Client_PlatformVersion_Args::new();
        a.client = client.raw;
        // SAFETY: as above.
        unsafe { pjrt_call!(&client.api, PJRT_Client_PlatformVersion, &mut a) }?;
        client.platform_version =
            unsafe { string_from(a.platform_version, a.platform_version_size) };

        let mut a = ffi::PJRT_Client_AddressableDevices_Args::new();
        a.client = client.raw;
        // SAFETY: as above; the device array lives as long as the client.
        unsafe { pjrt_call!(&client.api, PJRT_Client_AddressableDevices, &mut a) }?;
        let raws: Vec<*mut ffi::PJRT_Device> =
            unsafe { slice_from(a.addressable_devices, a.num_addressable_devices) }.to_vec();
        for (i, raw) in raws.into_iter().enumerate() {
            // SAFETY: `raw` is one of this client's devices.
            let d = unsafe { Device::query(&client.api, raw, i) }?;
            client.devices.push(d);
        }
        Ok(Arc::new(client))
    }

    /// The plugin this client was created from.
    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }

    /// Platform name, e.g. `"cpu"`.
    pub fn platform_name(&self) -> String {
        self.platform_name.clone()
    }

    /// Platform-specific version string.
    pub fn platform_version(&self) -> String {
        self.platform_version.clone()
    }

    /// The devices this client can issue work to, in plugin order.
    pub fn addressable_devices(&self) -> Vec<Device> {
        self.devices.clone()
    }

    /// The `index`-th addressable device.
    pub fn device(&self, index: usize) -> Result<Device> {
        self.devices.get(index).copied().ok_or_else(|| {
            Error::invalid_argument(format!(
                "device index {index} out of range: the client has {} addressable devices",
                self.devices.len()
            ))
        })
    }

    /// Maps a raw device pointer returned by the plugin to our handle.
    pub(crate) fn device_from_raw(&self, raw: *mut ffi::PJRT_Device) -> Result<Device> {
        self.devices
            .iter()
            .copied()
            .find(|d| d.raw == raw)
            .ok_or_else(|| {
                Error::internal(
                    "PJRT plugin returned a device that is not addressable by this client",
                )
            })
    }

    /// Errors unless `device` is one of this client's addressable devices.
    pub(crate) fn check_device(&self, device: Device) -> Result<()> {
        if self.devices.contains(&device) {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "device {device} does not belong to this PJRT client"
            )))
        }
    }

    /// Compiles a StableHLO module given as MLIR text (program format
    /// `"mlir"`) into a portable single-device executable
    /// ([`PORTABLE_COMPILE_OPTIONS`]) that can run on any addressable device;
    /// see [`Executable::execute`] for how the device is chosen.
    pub fn compile(self: &Arc<Self>, mlir_text: &str) -> Result<Executable> {
        self.compile_with_options(mlir_text, PORTABLE_COMPILE_OPTIONS)
    }

    /// Compiles with caller-supplied serialized `CompileOptionsProto` bytes,
    /// which must not be empty (the CPU plugin aborts on empty options).
    pub fn compile_with_options(
        self: &Arc<Self>,
        mlir_text: &str,
        compile_options: &[u8],
    ) -> Result<Executable> {
        if compile_options.is_empty() {
            return Err(Error::invalid_argument(
                "compile options must not be empty (the plugin aborts on them); \
                 use PORTABLE_COMPILE_OPTIONS or DEVICE0_COMPILE_OPTIONS",
            ));
        }
        const FORMAT: &str = "mlir";
        let mut program = ffi::PJRT_Program::new();
        program.code = mlir_text.as_ptr() as *mut c_char; // not written for Compile
        program.code_size = mlir_text.len();
        program.format = FORMAT.as_ptr() as *const c_char;
        program.format_size = FORMAT.len();

        let mut args = ffi::PJRT_Client_Compile_Args::new();
        args.client = self.raw;
        args.program = &program;
        args.compile_options = compile_options.as_ptr() as *const c_char;
        args.compile_options_size = compile_options.len();
        // SAFETY: all pointers reference live locals for the duration of the call.
        unsafe { pjrt_call!(&self.api, PJRT_Client_Compile, &mut args) }?;
        if args.executable.is_null() {
            return Err(Error::internal(
                "PJRT_Client_Compile returned a null executable",
            ));
        }
        // SAFETY: we own the new executable.
        unsafe { Executable::from_raw(self.clone(), args.executable) }
    }

    /// Loads an executable serialized by [`Executable::serialize`]
    /// (`PJRT_Executable_DeserializeAndLoad`), with the compile options it
    /// was compiled with (a portable executable stays portable). The bytes
    /// must come from the same platform and plugin build; anything else is
    /// the plugin's to reject (an `Err`, never a crash for well-formed
    /// plugins). Errors with code `UNIMPLEMENTED` when the plugin cannot
    /// deserialize.
    pub fn deserialize_executable(self: &Arc<Self>, bytes: &[u8]) -> Result<Executable> {
        if bytes.is_empty() {
            return Err(Error::invalid_argument(
                "cannot deserialize an executable from zero bytes",
            ));
        }
        let mut args = ffi::PJRT_Executable_DeserializeAndLoad_Args::new();
        args.client = self.raw;
        args.serialized_executable = bytes.as_ptr() as *const c_char;
        args.serialized_executable_size = bytes.len();
        // SAFETY: `bytes` outlives the call; null options = the stored ones.
        unsafe { pjrt_call!(&self.api, PJRT_Executable_DeserializeAndLoad, &mut args) }?;
        if args.loaded_executable.is_null() {
            return Err(Error::internal(
                "PJRT_Executable_DeserializeAndLoad returned a null executable",
            ));
        }
        // SAFETY: we own the new executable.
        unsafe { Executable::from_raw(self.clone(), args.loaded_executable) }
    }

    /// Copies a dense, row-major host array to `device`.
    ///
    /// `data.len()` must equal `product(dims) * byte_width(ty)`; sub-byte
    /// element types are not accepted here. The host data is copied during
    /// the call (`kImmutableOnlyDuringCall`).
    pub fn buffer_from_host(
        self: &Arc<Self>,
        data: &[u8],
        ty: ElementType,
        dims: &[i64],
        device: Device,
    ) -> Result<Buffer> {
        self.check_device(device)?;
        let expected = dense_byte_size(ty, dims)?.ok_or_else(|| {
            Error::invalid_argument(format!(
                "buffer_from_host does not support element type {ty:?} (no whole-byte width)"
            ))
        })?;
        if data.len() != expected {
            return Err(Error::invalid_argument(format!(
                "host data has {} bytes but a {ty:?} array of shape {dims:?} needs {expected}",
                data.len()
            )));
        }
        let mut args = ffi::PJRT_Client_BufferFromHostBuffer_Args::new();
        args.client = self.raw;
        args.data = data.as_ptr() as *const _;
        args.type_ = ty.as_raw();
        args.dims = dims.as_ptr();
        args.num_dims = dims.len();
        args.host_buffer_semantics = ffi::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
        args.device = device.raw;
        // SAFETY: data/dims outlive the call; the plugin copies the data
        // before returning under kImmutableOnlyDuringCall.
        unsafe { pjrt_call!(&self.api, PJRT_Client_BufferFromHostBuffer, &mut args) }?;
        // Own both outputs before anything else can fail.
        let done = (!args.done_with_host_buffer.is_null()).then(|| {
            // SAFETY: we own the returned event.
            unsafe { Event::from_raw(self.api.clone(), args.done_with_host_buffer, None) }
        });
        if args.buffer.is_null() {
            return Err(Error::internal(
                "PJRT_Client_BufferFromHostBuffer returned a null buffer",
            ));
        }
        // SAFETY: we own the new buffer; its type and dims are what we asked for.
        let buffer =
            unsafe { Buffer::from_raw_parts(self.clone(), args.buffer, ty, dims.into(), device) };
        if let Some(done) = done {
            done.await_ready()?;
        }
        Ok(buffer)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_Client_Destroy_Args::new();
        a.client = self.raw;
        // SAFETY: we own the client and nothing else references it (buffers
        // and executables hold an Arc to us). Errors cannot be reported.
        let _ = unsafe { pjrt_call!(&self.api, PJRT_Client_Destroy, &mut a) };
    }
}
