//! QUIC: HTTP/3 with h3 over quinn, the congestion controller taken from the settings
//! when each connection arrives.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use h3::server::RequestResolver;
use tracing::{debug, Instrument};

use crate::body::CHUNK;
use crate::delay;
use crate::shared::Shared;
use crate::stats::Counters;

/// Accepts connections until the endpoint closes.
pub async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = endpoint.accept().await {
        let cc = shared.settings().quic_cc;
        let span = tracing::info_span!("quic", peer = %incoming.remote_address());
        let shared = shared.clone();
        let local = endpoint.local_addr().unwrap_or(incoming.remote_address());
        tokio::spawn(
            async move {
                match incoming.await {
                    Ok(conn) => serve(conn, cc.name(), local, shared).await,
                    Err(e) => debug!("QUIC handshake failed: {e}"),
                }
            }
            .instrument(span),
        );
    }
}

async fn serve(conn: quinn::Connection, cc: &str, local: std::net::SocketAddr, shared: Arc<Shared>) {
    let handle = shared.registry.open_quic(conn.clone(), local, cc.into());
    if let Some(handshake) = crate::observe::quic_handshake(&conn) {
        handle.set_handshake(handshake);
    }
    let counters = handle.counters();
    let mut h3c = match h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn.clone())).await
    {
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
                let counters = counters.clone();
                tokio::spawn(async move {
                    if let Err(e) = request(resolver, shared, counters).await {
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

async fn request(
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
) -> anyhow::Result<()> {
    let (req, mut stream) = resolver.resolve_request().await.context("reading the request")?;
    counters.request(req.uri().path());
    let r = delay::serve(
        &shared.root,
        &shared.cache,
        req.method(),
        req.uri(),
        shared.alt_svc.as_ref(),
    )
    .await;
    let mut resp = http::Response::new(());
    *resp.status_mut() = r.status;
    *resp.headers_mut() = r.headers;
    stream
        .send_response(resp)
        .await
        .context("sending the response head")?;
    let mut rest = r.body;
    while !rest.is_empty() {
        let chunk = rest.split_to(rest.len().min(CHUNK));
        let n = chunk.len() as u64;
        stream.send_data(chunk).await.context("sending the body")?;
        counters.app_bytes.fetch_add(n, Ordering::Relaxed);
    }
    stream.finish().await.context("finishing the stream")?;
    Ok(())
}
