//! TCP: cleartext HTTP/1.1 and TLS with ALPN (h2 or http/1.1), with the congestion
//! control set on every accepted socket and read back from the kernel.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn, Instrument};

use crate::body::CountingBody;
use crate::cc;
use crate::delay;
use crate::observe::{self, Observed};
use crate::shared::Shared;
use crate::stats::Counters;

/// Bytes hyper's HTTP/2 buffers per stream before waiting for the socket.
const H2_SEND_BUF: usize = 1 << 20;

/// How long a client may take to complete its TLS handshake, and to send a request's
/// headers: a connection that sends nothing, or half a handshake, is closed instead of
/// held for ever. Generous against a GEO round trip (~0.53 s; a handshake takes 1-2).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);
/// An HTTP/2 peer that answers no PING within this long is gone.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// Accepts connections until the task is aborted.
pub async fn accept_loop(listener: Arc<TcpListener>, tls: Option<TlsAcceptor>, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let span = tracing::info_span!("tcp", %peer);
                tokio::spawn(handle(stream, peer, tls.clone(), shared.clone()).instrument(span));
            }
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn respond(
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    tls: bool,
    req: Request<Incoming>,
) -> Result<Response<CountingBody>, Infallible> {
    counters.request(req.uri().path());
    let alt_svc = if tls { shared.alt_svc.as_ref() } else { None };
    let r = delay::serve(&shared.root, &shared.cache, req.method(), req.uri(), alt_svc).await;
    let mut resp = Response::new(CountingBody::new(r.body, counters));
    *resp.status_mut() = r.status;
    *resp.headers_mut() = r.headers;
    Ok(resp)
}

/// HTTP/1.1 with a deadline for every request's headers (hyper needs a timer for it).
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.writev(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    b
}

async fn handle(stream: TcpStream, peer: SocketAddr, tls: Option<TlsAcceptor>, shared: Arc<Shared>) {
    let wanted = shared.settings().tcp_cc;
    if let Err(e) = cc::set_tcp_cc(&stream, wanted) {
        warn!("{e}");
    }
    let cc_now = cc::get_tcp_cc(&stream).unwrap_or_else(|e| format!("unknown ({e})"));
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let fd = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => {
            warn!("cannot duplicate the socket for TCP_INFO, dropping the connection: {e}");
            return;
        }
    };
    let conn = shared
        .registry
        .open_tcp(fd, "h1", tls.is_some(), peer, local, cc_now);
    let counters = conn.counters();
    let is_tls = tls.is_some();
    let svc_shared = shared.clone();
    let svc = service_fn(move |req| respond(svc_shared.clone(), counters.clone(), is_tls, req));
    let result = match tls {
        None => http1()
            .serve_connection(TokioIo::new(stream), svc)
            .await
            .map_err(anyhow::Error::from),
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(Observed::new(stream))).await {
                Err(_) => Err(anyhow::anyhow!(
                    "TLS handshake not done within {HANDSHAKE_TIMEOUT:?}"
                )),
                Ok(Err(e)) => Err(anyhow::Error::from(e).context("TLS handshake failed")),
                Ok(Ok(tls_stream)) => {
                    let (io, session) = tls_stream.get_ref();
                    conn.set_handshake(observe::tcp_handshake(io.offered(), session.handshake_kind()));
                    if session.alpn_protocol() == Some(b"h2") {
                        conn.set_protocol("h2");
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .timer(TokioTimer::new())
                            .keep_alive_interval(Some(H2_KEEP_ALIVE))
                            .keep_alive_timeout(H2_KEEP_ALIVE)
                            .max_send_buf_size(H2_SEND_BUF)
                            .serve_connection(TokioIo::new(tls_stream), svc)
                            .await
                            .map_err(anyhow::Error::from)
                    } else {
                        http1()
                            .serve_connection(TokioIo::new(tls_stream), svc)
                            .await
                            .map_err(anyhow::Error::from)
                    }
                }
            }
        }
    };
    if let Err(e) = result {
        debug!("connection ended: {e:#}");
    }
    drop(conn);
}
