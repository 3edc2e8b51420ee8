//! `monoflake decode`: IDs from the arguments or streamed from standard input, taken apart.

use std::io::{self, BufRead, BufReader, IsTerminal, Write};

use monoflake::{Encoding, Error, Id, Layout, Opaque};

use crate::args::{DecodeArgs, InputFormat};
use crate::failure::Failure;
use crate::key_file::read_key;
use crate::parts::{BUFFER, Sink};

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

pub fn run(args: &DecodeArgs) -> Result<(), Failure> {
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
            Some(o) => o.decrypt(monoflake::OpaqueId::from_u64(id.as_u64())),
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
            let mut written = Vec::new();
            let mut sink = Sink::new(&mut written);
            let mut tally = Tally::default();
            let reader = BufReader::with_capacity(capacity, input.as_slice());
            assert!(decoder.stream(reader, &mut sink, &mut tally).is_ok());
            sink.flush().unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), expected, "{capacity}");
            assert_eq!(
                (tally.total, tally.bad, tally.code),
                (301, 1, 2),
                "{capacity}"
            );
        }
    }
}
