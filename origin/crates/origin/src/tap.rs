//! An HTTP/2 connection's bytes, read as they pass between the TLS stream and hyper:
//! what the client sends (its priority signals) and the DATA frames origin writes, in
//! order (frames.rs). The bytes themselves pass unchanged.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::frames::{H2Event, H2Parser};
use crate::observe::write_rest_to;
use crate::priorities::Conn;

pub struct H2Tap<T> {
    io: T,
    reader: H2Parser,
    writer: H2Parser,
    conn: Arc<Conn>,
    events: Vec<H2Event>,
}

impl<T> H2Tap<T> {
    pub fn new(io: T, conn: Arc<Conn>) -> Self {
        Self {
            io,
            reader: H2Parser::from_client(),
            writer: H2Parser::from_server(),
            conn,
            events: Vec::new(),
        }
    }

    fn dispatch(&mut self) {
        for e in self.events.drain(..) {
            self.conn.h2_event(e);
        }
    }

    fn wrote(&mut self, bufs: &[IoSlice<'_>], mut n: usize) {
        for b in bufs {
            if n == 0 {
                break;
            }
            let take = n.min(b.len());
            self.writer.feed(&b[..take], &mut self.events);
            n -= take;
        }
        self.dispatch();
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for H2Tap<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut me.io).poll_read(cx, buf))?;
        me.reader.feed(&buf.filled()[before..], &mut me.events);
        me.dispatch();
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for H2Tap<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let n = ready!(Pin::new(&mut me.io).poll_write(cx, buf))?;
        me.wrote(&[IoSlice::new(buf)], n);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let n = ready!(Pin::new(&mut me.io).poll_write_vectored(cx, bufs))?;
        me.wrote(bufs, n);
        Poll::Ready(Ok(n))
    }

    write_rest_to!(io);
}
