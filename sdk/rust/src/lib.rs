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
//! `wqhost_self_test`); it is used once, in the cdylib crate.

use std::fmt;

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
    }
}

/// Native stand-ins: a host with an empty message, no config and no output queue, so the
/// crate builds and unit-tests off wasm.
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
}

/// The message being handled. Its body buffer is reused across messages so the hot path does
/// not allocate.
#[derive(Default)]
pub struct Message {
    body: Vec<u8>,
    loaded: bool,
}

impl Message {
    /// The message body.
    pub fn body(&mut self) -> &[u8] {
        if !self.loaded {
            let n = unsafe { abi::msg_body_len() };
            self.body.clear();
            if n > 0 {
                self.body.resize(n as usize, 0);
                let got = unsafe { abi::msg_body(self.body.as_mut_ptr(), n) };
                self.body.truncate(if got > 0 { got as usize } else { 0 });
            }
            self.loaded = true;
        }
        &self.body
    }

    /// A metadata value by its ABI key (`id`, `queue`, `tenant`, `binding`, `dequeue_count`,
    /// `inserted_at`, `order_key`).
    pub fn meta(&self, key: &str) -> Option<String> {
        lookup(key, |k, kl, b, bl| unsafe { abi::msg_meta(k, kl, b, bl) })
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
    pub fn reset(&mut self) { self.loaded = false; }
}

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

/// Writes a line to the host's structured log.
pub fn log(level: Level, msg: &str) {
    unsafe { abi::log(level as i32, msg.as_ptr(), msg.len() as i32) }
}

/// Queues an output message; `queue` "" means the binding's output queue.
pub fn emit(queue: &str, body: &[u8]) -> core::result::Result<(), Error> {
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
    use super::Message;
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
}

/// Defines the module's exports around a `fn(&mut Message) -> Result`, and optionally a
/// self test `fn() -> core::result::Result<(), String>`.
#[macro_export]
macro_rules! handler {
    ($handle:path) => {
        $crate::handler!($handle, || -> ::core::result::Result<(), ::std::string::String> { Ok(()) });
    };
    ($handle:path, $self_test:expr) => {
        #[no_mangle]
        pub extern "C" fn wqhost_abi_v1() {}

        #[no_mangle]
        pub extern "C" fn wqhost_handle() -> i32 {
            let m = unsafe { $crate::__private::message() };
            let r: $crate::Result = $handle(m);
            $crate::__finish(&r)
        }

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

#[cfg(test)]
mod tests {
    use super::*;

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
