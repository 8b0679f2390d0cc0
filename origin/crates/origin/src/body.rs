//! A response body that counts the bytes it hands to hyper.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::stats::Counters;

/// Bytes per DATA frame handed to the protocol stack.
pub const CHUNK: usize = 256 * 1024;

/// A body of known length, yielded in chunks; each chunk is counted as application
/// bytes sent when hyper takes it.
pub struct CountingBody {
    rest: Bytes,
    counters: Arc<Counters>,
}

impl CountingBody {
    pub fn new(data: Bytes, counters: Arc<Counters>) -> Self {
        Self { rest: data, counters }
    }
}

impl Body for CountingBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.rest.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.rest.len().min(CHUNK);
        let chunk = self.rest.split_to(n);
        self.counters.app_bytes.fetch_add(n as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}
