//! bulk-sink-rust: the Rust twin of bulk-sink-go, a batch handler (`wqhost::batch_handler!`).
//! It writes the messages of a batch that are JSON objects as one JSON array, `[{...},{...}]`,
//! to the binding's output queue, split into several arrays where one would exceed the config
//! value `max_output_bytes` (default: the host's limit on an output, `wqhost::max_output_bytes`,
//! or 49152 where the host does not tell; a larger value is cut to the host's limit). A message whose body is not a JSON object is
//! rejected with a reason naming its id; the others are done when the arrays are sent. The
//! arrays are the call's outputs (`wqhost::emit`), sent only if the handler returns ok, so a
//! failed emit retries every message not rejected. On a binding without `batch:` each call is
//! a batch of one.
//!
//! The crate has no dependencies, so the JSON check is written here (`json::valid`); the
//! handler tests compare its verdicts with the Go build's, which uses `encoding/json`.

use std::cell::RefCell;

mod json;

/// The array size limit on a host that does not tell its own: 49152 bytes fit a message on
/// every backend (Azure's 64 KiB of text after base64).
const FALLBACK_MAX_OUTPUT: usize = 49152;

thread_local! {
    // The binding's max_output_bytes, read once per instance (config is fixed for an
    // instance's life, docs/abi.md), and the array buffer, reused across calls.
    static MAX_OUTPUT: RefCell<Option<Result<usize, String>>> = RefCell::new(None);
    static OUT: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

fn max_output() -> Result<usize, String> {
    MAX_OUTPUT.with(|c| {
        c.borrow_mut()
            .get_or_insert_with(|| {
                // 0: the host does not tell.
                let host = wqhost::max_output_bytes();
                let default = if host > 0 { host } else { FALLBACK_MAX_OUTPUT };
                match wqhost::config("max_output_bytes") {
                    None => Ok(default),
                    Some(v) if v.is_empty() => Ok(default),
                    Some(v) => match v.parse::<usize>() {
                        Ok(n) if n > 0 && host > 0 => Ok(n.min(host)),
                        Ok(n) if n > 0 => Ok(n),
                        _ => Err(format!("bulk-sink: config max_output_bytes {:?} is not a positive byte count", v)),
                    },
                }
            })
            .clone()
    })
}

fn handle(b: &wqhost::Batch) -> wqhost::Result {
    let max = match max_output() {
        Ok(n) => n,
        // The operator's problem, not the messages': retry them, don't poison them.
        Err(e) => return wqhost::Result::retry(0, e),
    };
    OUT.with(|out| {
        let mut out = out.borrow_mut();
        let mut p = Packer::new(max, &mut out, |array| wqhost::emit("", array));
        for m in b.messages() {
            let obj = match json::object(m.body()) {
                Ok(obj) if !p.fits(obj) => Err(format!(
                    "a JSON object of {} bytes does not fit an array of max_output_bytes {}",
                    obj.len(),
                    max
                )),
                Ok(obj) => Ok(obj),
                Err(e) => Err(e.to_string()),
            };
            match obj {
                Ok(obj) => {
                    if let Err(e) = p.add(obj) {
                        return wqhost::Result::retry(0, e);
                    }
                }
                Err(e) => {
                    if let Err(e) = m.reject(format!("bulk-sink: message {}: {}", m.id(), e)) {
                        // Without its reject the message would end ok and be lost.
                        return wqhost::Result::retry(0, e);
                    }
                }
            }
        }
        match p.flush() {
            Ok(()) => wqhost::Result::Ok,
            Err(e) => wqhost::Result::retry(0, e),
        }
    })
}

wqhost::batch_handler!(handle);

/// Builds JSON arrays of objects, each at most `max` bytes, handing every full one to `emit`.
struct Packer<'a, E> {
    max: usize,
    /// The array being built: "[" and the objects so far, without the "]".
    buf: &'a mut Vec<u8>,
    emit: E,
}

impl<'a, E, EmitErr> Packer<'a, E>
where
    E: FnMut(&[u8]) -> Result<(), EmitErr>,
{
    fn new(max: usize, buf: &'a mut Vec<u8>, emit: E) -> Self {
        buf.clear();
        Packer { max, buf, emit }
    }

    /// Whether obj fits an array of its own.
    fn fits(&self, obj: &[u8]) -> bool { obj.len() + 2 <= self.max }

    /// Appends obj (which fits), first emitting the current array if obj would take it past max.
    fn add(&mut self, obj: &[u8]) -> Result<(), EmitErr> {
        if !self.buf.is_empty() && self.buf.len() + 1 + obj.len() + 1 > self.max {
            self.flush()?;
        }
        self.buf.push(if self.buf.is_empty() { b'[' } else { b',' });
        self.buf.extend_from_slice(obj);
        Ok(())
    }

    /// Emits the current array, if it holds anything.
    fn flush(&mut self) -> Result<(), EmitErr> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.buf.push(b']');
        let r = (self.emit)(self.buf);
        self.buf.clear();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(max: usize, objs: &[&str]) -> Vec<String> {
        let mut arrays = Vec::new();
        let mut buf = Vec::new();
        let mut p = Packer::new(max, &mut buf, |a: &[u8]| -> Result<(), ()> {
            arrays.push(String::from_utf8(a.to_vec()).unwrap());
            Ok(())
        });
        for o in objs {
            assert!(p.fits(o.as_bytes()), "{} fits {}", o, max);
            p.add(o.as_bytes()).unwrap();
        }
        p.flush().unwrap();
        arrays
    }

    #[test]
    fn packs_and_splits_at_max() {
        let ten = r#"{"s":"xx"}"#; // 10 bytes
        assert_eq!(pack(100, &[]), Vec::<String>::new());
        assert_eq!(pack(100, &[r#"{"a":1}"#, "{}"]), vec![r#"[{"a":1},{}]"#]);
        // [ + 10 + , + 10 + ] = 23 bytes: exactly max, then the third starts a new array.
        let two = format!("[{},{}]", ten, ten);
        let one = format!("[{}]", ten);
        assert_eq!(pack(23, &[ten, ten, ten]), vec![two, one.clone()]);
        assert_eq!(pack(22, &[ten, ten]), vec![one.clone(), one.clone()]);
        assert_eq!(pack(12, &[ten, ten]), vec![one.clone(), one]);
        let mut buf = Vec::new();
        let p = Packer::new(11, &mut buf, |_: &[u8]| -> Result<(), ()> { Ok(()) });
        assert!(!p.fits(ten.as_bytes()));
    }

    #[test]
    fn emit_error_stops_add() {
        let mut buf = Vec::new();
        let mut p = Packer::new(12, &mut buf, |_: &[u8]| Err("boom"));
        assert_eq!(p.add(br#"{"s":"xy"}"#), Ok(()));
        assert_eq!(p.add(br#"{"s":"xy"}"#), Err("boom"));
    }
}
