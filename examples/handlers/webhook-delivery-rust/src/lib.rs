//! webhook-delivery-rust: the Rust twin of webhook-delivery-go. POSTs each message body to
//! the binding's config `url`; 2xx completes the message; 408, 429 and 5xx retry after the
//! receiver's Retry-After (capped by `max_retry_after_ms`, default 600000) or the binding's
//! back-off; other statuses reject with the status and URL (no query) as the reason. Every
//! delivery carries `Idempotency-Key: <message id>`. Optional config: `credential` (a name
//! from http.credentials), `content_type` (default application/json).

use std::cell::RefCell;
use std::rc::Rc;

wqhost::use_http!();

/// The binding's config, read once per instance: config is fixed for an instance's life (a
/// config change builds new instances, docs/abi.md). A bad config rejects every message.
struct Settings {
    url: String,
    content_type: String, // the whole header line
    credential: String,
    max_after_ms: i64,
}

thread_local! {
    static SETTINGS: RefCell<Option<Rc<Result<Settings, String>>>> = RefCell::new(None);
}

fn load_settings() -> Result<Settings, String> {
    let url = match wqhost::config("url") {
        Some(u) if !u.is_empty() => u,
        _ => return Err("webhook-delivery: config url is not set".to_string()),
    };
    let ct = wqhost::config("content_type").filter(|v| !v.is_empty()).unwrap_or_else(|| "application/json".to_string());
    let max_after_ms = match wqhost::config("max_retry_after_ms") {
        None => 600_000,
        Some(v) => match v.parse::<i64>() {
            Ok(ms) if ms >= 0 => ms,
            _ => return Err(format!("webhook-delivery: config max_retry_after_ms {:?} is not a count of milliseconds", v)),
        },
    };
    Ok(Settings {
        url,
        content_type: format!("Content-Type: {}", ct),
        credential: wqhost::config("credential").unwrap_or_default(),
        max_after_ms,
    })
}

fn settings() -> Rc<Result<Settings, String>> {
    SETTINGS.with(|s| s.borrow_mut().get_or_insert_with(|| Rc::new(load_settings())).clone())
}

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    let settings = settings();
    let s = match settings.as_ref() {
        Ok(s) => s,
        Err(e) => return wqhost::Result::reject(e),
    };
    let key = format!("Idempotency-Key: {}", m.id());
    let headers = [s.content_type.as_str(), key.as_str()];
    let opts = wqhost::http::Options { headers: &headers, credential: &s.credential, max_body: 1024 };
    let outcome = wqhost::http::post(&s.url, m.body(), &opts).and_then(|r| r.check());
    wqhost::http::result_for(outcome, s.max_after_ms)
}

wqhost::handler!(handle);
