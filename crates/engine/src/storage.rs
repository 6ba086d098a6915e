//! Device storages. A storage is what a c10::Storage's data pointer points
//! at: a byte size, a device, and the PJRT buffer currently holding its
//! bytes. PJRT buffers are immutable, so writing to a storage swaps in a new
//! buffer; every view of the storage sees it because they share the handle.
//!
//! Invariant: `buffer` is 1-D, `[nbytes / dtype.size]` of `dtype`, where
//! `dtype` is the dtype of its last writer. `None` means never written
//! (reads see zeros).
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use stablehlo::DType;

pub struct Storage {
    pub nbytes: usize,
    pub device: i32,
    /// Unique for the life of the process (addresses get reused).
    pub id: u64,
    state: Mutex<StorageState>,
    /// Its current value lives in the pending Fused Eager graph.
    pub pending: std::sync::atomic::AtomicBool,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[derive(Clone)]
pub struct StorageState {
    pub buffer: Option<Arc<pjrt::Buffer>>,
    pub dtype: DType,
}

const MAX_DEVICES: usize = 64;

/// Bytes held by live storages, per device, with the peak since reset.
pub struct MemoryStats {
    allocated: [AtomicI64; MAX_DEVICES],
    peak: [AtomicI64; MAX_DEVICES],
    count: [AtomicI64; MAX_DEVICES],
    /// Bytes this process may hold (torch.tpu.set_per_process_memory_fraction); 0: no limit.
    limit: [AtomicI64; MAX_DEVICES],
}

pub static MEMORY: MemoryStats = MemoryStats {
    allocated: [const { AtomicI64::new(0) }; MAX_DEVICES],
    peak: [const { AtomicI64::new(0) }; MAX_DEVICES],
    count: [const { AtomicI64::new(0) }; MAX_DEVICES],
    limit: [const { AtomicI64::new(0) }; MAX_DEVICES],
};

impl MemoryStats {
    fn slot(device: i32) -> usize {
        (device.max(0) as usize).min(MAX_DEVICES - 1)
    }
    fn add(&self, device: i32, bytes: i64) {
        let i = Self::slot(device);
        let now = self.allocated[i].fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.count[i].fetch_add(if bytes >= 0 { 1 } else { -1 }, Ordering::Relaxed);
        self.peak[i].fetch_max(now, Ordering::Relaxed);
    }
    pub fn get(&self, device: i32) -> (i64, i64, i64) {
        let i = Self::slot(device);
        (
            self.allocated[i].load(Ordering::Relaxed),
            self.peak[i].load(Ordering::Relaxed),
            self.count[i].load(Ordering::Relaxed),
        )
    }
    pub fn set_limit(&self, device: i32, bytes: i64) {
        self.limit[Self::slot(device)].store(bytes.max(0), Ordering::Relaxed);
    }
    /// The limit in bytes, if one is set.
    pub fn limit(&self, device: i32) -> Option<i64> {
        Some(self.limit[Self::slot(device)].load(Ordering::Relaxed)).filter(|&l| l > 0)
    }
    pub fn reset_peak(&self, device: i32) {
        let i = Self::slot(device);
        self.peak[i].store(self.allocated[i].load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

impl Storage {
    pub fn new(nbytes: usize, device: i32) -> Storage {
        MEMORY.add(device, nbytes as i64);
        Storage {
            nbytes,
            device,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(StorageState { buffer: None, dtype: DType::U8 }),
            pending: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A storage that already holds `buffer` (1-D of `dtype`).
    pub fn with_buffer(buffer: Arc<pjrt::Buffer>, dtype: DType, nbytes: usize, device: i32) -> Storage {
        let s = Storage::new(nbytes, device);
        s.set(buffer, dtype);
        s
    }

    pub fn state(&self) -> StorageState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, buffer: Arc<pjrt::Buffer>, dtype: DType) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.buffer = Some(buffer);
        st.dtype = dtype;
    }

    /// Holds what `other` holds now: its buffer (or none: zeros) and dtype.
    pub fn share_value_of(&self, other: &Storage) {
        let value = other.state();
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = value;
    }

    /// Turns the handle given to C++ back into a reference.
    ///
    /// # Safety
    /// `ptr` must come from [`Storage::into_handle`] and not be released.
    pub unsafe fn from_handle<'a>(ptr: *const std::ffi::c_void) -> &'a Storage {
        &*(ptr as *const Storage)
    }

    pub fn into_handle(self) -> *mut std::ffi::c_void {
        Box::into_raw(Box::new(self)) as *mut std::ffi::c_void
    }

    /// # Safety
    /// `ptr` must come from [`Storage::into_handle`]; it is freed here.
    pub unsafe fn release(ptr: *mut std::ffi::c_void) {
        // A forked child's storages are the parent's: freeing their buffers
        // would call into a plugin whose threads are gone.
        if !ptr.is_null() && !crate::fork::in_forked_child() {
            drop(Box::from_raw(ptr as *mut Storage));
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        MEMORY.add(self.device, -(self.nbytes as i64));
        if self.pending.load(Ordering::Relaxed) {
            // A flush on another thread may be about to write this storage:
            // wait for it, or have it see the storage is gone.
            let _held = crate::graph_lock::hold();
            crate::fused::forget(self.id);
        }
    }
}
