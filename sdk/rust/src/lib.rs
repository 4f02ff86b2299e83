//! SDK for wqhost `wqhost/v1` handlers (docs/abi.md). Dependency free; builds with rustc 1.63
//! for `wasm32-unknown-unknown` and `wasm32-wasi`.
//!
//! ```ignore
//! fn handle(m: &mut wqhost::Message) -> wqhost::Result {
//!     match wqhost::emit("", m.body()) {
//!         Ok(()) => wqhost::Result::Ok,
//!         Err(e) => wqhost::Result::retry(0, e),
//!     }
//! }
//! wqhost::handler!(handle);
//! ```
//!
//! The `handler!` macro defines the module's exports (`wqhost_abi_v1`, `wqhost_handle`,
//! `wqhost_handle_batch`, `wqhost_self_test`); it is used once, in the cdylib crate.
//!
//! A handler that gains from seeing many messages at once (a bulk insert, an aggregate) uses
//! `batch_handler!` instead, with a `fn(&Batch) -> Result`:
//!
//! ```ignore
//! fn handle(b: &wqhost::Batch) -> wqhost::Result {
//!     for m in b.messages() {
//!         if m.body().is_empty() {
//!             let _ = m.reject(format!("message {} is empty", m.id()));
//!         }
//!     }
//!     wqhost::Result::Ok // for every message without a verdict of its own
//! }
//! wqhost::batch_handler!(handle);
//! ```
//!
//! Either kind runs on either kind of binding: `handler!` runs the message handler once per
//! message of a batch call, `batch_handler!` gets a batch of one on a binding without
//! `batch:`.

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};

pub mod http;

/// Status codes returned by `wqhost_handle`.
pub const STATUS_OK: i32 = 0;
/// The message is retried after a delay.
pub const STATUS_RETRY: i32 = 1;
/// The message goes to the poison queue.
pub const STATUS_REJECT: i32 = 2;

/// An error returned by a host function (a negative ABI code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// ERR_NOT_FOUND (-1): no such metadata or config key.
    NotFound,
    /// ERR_DENIED (-2): the emit queue is not the tenant's own or not allowed.
    Denied,
    /// ERR_TOO_LARGE (-3): an output exceeds the binding's size limit.
    TooLarge,
    /// ERR_LIMIT (-4): too many outputs for one message.
    Limit,
    /// ERR_INVALID (-5): an argument is malformed.
    Invalid,
    /// A code this SDK does not know.
    Unknown(i32),
}

impl Error {
    /// Maps a host return code to `Ok(value)` (non-negative) or the error.
    pub fn check(code: i32) -> core::result::Result<i32, Error> {
        match code {
            c if c >= 0 => Ok(c),
            -1 => Err(Error::NotFound),
            -2 => Err(Error::Denied),
            -3 => Err(Error::TooLarge),
            -4 => Err(Error::Limit),
            -5 => Err(Error::Invalid),
            c => Err(Error::Unknown(c)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound => f.write_str("wqhost: not found"),
            Error::Denied => f.write_str("wqhost: queue denied"),
            Error::TooLarge => f.write_str("wqhost: output too large"),
            Error::Limit => f.write_str("wqhost: too many outputs"),
            Error::Invalid => f.write_str("wqhost: invalid argument"),
            Error::Unknown(c) => write!(f, "wqhost: unknown host error code {}", c),
        }
    }
}

impl std::error::Error for Error {}

/// What a handler returns.
#[derive(Debug, PartialEq, Eq)]
pub enum Result {
    /// The message is done: outputs are sent and the message is deleted.
    Ok,
    /// Retry after `after_ms` milliseconds (0: the binding's policy decides), with a reason.
    Retry { after_ms: i64, reason: String },
    /// Send the message to the poison queue now, with a reason.
    Reject { reason: String },
}

impl Result {
    /// A retry with a delay in milliseconds and a reason.
    pub fn retry(after_ms: i64, reason: impl fmt::Display) -> Result {
        Result::Retry { after_ms, reason: reason.to_string() }
    }

    /// A reject with a reason.
    pub fn reject(reason: impl fmt::Display) -> Result {
        Result::Reject { reason: reason.to_string() }
    }

    /// The result as `batch_verdict` arguments: status, delay in milliseconds (0: the binding's
    /// policy decides) and reason.
    pub fn verdict_args(&self) -> (i32, i64, &str) {
        match self {
            Result::Ok => (STATUS_OK, 0, ""),
            Result::Retry { after_ms, reason } => (STATUS_RETRY, (*after_ms).max(0), reason),
            Result::Reject { reason } => (STATUS_REJECT, 0, reason),
        }
    }

    /// Reports the reason and delay to the host through the given functions and returns the
    /// status code. Split out from the exports so it can be tested natively.
    pub fn finish(&self, set_error: impl FnOnce(&str), retry_after: impl FnOnce(i64)) -> i32 {
        match self {
            Result::Ok => STATUS_OK,
            Result::Retry { after_ms, reason } => {
                if !reason.is_empty() {
                    set_error(reason);
                }
                if *after_ms > 0 {
                    retry_after(*after_ms);
                }
                STATUS_RETRY
            }
            Result::Reject { reason } => {
                if !reason.is_empty() {
                    set_error(reason);
                }
                STATUS_REJECT
            }
        }
    }
}

/// Log levels (log/slog's values).
#[derive(Clone, Copy, Debug)]
pub enum Level {
    Debug = -4,
    Info = 0,
    Warn = 4,
    Error = 8,
}

#[cfg(target_arch = "wasm32")]
mod abi {
    #[link(wasm_import_module = "wqhost")]
    extern "C" {
        pub fn msg_body_len() -> i32;
        pub fn msg_body(ptr: *mut u8, len: i32) -> i32;
        pub fn msg_meta(key_ptr: *const u8, key_len: i32, buf_ptr: *mut u8, buf_len: i32) -> i32;
        pub fn config_get(key_ptr: *const u8, key_len: i32, buf_ptr: *mut u8, buf_len: i32) -> i32;
        pub fn log(level: i32, ptr: *const u8, len: i32);
        pub fn set_error(ptr: *const u8, len: i32);
        pub fn retry_after(ms: i64);
        pub fn emit(queue_ptr: *const u8, queue_len: i32, body_ptr: *const u8, body_len: i32) -> i32;
        pub fn batch_size() -> i32;
        pub fn batch_body_len(i: i32) -> i32;
        pub fn batch_body(i: i32, ptr: *mut u8, len: i32) -> i32;
        pub fn batch_meta(i: i32, key_ptr: *const u8, key_len: i32, buf_ptr: *mut u8, buf_len: i32) -> i32;
        pub fn batch_emit(i: i32, queue_ptr: *const u8, queue_len: i32, body_ptr: *const u8, body_len: i32) -> i32;
        pub fn batch_verdict(i: i32, status: i32, retry_after_ms: i64, reason_ptr: *const u8, reason_len: i32) -> i32;
    }
}

/// Native stand-ins: a host with an empty message, an empty batch, no config and no output
/// queue, so the crate builds and unit-tests off wasm.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::missing_safety_doc)]
mod abi {
    pub unsafe fn msg_body_len() -> i32 { 0 }
    pub unsafe fn msg_body(_: *mut u8, _: i32) -> i32 { 0 }
    pub unsafe fn msg_meta(_: *const u8, _: i32, _: *mut u8, _: i32) -> i32 { -1 }
    pub unsafe fn config_get(_: *const u8, _: i32, _: *mut u8, _: i32) -> i32 { -1 }
    pub unsafe fn log(_: i32, _: *const u8, _: i32) {}
    pub unsafe fn set_error(_: *const u8, _: i32) {}
    pub unsafe fn retry_after(_: i64) {}
    pub unsafe fn emit(_: *const u8, _: i32, _: *const u8, _: i32) -> i32 { -5 }
    pub unsafe fn batch_size() -> i32 { 0 }
    pub unsafe fn batch_body_len(_: i32) -> i32 { -5 }
    pub unsafe fn batch_body(_: i32, _: *mut u8, _: i32) -> i32 { -5 }
    pub unsafe fn batch_meta(_: i32, _: *const u8, _: i32, _: *mut u8, _: i32) -> i32 { -5 }
    pub unsafe fn batch_emit(_: i32, _: *const u8, _: i32, _: *const u8, _: i32) -> i32 { -5 }
    pub unsafe fn batch_verdict(_: i32, _: i32, _: i64, _: *const u8, _: i32) -> i32 { -5 }
}

/// The message being handled. Its body buffer is reused across messages so the hot path does
/// not allocate.
#[derive(Default)]
pub struct Message {
    body: Vec<u8>,
    loaded: bool,
    /// `Some(i)`: message `i` of a `wqhost_handle_batch` call that a `handler!` handler runs
    /// in, read through `batch_body`/`batch_meta`; `None`: the call's message (`msg_*`).
    batch: Option<i32>,
}

impl Message {
    /// The message body.
    pub fn body(&mut self) -> &[u8] {
        if !self.loaded {
            let n = match self.batch {
                Some(i) => unsafe { abi::batch_body_len(i) },
                None => unsafe { abi::msg_body_len() },
            };
            self.body.clear();
            if n > 0 {
                self.body.resize(n as usize, 0);
                let got = match self.batch {
                    Some(i) => unsafe { abi::batch_body(i, self.body.as_mut_ptr(), n) },
                    None => unsafe { abi::msg_body(self.body.as_mut_ptr(), n) },
                };
                self.body.truncate(if got > 0 { got as usize } else { 0 });
            }
            self.loaded = true;
        }
        &self.body
    }

    /// A metadata value by its ABI key (`id`, `queue`, `tenant`, `binding`, `dequeue_count`,
    /// `inserted_at`, `order_key`).
    pub fn meta(&self, key: &str) -> Option<String> {
        match self.batch {
            Some(i) => batch_meta(i, key),
            None => lookup(key, |k, kl, b, bl| unsafe { abi::msg_meta(k, kl, b, bl) }),
        }
    }

    /// The message id.
    pub fn id(&self) -> String { self.meta("id").unwrap_or_default() }

    /// The queue it came from.
    pub fn queue(&self) -> String { self.meta("queue").unwrap_or_default() }

    /// The tenant name.
    pub fn tenant(&self) -> String { self.meta("tenant").unwrap_or_default() }

    /// The ordered-execution group, or "".
    pub fn order_key(&self) -> String { self.meta("order_key").unwrap_or_default() }

    /// The delivery count (1 on the first delivery), 0 when unknown.
    pub fn dequeue_count(&self) -> u32 {
        self.meta("dequeue_count").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// When it was queued, RFC 3339 with nanoseconds (no date library: this crate has no deps).
    pub fn inserted_at(&self) -> String { self.meta("inserted_at").unwrap_or_default() }

    #[doc(hidden)]
    pub fn reset(&mut self) {
        self.loaded = false;
        self.batch = None;
    }
}

fn batch_meta(i: i32, key: &str) -> Option<String> {
    lookup(key, |k, kl, b, bl| unsafe { abi::batch_meta(i, k, kl, b, bl) })
}

/// The batch being handled by a `batch_handler!` handler: 1 to the binding's
/// `batch.max_messages` messages (1 on a binding without `batch:`), in the order they were
/// received. Every body is read when the call starts, into one buffer reused across calls, so
/// they all stay borrowed from the batch for the whole call.
#[derive(Default)]
pub struct Batch {
    bodies: Vec<u8>,
    /// Where message i's body lies in `bodies`: (start, end).
    spans: Vec<(usize, usize)>,
}

impl Batch {
    /// The number of messages.
    pub fn len(&self) -> usize { self.spans.len() }

    /// Whether the batch has no messages (only in a self test).
    pub fn is_empty(&self) -> bool { self.spans.is_empty() }

    /// Message `i`, `0 <= i < len()`. Panics when `i` is out of range, as indexing does.
    pub fn message(&self, i: usize) -> BatchMessage<'_> {
        assert!(i < self.spans.len(), "wqhost: batch message {} of {}", i, self.spans.len());
        BatchMessage { batch: self, index: i }
    }

    /// The messages in order.
    pub fn messages(&self) -> Messages<'_> { Messages { batch: self, next: 0 } }

    /// Reads a batch of `n` messages through the given host functions (body length of i, copy
    /// of i's body into a buffer), reusing this batch's buffers. Split from the exports so it
    /// can be tested natively.
    #[doc(hidden)]
    pub fn load(&mut self, n: i32, body_len: impl Fn(i32) -> i32, body: impl Fn(i32, &mut [u8]) -> i32) {
        self.spans.clear();
        let mut total = 0usize;
        for i in 0..n.max(0) {
            let len = body_len(i).max(0) as usize;
            self.spans.push((total, total + len));
            total += len;
        }
        self.bodies.clear();
        self.bodies.resize(total, 0);
        for (i, span) in self.spans.iter_mut().enumerate() {
            if span.1 > span.0 {
                let got = body(i as i32, &mut self.bodies[span.0..span.1]).max(0) as usize;
                span.1 = span.0 + got.min(span.1 - span.0);
            }
        }
    }
}

/// The iterator `Batch::messages` returns.
pub struct Messages<'a> {
    batch: &'a Batch,
    next: usize,
}

impl<'a> Iterator for Messages<'a> {
    type Item = BatchMessage<'a>;

    fn next(&mut self) -> Option<BatchMessage<'a>> {
        if self.next >= self.batch.len() {
            return None;
        }
        self.next += 1;
        Some(BatchMessage { batch: self.batch, index: self.next - 1 })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batch.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Messages<'_> {}

/// One message of a batch: reads it, ties outputs to it and sets its verdict. A message
/// without a verdict ends by the batch handler's returned `Result`.
#[derive(Clone, Copy)]
pub struct BatchMessage<'a> {
    batch: &'a Batch,
    index: usize,
}

impl<'a> BatchMessage<'a> {
    /// The message's position in the batch.
    pub fn index(&self) -> usize { self.index }

    /// The message body, valid for the whole batch call.
    pub fn body(&self) -> &'a [u8] {
        let (start, end) = self.batch.spans[self.index];
        &self.batch.bodies[start..end]
    }

    /// A metadata value by its ABI key (as `Message::meta`).
    pub fn meta(&self, key: &str) -> Option<String> { batch_meta(self.index as i32, key) }

    /// The message id.
    pub fn id(&self) -> String { self.meta("id").unwrap_or_default() }

    /// The queue it came from.
    pub fn queue(&self) -> String { self.meta("queue").unwrap_or_default() }

    /// The ordered-execution group, or "".
    pub fn order_key(&self) -> String { self.meta("order_key").unwrap_or_default() }

    /// The delivery count (1 on the first delivery), 0 when unknown.
    pub fn dequeue_count(&self) -> u32 {
        self.meta("dequeue_count").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// When it was queued, RFC 3339 with nanoseconds.
    pub fn inserted_at(&self) -> String { self.meta("inserted_at").unwrap_or_default() }

    /// Queues an output tied to this message (`queue` "" means the binding's output queue):
    /// it is sent only if this message ends ok. `Err(Error::Denied)` once the message has a
    /// verdict.
    pub fn emit(&self, queue: &str, body: &[u8]) -> core::result::Result<(), Error> {
        batch_emit(self.index as i32, queue, body)
    }

    /// Sets the verdict ok: outputs sent, message deleted, whatever the handler returns. The
    /// first verdict is final: a second one is `Err(Error::Denied)`.
    pub fn ok(&self) -> core::result::Result<(), Error> { self.verdict(&Result::Ok) }

    /// Sets the verdict retry after `after_ms` milliseconds (0: the binding's retry policy
    /// decides), with a reason; the message's outputs are dropped.
    pub fn retry(&self, after_ms: i64, reason: impl fmt::Display) -> core::result::Result<(), Error> {
        self.verdict(&Result::retry(after_ms, reason))
    }

    /// Sets the verdict reject (poison queue), with a reason; the message's outputs are dropped.
    pub fn reject(&self, reason: impl fmt::Display) -> core::result::Result<(), Error> {
        self.verdict(&Result::reject(reason))
    }

    /// Sets a handler `Result` as the verdict, e.g. one shared with a message handler.
    pub fn verdict(&self, r: &Result) -> core::result::Result<(), Error> { set_verdict(self.index as i32, r) }
}

fn set_verdict(i: i32, r: &Result) -> core::result::Result<(), Error> {
    let (status, ms, reason) = r.verdict_args();
    let code = unsafe { abi::batch_verdict(i, status, ms, reason.as_ptr(), reason.len() as i32) };
    Error::check(code).map(|_| ())
}

fn batch_emit(i: i32, queue: &str, body: &[u8]) -> core::result::Result<(), Error> {
    let code = unsafe { abi::batch_emit(i, queue.as_ptr(), queue.len() as i32, body.as_ptr(), body.len() as i32) };
    Error::check(code).map(|_| ())
}

/// The batch message a `handler!` handler runs for in a `wqhost_handle_batch` call, or -1:
/// `emit` ties its outputs to that message. Atomics only because a static must be `Sync`;
/// on single-threaded wasm they are plain loads and stores.
static EMIT_TO: AtomicI32 = AtomicI32::new(-1);

fn lookup(key: &str, get: impl Fn(*const u8, i32, *mut u8, i32) -> i32) -> Option<String> {
    // Most values (ids, URLs, settings) fit a stack buffer: one host call, which copies what
    // fits and returns the full length; a longer value is read again at its size.
    let mut small = [0u8; 256];
    let n = get(key.as_ptr(), key.len() as i32, small.as_mut_ptr(), small.len() as i32);
    if n < 0 {
        return None;
    }
    if n as usize <= small.len() {
        return String::from_utf8(small[..n as usize].to_vec()).ok();
    }
    let mut buf = vec![0u8; n as usize];
    let got = get(key.as_ptr(), key.len() as i32, buf.as_mut_ptr(), n);
    if got < 0 {
        return None;
    }
    buf.truncate(got.min(n) as usize);
    String::from_utf8(buf).ok()
}

/// The binding's config value for `key`.
pub fn config(key: &str) -> Option<String> {
    lookup(key, |k, kl, b, bl| unsafe { abi::config_get(k, kl, b, bl) })
}

/// The largest output `emit` accepts in this call, in bytes: the tenant's
/// `limits.max_output_bytes`, or less where the binding's queue backend carries less (Azure
/// under base64: 49152). An `emit` above it fails with `Error::TooLarge`. It is the host's
/// `max_output_bytes` metadata key, known in every handler call (single or batch), not in a
/// self test; 0 where the host does not tell (a self test, a native build, or a host older
/// than the key), so a caller falls back to its own default.
pub fn max_output_bytes() -> usize {
    parse_max_output(lookup("max_output_bytes", |k, kl, b, bl| unsafe { abi::msg_meta(k, kl, b, bl) }))
}

fn parse_max_output(v: Option<String>) -> usize { v.and_then(|s| s.parse::<usize>().ok()).unwrap_or(0) }

/// Writes a line to the host's structured log.
pub fn log(level: Level, msg: &str) {
    unsafe { abi::log(level as i32, msg.as_ptr(), msg.len() as i32) }
}

/// Queues an output message; `queue` "" means the binding's output queue. Outputs are sent
/// only if the handler returns `Result::Ok`.
///
/// From a `handler!` handler the output belongs to the message being handled, also when the
/// binding batches (it is tied to that message of the batch). From a `batch_handler!` handler
/// it belongs to the whole call: sent only if the handler returns `Result::Ok`, whatever the
/// messages' own verdicts (`BatchMessage::emit` gives one message an output).
pub fn emit(queue: &str, body: &[u8]) -> core::result::Result<(), Error> {
    let i = EMIT_TO.load(Ordering::Relaxed);
    if i >= 0 {
        return batch_emit(i, queue, body);
    }
    let code = unsafe { abi::emit(queue.as_ptr(), queue.len() as i32, body.as_ptr(), body.len() as i32) };
    Error::check(code).map(|_| ())
}

#[doc(hidden)]
pub fn __finish(r: &Result) -> i32 {
    r.finish(
        |s| unsafe { abi::set_error(s.as_ptr(), s.len() as i32) },
        |ms| unsafe { abi::retry_after(ms) },
    )
}

#[doc(hidden)]
pub mod __private {
    use super::{abi, Batch, Message, Ordering, Result, EMIT_TO, STATUS_OK, STATUS_RETRY};
    use core::cell::UnsafeCell;

    /// The single reused message. Wasm modules are single threaded; the host never calls
    /// `wqhost_handle` re-entrantly.
    pub struct Slot(pub UnsafeCell<Option<Message>>);
    unsafe impl Sync for Slot {}

    pub static SLOT: Slot = Slot(UnsafeCell::new(None));

    /// Returns the reused message, reset for a new delivery.
    ///
    /// # Safety
    /// Single threaded, not re-entrant (true of a wasm handler instance).
    pub unsafe fn message() -> &'static mut Message {
        let m = (*SLOT.0.get()).get_or_insert_with(Message::default);
        m.reset();
        m
    }

    /// The single reused batch, as `SLOT` is for the message.
    pub struct BatchSlot(pub UnsafeCell<Option<Batch>>);
    unsafe impl Sync for BatchSlot {}

    pub static BATCH: BatchSlot = BatchSlot(UnsafeCell::new(None));

    /// Serves `wqhost_handle` and `wqhost_handle_batch` for a `batch_handler!` handler: loads
    /// the call's batch (one message in a `wqhost_handle` call) and returns the status of the
    /// messages the handler gave no verdict.
    ///
    /// # Safety
    /// Single threaded, not re-entrant (true of a wasm handler instance).
    pub unsafe fn run_batch(handle: impl FnOnce(&Batch) -> Result) -> i32 {
        let b = (*BATCH.0.get()).get_or_insert_with(Batch::default);
        b.load(abi::batch_size(), |i| abi::batch_body_len(i), |i, buf| abi::batch_body(i, buf.as_mut_ptr(), buf.len() as i32));
        let r = handle(b);
        super::__finish(&r)
    }

    /// Serves `wqhost_handle_batch` for a `handler!` handler: runs it once per message, as if
    /// each had its own `wqhost_handle` call, its `Result` becoming the message's verdict and
    /// `emit` inside it tied to the message. So a module written with `handler!` works on a
    /// binding with `batch:`.
    ///
    /// # Safety
    /// Single threaded, not re-entrant (true of a wasm handler instance).
    pub unsafe fn each_message(mut handle: impl FnMut(&mut Message) -> Result) -> i32 {
        let n = abi::batch_size();
        let mut failed = None;
        for i in 0..n {
            let m = message();
            m.batch = Some(i);
            EMIT_TO.store(i, Ordering::Relaxed);
            let r = handle(m);
            EMIT_TO.store(-1, Ordering::Relaxed);
            if let Err(e) = super::set_verdict(i, &r) {
                failed.get_or_insert((i, e));
            }
        }
        message();
        match failed {
            // Only a host that breaks the ABI refuses these verdicts (one per message, in
            // range, known status). The messages left without one would end by the returned
            // status: retry them rather than delete what the handler may have failed.
            Some((i, e)) => {
                let text = format!("wqhost: verdict for batch message {}: {}", i, e);
                abi::set_error(text.as_ptr(), text.len() as i32);
                STATUS_RETRY
            }
            None => STATUS_OK,
        }
    }
}

/// The exports every handler module has besides its handle functions.
#[doc(hidden)]
#[macro_export]
macro_rules! __common_exports {
    ($self_test:expr) => {
        #[no_mangle]
        pub extern "C" fn wqhost_abi_v1() {}

        #[no_mangle]
        pub extern "C" fn wqhost_self_test() -> i32 {
            let f = $self_test;
            match f() {
                Ok(()) => 0,
                Err(e) => {
                    $crate::log($crate::Level::Error, &e);
                    1
                }
            }
        }
    };
}

/// Defines the module's exports around a `fn(&mut Message) -> Result`, and optionally a
/// self test `fn() -> core::result::Result<(), String>`. On a binding with `batch:`
/// (`wqhost_handle_batch`) the handler runs once per message of the batch.
#[macro_export]
macro_rules! handler {
    ($handle:path) => {
        $crate::handler!($handle, || -> ::core::result::Result<(), ::std::string::String> { Ok(()) });
    };
    ($handle:path, $self_test:expr) => {
        $crate::__common_exports!($self_test);

        #[no_mangle]
        pub extern "C" fn wqhost_handle() -> i32 {
            let m = unsafe { $crate::__private::message() };
            let r: $crate::Result = $handle(m);
            $crate::__finish(&r)
        }

        #[no_mangle]
        pub extern "C" fn wqhost_handle_batch() -> i32 {
            unsafe { $crate::__private::each_message(|m| $handle(m)) }
        }
    };
}

/// Defines the module's exports around a batch handler `fn(&Batch) -> Result`, and optionally
/// a self test. The returned `Result` is the verdict of every message without its own. On a
/// binding without `batch:` (`wqhost_handle`) the handler gets a batch of one.
#[macro_export]
macro_rules! batch_handler {
    ($handle:path) => {
        $crate::batch_handler!($handle, || -> ::core::result::Result<(), ::std::string::String> { Ok(()) });
    };
    ($handle:path, $self_test:expr) => {
        $crate::__common_exports!($self_test);

        #[no_mangle]
        pub extern "C" fn wqhost_handle() -> i32 {
            unsafe { $crate::__private::run_batch(|b| $handle(b)) }
        }

        #[no_mangle]
        pub extern "C" fn wqhost_handle_batch() -> i32 {
            unsafe { $crate::__private::run_batch(|b| $handle(b)) }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_output_bytes_parses_the_host_key() {
        assert_eq!(parse_max_output(Some("49152".into())), 49152);
        assert_eq!(parse_max_output(None), 0);
        assert_eq!(parse_max_output(Some("lots".into())), 0);
        assert_eq!(parse_max_output(Some("-1".into())), 0);
        // Off wasm the stand-in host has no metadata.
        assert_eq!(max_output_bytes(), 0);
    }

    #[test]
    fn check_maps_codes() {
        let cases = [(0, Ok(0)), (5, Ok(5)), (-1, Err(Error::NotFound)), (-2, Err(Error::Denied)),
            (-3, Err(Error::TooLarge)), (-4, Err(Error::Limit)), (-5, Err(Error::Invalid)),
            (-9, Err(Error::Unknown(-9)))];
        for (code, want) in cases {
            assert_eq!(Error::check(code), want, "code {}", code);
        }
    }

    #[test]
    fn finish_reports_reason_and_delay() {
        let mut err = String::new();
        let mut ms = 0;
        assert_eq!(Result::retry(250, "busy").finish(|s| err = s.to_string(), |m| ms = m), STATUS_RETRY);
        assert_eq!((err.as_str(), ms), ("busy", 250));
        let mut err = String::new();
        assert_eq!(Result::reject("bad").finish(|s| err = s.to_string(), |_| panic!("no delay")), STATUS_REJECT);
        assert_eq!(err, "bad");
        assert_eq!(Result::Ok.finish(|_| panic!("no error"), |_| panic!("no delay")), STATUS_OK);
    }

    /// A getter like msg_meta/config_get over one value: copies what fits, returns the full
    /// length (or -1 for a missing key), and counts its calls.
    fn fake_get<'a>(value: Option<&'a str>, calls: &'a std::cell::Cell<u32>) -> impl Fn(*const u8, i32, *mut u8, i32) -> i32 + 'a {
        move |_, _, buf, len| {
            calls.set(calls.get() + 1);
            let v = match value {
                Some(v) => v.as_bytes(),
                None => return -1,
            };
            let n = v.len().min(len as usize);
            unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), buf, n) };
            v.len() as i32
        }
    }

    #[test]
    fn verdict_args() {
        assert_eq!(Result::Ok.verdict_args(), (STATUS_OK, 0, ""));
        assert_eq!(Result::retry(250, "busy").verdict_args(), (STATUS_RETRY, 250, "busy"));
        assert_eq!(Result::retry(-5, "").verdict_args(), (STATUS_RETRY, 0, ""));
        assert_eq!(Result::reject("bad").verdict_args(), (STATUS_REJECT, 0, "bad"));
    }

    #[test]
    fn batch_load_keeps_every_body() {
        let mut b = Batch::default();
        for bodies in [vec!["first", "", "third body", "x"], vec!["a much longer body than before"], vec![]] {
            let n = bodies.len() as i32;
            b.load(n, |i| bodies[i as usize].len() as i32, |i, buf| {
                let src = bodies[i as usize].as_bytes();
                buf.copy_from_slice(src);
                src.len() as i32
            });
            assert_eq!(b.len(), bodies.len());
            assert_eq!(b.is_empty(), bodies.is_empty());
            let got: Vec<&[u8]> = b.messages().map(|m| m.body()).collect();
            let want: Vec<&[u8]> = bodies.iter().map(|s| s.as_bytes()).collect();
            assert_eq!(got, want);
            for (i, m) in b.messages().enumerate() {
                assert_eq!(m.index(), i);
                assert_eq!(b.message(i).body(), want[i]);
            }
        }
    }

    #[test]
    fn batch_load_trims_short_copies() {
        // A host copying fewer bytes than it announced (it may not, but the SDK must not show
        // zeroes as body bytes) and a negative length.
        let mut b = Batch::default();
        b.load(2, |i| if i == 0 { 4 } else { -5 }, |_, buf| {
            buf[..2].copy_from_slice(b"ab");
            2
        });
        assert_eq!(b.message(0).body(), b"ab");
        assert_eq!(b.message(1).body(), b"");
    }

    #[test]
    #[should_panic]
    fn batch_message_out_of_range_panics() {
        Batch::default().message(0);
    }

    #[test]
    fn lookup_reads_small_values_in_one_call() {
        let long = "x".repeat(300);
        let cases: [(Option<&str>, Option<&str>, u32); 4] =
            [(Some("0.2"), Some("0.2"), 1), (Some(""), Some(""), 1), (None, None, 1), (Some(&long), Some(&long), 2)];
        for (value, want, want_calls) in cases {
            let calls = std::cell::Cell::new(0);
            assert_eq!(lookup("k", fake_get(value, &calls)).as_deref(), want);
            assert_eq!(calls.get(), want_calls, "value of {} bytes", value.map_or(0, |v| v.len()));
        }
    }
}
