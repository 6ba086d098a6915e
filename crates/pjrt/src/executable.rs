//! [`Executable`]: an owned `PJRT_LoadedExecutable` and asynchronous
//! single-device execution returning output [`Buffer`]s.

use std::sync::Arc;

use crate::api::{pjrt_call, slice_from};
use crate::buffer::Buffer;
use crate::client::Client;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::{self, PjrtArgs};
use crate::types::ElementType;

/// A compiled, loaded program. Destroyed (`PJRT_LoadedExecutable_Destroy`)
/// on drop; in-flight executions keep what they need alive.
pub struct Executable {
    client: Arc<Client>,
    raw: *mut ffi::PJRT_LoadedExecutable,
    num_outputs: usize,
    /// Per-output (type, dims), when the plugin reports them; otherwise each
    /// output buffer is queried.
    output_meta: Option<Vec<(ElementType, Arc<[i64]>)>>,
    devices: Vec<Device>,
}

// SAFETY: PJRT executables are thread-safe (concurrent Execute calls are allowed).
unsafe impl Send for Executable {}
unsafe impl Sync for Executable {}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("num_outputs", &self.num_outputs)
            .field("devices", &self.devices)
            .finish()
    }
}

/// Owns a `PJRT_Executable` obtained from `PJRT_LoadedExecutable_GetExecutable`.
struct ExecutableView<'a> {
    client: &'a Client,
    raw: *mut ffi::PJRT_Executable,
}

impl Drop for ExecutableView<'_> {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_Executable_Destroy_Args::new();
        a.executable = self.raw;
        // SAFETY: we own the view.
        let _ = unsafe { pjrt_call!(self.client.api(), PJRT_Executable_Destroy, &mut a) };
    }
}

impl Executable {
    /// Takes ownership of a freshly compiled executable and reads its output
    /// count, output shapes and devices. On failure the executable is destroyed.
    pub(crate) unsafe fn from_raw(
        client: Arc<Client>,
        raw: *mut ffi::PJRT_LoadedExecutable,
    ) -> Result<Executable> {
        let mut exe = Executable {
            client,
            raw,
            num_outputs: 0,
            output_meta: None,
            devices: Vec::new(),
        };
        let api = exe.client.api().clone();

        let mut g = ffi::PJRT_LoadedExecutable_GetExecutable_Args::new();
        g.loaded_executable = raw;
        pjrt_call!(&api, PJRT_LoadedExecutable_GetExecutable, &mut g)?;
        let view = ExecutableView {
            client: &exe.client,
            raw: g.executable,
        };

        let mut n = ffi::PJRT_Executable_NumOutputs_Args::new();
        n.executable = view.raw;
        pjrt_call!(&api, PJRT_Executable_NumOutputs, &mut n)?;
        let num_outputs = n.num_outputs;

        // Output types and dims, best effort (used to avoid per-buffer queries).
        let mut meta = None;
        let mut t = ffi::PJRT_Executable_OutputElementTypes_Args::new();
        t.executable = view.raw;
        if pjrt_call!(&api, PJRT_Executable_OutputElementTypes, &mut t).is_ok()
            && t.num_output_types == num_outputs
        {
            let types = slice_from(t.output_types as *const i32, t.num_output_types);
            let mut d = ffi::PJRT_Executable_OutputDimensions_Args::new();
            d.executable = view.raw;
            if pjrt_call!(&api, PJRT_Executable_OutputDimensions, &mut d).is_ok()
                && d.num_outputs == num_outputs
            {
                let sizes = slice_from(d.dim_sizes, d.num_outputs);
                let total: usize = sizes.iter().sum();
                let all_dims = slice_from(d.dims, total);
                let mut v = Vec::with_capacity(num_outputs);
                let mut off = 0;
                for (i, &s) in sizes.iter().enumerate() {
                    match ElementType::from_raw(types[i]) {
                        Some(ty) => v.push((ty, Arc::<[i64]>::from(&all_dims[off..off + s]))),
                        None => break,
                    }
                    off += s;
                }
                if v.len() == num_outputs {
                    meta = Some(v);
                }
            }
        }
        drop(view);

        let mut a = ffi::PJRT_LoadedExecutable_AddressableDevices_Args::new();
        a.executable = raw;
        pjrt_call!(&api, PJRT_LoadedExecutable_AddressableDevices, &mut a)?;
        let mut devices = Vec::new();
        for &d in slice_from(a.addressable_devices, a.num_addressable_devices) {
            devices.push(exe.client.device_from_raw(d)?);
        }

        exe.num_outputs = num_outputs;
        exe.output_meta = meta;
        exe.devices = devices;
        Ok(exe)
    }

    /// The client this executable was compiled by.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// Number of outputs per execution (`PJRT_Executable_NumOutputs`).
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// Devices the executable was compiled to run on (empty if portable).
    pub fn addressable_devices(&self) -> Vec<Device> {
        self.devices.clone()
    }

    /// Output element types and dims, if the plugin reports them.
    pub fn output_shapes(&self) -> Option<Vec<(ElementType, Vec<i64>)>> {
        self.output_meta
            .as_ref()
            .map(|m| m.iter().map(|(t, d)| (*t, d.to_vec())).collect())
    }

    /// A platform-specific serialization of the compiled program
    /// (`PJRT_Executable_Serialize`), to be loaded again with
    /// [`Client::deserialize_executable`] by the same plugin build. The bytes
    /// are not stable across plugin versions. Errors with code
    /// `UNIMPLEMENTED` when the plugin cannot serialize executables.
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let api = self.client.api();
        let mut g = ffi::PJRT_LoadedExecutable_GetExecutable_Args::new();
        g.loaded_executable = self.raw;
        // SAFETY: we own the loaded executable; the view is destroyed on drop.
        unsafe { pjrt_call!(api, PJRT_LoadedExecutable_GetExecutable, &mut g) }?;
        let view = ExecutableView {
            client: &self.client,
            raw: g.executable,
        };
        let mut a = ffi::PJRT_Executable_Serialize_Args::new();
        a.executable = view.raw;
        // SAFETY: valid executable view; the outputs are owned by us after the call.
        unsafe { pjrt_call!(api, PJRT_Executable_Serialize, &mut a) }?;
        // SAFETY: the bytes live until the deleter runs, which happens after the copy.
        let bytes =
            unsafe { slice_from(a.serialized_bytes as *const u8, a.serialized_bytes_size) }.to_vec();
        if !a.serialized_executable.is_null() {
            if let Some(del) = a.serialized_executable_deleter {
                // SAFETY: called exactly once on the object the plugin returned.
                unsafe { del(a.serialized_executable) };
            }
        }
        drop(view);
        if bytes.is_empty() {
            return Err(Error::internal(
                "PJRT_Executable_Serialize returned an empty serialization",
            ));
        }
        Ok(bytes)
    }

    /// Whether the executable is portable (not bound to a device at compile
    /// time; [`Client::compile`] produces these).
    pub fn is_portable(&self) -> bool {
        self.devices.is_empty()
    }

    /// Enqueues one execution and returns its outputs without waiting for it
    /// to finish; the outputs can be fed to further executions right away,
    /// and [`Buffer::ready`] / [`Buffer::to_host`] wait for them. Errors of
    /// the computation itself surface there.
    ///
    /// Device: for a portable executable, `Some(d)` runs on `d`; `None` runs
    /// on the device of the first input (device 0 if there are no inputs).
    /// For an executable bound to a device, `None` or that device run there,
    /// and any other device is an error. Inputs must live on the device used.
    ///
    /// No input is donated: inputs remain valid after the call.
    pub fn execute(&self, inputs: &[&Buffer], device: Option<Device>) -> Result<Vec<Buffer>> {
        self.execute_impl(inputs, &[], device)
    }

    /// Like [`execute`](Self::execute), but the inputs at the indices in
    /// `donate` may be donated (their memory reused for outputs) if the
    /// program declares input/output aliasing for them. A donated input is
    /// invalid afterwards: using it returns an error from the plugin.
    pub fn execute_donating(
        &self,
        inputs: &[&Buffer],
        donate: &[usize],
        device: Option<Device>,
    ) -> Result<Vec<Buffer>> {
        if let Some(&bad) = donate.iter().find(|&&i| i >= inputs.len()) {
            return Err(Error::invalid_argument(format!(
                "donated input index {bad} out of range ({} inputs)",
                inputs.len()
            )));
        }
        self.execute_impl(inputs, donate, device)
    }

    fn execute_impl(
        &self,
        inputs: &[&Buffer],
        donate: &[usize],
        device: Option<Device>,
    ) -> Result<Vec<Buffer>> {
        for (i, b) in inputs.iter().enumerate() {
            if !Arc::ptr_eq(b.client(), &self.client) {
                return Err(Error::invalid_argument(format!(
                    "input {i} belongs to a different PJRT client than the executable"
                )));
            }
        }
        // The device to pass as `execute_device` (null = as compiled), and the
        // device the outputs will be on (None = ask the plugin).
        let (execute_device, out_device) = if self.is_portable() {
            let d = match device {
                Some(d) => {
                    self.client.check_device(d)?;
                    d
                }
                None => match inputs.first() {
                    Some(b) => b.device(),
                    None => self.client.device(0)?,
                },
            };
            (d.raw, Some(d))
        } else if self.devices.len() == 1 {
            let compiled = self.devices[0];
            if let Some(d) = device {
                if d != compiled {
                    return Err(Error::invalid_argument(format!(
                        "executable was compiled for device {compiled} (not portable) and cannot run on {d}; \
                         compile it with Client::compile to get a portable executable"
                    )));
                }
            }
            (std::ptr::null_mut(), Some(compiled))
        } else {
            match device {
                Some(d) => {
                    self.client.check_device(d)?;
                    (d.raw, None)
                }
                None => (std::ptr::null_mut(), None),
            }
        };

        let arg_ptrs: Vec<*mut ffi::PJRT_Buffer> = inputs.iter().map(|b| b.raw).collect();
        let arg_lists: [*const *mut ffi::PJRT_Buffer; 1] = [arg_ptrs.as_ptr()];
        let mut outs: Vec<*mut ffi::PJRT_Buffer> = vec![std::ptr::null_mut(); self.num_outputs];
        let out_lists: [*mut *mut ffi::PJRT_Buffer; 1] = [outs.as_mut_ptr()];
        // Nothing donated (every eager op): all inputs are non-donatable, a
        // prefix of a constant list, so there is nothing to allocate.
        const FIRST_INDICES: [i64; 64] = {
            let mut a = [0i64; 64];
            let mut i = 0;
            while i < 64 {
                a[i] = i as i64;
                i += 1;
            }
            a
        };
        let listed: Vec<i64>;
        let non_donatable: &[i64] = if donate.is_empty() && inputs.len() <= FIRST_INDICES.len() {
            &FIRST_INDICES[..inputs.len()]
        } else {
            listed = (0..inputs.len()).filter(|i| !donate.contains(i)).map(|i| i as i64).collect();
            &listed
        };

        let mut opts = ffi::PJRT_ExecuteOptions::new();
        opts.non_donatable_input_indices = non_donatable.as_ptr();
        opts.num_non_donatable_input_indices = non_donatable.len();

        let mut args = ffi::PJRT_LoadedExecutable_Execute_Args::new();
        args.executable = self.raw;
        args.options = &mut opts;
        args.argument_lists = arg_lists.as_ptr();
        args.num_devices = 1;
        args.num_args = inputs.len();
        args.output_lists = out_lists.as_ptr();
        args.execute_device = execute_device;
        // SAFETY: every pointer references locals (or live buffers borrowed
        // by `inputs`) that outlive the call; the plugin fills `outs`.
        unsafe { pjrt_call!(self.client.api(), PJRT_LoadedExecutable_Execute, &mut args) }?;
        // Donated inputs the plugin consumed no longer hold memory; stop
        // counting them before the outputs that reuse it are counted.
        for &i in donate {
            inputs[i].uncount_if_deleted();
        }

        // Take ownership of every output before anything can fail.
        let mut result = Vec::with_capacity(outs.len());
        let mut first_err = None;
        for (i, &raw) in outs.iter().enumerate() {
            if raw.is_null() {
                first_err.get_or_insert_with(|| {
                    Error::internal(format!("PJRT execute returned a null output buffer {i}"))
                });
                continue;
            }
            let b = match (&self.output_meta, out_device) {
                // SAFETY: we own `raw`; its type/dims come from the executable.
                (Some(m), Some(dev)) => Ok(unsafe {
                    Buffer::from_raw_parts(self.client.clone(), raw, m[i].0, m[i].1.clone(), dev)
                }),
                // SAFETY: we own `raw` (destroyed on failure).
                _ => unsafe { Buffer::from_raw(self.client.clone(), raw) },
            };
            match b {
                Ok(b) => result.push(b),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(result),
        }
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_LoadedExecutable_Destroy_Args::new();
        a.executable = self.raw;
        // SAFETY: we own the executable. Errors cannot be reported from drop.
        let _ = unsafe { pjrt_call!(self.client.api(), PJRT_LoadedExecutable_Destroy, &mut a) };
    }
}
