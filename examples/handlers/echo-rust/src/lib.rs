//! echo-rust: emits each message body unchanged to the binding's output queue (the Rust twin
//! of echo-go).

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    match wqhost::emit("", m.body()) {
        Ok(()) => wqhost::Result::Ok,
        Err(e) => wqhost::Result::retry(0, e),
    }
}

wqhost::handler!(handle);
