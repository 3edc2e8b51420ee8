//! A batch's answer, written as the client takes it: [`CHUNK`]-sized pieces of JSON (ending
//! with a newline, as every JSON body does) or text lines, at most `limit` bytes produced and not yet handed to the kernel at once.
//!
//! The IDs are reserved (issued) before the answer starts, with one reservation, and only
//! their text is made as the client reads: 100,000 IDs hold 32 KiB at a time, not 2.2 MB. If
//! the client goes away mid-way, the rest of the run is never sent and never reissued.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use monoflake::Ids;

use super::budget::CHUNK;

/// How the IDs are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `{"ids":["…","…"]}` and a newline
    Json,
    /// One decimal ID per line.
    Text,
}

/// The longest text of one ID: 20 digits, two quotes, a comma.
const LONGEST: usize = 23;

/// The bytes of a batch produced and not yet dropped, and who waits for room.
#[derive(Debug, Default)]
struct Window {
    live: AtomicUsize,
    waker: AtomicWaker,
}

/// A piece of the answer; gives its room back when the last of it is dropped.
struct Piece {
    text: String,
    window: Arc<Window>,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        // Ordering: AcqRel pairs with the body's load after it registered its waker: either
        // the body sees the room, or this wake reaches the waker it registered.
        self.window
            .live
            .fetch_sub(self.text.len(), Ordering::AcqRel);
        self.window.waker.wake();
    }
}

/// The answer body of a batch.
pub struct Batch {
    ids: Ids,
    format: Format,
    begun: bool,
    done: bool,
    limit: usize,
    window: Arc<Window>,
}

impl Batch {
    /// `ids` written in `format`, at most `limit` bytes (at least one [`CHUNK`]) unsent.
    pub fn new(ids: Ids, format: Format, limit: usize) -> Batch {
        Batch {
            ids,
            format,
            begun: false,
            done: false,
            limit,
            window: Arc::default(),
        }
    }

    /// The next piece: as many IDs as fit in a [`CHUNK`].
    fn piece(&mut self) -> String {
        let mut out = String::with_capacity(CHUNK.min(self.ids.len() * LONGEST + 16));
        let json = self.format == Format::Json;
        if !self.begun && json {
            out.push_str("{\"ids\":[");
        }
        // Writing to a String cannot fail. Room is kept for one ID and the closing `]}\n`.
        while out.len() + LONGEST + 3 <= CHUNK {
            let Some(id) = self.ids.next() else { break };
            if json {
                let sep = if self.begun { "," } else { "" };
                let _ = write!(out, "{sep}\"{id}\"");
            } else {
                let _ = writeln!(out, "{id}");
            }
            self.begun = true;
        }
        if self.ids.len() == 0 {
            self.done = true;
            if json {
                out.push_str("]}\n");
            }
        }
        self.begun = true;
        out
    }
}

impl http_body::Body for Batch {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        this.window.waker.register(cx.waker());
        // Ordering: Acquire, after registering (see `Piece::drop`).
        let live = this.window.live.load(Ordering::Acquire);
        if live > 0 && live + CHUNK > this.limit {
            return Poll::Pending;
        }
        let text = this.piece();
        this.window.live.fetch_add(text.len(), Ordering::AcqRel);
        let piece = Piece {
            text,
            window: Arc::clone(&this.window),
        };
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_owner(piece)))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use http_body::Body as _;

    use super::*;

    fn run(n: u64) -> Ids {
        let g = monoflake::Generator::new(monoflake::Layout::twitter(), 1).unwrap();
        g.try_next_ids(n).unwrap()
    }

    /// Polls `body` once, without a task to wake.
    fn poll(body: &mut Batch) -> Poll<Option<Bytes>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(body)
            .poll_frame(&mut cx)
            .map(|f| f.map(|f| f.unwrap().into_data().unwrap()))
    }

    #[test]
    fn writes_the_same_json_and_text_as_a_whole_answer_would() {
        for n in [1, 2, 700, 5000] {
            let ids = run(n);
            let expected: Vec<String> = ids.clone().map(|id| id.to_string()).collect();
            for format in [Format::Json, Format::Text] {
                let mut body = Batch::new(ids.clone(), format, usize::MAX);
                let mut text = Vec::new();
                while let Poll::Ready(Some(piece)) = poll(&mut body) {
                    assert!(piece.len() <= CHUNK);
                    text.extend_from_slice(&piece);
                }
                assert!(body.is_end_stream());
                let text = String::from_utf8(text).unwrap();
                assert!(text.ends_with('\n'), "{n} {format:?}: the body ends a line");
                let got: Vec<String> = match format {
                    Format::Json => {
                        serde_json::from_str::<serde_json::Value>(&text).unwrap()["ids"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|v| v.as_str().unwrap().to_owned())
                            .collect()
                    }
                    Format::Text => text.lines().map(str::to_owned).collect(),
                };
                assert_eq!(got, expected, "{n} {format:?}");
            }
        }
    }

    #[test]
    fn holds_at_most_its_window_until_pieces_are_dropped() {
        let mut body = Batch::new(run(100_000), Format::Json, 2 * CHUNK);
        let Poll::Ready(Some(a)) = poll(&mut body) else {
            panic!("first piece")
        };
        let Poll::Ready(Some(b)) = poll(&mut body) else {
            panic!("second piece")
        };
        assert!(
            poll(&mut body).is_pending(),
            "a third piece past the window"
        );
        // A slice keeps its piece alive.
        let tail = a.slice(10..);
        drop(a);
        assert!(poll(&mut body).is_pending());
        drop(tail);
        let Poll::Ready(Some(c)) = poll(&mut body) else {
            panic!("room again")
        };
        drop((b, c));
    }
}
