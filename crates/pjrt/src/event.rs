//! [`Event`]: an owned `PJRT_Event` (completion of an asynchronous transfer
//! or computation), destroyed on drop.

use std::sync::Arc;

use crate::api::{pjrt_call, Api};
use crate::client::Client;
use crate::error::Result;
use crate::ffi::{self, PjrtArgs};

/// A PJRT completion event. Dropping it does not wait for it.
pub struct Event {
    api: Arc<Api>,
    raw: *mut ffi::PJRT_Event,
    // Keeps the client (and thus whatever the event refers to) alive.
    _client: Option<Arc<Client>>,
}

// SAFETY: PJRT events are thread-safe.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("raw", &self.raw).finish()
    }
}

impl Event {
    /// Takes ownership of `raw` (must be non-null and created by `api`).
    pub(crate) unsafe fn from_raw(
        api: Arc<Api>,
        raw: *mut ffi::PJRT_Event,
        client: Option<Arc<Client>>,
    ) -> Event {
        Event {
            api,
            raw,
            _client: client,
        }
    }

    /// Blocks until the event is ready; returns the error it carries, if any
    /// (e.g. the failure of the computation that produced a buffer). May be
    /// called more than once.
    pub fn await_ready(&self) -> Result<()> {
        let mut a = ffi::PJRT_Event_Await_Args::new();
        a.event = self.raw;
        // SAFETY: `raw` is live for the lifetime of `self`.
        unsafe { pjrt_call!(&self.api, PJRT_Event_Await, &mut a) }
    }

    /// Whether the event has completed (successfully or not). Never blocks.
    /// If the plugin cannot answer, this returns `true` so that a following
    /// [`await_ready`](Self::await_ready) reports the problem.
    pub fn is_ready(&self) -> bool {
        let mut a = ffi::PJRT_Event_IsReady_Args::new();
        a.event = self.raw;
        // SAFETY: as above.
        match unsafe { pjrt_call!(&self.api, PJRT_Event_IsReady, &mut a) } {
            Ok(()) => a.is_ready,
            Err(_) => true,
        }
    }

    /// The event's status without blocking: `None` while pending,
    /// `Some(Ok(()))` on success, `Some(Err(e))` if it completed with an error.
    pub fn status(&self) -> Option<Result<()>> {
        if !self.is_ready() {
            return None;
        }
        let mut a = ffi::PJRT_Event_Error_Args::new();
        a.event = self.raw;
        // SAFETY: as above; only called once ready.
        Some(unsafe { pjrt_call!(&self.api, PJRT_Event_Error, &mut a) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut a = ffi::PJRT_Event_Destroy_Args::new();
        a.event = self.raw;
        // SAFETY: we own `raw`. Errors on destroy cannot be reported.
        let _ = unsafe { pjrt_call!(&self.api, PJRT_Event_Destroy, &mut a) };
    }
}
