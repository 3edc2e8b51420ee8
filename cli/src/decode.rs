//! `monoflake decode`: IDs from the arguments or streamed from standard input, taken apart.

use std::io::{self, BufRead, BufReader, IsTerminal, Write};

use monoflake::{Encoding, Error, Id, Layout, Opaque, Parts, rfc3339};

use crate::args::{DecodeArgs, InputFormat};
use crate::commands::Failure;
use crate::keys::read_key;

/// Buffer sizes for reading standard input and writing standard output.
const BUFFER: usize = 64 * 1024;
/// No ID is longer than this (20 decimal digits, 18 with 0x); a longer token is refused
/// without being kept whole.
const MAX_TOKEN: usize = 64;

/// How each ID is read and written.
struct Decoder<'a> {
    layout: &'a Layout,
    opaque: Option<Opaque>,
    format: InputFormat,
    json: bool,
}

/// How many IDs were read, how many were bad, and the exit code of the first bad one.
#[derive(Default)]
struct Tally {
    total: u64,
    bad: u64,
    code: u8,
}

pub fn decode(args: &DecodeArgs) -> Result<(), Failure> {
    let decoder = Decoder {
        layout: &args.layout,
        opaque: match &args.key_file {
            Some(path) => Some(Opaque::new(&args.layout, read_key(path)?)),
            None => None,
        },
        format: args.format,
        json: args.json,
    };
    let mut out = Sink::new(io::stdout().lock());
    let mut tally = Tally::default();
    if args.ids.is_empty() || args.ids == ["-"] {
        let stdin = io::stdin().lock();
        if stdin.is_terminal() {
            eprintln!("monoflake: reading IDs from standard input, one per line (Ctrl-D ends)");
        }
        let streamed = decoder.stream(
            BufReader::with_capacity(BUFFER, stdin),
            &mut out,
            &mut tally,
        );
        // What was decoded before a read failed is still written.
        if let Err(failure) = streamed {
            out.flush()?;
            return Err(failure);
        }
    } else {
        for input in &args.ids {
            decoder.one(input, &mut out, &mut tally, |e| {
                eprintln!("monoflake: {e}");
            })?;
        }
    }
    out.flush()?;
    if tally.bad > 0 {
        return Err(Failure {
            code: tally.code,
            message: format!("{} of {} IDs could not be decoded", tally.bad, tally.total),
        });
    }
    Ok(())
}

impl Decoder<'_> {
    /// Decodes every whitespace-separated ID of `input` straight from its buffer (only an ID
    /// split between two reads is copied, into a buffer of bounded size, so a stream without
    /// newlines never grows memory); a bad ID is reported on stderr with its line number.
    fn stream<W: Write>(
        &self,
        mut input: impl BufRead,
        out: &mut Sink<W>,
        tally: &mut Tally,
    ) -> Result<(), Failure> {
        let mut stderr = io::stderr().lock();
        let mut token =
            |out: &mut Sink<W>, bytes: &[u8], length: usize, line: u64| -> Result<(), Failure> {
                match std::str::from_utf8(bytes) {
                    Ok(text) if length <= MAX_TOKEN => self.one(text, out, tally, |e| {
                        let _ = writeln!(stderr, "monoflake: line {line}: {e}");
                    }),
                    _ => {
                        tally.total += 1;
                        tally.bad += 1;
                        tally.code = if tally.code == 0 { 2 } else { tally.code };
                        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(32)]);
                        let _ = if length > MAX_TOKEN {
                            writeln!(
                                stderr,
                                "monoflake: line {line}: invalid ID {shown:?}…: {length} bytes, \
                             longer than any ID"
                            )
                        } else {
                            writeln!(
                                stderr,
                                "monoflake: line {line}: invalid ID {shown:?}: not UTF-8"
                            )
                        };
                        Ok(())
                    }
                }
            };
        // The part of an ID read so far when a read ends inside it, and its full length.
        let mut pending: Vec<u8> = Vec::with_capacity(MAX_TOKEN);
        let mut pending_length = 0usize;
        let mut line = 1u64;
        loop {
            // Everything read so far is written before waiting for more: typed at a terminal
            // or fed by a slow producer, each line is answered at once.
            out.flush().map_err(Failure::from)?;
            let chunk = match input.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Failure {
                        code: 1,
                        message: format!("cannot read standard input: {e}"),
                    });
                }
            };
            if chunk.is_empty() {
                break;
            }
            let mut start = 0;
            for (at, &byte) in chunk.iter().enumerate() {
                if !byte.is_ascii_whitespace() {
                    continue;
                }
                if pending_length > 0 {
                    let rest = &chunk[start..at];
                    pending.extend_from_slice(&rest[..rest.len().min(MAX_TOKEN - pending.len())]);
                    token(out, &pending, pending_length + rest.len(), line)?;
                    pending.clear();
                    pending_length = 0;
                } else if at > start {
                    token(out, &chunk[start..at], at - start, line)?;
                }
                line += u64::from(byte == b'\n');
                start = at + 1;
            }
            let rest = &chunk[start..];
            pending.extend_from_slice(&rest[..rest.len().min(MAX_TOKEN - pending.len())]);
            pending_length += rest.len();
            let consumed = chunk.len();
            input.consume(consumed);
        }
        if pending_length > 0 {
            token(out, &pending, pending_length, line)?;
        }
        Ok(())
    }

    /// Decodes one ID to `out`, or reports why it cannot be decoded.
    fn one(
        &self,
        input: &str,
        out: &mut Sink<impl Write>,
        tally: &mut Tally,
        report: impl FnOnce(&Error),
    ) -> Result<(), Failure> {
        tally.total += 1;
        let id = parse_id(input, self.format).and_then(|id| match &self.opaque {
            Some(o) => o.decrypt(id),
            None => Ok(id),
        });
        match id.and_then(|id| Ok((id, id.parts(self.layout)?))) {
            Ok((id, parts)) => out.line(id, &parts, self.json)?,
            Err(e) => {
                report(&e);
                tally.bad += 1;
                if tally.code == 0 {
                    tally.code = Failure::from(e).code;
                }
            }
        }
        Ok(())
    }
}

/// Decoded lines, written without the formatting machinery into one buffer that goes out in
/// large writes; the date text (from the library's `rfc3339`) is reused while consecutive IDs
/// share a day, and the time of day is written from the milliseconds.
struct Sink<W: Write> {
    out: W,
    buf: Vec<u8>,
    date_of: Option<u64>,
    date: String,
}

const DAY_MS: u64 = 86_400_000;

impl<W: Write> Sink<W> {
    fn new(out: W) -> Self {
        Sink {
            out,
            buf: Vec::with_capacity(BUFFER + 512),
            date_of: None,
            date: String::new(),
        }
    }

    /// One line: `ID TIME FIELD=VALUE… sequence=N` (as `Parts` displays), or a JSON object.
    fn line(&mut self, id: Id, parts: &Parts<'_>, json: bool) -> io::Result<()> {
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

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }
}

/// The JSON object `monoflake decode --json` prints for `id` (without the newline): what
/// `monoflake serve` answers on `/v1/decode/{id}`, from the same writer.
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

fn parse_id(s: &str, format: InputFormat) -> Result<Id, Error> {
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"));
    let encoding = match format {
        InputFormat::Decimal => Encoding::Decimal,
        InputFormat::Base32 => Encoding::Base32,
        InputFormat::Base62 => Encoding::Base62,
        InputFormat::Hex => return Id::from_hex(s),
        InputFormat::Auto => match hex {
            Some(_) => return Id::from_hex(s),
            None if s.bytes().all(|b| b.is_ascii_digit()) => Encoding::Decimal,
            None if s.len() == 13 => Encoding::Base32,
            None if s.len() == 11 => Encoding::Base62,
            None => Encoding::Decimal, // reports the first non-digit
        },
    };
    Id::decode(s, encoding)
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

    #[test]
    fn ids_split_between_reads_decode_as_whole_ones() {
        let layout = Layout::twitter();
        let decoder = Decoder {
            layout: &layout,
            opaque: None,
            format: InputFormat::Auto,
            json: false,
        };
        let mut input = Vec::new();
        let mut expected = String::new();
        for i in 0..300u64 {
            let id = Id::from_u64(i * 987_654_321_987);
            let parts = id.parts(&layout).unwrap();
            expected.push_str(&format!("{id} {parts}\n"));
            let separator: &[u8] = [&b"\n"[..], b" ", b"\t\t", b"\r\n", b" \n\n "][i as usize % 5];
            input.extend_from_slice(id.to_string().as_bytes());
            input.extend_from_slice(separator);
        }
        input.extend_from_slice(&[b'7'; 100]); // too long, and at the very end
        for capacity in [1, 2, 3, 7, 20, 64, 65_536] {
            let mut sink = Sink::new(Vec::new());
            let mut tally = Tally::default();
            let reader = BufReader::with_capacity(capacity, input.as_slice());
            assert!(decoder.stream(reader, &mut sink, &mut tally).is_ok());
            sink.flush().unwrap();
            assert_eq!(String::from_utf8(sink.out).unwrap(), expected, "{capacity}");
            assert_eq!(
                (tally.total, tally.bad, tally.code),
                (301, 1, 2),
                "{capacity}"
            );
        }
    }
}
