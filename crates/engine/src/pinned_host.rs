//! Pinned host memory: what `tensor.pin_memory()` and `DataLoader(...,
//! pin_memory=True)` allocate, remembered so that `is_pinned()` can tell
//! these blocks (and views into them) from ordinary CPU memory, as on CUDA.
//!
//! PJRT's host-to-device transfers take any host memory, so on the CPU
//! plugin pinning changes nothing but the answer; the blocks are plain
//! aligned heap memory.
use std::alloc::{alloc, dealloc, Layout};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Cache-line alignment, as CPU tensors get.
const ALIGN: usize = 64;

/// Live blocks: start address -> length in bytes.
static BLOCKS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn blocks() -> std::sync::MutexGuard<'static, BTreeMap<usize, usize>> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A block of `nbytes` (at least one byte, so an empty tensor's pointer is
/// pinned too), or null when the host is out of memory.
pub fn allocate(nbytes: usize) -> *mut u8 {
    let Ok(layout) = Layout::from_size_align(nbytes.max(1), ALIGN) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a nonzero size.
    let p = unsafe { alloc(layout) };
    if !p.is_null() {
        blocks().insert(p as usize, layout.size());
    }
    p
}

/// Frees a block from [`allocate`]; anything else is ignored.
pub fn free(p: *mut u8) {
    let Some(len) = blocks().remove(&(p as usize)) else {
        return;
    };
    // SAFETY: `p` came from `allocate` with this size and alignment.
    unsafe { dealloc(p, Layout::from_size_align_unchecked(len, ALIGN)) };
}

/// Whether `p` points into a live block.
pub fn contains(p: *const u8) -> bool {
    let a = p as usize;
    blocks().range(..=a).next_back().is_some_and(|(&start, &len)| a < start + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_their_interiors_are_pinned_until_freed() {
        let p = allocate(100);
        assert!(!p.is_null());
        assert!(contains(p) && contains(unsafe { p.add(99) }));
        assert!(!contains(unsafe { p.add(100) }));
        let empty = allocate(0);
        assert!(contains(empty));
        free(p);
        assert!(!contains(p));
        free(empty);
        let ordinary = Box::new([0u8; 16]);
        assert!(!contains(ordinary.as_ptr()));
    }
}
