//! A JSON validity check (RFC 8259) without dependencies, agreeing with Go's `json.Valid`
//! plus `utf8.Valid`, which bulk-sink-go uses: the same grammar, the same nesting limit
//! (10000), and invalid UTF-8 refused (RFC 8259 requires UTF-8 between systems).

/// Why a body is not a JSON object; the texts are bulk-sink-go's.
#[derive(Debug, PartialEq, Eq)]
pub enum NotObject {
    NotJson,
    NotUtf8,
    NotAnObject,
}

impl std::fmt::Display for NotObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotObject::NotJson => "the body is not valid JSON",
            NotObject::NotUtf8 => "the body is not valid JSON (not UTF-8)",
            NotObject::NotAnObject => "the body is JSON but not an object",
        })
    }
}

/// Returns `body` without surrounding whitespace if it is one JSON object, else why not.
pub fn object(body: &[u8]) -> Result<&[u8], NotObject> {
    if !valid(body) {
        return Err(NotObject::NotJson);
    }
    if std::str::from_utf8(body).is_err() {
        return Err(NotObject::NotUtf8);
    }
    let start = body.iter().position(|c| !is_space(*c)).unwrap_or(body.len());
    let end = body.iter().rposition(|c| !is_space(*c)).map_or(start, |i| i + 1);
    let obj = &body[start..end];
    if obj.first() != Some(&b'{') {
        return Err(NotObject::NotAnObject);
    }
    Ok(obj)
}

/// Go's encoding/json maxNestingDepth: deeper documents are invalid there, so here too.
const MAX_DEPTH: usize = 10000;

fn is_space(c: u8) -> bool { matches!(c, b' ' | b'\t' | b'\n' | b'\r') }

/// Whether `b` is one JSON value with optional surrounding whitespace. Strings may hold any
/// bytes but control characters, `"` and `\` (escapes aside), as in Go's scanner; UTF-8 is
/// checked separately. Iterative, with an explicit stack, so deep nesting cannot overflow the
/// wasm stack.
pub fn valid(b: &[u8]) -> bool {
    let mut s = Scanner { b, i: 0 };
    // The open containers, innermost last: b'{' or b'['.
    let mut stack: Vec<u8> = Vec::new();
    s.space();
    'value: loop {
        // A value starts at s.i.
        match s.next() {
            Some(b'{') => {
                stack.push(b'{');
                if stack.len() > MAX_DEPTH {
                    return false;
                }
                s.space();
                if s.peek() == Some(b'}') {
                    s.i += 1;
                    stack.pop();
                } else {
                    if !s.member_name() {
                        return false;
                    }
                    continue 'value;
                }
            }
            Some(b'[') => {
                stack.push(b'[');
                if stack.len() > MAX_DEPTH {
                    return false;
                }
                s.space();
                if s.peek() == Some(b']') {
                    s.i += 1;
                    stack.pop();
                } else {
                    continue 'value;
                }
            }
            Some(b'"') => {
                if !s.string_rest() {
                    return false;
                }
            }
            Some(b't') => {
                if !s.literal_rest(b"rue") {
                    return false;
                }
            }
            Some(b'f') => {
                if !s.literal_rest(b"alse") {
                    return false;
                }
            }
            Some(b'n') => {
                if !s.literal_rest(b"ull") {
                    return false;
                }
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                s.i -= 1;
                if !s.number() {
                    return false;
                }
            }
            _ => return false,
        }
        // A value ended: close containers until one continues with another value.
        loop {
            s.space();
            match stack.last() {
                None => return s.i == b.len(),
                Some(b'{') => match s.next() {
                    Some(b',') => {
                        s.space();
                        if !s.member_name() {
                            return false;
                        }
                        continue 'value;
                    }
                    Some(b'}') => {
                        stack.pop();
                    }
                    _ => return false,
                },
                Some(_) => match s.next() {
                    Some(b',') => {
                        s.space();
                        continue 'value;
                    }
                    Some(b']') => {
                        stack.pop();
                    }
                    _ => return false,
                },
            }
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> { self.b.get(self.i).copied() }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        if c.is_some() {
            self.i += 1;
        }
        c
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(c) if is_space(c)) {
            self.i += 1;
        }
    }

    /// `"name"` then `:` and whitespace, leaving s.i at the member's value.
    fn member_name(&mut self) -> bool {
        if self.next() != Some(b'"') || !self.string_rest() {
            return false;
        }
        self.space();
        if self.next() != Some(b':') {
            return false;
        }
        self.space();
        true
    }

    /// The rest of a string after its opening quote.
    fn string_rest(&mut self) -> bool {
        loop {
            match self.next() {
                Some(b'"') => return true,
                Some(b'\\') => match self.next() {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                    Some(b'u') => {
                        for _ in 0..4 {
                            match self.next() {
                                Some(c) if c.is_ascii_hexdigit() => {}
                                _ => return false,
                            }
                        }
                    }
                    _ => return false,
                },
                Some(c) if c < 0x20 => return false,
                Some(_) => {}
                None => return false,
            }
        }
    }

    /// The rest of `true`, `false` or `null` after its first letter.
    fn literal_rest(&mut self, rest: &[u8]) -> bool {
        if self.b[self.i..].starts_with(rest) {
            self.i += rest.len();
            true
        } else {
            false
        }
    }

    /// `-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> bool {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next() {
            Some(b'0') => {}
            Some(b'1'..=b'9') => self.digits(),
            _ => return false,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.some_digits() {
                return false;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.some_digits() {
                return false;
            }
        }
        true
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// One or more digits.
    fn some_digits(&mut self) -> bool {
        let start = self.i;
        self.digits();
        self.i > start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_documents() {
        for doc in [
            "{}", "[]", "0", "-0", "1.5e+10", "-12.25E-3", "true", "false", "null", r#""""#,
            r#""\"\\\/\b\f\n\r\t\u00e9\uD83D""#, " \t\r\n{ \"a\" : [ 1 , { } , [ ] , \"x\" ] } \n",
            r#"{"a":{"b":{"c":[null,true,false]}}}"#, "\"\u{7f}é😀\"",
        ] {
            assert!(valid(doc.as_bytes()), "{:?} is valid JSON", doc);
        }
    }

    #[test]
    fn invalid_documents() {
        for doc in [
            "", " ", "{", "}", "[", "[1,]", "{,}", r#"{"a"}"#, r#"{"a":}"#, r#"{"a":1,}"#, r#"{"a" 1}"#,
            "{a:1}", "{'a':1}", "[1 2]", "01", "1.", ".5", "1e", "1e+", "+1", "-", "--1", "0x1",
            "tru", "truex", "nul", "True", r#""abc"#, r#""\x""#, r#""\u12G4""#, r#""\u123""#,
            "\"a\u{1}b\"", "\"\t\"", "{}{}", "{} x", "[1]]", "NaN", "Infinity", "\u{feff}{}",
        ] {
            assert!(!valid(doc.as_bytes()), "{:?} is not valid JSON", doc);
        }
    }

    #[test]
    fn nesting_limit_is_go_s() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(valid(nested(MAX_DEPTH).as_bytes()));
        assert!(!valid(nested(MAX_DEPTH + 1).as_bytes()));
    }

    #[test]
    fn objects() {
        assert_eq!(object(b" {\"a\":1}\n"), Ok(&b"{\"a\":1}"[..]));
        assert_eq!(object(b"[{}]"), Err(NotObject::NotAnObject));
        assert_eq!(object(b"\"s\""), Err(NotObject::NotAnObject));
        assert_eq!(object(b"{\"a\":\"\xff\"}"), Err(NotObject::NotUtf8));
        assert_eq!(object(b"{\"a\":"), Err(NotObject::NotJson));
    }
}
