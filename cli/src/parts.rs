//! Decoded IDs written out: the lines `decode` prints, text or JSON, gathered in a buffer
//! that goes out in large writes ([`Sink`]), and the JSON object `serve` answers on
//! `/v1/decode/{id}` ([`json_object`]), from the same writers.
//!
//! Imports only the library.

use std::io::{self, Write};

use monoflake::{Error, Id, Layout, Parts, rfc3339};

/// Standard output is written in pieces of this size (`decode` also reads standard input in
/// pieces of this size).
pub const BUFFER: usize = 64 * 1024;

/// Decoded lines, written without the formatting machinery into one buffer that goes out in
/// large writes; the date text (from the library's `rfc3339`) is reused while consecutive IDs
/// share a day, and the time of day is written from the milliseconds.
pub struct Sink<W: Write> {
    out: W,
    buf: Vec<u8>,
    date_of: Option<u64>,
    date: String,
}

const DAY_MS: u64 = 86_400_000;

impl<W: Write> Sink<W> {
    pub fn new(out: W) -> Self {
        Sink {
            out,
            buf: Vec::with_capacity(BUFFER + 512),
            date_of: None,
            date: String::new(),
        }
    }

    /// One line: `ID TIME FIELD=VALUE… sequence=N` (as `Parts` displays), or a JSON object.
    pub fn line(&mut self, id: Id, parts: &Parts<'_>, json: bool) -> io::Result<()> {
        let buf = &mut self.buf;
        if json {
            push_json(buf, &mut self.date_of, &mut self.date, id, parts);
            buf.push(b'\n');
        } else {
            push_u64(buf, id.as_u64());
            buf.push(b' ');
            push_time(buf, &mut self.date_of, &mut self.date, parts.unix_ms());
            push_fields(buf, parts, b" ", b"=");
            buf.extend_from_slice(b" sequence=");
            push_u64(buf, parts.sequence());
            buf.push(b'\n');
        }
        if self.buf.len() >= BUFFER {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }
}

/// The JSON object `monoflake decode --json` prints for `id` (without the newline): what
/// `monoflake serve` answers on `/v1/decode/{id}`, from the same writer.
#[cfg(feature = "server")]
pub fn json_object(id: Id, layout: &Layout) -> Result<String, Error> {
    let parts = id.parts(layout)?;
    let mut buf = Vec::with_capacity(160);
    push_json(&mut buf, &mut None, &mut String::new(), id, &parts);
    // Only ASCII digits, names and punctuation were written.
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Appends the JSON object for `id`: `{"id":"…","unix_ms":…,"time":"…","node":…,"sequence":…}`
/// plus one member per node field.
fn push_json(
    buf: &mut Vec<u8>,
    date_of: &mut Option<u64>,
    date: &mut String,
    id: Id,
    parts: &Parts<'_>,
) {
    buf.extend_from_slice(b"{\"id\":\"");
    push_u64(buf, id.as_u64());
    buf.extend_from_slice(b"\",\"unix_ms\":");
    push_u64(buf, parts.unix_ms());
    buf.extend_from_slice(b",\"time\":\"");
    push_time(buf, date_of, date, parts.unix_ms());
    buf.extend_from_slice(b"\",\"node\":");
    push_u64(buf, parts.node());
    buf.extend_from_slice(b",\"sequence\":");
    push_u64(buf, parts.sequence());
    push_fields(buf, parts, b",\"", b"\":");
    buf.push(b'}');
}

/// Appends each node field as `before` name `between` value (` name=value` in text,
/// `,"name":value` in JSON).
fn push_fields(buf: &mut Vec<u8>, parts: &Parts<'_>, before: &[u8], between: &[u8]) {
    for (name, value) in parts.fields() {
        buf.extend_from_slice(before);
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(between);
        push_u64(buf, value);
    }
}

/// Appends `unix_ms` as RFC 3339 (`YYYY-MM-DDTHH:MM:SS.mmmZ`, as `monoflake::rfc3339`), the
/// date from `date` when it is of the same day (`date_of`), else from the library.
fn push_time(buf: &mut Vec<u8>, date_of: &mut Option<u64>, date: &mut String, unix_ms: u64) {
    let day = unix_ms / DAY_MS;
    if *date_of != Some(day) {
        let full = rfc3339(day * DAY_MS);
        let t = full.find('T').map_or(full.len(), |t| t + 1);
        date.clear();
        date.push_str(&full[..t]);
        *date_of = Some(day);
    }
    buf.extend_from_slice(date.as_bytes());
    let ms = unix_ms % DAY_MS;
    let two = |buf: &mut Vec<u8>, v: u64| {
        buf.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8])
    };
    two(buf, ms / 3_600_000);
    buf.push(b':');
    two(buf, ms / 60_000 % 60);
    buf.push(b':');
    two(buf, ms / 1000 % 60);
    buf.push(b'.');
    let frac = ms % 1000;
    buf.extend_from_slice(&[
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
        b'Z',
    ]);
}

/// Appends `value` in decimal.
fn push_u64(buf: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_as_the_library_formats_them() {
        let layout = Layout::discord();
        let mut sink = Sink::new(Vec::new());
        let mut expected = String::new();
        let ids = [
            0,
            1,
            175_928_847_299_117_063,
            90_339_695_967_350_784,
            u64::MAX,
        ]
        .into_iter()
        .chain((0..5000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        for raw in ids {
            let id = Id::from_u64(raw);
            let parts = id.parts(&layout).unwrap();
            sink.line(id, &parts, false).unwrap();
            sink.line(id, &parts, true).unwrap();
            expected.push_str(&format!("{id} {parts}\n{{\"id\":\"{id}\",\"unix_ms\":{},\"time\":\"{}\",\"node\":{},\"sequence\":{}", parts.unix_ms(), parts.rfc3339(), parts.node(), parts.sequence()));
            for (name, value) in parts.fields() {
                expected.push_str(&format!(",\"{name}\":{value}"));
            }
            expected.push_str("}\n");
        }
        sink.flush().unwrap();
        assert_eq!(String::from_utf8(sink.out).unwrap(), expected);
    }
}
