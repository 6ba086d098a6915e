//! [`Device`]: a small `Copy` handle to one addressable device of a
//! [`Client`](crate::Client), with its id, kind and local hardware id read
//! once when the client is created.

use std::sync::Mutex;

use crate::api::{pjrt_call, string_from, Api};
use crate::error::Result;
use crate::ffi::{self, PjrtArgs};

/// An addressable device of a [`Client`](crate::Client).
///
/// All properties are captured when the client is created, so reading them
/// never calls into the plugin. The handle is only meaningful together with
/// the client that produced it; client methods that take a `Device` check that
/// it belongs to that client.
#[derive(Clone, Copy)]
pub struct Device {
    pub(crate) raw: *mut ffi::PJRT_Device,
    id: i32,
    local_hardware_id: i32,
    index: usize,
    kind: &'static str,
}

// SAFETY: the handle is an opaque token; PJRT devices are thread-safe.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl Eq for Device {}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.raw as usize).hash(state)
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("local_hardware_id", &self.local_hardware_id)
            .field("index", &self.index)
            .finish()
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.id)
    }
}

impl Device {
    /// The device id (`PJRT_DeviceDescription_Id`), unique within the client.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The device kind (`PJRT_DeviceDescription_Kind`), e.g. `"cpu"`.
    pub fn kind(&self) -> String {
        self.kind.to_string()
    }

    /// The device kind without allocating.
    pub fn kind_str(&self) -> &'static str {
        self.kind
    }

    /// Opaque hardware id (`PJRT_Device_LocalHardwareId`); -1 if undefined or
    /// if the plugin does not report it.
    pub fn local_hardware_id(&self) -> i32 {
        self.local_hardware_id
    }

    /// Position of this device in its client's
    /// [`addressable_devices`](crate::Client::addressable_devices) list.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The plugin's memory statistics for this device
    /// (`PJRT_Device_MemoryStats`); an error where the plugin has none.
    pub fn memory_stats(&self, api: &Api) -> Result<MemoryStats> {
        let mut a = ffi::PJRT_Device_MemoryStats_Args::new();
        a.device = self.raw;
        // SAFETY: `raw` is a live device of a client created by `api`.
        unsafe { pjrt_call!(api, PJRT_Device_MemoryStats, &mut a) }?;
        Ok(MemoryStats {
            bytes_in_use: a.bytes_in_use,
            bytes_limit: a.bytes_limit_is_set.then_some(a.bytes_limit),
        })
    }

    /// Reads the properties of `raw` (one of the client's addressable devices).
    ///
    /// # Safety
    /// `raw` must be a live device of a client created by `api`.
    pub(crate) unsafe fn query(
        api: &Api,
        raw: *mut ffi::PJRT_Device,
        index: usize,
    ) -> Result<Device> {
        let mut d = ffi::PJRT_Device_GetDescription_Args::new();
        d.device = raw;
        pjrt_call!(api, PJRT_Device_GetDescription, &mut d)?;
        let desc = d.device_description;

        let mut a = ffi::PJRT_DeviceDescription_Id_Args::new();
        a.device_description = desc;
        pjrt_call!(api, PJRT_DeviceDescription_Id, &mut a)?;
        let id = a.id;

        let mut k = ffi::PJRT_DeviceDescription_Kind_Args::new();
        k.device_description = desc;
        pjrt_call!(api, PJRT_DeviceDescription_Kind, &mut k)?;
        let kind = intern(string_from(k.device_kind, k.device_kind_size));

        let mut h = ffi::PJRT_Device_LocalHardwareId_Args::new();
        h.device = raw;
        let local_hardware_id = match pjrt_call!(api, PJRT_Device_LocalHardwareId, &mut h) {
            Ok(()) => h.local_hardware_id,
            Err(_) => -1,
        };
        Ok(Device {
            raw,
            id,
            local_hardware_id,
            index,
            kind,
        })
    }
}

/// What a plugin reports about a device's memory (the fields used here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    pub bytes_in_use: i64,
    /// The memory user allocations may take, where the plugin knows it.
    pub bytes_limit: Option<i64>,
}

/// Interns device-kind strings so that `Device` can stay `Copy`. The set of
/// distinct kinds in a process is tiny ("cpu", a few accelerator names).
fn intern(s: String) -> &'static str {
    static KINDS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut kinds = KINDS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(k) = kinds.iter().find(|k| **k == s) {
        return k;
    }
    let leaked: &'static str = Box::leak(s.into_boxed_str());
    kinds.push(leaked);
    leaked
}
