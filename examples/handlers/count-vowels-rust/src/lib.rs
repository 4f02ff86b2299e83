//! count-vowels-rust: the logic of Extism's Rust count_vowels plugin (go-sdk
//! wasm/count_vowels.wasm) as a wqhost/v1 handler, so the benchmarks compare the same work in
//! the same language: count the body's chars found in the "vowels" config (default
//! aeiouAEIOU), keep a running total in the instance (the plugin keeps it in an Extism var),
//! emit {"count":N,"total":N,"vowels":"..."}.

use std::cell::Cell;
use std::fmt::Write;

const DEFAULT_VOWELS: &str = "aeiouAEIOU";

thread_local! {
    // Lives as long as the instance, like the plugin's "total" var.
    static TOTAL: Cell<u64> = Cell::new(0);
}

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    let vowels = wqhost::config("vowels").unwrap_or_else(|| DEFAULT_VOWELS.to_string());
    let input = match std::str::from_utf8(m.body()) {
        Ok(s) => s,
        Err(e) => return wqhost::Result::reject(format!("count-vowels: body is not UTF-8: {}", e)),
    };
    let count = input.chars().filter(|c| vowels.contains(*c)).count() as u64;
    let total = TOTAL.with(|t| {
        t.set(t.get() + count);
        t.get()
    });
    let mut out = String::with_capacity(48 + vowels.len());
    // vowels is echoed as the plugin does; a config with quotes or backslashes would need
    // escaping, which the default and any sane vowel set do not.
    let _ = write!(out, "{{\"count\":{},\"total\":{},\"vowels\":\"{}\"}}", count, total, vowels);
    match wqhost::emit("", out.as_bytes()) {
        Ok(()) => wqhost::Result::Ok,
        Err(e) => wqhost::Result::retry(0, e),
    }
}

wqhost::handler!(handle);
