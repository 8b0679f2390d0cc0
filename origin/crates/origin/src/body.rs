//! A response body that counts the bytes it hands to hyper and, under a scheduler that
//! orders (sched.rs), hands each chunk over only when its stream's turn has come.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::gate::Gate;
use crate::stats::Counters;

/// Bytes per DATA frame handed to the protocol stack.
pub const CHUNK: usize = 256 * 1024;
/// A chunk of an ordered response: one HTTP/2 frame of the default maximum size, so that
/// the queue decides frame by frame.
pub const GATED_CHUNK: usize = 16 * 1024;
/// What h2 may buffer per stream under an ordering scheduler: one frame, so that the
/// queue decides frame by frame.
pub const GATED_SEND_BUF: usize = GATED_CHUNK;

/// An ordered response's place in its connection's queue, taken when its request
/// arrives and given up when this is dropped (the response sent, refused or cancelled).
pub struct Turn {
    pub gate: Arc<Gate>,
    pub stream: u64,
    /// Whether dropping it gives the place up (see [`Turn::keep_until_written`]).
    armed: bool,
}

impl Turn {
    /// Takes place `stream` in `gate`'s queue.
    pub fn take(gate: Arc<Gate>, stream: u64, priority: crate::sched::Priority) -> Self {
        gate.open(stream, priority);
        Self {
            gate,
            stream,
            armed: true,
        }
    }

    /// HTTP/2: its last bytes are handed to hyper, but h2 may still hold them, and a
    /// next response's frames could be written first: the place is given up when the
    /// connection writes its END_STREAM frame or a reset (priorities.rs), or when none of
    /// its frames has been written for sched::RELEASE_AFTER (gate.rs), not here.
    pub fn keep_until_written(mut self) {
        self.gate.finishing(self.stream);
        self.armed = false;
    }

    /// Waits for its turn, then counts one chunk sent.
    pub async fn next(&self) {
        std::future::poll_fn(|cx| self.gate.poll_turn(self.stream, cx)).await;
        self.gate.served(self.stream);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.armed {
            self.gate.close(self.stream);
        }
    }
}

/// A body of known length, yielded in chunks; each chunk is counted as application
/// bytes sent when hyper takes it, and noted in the exchange's record (`key`).
pub struct CountingBody {
    rest: Bytes,
    counters: Arc<Counters>,
    key: Option<u64>,
    turn: Option<Turn>,
}

impl CountingBody {
    pub fn new(data: Bytes, counters: Arc<Counters>) -> Self {
        Self {
            rest: data,
            counters,
            key: None,
            turn: None,
        }
    }

    /// Notes each chunk in exchange `key`'s record.
    pub fn recorded(mut self, key: u64) -> Self {
        self.key = Some(key);
        self
    }

    /// Sends through `turn`'s queue; a body with nothing to send gives its place up.
    pub fn ordered(mut self, turn: Turn) -> Self {
        if !self.rest.is_empty() {
            self.turn = Some(turn);
        }
        self
    }

    fn leave_queue(&mut self) {
        self.turn = None; // Turn's drop gives the place up
    }
}

impl Body for CountingBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.rest.is_empty() {
            self.leave_queue();
            return Poll::Ready(None);
        }
        let max = match &self.turn {
            Some(t) => {
                ready!(t.gate.poll_turn(t.stream, cx));
                t.gate.served(t.stream);
                GATED_CHUNK
            }
            None => CHUNK,
        };
        let n = self.rest.len().min(max);
        let chunk = self.rest.split_to(n);
        let last = self.rest.is_empty();
        if last {
            if let Some(t) = self.turn.take() {
                t.keep_until_written();
            }
        }
        self.counters.app_bytes.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(key) = self.key {
            self.counters.exchanges.handed(key, n as u64, last);
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

impl Drop for CountingBody {
    /// A cancelled response (the client reset its stream) leaves the queue too.
    fn drop(&mut self) {
        self.leave_queue();
    }
}
