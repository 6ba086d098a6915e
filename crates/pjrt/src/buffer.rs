//! [`Buffer`]: an owned `PJRT_Buffer` (a device array) with its element type
//! and shape, readback to host memory, and readiness waiting.

use std::sync::Arc;

use crate::api::{pjrt_call, slice_from};
use crate::client::Client;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::ffi::{self, PjrtArgs};
use crate::types::{dense_byte_size, element_count, ElementType};

/// A device-resident array. Destroyed (`PJRT_Buffer_Destroy`) on drop; the
/// runtime keeps the memory alive until pending computations using it finish.
pub struct Buffer {
    client: Arc<Client>,
    pub(crate) raw: *mut ffi::PJRT_Buffer,
    ty: ElementType,
    dims: Arc<[i64]>,
    device: Device,
    /// Bytes counted in `buffer_memory` until the buffer is dropped or donated.
    counted: std::sync::atomic::AtomicI64,
}

// SAFETY: PJRT buffers are thread-safe.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("type", &self.ty)
            .field("dims", &&*self.dims)
            .field("device", &self.device)
            .finish()
    }
}

impl Buffer {
    /// Wraps an owned raw buffer whose type, dims and device are known.
    pub(crate) unsafe fn from_raw_parts(
        client: Arc<Client>,
        raw: *mut ffi::PJRT_Buffer,
        ty: ElementType,
        dims: Arc<[i64]>,
        device: Device,
    ) -> Buffer {
        let counted = counted_bytes(ty, &dims);
        Buffer {
            client,
            raw,
            ty,
            dims,
            device,
            counted,
        }
    }

    /// Wraps an owned raw buffer, asking the plugin for its type, dims and
    /// device. On failure the raw buffer is destroyed.
    pub(crate) unsafe fn from_raw(
        client: Arc<Client>,
        raw: *mut ffi::PJRT_Buffer,
    ) -> Result<Buffer> {
        let query = || -> Result<(ElementType, Arc<[i64]>, Device)> {
            let api = client.api();
            let mut t = ffi::PJRT_Buffer_ElementType_Args::new();
            t.buffer = raw;
            pjrt_call!(api, PJRT_Buffer_ElementType, &mut t)?;
            let ty = ElementType::try_from_raw(t.type_)?;
            let mut d = ffi::PJRT_Buffer_Dimensions_Args::new();
            d.buffer = raw;
            pjrt_call!(api, PJRT_Buffer_Dimensions, &mut d)?;
            let dims = Arc::from(slice_from(d.dims, d.num_dims));
            let mut dv = ffi::PJRT_Buffer_Device_Args::new();
            dv.buffer = raw;
            pjrt_call!(api, PJRT_Buffer_Device, &mut dv)?;
            Ok((ty, dims, client.device_from_raw(dv.device)?))
        };
        match query() {
            // SAFETY: we own `raw`; its type, dims and device were just queried.
            Ok((ty, dims, device)) => Ok(unsafe { Buffer::from_raw_parts(client, raw, ty, dims, device) }),
            Err(e) => {
                let mut a = ffi::PJRT_Buffer_Destroy_Args::new();
                a.buffer = raw;
                let _ = pjrt_call!(client.api(), PJRT_Buffer_Destroy, &mut a);
                Err(e)
            }
        }
    }

    /// The client that owns this buffer.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// Element type.
    pub fn element_type(&self) -> ElementType {
        self.ty
    }

    /// Dimensions (empty for a scalar).
    pub fn dims(&self) -> Vec<i64> {
        self.dims.to_vec()
    }

    /// Dimensions without allocating.
    pub fn shape(&self) -> &[i64] {
        &self.dims
    }

    /// Number of elements (1 for a scalar).
    pub fn element_count(&self) -> usize {
        element_count(&self.dims).unwrap_or(0)
    }

    /// Size in bytes of the dense host representation that
    /// [`to_host`](Self::to_host) expects.
    pub fn host_size(&self) -> Result<usize> {
        if let Some(n) = dense_byte_size(self.ty, &self.dims)? {
            return Ok(n);
        }
        // Sub-byte types: ask the plugin (dst = null queries the size).
        let mut a = ffi::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.raw;
        // SAFETY: valid buffer; null dst only queries the size.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_ToHostBuffer, &mut a) }?;
        Ok(a.dst_size)
    }

    /// Bytes the buffer occupies on the device (`PJRT_Buffer_OnDeviceSizeInBytes`).
    pub fn on_device_size(&self) -> Result<usize> {
        let mut a = ffi::PJRT_Buffer_OnDeviceSizeInBytes_Args::new();
        a.buffer = self.raw;
        // SAFETY: valid buffer.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_OnDeviceSizeInBytes, &mut a) }?;
        Ok(a.on_device_size_in_bytes)
    }

    /// The device holding this buffer (known without a plugin call).
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device holding this buffer, as reported by the plugin
    /// (`PJRT_Buffer_Device`); always equal to [`device`](Self::device).
    pub fn query_device(&self) -> Result<Device> {
        let mut a = ffi::PJRT_Buffer_Device_Args::new();
        a.buffer = self.raw;
        // SAFETY: valid buffer.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_Device, &mut a) }?;
        self.client.device_from_raw(a.device)
    }

    /// Copies the buffer into `dst` (dense, row-major) and blocks until the
    /// copy is done. `dst.len()` must equal [`host_size`](Self::host_size).
    /// If the computation producing this buffer failed, returns that error.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        let need = self.host_size()?;
        if dst.len() != need {
            return Err(Error::invalid_argument(format!(
                "destination has {} bytes but the {:?} buffer of shape {:?} needs {need}",
                dst.len(),
                self.ty,
                &*self.dims
            )));
        }
        let mut a = ffi::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.raw;
        a.dst = dst.as_mut_ptr() as *mut _;
        a.dst_size = dst.len();
        // SAFETY: dst is valid for dst_size bytes and stays borrowed until the
        // event below has completed.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_ToHostBuffer, &mut a) }?;
        if !a.event.is_null() {
            // SAFETY: we own the returned event.
            let ev = unsafe { Event::from_raw(self.client.api().clone(), a.event, None) };
            ev.await_ready()?;
        }
        Ok(())
    }

    /// Convenience: copies the buffer into a new `Vec<u8>`.
    pub fn to_host_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.host_size()?];
        self.to_host(&mut v)?;
        Ok(v)
    }

    /// An event that becomes ready when the buffer's contents are (or the
    /// computation producing them failed).
    pub fn ready_event(&self) -> Result<Event> {
        let mut a = ffi::PJRT_Buffer_ReadyEvent_Args::new();
        a.buffer = self.raw;
        // SAFETY: valid buffer.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_ReadyEvent, &mut a) }?;
        if a.event.is_null() {
            return Err(Error::internal(
                "PJRT_Buffer_ReadyEvent returned a null event",
            ));
        }
        // SAFETY: we own the returned event.
        Ok(unsafe {
            Event::from_raw(
                self.client.api().clone(),
                a.event,
                Some(self.client.clone()),
            )
        })
    }

    /// Blocks until the buffer is ready; returns the execution error if the
    /// computation producing it failed.
    pub fn ready(&self) -> Result<()> {
        self.ready_event()?.await_ready()
    }
}

fn counted_bytes(ty: ElementType, dims: &[i64]) -> std::sync::atomic::AtomicI64 {
    let bytes = dense_byte_size(ty, dims).ok().flatten().unwrap_or(0) as i64;
    crate::buffer_memory::add(bytes);
    std::sync::atomic::AtomicI64::new(bytes)
}

impl Buffer {
    /// Whether the plugin has deleted the buffer (e.g. it was donated to an
    /// execution, whose output now owns its memory).
    pub fn is_deleted(&self) -> bool {
        let mut a = ffi::PJRT_Buffer_IsDeleted_Args::new();
        a.buffer = self.raw;
        // SAFETY: valid buffer handle.
        unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_IsDeleted, &mut a) }.map(|_| a.is_deleted).unwrap_or(false)
    }

    /// Stops counting this buffer's bytes once the plugin has deleted it.
    pub(crate) fn uncount_if_deleted(&self) {
        if self.is_deleted() {
            crate::buffer_memory::sub(self.counted.swap(0, std::sync::atomic::Ordering::Relaxed));
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        crate::buffer_memory::sub(self.counted.swap(0, std::sync::atomic::Ordering::Relaxed));
        let mut a = ffi::PJRT_Buffer_Destroy_Args::new();
        a.buffer = self.raw;
        // SAFETY: we own the buffer. Errors cannot be reported from drop.
        let _ = unsafe { pjrt_call!(self.client.api(), PJRT_Buffer_Destroy, &mut a) };
    }
}
