//! QUIC: HTTP/3 with h3 over quinn, the congestion controller and the scheduler taken
//! from the settings when each connection arrives.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use h3::server::RequestResolver;
use tracing::{debug, Instrument};

use crate::acks::AckWatch;
use crate::body::CHUNK;
use crate::delay;
use crate::h3conn::PrioConnection;
use crate::priorities::Conn;
use crate::replay;
use crate::shared::{Service, Shared};

/// Accepts connections until the endpoint closes; `service`: what they are served.
pub async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>, service: Service) {
    while let Some(incoming) = endpoint.accept().await {
        let settings = shared.settings();
        let span = tracing::info_span!("quic", peer = %incoming.remote_address());
        let shared = shared.clone();
        let local = endpoint.local_addr().unwrap_or(incoming.remote_address());
        tokio::spawn(
            async move {
                match incoming.await {
                    Ok(conn) => serve(conn, settings, local, shared, service).await,
                    Err(e) => debug!("QUIC handshake failed: {e}"),
                }
            }
            .instrument(span),
        );
    }
}

async fn serve(
    conn: quinn::Connection,
    settings: crate::settings::Settings,
    local: std::net::SocketAddr,
    shared: Arc<Shared>,
    service: Service,
) {
    let handle = shared.registry.open_quic(
        conn.clone(),
        local,
        settings.quic_cc.name().into(),
        settings
            .quic_initial_window
            .unwrap_or(crate::cc::QUINN_INITIAL_WINDOW),
    );
    if let Some(handshake) = crate::observe::quic_handshake(&conn) {
        handle.set_handshake(handshake);
    }
    let server_name = crate::observe::quic_server_name(&conn);
    handle.set_origin(server_name.as_deref(), service == Service::Site);
    let sched = Conn::new(settings.scheduler, handle.counters(), false);
    crate::quic_fin::attach(sched.counters.clone());
    let counters = sched.counters.clone();
    let served = Served {
        service,
        conn: handle.id,
        alt_svc: shared.alt_svc(service, local.port(), true),
        acks: AckWatch::spawn(move |stream, unix_ms| counters.exchanges.h3_acked(stream, unix_ms)),
    };
    let quic = PrioConnection::new(conn.clone(), sched.clone());
    let mut h3c = match h3::server::Connection::<_, Bytes>::new(quic).await {
        Ok(c) => c,
        Err(e) => {
            debug!("HTTP/3 setup failed: {e}");
            return;
        }
    };
    loop {
        match h3c.accept().await {
            Ok(Some(resolver)) => {
                let shared = shared.clone();
                let sched = sched.clone();
                let served = served.clone();
                tokio::spawn(async move {
                    if let Err(e) = request(resolver, shared, sched, served).await {
                        debug!("HTTP/3 request failed: {e:#}");
                    }
                });
            }
            Ok(None) => break,
            Err(e) => {
                debug!("HTTP/3 connection ended: {e}");
                break;
            }
        }
    }
    conn.closed().await;
    drop(handle);
}

/// How a connection's requests are served.
#[derive(Clone)]
struct Served {
    service: Service,
    /// Its id in the records.
    conn: u64,
    alt_svc: Option<http::HeaderValue>,
    acks: AckWatch,
}

async fn request(
    resolver: RequestResolver<PrioConnection, Bytes>,
    shared: Arc<Shared>,
    sched: Arc<Conn>,
    served: Served,
) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await.context("reading the request")?;
    let counters = sched.counters.clone();
    counters.request(req.uri().path());
    let id = stream.id().into_inner();
    let header = req.headers().get("priority").and_then(|v| v.to_str().ok());
    let (key, priority) = counters.exchanges.begin(Some(id), req.uri().path(), header);
    // Before its first byte is written: quinn reads a stream's priority as it queues it.
    let turn = sched.quic_arrived(id, key, priority);
    let alt_svc = served.alt_svc.as_ref();
    let r = match (served.service, &shared.site) {
        (Service::Site, Some(site)) => {
            let site_req = replay::Request::of(&req, "h3", served.conn);
            replay::answer(site, &counters, key, &site_req, alt_svc).await
        }
        _ => delay::serve(&shared.root, &shared.cache, req.method(), req.uri(), alt_svc).await,
    };
    let mut resp = http::Response::new(());
    *resp.status_mut() = r.status;
    *resp.headers_mut() = r.headers;
    // A PRIORITY_UPDATE may have come during a hold.
    let now = counters.exchanges.priority_of(key);
    sched.prioritize_quic(id, now);
    if let Some(t) = &turn {
        t.gate.reprioritize(t.stream, now);
    }
    stream
        .send_response(resp)
        .await
        .context("sending the response head")?;
    let mut rest = r.body;
    while !rest.is_empty() {
        let chunk = rest.split_to(rest.len().min(CHUNK));
        let n = chunk.len() as u64;
        if let Some(t) = &turn {
            t.next().await;
        }
        stream.send_data(chunk).await.context("sending the body")?;
        counters.app_bytes.fetch_add(n, Ordering::Relaxed);
        counters.exchanges.handed(key, n, rest.is_empty());
    }
    // Its last bytes are with quinn, which sends them before the next response's (their
    // priorities): the next may start.
    drop(turn);
    stream.finish().await.context("finishing the stream")?;
    if let Some(stopped) = sched.quic_stopped(id) {
        served.acks.watch(id, stopped);
    }
    Ok(())
}
