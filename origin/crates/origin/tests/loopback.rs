//! Loopback integration tests: start origin on 127.0.0.1 ephemeral ports with a
//! freshly made CA and server certificate, fetch over h1 (cleartext and TLS), h2 and h3,
//! and check protocol, bytes, headers, stats and configuration changes.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use origin::cc::{QuicCc, TcpCc};
use origin::sched::Scheduler;
use origin::{Options, Server};
use rustls::pki_types::ServerName;
use serde_json::Value;

mod common;
use common::{cert_files, client_tls, control, make_certs, scratch, sha, Fixture};

const HOST: &str = "www.clarke.test";

async fn start(name: &str) -> Fixture {
    // As the binary does: quic_fin.rs notes when each HTTP/3 response's end went out.
    origin::quic_fin::init_tracing("warn");
    let dir = scratch("origin-it", name);
    std::fs::create_dir_all(dir.join("root/img")).unwrap();
    make_certs(&dir, &[HOST]);
    let (cert, key) = cert_files(&dir, HOST);
    let big: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("root/img/big.jpg"), &big).unwrap();
    std::fs::write(dir.join("root/index.html"), b"<!doctype html><p>hello</p>\n").unwrap();
    let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Server::start(Options {
        root: dir.join("root"),
        listen: localhost,
        plain_listen: Some(localhost),
        cert,
        key,
        control: localhost,
        tcp_cc: TcpCc::Bbr,
        quic_cc: QuicCc::Bbr,
        quic_initial_window: Some(40_000),
        scheduler: Scheduler::RoundRobin,
        log: Some(dir.join("conn.log")),
        alt_svc_max_age: Some(3600),
        cache_bytes: 64 << 20,
        command: "test".into(),
        site: None,
    })
    .await
    .expect("origin starts");
    Fixture {
        dir,
        server: Some(server),
        large_body: big,
    }
}

struct Got {
    version: http::Version,
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn tls_connect(
    addr: SocketAddr,
    ca: &Path,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(client_tls(ca, alpn))
        .connect(ServerName::try_from(HOST).unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    tls
}

async fn tls_get(addr: SocketAddr, ca: &Path, alpn: &[u8], path: &str) -> Got {
    let tls = tls_connect(addr, ca, alpn).await;
    let uri: http::Uri = format!("https://{HOST}{path}").parse().unwrap();
    if alpn == b"h2" {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = http::Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
        collect(send.send_request(req).await.unwrap()).await
    } else {
        plain_request(TokioIo::new(tls), http::Method::GET, &uri, Bytes::new()).await
    }
}

async fn plain_request<T>(io: TokioIo<T>, method: http::Method, uri: &http::Uri, body: Bytes) -> Got
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .header("host", uri.authority().map(|a| a.as_str()).unwrap_or(HOST))
        .header("accept-encoding", "gzip, br")
        .body(Full::new(body))
        .unwrap();
    collect(send.send_request(req).await.unwrap()).await
}

async fn collect(resp: http::Response<hyper::body::Incoming>) -> Got {
    let (parts, body) = resp.into_parts();
    Got {
        version: parts.version,
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// POSTs `body` to origin's /config.
async fn configure(addr: SocketAddr, body: &str) -> (u16, Value) {
    control(addr, http::Method::POST, "/config", body).await
}

/// h3get's options for `path_and_query` at `quic`: `repeat` requests, `parallel` at once.
fn h3_options(
    quic: SocketAddr,
    ca: &Path,
    path_and_query: &str,
    repeat: u32,
    parallel: u32,
) -> h3get::Options {
    h3get::Options {
        url: format!("https://{HOST}:{}{path_and_query}", quic.port())
            .parse()
            .unwrap(),
        connect: Some(quic),
        cacert: ca.to_path_buf(),
        repeat,
        parallel,
        timeout: Duration::from_secs(20),
    }
}

async fn settle_stats(addr: SocketAddr, n: usize) -> Vec<Value> {
    for _ in 0..100 {
        let (_, v) = control(addr, http::Method::GET, "/stats", "").await;
        let conns = v["connections"].as_array().unwrap().clone();
        if conns.len() >= n && conns.iter().all(|c| c["open"] == false) {
            return conns;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("connections did not close in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_h1_h2_h3_byte_identical_with_stats() {
    let fx = start("proto").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let ca = fx.dir.join("ca.pem");
    let want = sha(&fx.large_body);

    let h1 = tls_get(addrs.tls_tcp, &ca, b"http/1.1", "/img/big.jpg").await;
    assert_eq!(h1.version, http::Version::HTTP_11);
    let h2 = tls_get(addrs.tls_tcp, &ca, b"h2", "/img/big.jpg").await;
    assert_eq!(h2.version, http::Version::HTTP_2);
    for got in [&h1, &h2] {
        assert_eq!(got.status, 200);
        assert_eq!(sha(&got.body), want);
        assert_eq!(got.headers["content-type"], "image/jpeg");
        assert_eq!(got.headers["content-length"], "2000000");
        assert!(got.headers.get("content-encoding").is_none());
        assert!(got.headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("no-store"));
        assert_eq!(
            got.headers["alt-svc"],
            format!("h3=\":{}\"; ma=3600", addrs.tls_tcp.port())
        );
    }

    let h3 = h3get::fetch(&h3_options(addrs.quic_udp, &ca, "/img/big.jpg", 1, 1))
        .await
        .unwrap();
    assert_eq!(h3.first.status, 200);
    assert_eq!(h3.first.bytes, 2_000_000);
    assert_eq!(h3.first.sha256, want);
    assert_eq!(h3.first.content_type.as_deref(), Some("image/jpeg"));

    let plain = plain_request(
        TokioIo::new(
            tokio::net::TcpStream::connect(addrs.plain_tcp.unwrap())
                .await
                .unwrap(),
        ),
        http::Method::GET,
        &"/".parse().unwrap(),
        Bytes::new(),
    )
    .await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.headers["content-type"], "text/html; charset=utf-8");
    assert!(plain.headers.get("alt-svc").is_none());

    let conns = settle_stats(addrs.control, 4).await;
    let by = |p: &str, tls: bool| {
        conns
            .iter()
            .find(|c| c["protocol"] == p && c["tls"] == tls)
            .unwrap_or_else(|| panic!("no {p} record"))
    };
    for (p, tls) in [("h1", true), ("h2", true), ("h3", true)] {
        let c = by(p, tls);
        assert_eq!(c["cc"], "bbr", "{c}");
        assert_eq!(c["app_bytes_sent"], 2_000_000, "{c}");
        let wire = c["wire_bytes_sent"].as_u64().unwrap();
        assert!(wire > 2_000_000 && wire < 2_600_000, "{c}");
        assert!(c["ip_bytes_estimate"].as_u64().unwrap() > wire);
        assert!(c["end_unix_ms"].as_u64().is_some());
    }
    assert!(
        by("h3", true)["transport"]["quic"]["udp_datagrams_sent"]
            .as_u64()
            .unwrap()
            > 1000
    );
    assert!(by("h1", true)["transport"]["tcp"]["bytes_sent"].as_u64().unwrap() > 2_000_000);

    let log = std::fs::read_to_string(fx.dir.join("conn.log")).unwrap();
    assert!(log.starts_with("# origin "));
    assert_eq!(log.lines().filter(|l| l.contains("\"conn_closed\"")).count(), 4);

    let (status, v) = control(addrs.control, http::Method::POST, "/stats/reset", "").await;
    assert_eq!(status, 200);
    assert_eq!(v["removed"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_changes_cc_for_new_connections_and_refuses_unknown() {
    let fx = start("config").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let (status, v) = control(addrs.control, http::Method::GET, "/health", "").await;
    assert_eq!(status, 200);
    assert_eq!(v["settings"]["tcp_cc"], "bbr");
    assert_eq!(v["settings"]["quic_initial_window"], 40_000);

    let (status, v) = configure(addrs.control, r#"{"tcp_cc": "vegas"}"#).await;
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().contains("vegas"), "{v}");
    let (status, _) = configure(addrs.control, r#"{"quic_cc": "reno"}"#).await;
    assert_eq!(status, 400);

    let (status, v) = configure(addrs.control, r#"{"tcp_cc": "reno", "quic_cc": "newreno"}"#).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["settings"]["quic_cc"], "newreno");

    let ca = fx.dir.join("ca.pem");
    let got = tls_get(addrs.tls_tcp, &ca, b"h2", "/index.html").await;
    assert_eq!(got.status, 200);
    h3get::fetch(&h3_options(addrs.quic_udp, &ca, "/index.html", 3, 2))
        .await
        .unwrap();
    let conns = settle_stats(addrs.control, 2).await;
    let h2 = conns.iter().find(|c| c["protocol"] == "h2").unwrap();
    assert_eq!(h2["cc"], "reno", "the kernel's word: {h2}");
    let h3 = conns.iter().find(|c| c["protocol"] == "h3").unwrap();
    assert_eq!(h3["cc"], "newreno");
    assert_eq!(h3["requests"], 3);

    let (status, _) = control(addrs.control, http::Method::GET, "/nope", "").await;
    assert_eq!(status, 404);
}

/// `?delay_ms=N` holds a response N ms after its request arrived, over h1, h2 and h3,
/// without holding up other requests on the same connection; a malformed or too long
/// delay is refused with 400 and no hold; the stats record the path without the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_a_response_on_request_without_blocking_the_connection() {
    const HOLD: Duration = Duration::from_millis(400);
    let fx = start("delay").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let ca = fx.dir.join("ca.pem");
    let index = std::fs::read(fx.dir.join("root/index.html")).unwrap();

    // h1 (cleartext): held, refused, or served with other parameters left alone.
    let h1 = |path: String| async move {
        let tcp = tokio::net::TcpStream::connect(addrs.plain_tcp.unwrap())
            .await
            .unwrap();
        let t = Instant::now();
        let got = plain_request(
            TokioIo::new(tcp),
            http::Method::GET,
            &path.parse().unwrap(),
            Bytes::new(),
        )
        .await;
        (got, t.elapsed())
    };
    let (got, took) = h1(format!("/index.html?delay_ms={}", HOLD.as_millis())).await;
    assert_eq!((got.status, &got.body[..]), (200, &index[..]));
    assert!(took >= HOLD, "h1 answered after {took:?}");
    let (got, _) = h1("/index.html?v=2".into()).await;
    assert_eq!(got.status, 200);
    for bad in ["30001", "abc", "", "-1", "5&delay_ms=5"] {
        let (got, took) = h1(format!("/index.html?delay_ms={bad}")).await;
        assert_eq!(got.status, 400, "delay_ms={bad}");
        assert!(
            String::from_utf8_lossy(&got.body).contains("delay_ms"),
            "delay_ms={bad}"
        );
        assert!(took < HOLD, "a refusal is not held: {took:?}");
    }

    // h2: a held and an unheld request on one connection; the unheld one is answered
    // while the held one still waits.
    let tls = tls_connect(addrs.tls_tcp, &ca, b"h2").await;
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let h2 = |mut send: hyper::client::conn::http2::SendRequest<Empty<Bytes>>, path: String| async move {
        let uri: http::Uri = format!("https://{HOST}{path}").parse().unwrap();
        let req = http::Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
        let t = Instant::now();
        let got = collect(send.send_request(req).await.unwrap()).await;
        (got, t.elapsed())
    };
    let held = tokio::spawn(h2(
        send.clone(),
        format!("/index.html?delay_ms={}", HOLD.as_millis()),
    ));
    tokio::time::sleep(Duration::from_millis(20)).await; // the held request goes first
    let (quick, _) = h2(send.clone(), "/index.html".into()).await;
    assert_eq!(quick.status, 200);
    assert!(!held.is_finished(), "the unheld request waited for the held one");
    let (got, took) = held.await.unwrap();
    assert_eq!(
        (got.version, got.status, &got.body[..]),
        (http::Version::HTTP_2, 200, &index[..])
    );
    assert!(took >= HOLD, "h2 answered after {took:?}");
    drop(send);

    // h3: two held requests on one connection overlap: both in less than two holds.
    let h3 = |query: String, repeat: u32| {
        let opts = h3_options(
            addrs.quic_udp,
            &ca,
            &format!("/index.html?{query}"),
            repeat,
            repeat,
        );
        async move { h3get::fetch(&opts).await }
    };
    let r = h3(format!("delay_ms={}", HOLD.as_millis()), 2).await.unwrap();
    assert_eq!((r.first.status, r.requests), (200, 2));
    assert_eq!(r.first.bytes, index.len() as u64);
    let took = Duration::from_secs_f64(r.seconds);
    assert!(
        took >= HOLD && took < 2 * HOLD,
        "two held h3 requests took {took:?}"
    );
    let r = h3("delay_ms=1.5".into(), 1).await.unwrap();
    assert_eq!(r.first.status, 400);

    // Every request is in the stats under its path, without the query.
    let conns = settle_stats(addrs.control, 10).await;
    let paths: Vec<&str> = conns
        .iter()
        .flat_map(|c| c["request_paths"].as_array().unwrap())
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 12, "{paths:?}");
    assert!(paths.iter().all(|p| *p == "/index.html"), "{paths:?}");
    let h3_held = conns
        .iter()
        .find(|c| c["protocol"] == "h3" && c["requests"] == 2)
        .expect("the h3 connection with two requests");
    assert_eq!(h3_held["app_bytes_sent"], 2 * index.len() as u64);
}

/// HTTP/3 under `sequential`: three responses of 2 MB asked for at once end on the wire
/// in the order their requests arrived (quinn's priorities, sched::quinn_priority), by
/// when each one's FIN first went out (quic_fin.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_responses_end_in_the_schedulers_order() {
    let fx = start("h3sched").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let (status, _) = configure(addrs.control, r#"{"scheduler": "sequential"}"#).await;
    assert_eq!(status, 200);
    let got = h3get::fetch(&h3_options(
        addrs.quic_udp,
        &fx.dir.join("ca.pem"),
        "/img/big.jpg",
        3,
        3,
    ))
    .await
    .unwrap();
    assert_eq!((got.first.status, got.requests), (200, 3));
    let conns = settle_stats(addrs.control, 1).await;
    let c = conns
        .iter()
        .find(|c| c["protocol"] == "h3")
        .expect("an h3 record");
    let mut ends: Vec<(f64, u64)> = c["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let fin = x["fin_sent_unix_ms"].as_f64();
            (
                fin.unwrap_or_else(|| panic!("no FIN noted: {x}")),
                x["order"].as_u64().unwrap(),
            )
        })
        .collect();
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(
        ends.iter().map(|e| e.1).collect::<Vec<_>>(),
        [1, 2, 3],
        "{ends:?}"
    );
}

#[tokio::test]
async fn refuses_bad_input_without_panicking() {
    let dir = scratch("origin-it", "bad");
    make_certs(&dir, &[HOST]);
    let (cert, key) = cert_files(&dir, HOST);
    let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let base = Options {
        root: dir.clone(),
        listen: localhost,
        plain_listen: None,
        cert: cert.clone(),
        key,
        control: localhost,
        tcp_cc: TcpCc::Cubic,
        quic_cc: QuicCc::Cubic,
        quic_initial_window: None,
        scheduler: Scheduler::RoundRobin,
        log: None,
        alt_svc_max_age: None,
        cache_bytes: 64 << 20,
        command: "test".into(),
        site: None,
    };
    let err = |o: Options| async move { format!("{:#}", Server::start(o).await.err().expect("must fail")) };
    let e = err(Options {
        root: dir.join("missing"),
        ..base.clone()
    })
    .await;
    assert!(e.contains("root directory"), "{e}");
    let e = err(Options {
        cert: dir.join("nope.pem"),
        ..base.clone()
    })
    .await;
    assert!(e.contains("certificate chain file"), "{e}");
    let e = err(Options {
        key: cert,
        ..base.clone()
    })
    .await;
    assert!(e.contains("private key"), "{e}");
    let busy = std::net::TcpListener::bind(localhost).unwrap();
    let e = err(Options {
        listen: busy.local_addr().unwrap(),
        ..base.clone()
    })
    .await;
    assert!(e.contains("failed to bind the TLS listener"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every connection's record says how its TLS handshake went: a client with no state
/// gets a full handshake and offers nothing; the same client again (its session ticket
/// kept, as a browser context that shares state would) offers it and is resumed, over
/// TCP and over QUIC. A connection open across a reset that serves a request again is
/// marked as carried over; one that serves nothing is listed as lingering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_full_and_resumed_handshakes_and_connections_carried_over() {
    let fx = start("handshakes").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let ca = fx.dir.join("ca.pem");

    // TCP: one client configuration (its session cache) for two connections.
    let tcp_cfg = client_tls(&ca, b"http/1.1");
    let uri: http::Uri = format!("https://{HOST}/index.html").parse().unwrap();
    let mut kept = None;
    for _ in 0..2 {
        let tcp = tokio::net::TcpStream::connect(addrs.tls_tcp).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(tcp_cfg.clone())
            .connect(ServerName::try_from(HOST).unwrap(), tcp)
            .await
            .unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = http::Request::get(uri.path())
            .header("host", HOST)
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(collect(send.send_request(req).await.unwrap()).await.status, 200);
        kept = Some(send); // the second stays open, for the reset below
    }

    // QUIC: one quinn client configuration for two connections.
    let quic_cfg = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from((*client_tls(&ca, b"h3")).clone()).unwrap(),
    ));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quic_cfg);
    for _ in 0..2 {
        let conn = endpoint.connect(addrs.quic_udp, HOST).unwrap().await.unwrap();
        // The session tickets come after the handshake: give them time to arrive.
        tokio::time::sleep(Duration::from_millis(200)).await;
        conn.close(0u32.into(), b"done");
    }

    // Every connection but the kept one closed, as the server saw it (a close reaches it
    // a moment later), so that the reset below removes those three.
    let mut v = Value::Null;
    for _ in 0..100 {
        (_, v) = control(addrs.control, http::Method::GET, "/stats", "").await;
        let conns = v["connections"].as_array().unwrap();
        if conns.iter().filter(|c| c["open"] == false).count() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let conns = v["connections"].as_array().unwrap();
    for proto in ["h1", "h3"] {
        let hs: Vec<&Value> = conns
            .iter()
            .filter(|c| c["protocol"] == proto)
            .map(|c| &c["tls_handshake"])
            .collect();
        assert_eq!(hs.len(), 2, "{proto}: {v}");
        assert_eq!(hs[0]["kind"], "full", "{proto}: {}", hs[0]);
        assert_eq!(hs[0]["hello_read"], true);
        assert_eq!(hs[0]["psk_offered"], false);
        assert_eq!(hs[1]["kind"], "resumed", "{proto}: {}", hs[1]);
        assert_eq!(hs[1]["psk_offered"], true);
        for h in &hs {
            assert_eq!(h["early_data_offered"], false);
            assert_eq!(h["early_data_accepted"], false);
        }
    }
    assert!(conns.iter().all(|c| c["opened_before_reset"] == false));

    // The TLS h1 connection still open is an earlier load's after a reset: hidden and
    // lingering until it serves a request, then shown and marked as carried over.
    let (_, v) = control(addrs.control, http::Method::POST, "/stats/reset", "").await;
    assert!(v["removed"].as_u64().unwrap() >= 3, "{v}");
    let (_, v) = control(addrs.control, http::Method::GET, "/stats", "").await;
    assert!(v["connections"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["lingering"].as_array().unwrap().len(), 1, "{v}");
    let mut send = kept.unwrap();
    let req = http::Request::get(uri.path())
        .header("host", HOST)
        .body(Empty::<Bytes>::new())
        .unwrap();
    assert_eq!(collect(send.send_request(req).await.unwrap()).await.status, 200);
    let (_, v) = control(addrs.control, http::Method::GET, "/stats", "").await;
    let conns = v["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{v}");
    assert_eq!(conns[0]["opened_before_reset"], true);
    assert!(v["lingering"].as_array().unwrap().is_empty());
}

/// Three responses of 2 MB asked at once on one HTTP/2 connection; the connection's
/// record of the DATA frames origin wrote, as runs of one stream's frames, and when each
/// response's last frame was written, by stream.
async fn h2_three_at_once(
    addr: SocketAddr,
    ca: &Path,
    control_addr: SocketAddr,
) -> (Vec<(u64, u64)>, Vec<(u64, f64)>) {
    let (status, _) = control(control_addr, http::Method::POST, "/stats/reset", "").await;
    assert_eq!(status, 200);
    let tls = tls_connect(addr, ca, b"h2").await;
    // A small connection window: origin holds the three responses' bytes at once and
    // sends as the client's WINDOW_UPDATEs allow, so its order is the scheduler's, not
    // the order the handlers happened to run in.
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_connection_window_size(65_535)
        .adaptive_window(false)
        .handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut gets = Vec::new();
    for _ in 0..3 {
        let mut send = send.clone();
        let uri: http::Uri = format!("https://{HOST}/img/big.jpg").parse().unwrap();
        let req = http::Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
        gets.push(tokio::spawn(async move {
            collect(send.send_request(req).await.unwrap()).await
        }));
    }
    for g in gets {
        assert_eq!(g.await.unwrap().body.len(), 2_000_000);
    }
    drop(send);
    let conns = settle_stats(control_addr, 1).await;
    let c = conns
        .iter()
        .find(|c| c["protocol"] == "h2")
        .expect("an h2 record");
    let runs = c["data_frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
        .collect();
    let mut done: Vec<(u64, f64)> = c["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["stream"].as_u64().unwrap(),
                x["written_last_unix_ms"].as_f64().unwrap(),
            )
        })
        .collect();
    done.sort_by(|a, b| a.1.total_cmp(&b.1));
    (runs, done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_data_frames_go_out_in_the_schedulers_order() {
    let fx = start("sched").await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    let ca = fx.dir.join("ca.pem");

    // round-robin (h2's own): the three responses' frames alternate.
    let (runs, _) = h2_three_at_once(addrs.tls_tcp, &ca, addrs.control).await;
    let frames: u64 = runs.iter().map(|r| r.1).sum();
    assert!(frames >= 3 * 2_000_000 / 16_384, "{runs:?}");
    assert!(runs.len() > 30, "round-robin did not interleave: {runs:?}");

    // sequential: one response after the other, in stream order.
    let (status, _) = configure(addrs.control, r#"{"scheduler": "sequential"}"#).await;
    assert_eq!(status, 200);
    let (runs, done) = h2_three_at_once(addrs.tls_tcp, &ca, addrs.control).await;
    assert_eq!(
        done.iter().map(|d| d.0).collect::<Vec<_>>(),
        [1, 3, 5],
        "{done:?}"
    );
    assert!(runs.len() <= 3 + 2 * 4, "sequential interleaved: {runs:?}");
    for (stream, _) in &runs {
        assert!([1, 3, 5].contains(stream), "{runs:?}");
    }
}
