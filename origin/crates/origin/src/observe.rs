//! Reading each connection's TLS handshake as it happens (hello.rs says what to look
//! for): over TCP, a stream wrapper that passes the client's first bytes to a parser
//! before rustls reads them; over QUIC, a crypto configuration that wraps quinn's rustls
//! session and reads the handshake messages it is given and writes.
//!
//! Both only look: every byte and every call goes to the wrapped stream or session
//! unchanged, and they stop looking once they have the hellos.

use std::any::Any;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use quinn::crypto::rustls::QuicServerConfig;
use quinn::crypto::{
    self, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey, UnsupportedVersion,
};
use quinn::{ConnectionId, Side};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::TransportError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::hello::{ClientWatch, Handshake, Kind, Messages, Offered, Records, ServerWatch};

/// A TCP stream whose first bytes from the client are read for its ClientHello.
pub struct Observed<S> {
    inner: S,
    records: Records,
    watch: ClientWatch,
}

impl<S> Observed<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            records: Records::default(),
            watch: ClientWatch::default(),
        }
    }

    /// What the ClientHello offered, once it was read whole.
    pub fn offered(&self) -> Option<Offered> {
        self.watch.offered()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Observed<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if !this.watch.done() {
            if let Poll::Ready(Ok(())) = polled {
                let messages = this.records.push(&buf.filled()[before..]);
                this.watch.see(&messages);
            }
        }
        polled
    }
}

/// An AsyncWrite wrapper's flush, shutdown and vectored-write support: those of the
/// stream in `$field`, untouched (the wrappers observe writes only).
macro_rules! write_rest_to {
    ($field:ident) => {
        fn is_write_vectored(&self) -> bool {
            self.$field.is_write_vectored()
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().$field).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().$field).poll_shutdown(cx)
        }
    };
}
pub(crate) use write_rest_to;

impl<S: AsyncWrite + Unpin> AsyncWrite for Observed<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    write_rest_to!(inner);
}

/// A finished TCP handshake: what the ClientHello offered, and what rustls did.
pub fn tcp_handshake(offered: Option<Offered>, kind: Option<rustls::HandshakeKind>) -> Handshake {
    let kind = match kind {
        Some(rustls::HandshakeKind::Resumed) => Kind::Resumed,
        Some(_) => Kind::Full,
        None => Kind::Unknown,
    };
    Handshake {
        kind,
        ..Handshake::default()
    }
    .with_offered(offered)
}

/// What a QUIC connection's handshake showed; shared between its session and the
/// connection's task, which reads it once the handshake is done.
#[derive(Debug, Default)]
pub struct Seen {
    client: Messages,
    server: Messages,
    client_watch: ClientWatch,
    server_watch: ServerWatch,
    /// quinn took 0-RTT keys from the session: early data was accepted.
    zero_rtt_keys: bool,
}

impl Seen {
    pub fn handshake(&self) -> Handshake {
        let mut h = Handshake {
            kind: self.server_watch.kind(),
            ..Handshake::default()
        }
        .with_offered(self.client_watch.offered());
        h.early_data_accepted = self.server_watch.early_data_accepted || self.zero_rtt_keys;
        h
    }
}

/// What `quinn::Connection::handshake_data()` returns on an observed endpoint.
pub struct ObservedHandshakeData {
    /// quinn's own (rustls' ALPN protocol and server name).
    pub rustls: Option<Box<dyn Any>>,
    pub seen: Arc<Mutex<Seen>>,
}

/// quinn's rustls server configuration, with every session observed.
pub struct ObservedQuic {
    inner: Arc<QuicServerConfig>,
}

impl ObservedQuic {
    pub fn new(inner: Arc<QuicServerConfig>) -> Self {
        Self { inner }
    }
}

impl crypto::ServerConfig for ObservedQuic {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> Result<Keys, UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Box::new(ObservedSession {
            inner: self.inner.clone().start_session(version, params),
            seen: Arc::new(Mutex::new(Seen::default())),
        })
    }
}

struct ObservedSession {
    inner: Box<dyn crypto::Session>,
    seen: Arc<Mutex<Seen>>,
}

impl ObservedSession {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl crypto::Session for ObservedSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let rustls = self.inner.handshake_data();
        rustls.as_ref()?;
        Some(Box::new(ObservedHandshakeData {
            rustls,
            seen: self.seen.clone(),
        }))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        let keys = self.inner.early_crypto();
        if keys.is_some() {
            self.seen().zero_rtt_keys = true;
        }
        keys
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        {
            let mut seen = self.seen();
            if !seen.client_watch.done() {
                let messages = seen.client.push(buf);
                seen.client_watch.see(&messages);
            }
        }
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let start = buf.len();
        let keys = self.inner.write_handshake(buf);
        let mut seen = self.seen();
        if !seen.server_watch.done() {
            let messages = seen.server.push(&buf[start..]);
            seen.server_watch.see(&messages);
        }
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// A QUIC connection's handshake, from its handshake data (None where the endpoint is
/// not observed).
/// The name the client asked for (SNI) on a QUIC connection, whether its endpoint is
/// observed (quinn's handshake data inside ours) or not.
pub fn quic_server_name(conn: &quinn::Connection) -> Option<String> {
    let data = conn.handshake_data()?;
    let rustls = match data.downcast::<ObservedHandshakeData>() {
        Ok(observed) => observed.rustls?,
        Err(data) => data,
    };
    rustls
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?
        .server_name
}

pub fn quic_handshake(conn: &quinn::Connection) -> Option<Handshake> {
    let data = conn.handshake_data()?;
    let observed = data.downcast::<ObservedHandshakeData>().ok()?;
    let seen = observed.seen.lock().unwrap_or_else(|e| e.into_inner());
    Some(seen.handshake())
}
