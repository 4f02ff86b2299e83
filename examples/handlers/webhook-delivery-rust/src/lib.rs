//! webhook-delivery-rust: the Rust twin of webhook-delivery-go. POSTs each message body to
//! the binding's config `url`; 2xx completes the message; 408, 429 and 5xx retry after the
//! receiver's Retry-After (capped by `max_retry_after_ms`, default 600000) or the binding's
//! back-off; other statuses reject with the status and URL (no query) as the reason. Every
//! delivery carries `Idempotency-Key: <message id>`. Optional config: `credential` (a name
//! from http.credentials), `content_type` (default application/json).

wqhost::use_http!();

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    let url = match wqhost::config("url") {
        Some(u) if !u.is_empty() => u,
        _ => return wqhost::Result::reject("webhook-delivery: config url is not set"),
    };
    let ct = wqhost::config("content_type").filter(|v| !v.is_empty()).unwrap_or_else(|| "application/json".to_string());
    let max_after = match wqhost::config("max_retry_after_ms") {
        None => 600_000,
        Some(v) => match v.parse::<i64>() {
            Ok(ms) if ms >= 0 => ms,
            _ => return wqhost::Result::reject(format!("webhook-delivery: config max_retry_after_ms {:?} is not a count of milliseconds", v)),
        },
    };
    let cred = wqhost::config("credential").unwrap_or_default();
    let content_type = format!("Content-Type: {}", ct);
    let key = format!("Idempotency-Key: {}", m.id());
    let headers = [content_type.as_str(), key.as_str()];
    let opts = wqhost::http::Options { headers: &headers, credential: &cred, max_body: 1024 };
    let outcome = wqhost::http::post(&url, m.body(), &opts).and_then(|r| r.check());
    wqhost::http::result_for(outcome, max_after)
}

wqhost::handler!(handle);
