//! A small HTTP/3 client on quinn + h3 for Clarke's tests and `clarke testbed verify`:
//! fetches a URL and reports the negotiated protocol, status, byte count and SHA-256;
//! with `repeat` and `parallel`, also a bounded throughput measurement over one
//! connection.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, Bytes};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What to fetch and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub url: http::Uri,
    /// Connect here instead of resolving the URL's host (like curl's --resolve).
    pub connect: Option<SocketAddr>,
    /// PEM file of CA certificates to trust.
    pub cacert: PathBuf,
    /// Requests to make over the connection.
    pub repeat: u32,
    /// Requests in flight at once.
    pub parallel: u32,
    /// Give up after this long.
    pub timeout: Duration,
}

/// One response.
#[derive(Debug, Clone, Serialize)]
pub struct Fetched {
    pub protocol: &'static str,
    pub status: u16,
    pub bytes: u64,
    pub sha256: String,
    pub content_type: Option<String>,
    pub content_length: Option<u64>,
    pub alt_svc: Option<String>,
    pub seconds: f64,
}

/// All responses, and the throughput over the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub protocol: &'static str,
    pub peer: SocketAddr,
    pub requests: u32,
    pub bytes: u64,
    pub seconds: f64,
    pub requests_per_second: f64,
    pub gbit_per_second: f64,
    /// The first response.
    pub first: Fetched,
}

fn client_config(cacert: &std::path::Path) -> anyhow::Result<quinn::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cacert)
        .with_context(|| format!("failed to read CA file {}", cacert.display()))?
    {
        let cert = cert.with_context(|| format!("invalid PEM in CA file {}", cacert.display()))?;
        roots.add(cert).context("unusable CA certificate")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let mut cfg = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    let mut transport = quinn::TransportConfig::default();
    // Large receive windows so that flow control does not limit loopback throughput.
    transport.stream_receive_window(quinn::VarInt::from_u32(16 << 20));
    transport.receive_window(quinn::VarInt::from_u32(64 << 20));
    cfg.transport_config(Arc::new(transport));
    Ok(cfg)
}

async fn one(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    url: http::Uri,
) -> anyhow::Result<Fetched> {
    let start = Instant::now();
    let req = http::Request::get(url).body(()).context("building the request")?;
    let mut stream = send.send_request(req).await.context("sending the request")?;
    stream.finish().await.context("finishing the request")?;
    let resp = stream
        .recv_response()
        .await
        .context("receiving the response head")?;
    let header = |name: http::HeaderName| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    while let Some(mut chunk) = stream.recv_data().await.context("receiving the body")? {
        while chunk.has_remaining() {
            let part = chunk.chunk();
            hasher.update(part);
            let n = part.len();
            bytes += n as u64;
            chunk.advance(n);
        }
    }
    Ok(Fetched {
        protocol: "h3",
        status: resp.status().as_u16(),
        bytes,
        sha256: format!("{:x}", hasher.finalize()),
        content_type: header(http::header::CONTENT_TYPE),
        content_length: header(http::header::CONTENT_LENGTH).and_then(|v| v.parse().ok()),
        alt_svc: header(http::header::ALT_SVC),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Fetches `opts.url` over HTTP/3, `repeat` times over one connection.
pub async fn fetch(opts: &Options) -> anyhow::Result<Report> {
    tokio::time::timeout(opts.timeout, fetch_inner(opts))
        .await
        .map_err(|_| anyhow!("timed out after {:?}", opts.timeout))?
}

async fn fetch_inner(opts: &Options) -> anyhow::Result<Report> {
    if opts.url.scheme_str() != Some("https") {
        bail!("HTTP/3 needs an https:// URL, not {}", opts.url);
    }
    let host = opts
        .url
        .host()
        .context("the URL has no host")?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = opts.url.port_u16().unwrap_or(443);
    let peer = match opts.connect {
        Some(a) => a,
        None => (host.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .next()
            .with_context(|| format!("no address for {host}"))?,
    };
    let bind: SocketAddr = if peer.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse()?;
    let socket = std::net::UdpSocket::bind(bind).context("cannot open a UDP socket")?;
    // A larger receive buffer than the default, so a fast sender on loopback does not
    // overflow it (the kernel caps it at net.core.rmem_max).
    let _ = socket2::SockRef::from(&socket).set_recv_buffer_size(8 << 20);
    let runtime = quinn::default_runtime().context("no async runtime")?;
    let mut endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)
        .context("cannot open the QUIC endpoint")?;
    endpoint.set_default_client_config(client_config(&opts.cacert)?);
    let conn = endpoint
        .connect(peer, &host)
        .context("cannot start the QUIC connection")?
        .await
        .with_context(|| format!("QUIC handshake with {peer} failed"))?;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("HTTP/3 setup failed")?;
    let driver = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });

    let start = Instant::now();
    let total = opts.repeat.max(1);
    let mut results: Vec<Fetched> = Vec::with_capacity(total as usize);
    let mut inflight = tokio::task::JoinSet::new();
    let mut issued = 0;
    while issued < total || !inflight.is_empty() {
        while issued < total && inflight.len() < opts.parallel.max(1) as usize {
            inflight.spawn(one(send.clone(), opts.url.clone()));
            issued += 1;
        }
        if let Some(r) = inflight.join_next().await {
            results.push(r.context("request task failed")??);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(send);
    conn.close(0u32.into(), b"done");
    driver.abort();
    endpoint.wait_idle().await;

    let bytes: u64 = results.iter().map(|r| r.bytes).sum();
    if let Some(bad) = results.iter().find(|r| r.sha256 != results[0].sha256) {
        bail!("responses differ: {} vs {}", results[0].sha256, bad.sha256);
    }
    Ok(Report {
        protocol: "h3",
        peer,
        requests: total,
        bytes,
        seconds,
        requests_per_second: total as f64 / seconds,
        gbit_per_second: bytes as f64 * 8.0 / seconds / 1e9,
        first: results.swap_remove(0),
    })
}
