//! versioned: the hot-reload fixture. Emits "<version>:<body>" to the binding's output queue,
//! where <version> is WQHOST_FIXTURE_VERSION at build time, so two builds of this file are two
//! module versions whose outputs say which one handled a message (see build.sh).

const VERSION: &str = env!("WQHOST_FIXTURE_VERSION");

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    let mut out = Vec::with_capacity(VERSION.len() + 1 + m.body().len());
    out.extend_from_slice(VERSION.as_bytes());
    out.push(b':');
    out.extend_from_slice(m.body());
    match wqhost::emit("", &out) {
        Ok(()) => wqhost::Result::Ok,
        Err(e) => wqhost::Result::retry(0, e),
    }
}

wqhost::handler!(handle);
