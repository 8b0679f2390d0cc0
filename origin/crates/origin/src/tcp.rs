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

use crate::body::{CountingBody, Turn, GATED_SEND_BUF};
use crate::cc;
use crate::delay;
use crate::observe::{self, Observed};
use crate::priorities::Conn;
use crate::replay;
use crate::shared::{Service, Shared};
use crate::stats::Counters;
use crate::tap::H2Tap;

/// Bytes hyper's HTTP/2 buffers per stream before waiting for the socket (under a
/// scheduler that orders, body::GATED_SEND_BUF).
const H2_SEND_BUF: usize = 1 << 20;

/// How long a client may take to complete its TLS handshake, and to send a request's
/// headers: a connection that sends nothing, or half a handshake, is closed instead of
/// held for ever. Generous against a GEO round trip (~0.53 s; a handshake takes 1-2).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);
/// An HTTP/2 peer that answers no PING within this long is gone.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// Accepts connections until the task is aborted; `service`: what they are served.
pub async fn accept_loop(
    listener: Arc<TcpListener>,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    service: Service,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let span = tracing::info_span!("tcp", %peer);
                let accepted = Accepted {
                    peer,
                    tls: tls.clone(),
                    service,
                };
                tokio::spawn(handle(stream, accepted, shared.clone()).instrument(span));
            }
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// One accepted connection, and how to serve it.
struct Accepted {
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    service: Service,
}

/// Where a request arrived: what a response needs besides the request.
#[derive(Clone)]
struct Arrival {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    /// Its connection's id in the records.
    conn: u64,
    service: Service,
    alt_svc: Option<http::HeaderValue>,
    /// HTTP/2: the connection's scheduling.
    h2: Option<Arc<Conn>>,
}

/// The request's exchange record, and (HTTP/2 under a scheduler that orders) its place
/// in the connection's queue. Called as hyper dispatches the request, before its future
/// runs: in stream order, so a response cannot go before one asked earlier that is still
/// being read or held (sequential means one at a time in request order).
fn arrived(a: &Arrival, req: &Request<Incoming>) -> (u64, Option<Turn>) {
    a.counters.request(req.uri().path());
    let path = req.uri().path();
    let header = req.headers().get("priority").and_then(|v| v.to_str().ok());
    let log = &a.counters.exchanges;
    if let Some(conn) = &a.h2 {
        if let Some((key, stream, priority)) = log.h2_claim(path, header) {
            let turn = conn.gate.clone().map(|g| Turn::take(g, stream, priority));
            return (key, turn);
        }
    }
    (log.begin(None, path, header).0, None)
}

async fn respond(
    a: Arrival,
    key: u64,
    turn: Option<Turn>,
    req: Request<Incoming>,
) -> Result<Response<CountingBody>, Infallible> {
    let alt_svc = a.alt_svc.as_ref();
    let r = match (a.service, &a.shared.site) {
        (Service::Site, Some(site)) => {
            let protocol = if a.h2.is_some() { "h2" } else { "h1" };
            let site_req = replay::Request::of(&req, protocol, a.conn);
            replay::answer(site, &a.counters, key, &site_req, alt_svc).await
        }
        _ => delay::serve(&a.shared.root, &a.shared.cache, req.method(), req.uri(), alt_svc).await,
    };
    let mut body = CountingBody::new(r.body, a.counters.clone()).recorded(key);
    if let Some(turn) = turn {
        // A PRIORITY_UPDATE may have come while it was read or held.
        turn.gate
            .reprioritize(turn.stream, a.counters.exchanges.priority_of(key));
        body = body.ordered(turn);
    }
    let mut resp = Response::new(body);
    *resp.status_mut() = r.status;
    *resp.headers_mut() = r.headers;
    Ok(resp)
}

fn service(
    a: Arrival,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<CountingBody>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<CountingBody>, Infallible>> + Send,
> + Clone {
    service_fn(move |req: Request<Incoming>| {
        let (key, turn) = arrived(&a, &req);
        respond(a.clone(), key, turn, req)
    })
}

/// HTTP/1.1 with a deadline for every request's headers (hyper needs a timer for it).
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.writev(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    b
}

async fn handle(stream: TcpStream, accepted: Accepted, shared: Arc<Shared>) {
    let Accepted {
        peer,
        tls,
        service: serves,
    } = accepted;
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
    let scheduler = shared.settings().scheduler;
    let arrival = Arrival {
        shared: shared.clone(),
        counters: counters.clone(),
        conn: conn.id,
        service: serves,
        alt_svc: shared.alt_svc(serves, local.port(), tls.is_some()),
        h2: None,
    };
    let svc = service(arrival.clone());
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
                    conn.set_origin(session.server_name(), serves == Service::Site);
                    if session.alpn_protocol() == Some(b"h2") {
                        conn.set_protocol("h2");
                        let sched = Conn::new(scheduler, counters, true);
                        let send_buf = if sched.gate.is_some() {
                            GATED_SEND_BUF
                        } else {
                            H2_SEND_BUF
                        };
                        let svc = service(Arrival {
                            h2: Some(sched.clone()),
                            ..arrival
                        });
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .timer(TokioTimer::new())
                            .keep_alive_interval(Some(H2_KEEP_ALIVE))
                            .keep_alive_timeout(H2_KEEP_ALIVE)
                            .max_send_buf_size(send_buf)
                            .serve_connection(TokioIo::new(H2Tap::new(tls_stream, sched)), svc)
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
