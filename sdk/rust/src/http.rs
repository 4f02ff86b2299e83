//! Outbound HTTP through the host, under the binding's `http:` policy (docs/abi.md, "Outbound
//! HTTP"). A module that uses it must declare the feature once, in the cdylib crate:
//!
//! ```ignore
//! wqhost::use_http!();
//!
//! fn handle(m: &mut wqhost::Message) -> wqhost::Result {
//!     let opts = wqhost::http::Options { credential: "hooks", ..Default::default() };
//!     let outcome = wqhost::http::post("https://hooks.example.com/in", m.body(), &opts)
//!         .and_then(|r| r.check());
//!     wqhost::http::result_for(outcome, 600_000)
//! }
//! ```
//!
//! `result_for` maps the outcome to a verdict: 2xx ok; 408, 429 and 5xx retry after the
//! server's `Retry-After` (seconds, capped) or the binding's back-off; other statuses reject
//! with the status and URL (no query) as the reason; timeouts and network failures retry;
//! policy refusals reject. Responses are valid during the handler call only.

use crate::Error as HostError;
use std::fmt;

#[cfg(target_arch = "wasm32")]
mod abi {
    #[link(wasm_import_module = "wqhost")]
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        pub fn http_request(
            method_ptr: *const u8, method_len: i32, url_ptr: *const u8, url_len: i32,
            headers_ptr: *const u8, headers_len: i32, body_ptr: *const u8, body_len: i32,
            cred_ptr: *const u8, cred_len: i32,
        ) -> i32;
        pub fn http_status(handle: i32) -> i32;
        pub fn http_header(handle: i32, name_ptr: *const u8, name_len: i32, buf_ptr: *mut u8, buf_len: i32) -> i32;
        pub fn http_body_read(handle: i32, buf_ptr: *mut u8, buf_len: i32) -> i32;
        pub fn http_error(buf_ptr: *mut u8, buf_len: i32) -> i32;
    }
}

/// Native stand-ins: every request is refused, as by a binding without an `http:` policy.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
mod abi {
    pub unsafe fn http_request(_: *const u8, _: i32, _: *const u8, _: i32, _: *const u8, _: i32, _: *const u8, _: i32, _: *const u8, _: i32) -> i32 { -2 }
    pub unsafe fn http_status(_: i32) -> i32 { -5 }
    pub unsafe fn http_header(_: i32, _: *const u8, _: i32, _: *mut u8, _: i32) -> i32 { -1 }
    pub unsafe fn http_body_read(_: i32, _: *mut u8, _: i32) -> i32 { -5 }
    pub unsafe fn http_error(_: *mut u8, _: i32) -> i32 { -1 }
}

/// Declares the `wqhost_feature_http_v1` marker the host checks before a module may import
/// the HTTP functions. Use it once, in the cdylib crate that uses this module.
#[macro_export]
macro_rules! use_http {
    () => {
        #[no_mangle]
        pub extern "C" fn wqhost_feature_http_v1() {}
    };
}

/// A request's optional parts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// `Name: value` header lines (Host, Content-Length and the connection headers are the
    /// host's).
    pub headers: &'a [&'a str],
    /// One of the binding's `http.credentials`, added by the host; "" for none.
    pub credential: &'a str,
    /// Bound on the response body kept (0: all the host delivers).
    pub max_body: usize,
}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The server answered with an unsuccessful status (from `Response::check`).
    Status,
    /// ERR_TIMEOUT (-10): no complete response within `http.timeout` or the time limit.
    Timeout,
    /// ERR_NETWORK (-11): connecting, TLS or the exchange failed.
    Network,
    /// A common host error: `Denied` (policy), `Invalid`, `TooLarge`, `Limit`, `NotFound`.
    Host(HostError),
}

/// A failed request. Its text never holds the URL's query or a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    pub method: String,
    /// The URL without user info, query or fragment.
    pub url: String,
    /// The response status; 0 when there was no response.
    pub status: u16,
    pub cause: Cause,
    /// The host's explanation (`http_error`), if any.
    pub detail: String,
    /// The server's `Retry-After` in milliseconds; 0 when absent.
    pub retry_after_ms: i64,
}

impl HttpError {
    /// Whether trying again later may succeed: 408, 429, 5xx, timeouts, network failures.
    pub fn retryable(&self) -> bool {
        match self.cause {
            Cause::Status => self.status == 408 || self.status == 429 || self.status >= 500,
            Cause::Timeout | Cause::Network => true,
            Cause::Host(_) => false,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http {} {}: ", self.method, self.url)?;
        match self.cause {
            Cause::Status => write!(f, "status {}", self.status)?,
            Cause::Timeout => f.write_str("timed out")?,
            Cause::Network => f.write_str("network error")?,
            Cause::Host(e) => write!(f, "{}", e)?,
        }
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for HttpError {}

/// Maps a request's outcome to the handler's verdict (see the module docs);
/// `max_retry_after_ms` caps the server's `Retry-After`.
pub fn result_for(outcome: Result<(), HttpError>, max_retry_after_ms: i64) -> crate::Result {
    match outcome {
        Ok(()) => crate::Result::Ok,
        Err(e) if e.retryable() => crate::Result::retry(e.retry_after_ms.min(max_retry_after_ms).max(0), e),
        Err(e) => crate::Result::reject(e),
    }
}

/// A completed request.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// The body went past the cap and the rest was dropped.
    pub truncated: bool,
    method: String,
    url: String,
    handle: i32,
}

impl Response {
    /// A response header (several values joined by ", ").
    pub fn header(&self, name: &str) -> Option<String> {
        let n = unsafe { abi::http_header(self.handle, name.as_ptr(), name.len() as i32, core::ptr::null_mut(), 0) };
        if n < 0 {
            return None;
        }
        let mut buf = vec![0u8; n as usize];
        let got = unsafe { abi::http_header(self.handle, name.as_ptr(), name.len() as i32, buf.as_mut_ptr(), n) };
        buf.truncate(got.max(0).min(n) as usize);
        String::from_utf8(buf).ok()
    }

    /// `Retry-After` in milliseconds when given in seconds; 0 otherwise.
    pub fn retry_after_ms(&self) -> i64 {
        self.header("Retry-After").map(|v| parse_retry_after_ms(&v)).unwrap_or(0)
    }

    /// `Ok` for a 2xx status, else an error with the status, URL and `Retry-After`.
    pub fn check(&self) -> Result<(), HttpError> {
        if (200..300).contains(&self.status) {
            return Ok(());
        }
        Err(HttpError {
            method: self.method.clone(), url: self.url.clone(), status: self.status, cause: Cause::Status,
            detail: String::new(), retry_after_ms: self.retry_after_ms(),
        })
    }
}

/// Parses delay-seconds (capped at a year); anything else is 0.
pub fn parse_retry_after_ms(v: &str) -> i64 {
    match v.trim().parse::<i64>() {
        Ok(s) if s > 0 => s.min(365 * 24 * 3600) * 1000,
        _ => 0,
    }
}

/// The URL without user info, query or fragment.
pub fn redact_url(u: &str) -> String {
    let mut u = match u.find(|c| c == '?' || c == '#') {
        Some(i) => &u[..i],
        None => u,
    }
    .to_string();
    if let Some(i) = u.find("://") {
        let rest = &u[i + 3..];
        let end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            u = format!("{}{}", &u[..i + 3], &rest[at + 1..]);
        }
    }
    u
}

fn cause(code: i32) -> Cause {
    match code {
        -10 => Cause::Timeout,
        -11 => Cause::Network,
        c => Cause::Host(HostError::check(c).err().unwrap_or(HostError::Unknown(c))),
    }
}

fn last_error() -> String {
    let n = unsafe { abi::http_error(core::ptr::null_mut(), 0) };
    if n <= 0 {
        return String::new();
    }
    let mut buf = vec![0u8; n as usize];
    let got = unsafe { abi::http_error(buf.as_mut_ptr(), n) };
    buf.truncate(got.max(0).min(n) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Sends a GET request.
pub fn get(url: &str, opts: &Options) -> Result<Response, HttpError> { request("GET", url, &[], opts) }

/// Sends a POST request with `body`.
pub fn post(url: &str, body: &[u8], opts: &Options) -> Result<Response, HttpError> {
    request("POST", url, body, opts)
}

/// Sends a request and reads its response. An error means there was no response; any
/// status is a response (use `check`).
pub fn request(method: &str, url: &str, body: &[u8], opts: &Options) -> Result<Response, HttpError> {
    let shown = redact_url(url);
    let headers = opts.headers.join("\n");
    let fail = |code: i32| HttpError {
        method: method.to_string(), url: shown.clone(), status: 0, cause: cause(code), detail: last_error(), retry_after_ms: 0,
    };
    let h = unsafe {
        abi::http_request(method.as_ptr(), method.len() as i32, url.as_ptr(), url.len() as i32,
            headers.as_ptr(), headers.len() as i32, body.as_ptr(), body.len() as i32,
            opts.credential.as_ptr(), opts.credential.len() as i32)
    };
    if h < 0 {
        return Err(fail(h));
    }
    let status = unsafe { abi::http_status(h) };
    let mut r = Response { status: status.max(0) as u16, body: Vec::new(), truncated: false, method: method.to_string(), url: shown.clone(), handle: h };
    // The body is read straight into its own spare capacity: no scratch buffer to zero and
    // copy from (zeroing 16 KiB per request cost more than the rest of the guest's work).
    let mut size = 16 << 10;
    if opts.max_body > 0 && opts.max_body < size {
        // One byte beyond max_body tells a body that ends there from a longer one.
        size = opts.max_body + 1;
    }
    r.body.reserve_exact(size);
    loop {
        if opts.max_body > 0 && r.body.len() >= opts.max_body {
            r.truncated = true;
            break;
        }
        if r.body.len() == r.body.capacity() {
            r.body.reserve(r.body.len());
        }
        let spare = (r.body.capacity() - r.body.len()).min(i32::MAX as usize);
        let n = unsafe { abi::http_body_read(h, r.body.as_mut_ptr().add(r.body.len()), spare as i32) };
        if n == -3 {
            r.truncated = true;
            break;
        }
        if n < 0 {
            return Err(fail(n));
        }
        if n == 0 {
            break;
        }
        // SAFETY: the host wrote n bytes (never more than it was given) after the length.
        unsafe { r.body.set_len(r.body.len() + (n as usize).min(spare)) };
    }
    if opts.max_body > 0 {
        r.body.truncate(opts.max_body);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_err(status: u16, after: i64) -> HttpError {
        HttpError { method: "POST".into(), url: "https://h.io/in".into(), status, cause: Cause::Status, detail: String::new(), retry_after_ms: after }
    }

    #[test]
    fn result_for_maps_outcomes() {
        assert_eq!(result_for(Ok(()), 1000), crate::Result::Ok);
        assert_eq!(result_for(Err(status_err(503, 20_000)), 60_000), crate::Result::retry(20_000, "http POST https://h.io/in: status 503"));
        assert_eq!(result_for(Err(status_err(429, 3_600_000)), 60_000), crate::Result::retry(60_000, "http POST https://h.io/in: status 429"));
        assert_eq!(result_for(Err(status_err(400, 5_000)), 60_000), crate::Result::reject("http POST https://h.io/in: status 400"));
        let mut denied = status_err(0, 0);
        denied.cause = Cause::Host(HostError::Denied);
        assert!(matches!(result_for(Err(denied), 1000), crate::Result::Reject { .. }));
        let mut t = status_err(0, 0);
        t.cause = Cause::Timeout;
        assert!(matches!(result_for(Err(t), 1000), crate::Result::Retry { after_ms: 0, .. }));
    }

    #[test]
    fn redacts_urls() {
        assert_eq!(redact_url("https://u:p@h.io/a?token=s#f"), "https://h.io/a");
        assert_eq!(redact_url("http://h.io/p@q"), "http://h.io/p@q");
    }

    #[test]
    fn parses_retry_after() {
        assert_eq!(parse_retry_after_ms("30"), 30_000);
        assert_eq!(parse_retry_after_ms("Fri, 02 Jan 2026 03:05:05 GMT"), 0);
        assert_eq!(parse_retry_after_ms("-1"), 0);
    }

    #[test]
    fn native_stand_in_refuses() {
        let e = post("https://h.io/x?secret=1", b"b", &Options::default()).unwrap_err();
        assert_eq!((e.cause, e.url.as_str()), (Cause::Host(HostError::Denied), "https://h.io/x"));
    }
}
