//! h3's QUIC connection, with what h3-quinn does not offer: a handle on each request
//! stream's `quinn::SendStream` (h3-quinn wraps it privately), so that a scheduler can set
//! its priority, and a reader on the client's control stream for PRIORITY_UPDATE frames
//! (h3 0.0.8 skips them). Unidirectional streams and the opener are h3-quinn's own; only
//! bidirectional (request) streams are accepted here, over quinn directly.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};

use crate::frames::{H3ControlParser, H3Event};
use crate::priorities::{Conn, SharedSend};

type Accepting = Pin<
    Box<
        dyn Future<Output = Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>>
            + Send
            + Sync,
    >,
>;
type Reading = Pin<
    Box<
        dyn Future<Output = (quinn::RecvStream, Result<Option<quinn::Chunk>, quinn::ReadError>)>
            + Send
            + Sync,
    >,
>;

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => ConnectionErrorIncoming::ApplicationClose {
            error_code: c.error_code.into_inner(),
        },
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(Arc::new(other)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::WriteError::ConnectionLost(c) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(c),
        },
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::ReadError::ConnectionLost(c) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(c),
        },
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn stream_id(id: quinn::StreamId) -> StreamId {
    // quinn's IDs are QUIC varints, which h3 takes whole.
    StreamId::try_from(u64::from(id)).unwrap_or_else(|_| StreamId::try_from(0).expect("0 is an ID"))
}

/// A QUIC connection for h3's server.
pub struct PrioConnection {
    conn: quinn::Connection,
    uni: h3_quinn::Connection,
    accepting: Option<Accepting>,
    sched: Arc<Conn>,
}

impl PrioConnection {
    pub fn new(conn: quinn::Connection, sched: Arc<Conn>) -> Self {
        Self {
            uni: h3_quinn::Connection::new(conn.clone()),
            conn,
            accepting: None,
            sched,
        }
    }
}

impl<B: Buf> quic::Connection<B> for PrioConnection {
    type RecvStream = TapRecv;
    type OpenStreams = PrioOpener;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<TapRecv, ConnectionErrorIncoming>> {
        let inner = ready!(<h3_quinn::Connection as quic::Connection<B>>::poll_accept_recv(
            &mut self.uni,
            cx
        ))?;
        Poll::Ready(Ok(TapRecv {
            inner,
            parser: H3ControlParser::new(),
            sched: self.sched.clone(),
        }))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<PrioBidi<B>, ConnectionErrorIncoming>> {
        let conn = &self.conn;
        let fut = self.accepting.get_or_insert_with(|| {
            let conn = conn.clone();
            Box::pin(async move { conn.accept_bi().await })
        });
        let r = ready!(fut.as_mut().poll(cx));
        self.accepting = None;
        let (send, recv) = r.map_err(connection_error)?;
        let id = send.id();
        let send: SharedSend = Arc::new(Mutex::new(send));
        self.sched.register_quic(u64::from(id), &send);
        Poll::Ready(Ok(PrioBidi {
            send: PrioSend::new(send, id),
            recv: PrioRecv::new(recv),
        }))
    }

    fn opener(&self) -> PrioOpener {
        PrioOpener {
            uni: <h3_quinn::Connection as quic::Connection<B>>::opener(&self.uni),
            conn: self.conn.clone(),
            opening: None,
        }
    }
}

type Opening = Pin<
    Box<
        dyn Future<Output = Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>>
            + Send
            + Sync,
    >,
>;

fn poll_open<B: Buf>(
    conn: &quinn::Connection,
    opening: &mut Option<Opening>,
    cx: &mut Context<'_>,
) -> Poll<Result<PrioBidi<B>, StreamErrorIncoming>> {
    let fut = opening.get_or_insert_with(|| {
        let conn = conn.clone();
        Box::pin(async move { conn.open_bi().await })
    });
    let r = ready!(fut.as_mut().poll(cx));
    *opening = None;
    let (send, recv) = r.map_err(|e| StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: connection_error(e),
    })?;
    let id = send.id();
    Poll::Ready(Ok(PrioBidi {
        send: PrioSend::new(Arc::new(Mutex::new(send)), id),
        recv: PrioRecv::new(recv),
    }))
}

impl<B: Buf> quic::OpenStreams<B> for PrioConnection {
    type BidiStream = PrioBidi<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<PrioBidi<B>, StreamErrorIncoming>> {
        // A server opens no request streams; implemented for the trait's sake.
        let mut none = None;
        poll_open(&self.conn, &mut none, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        <h3_quinn::Connection as quic::OpenStreams<B>>::poll_open_send(&mut self.uni, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <h3_quinn::Connection as quic::OpenStreams<B>>::close(&mut self.uni, code, reason)
    }
}

/// Opens the server's unidirectional streams (control, QPACK) through h3-quinn.
pub struct PrioOpener {
    uni: h3_quinn::OpenStreams,
    conn: quinn::Connection,
    opening: Option<Opening>,
}

impl<B: Buf> quic::OpenStreams<B> for PrioOpener {
    type BidiStream = PrioBidi<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<PrioBidi<B>, StreamErrorIncoming>> {
        poll_open(&self.conn, &mut self.opening, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::poll_open_send(&mut self.uni, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::close(&mut self.uni, code, reason)
    }
}

/// A unidirectional stream from the client, read on the way to h3: its control stream's
/// SETTINGS and PRIORITY_UPDATE frames go to the connection's scheduling.
pub struct TapRecv {
    inner: h3_quinn::RecvStream,
    parser: H3ControlParser,
    sched: Arc<Conn>,
}

impl quic::RecvStream for TapRecv {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let data = ready!(self.inner.poll_data(cx))?;
        if let Some(b) = &data {
            let mut events: Vec<H3Event> = Vec::new();
            self.parser.feed(b, &mut events);
            for e in events {
                self.sched.h3_event(e);
            }
        }
        Poll::Ready(Ok(data))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

/// A request stream's send half: quinn's stream, shared with the connection's scheduling.
pub struct PrioSend<B: Buf> {
    stream: SharedSend,
    id: quinn::StreamId,
    writing: Option<WriteBuf<B>>,
}

impl<B: Buf> PrioSend<B> {
    fn new(stream: SharedSend, id: quinn::StreamId) -> Self {
        Self {
            stream,
            id,
            writing: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, quinn::SendStream> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<B: Buf> quic::SendStream<B> for PrioSend<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = self.writing.as_mut() {
            let mut s = self.stream.lock().unwrap_or_else(|e| e.into_inner());
            while data.has_remaining() {
                let n = ready!(Pin::new(&mut *s).poll_write(cx, data.chunk())).map_err(write_error)?;
                data.advance(n);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            // h3 waits for poll_ready before it sends again: a second write is a bug there.
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data while a write is pending".into(),
                ),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(
            self.lock()
                .finish()
                .map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))),
        )
    }

    fn reset(&mut self, reset_code: u64) {
        let code = quinn::VarInt::from_u64(reset_code).unwrap_or(quinn::VarInt::MAX);
        let _ = self.lock().reset(code);
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.id)
    }
}

/// A request stream's receive half: quinn's stream, read a chunk at a time.
pub struct PrioRecv {
    stream: Option<quinn::RecvStream>,
    id: quinn::StreamId,
    reading: Option<Reading>,
}

impl PrioRecv {
    fn new(stream: quinn::RecvStream) -> Self {
        Self {
            id: stream.id(),
            stream: Some(stream),
            reading: None,
        }
    }
}

impl quic::RecvStream for PrioRecv {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        if self.reading.is_none() {
            let Some(mut s) = self.stream.take() else {
                return Poll::Ready(Ok(None));
            };
            self.reading = Some(Box::pin(async move {
                let r = s.read_chunk(usize::MAX, true).await;
                (s, r)
            }));
        }
        let fut = self.reading.as_mut().expect("set above");
        let (s, r) = ready!(fut.as_mut().poll(cx));
        self.reading = None;
        self.stream = Some(s);
        Poll::Ready(r.map(|c| c.map(|c| c.bytes)).map_err(read_error))
    }

    fn stop_sending(&mut self, error_code: u64) {
        if let Some(s) = self.stream.as_mut() {
            let _ = s.stop(quinn::VarInt::from_u64(error_code).unwrap_or(quinn::VarInt::MAX));
        }
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.id)
    }
}

/// A request stream.
pub struct PrioBidi<B: Buf = Bytes> {
    send: PrioSend<B>,
    recv: PrioRecv,
}

impl<B: Buf> quic::SendStream<B> for PrioBidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::RecvStream for PrioBidi<B> {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::BidiStream<B> for PrioBidi<B> {
    type SendStream = PrioSend<B>;
    type RecvStream = PrioRecv;

    fn split(self) -> (PrioSend<B>, PrioRecv) {
        (self.send, self.recv)
    }
}
