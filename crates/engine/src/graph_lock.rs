//! One thread at a time records into or flushes the Fused Eager graphs.
//!
//! The pending graphs (one per device) are shared by all threads, and
//! threads do use them at once (`nn.DataParallel` runs its replicas in
//! threads, each on its own device, with the GIL released inside ops).
//! Without this lock a thread could record into a graph another thread is
//! flushing, and read a storage whose value is in flight as zeros, or free
//! a storage the flush is about to write. The lock is re-entrant because
//! recording may flush (a full graph, a step boundary).
use std::marker::PhantomData;
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

struct Owner {
    thread: Option<ThreadId>,
    depth: usize,
    /// Threads waiting for the lock: with none, release skips the wake-up
    /// (a futex syscall on every eager op otherwise).
    waiting: usize,
}

static OWNER: Mutex<Owner> = Mutex::new(Owner { thread: None, depth: 0, waiting: 0 });
static RELEASED: Condvar = Condvar::new();

/// Held while a thread works on the graph; released on drop. Not `Send`:
/// the owner is the thread that took it, so it must be dropped there.
pub struct GraphLock(PhantomData<*const ()>);

/// Waits until no other thread holds the graph, then holds it.
pub fn hold() -> GraphLock {
    let me = std::thread::current().id();
    let mut owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
    while owner.thread.is_some_and(|t| t != me) {
        owner.waiting += 1;
        owner = RELEASED.wait(owner).unwrap_or_else(|e| e.into_inner());
        owner.waiting -= 1;
    }
    owner.thread = Some(me);
    owner.depth += 1;
    GraphLock(PhantomData)
}

impl Drop for GraphLock {
    fn drop(&mut self) {
        let mut owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
        owner.depth -= 1;
        if owner.depth == 0 {
            owner.thread = None;
            if owner.waiting > 0 {
                RELEASED.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn reentrant_on_one_thread_and_exclusive_across_threads() {
        let outer = hold();
        let inner = hold(); // the same thread again: no deadlock
        drop(inner);
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (inside, most) = (inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _g = hold();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(inside.load(Ordering::SeqCst), 0, "a thread got in while the lock was held");
        drop(outer);
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}
