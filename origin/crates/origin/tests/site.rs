//! Replaying a site archive through origin's real listeners on loopback: an archive of
//! two origins written by the test in the archive format (site.json, bodies/ by SHA-256),
//! a certificate per host from a fresh CA, fetched over HTTP/1.1, /2 and /3 with each
//! host's name as SNI and authority; matching exact, by query, by prefix; misses recorded
//! in /stats and answered 404; the same bytes on every protocol.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use origin::cc::{QuicCc, TcpCc};
use origin::replay::Ttfb;
use origin::sched::Scheduler;
use origin::{Options, Server, SiteOptions};
use rustls::pki_types::ServerName;
use serde_json::{json, Value};

mod common;
use common::{cert_files, client_tls, control, make_certs, scratch, sha, Fixture};

const WWW: &str = "www.a.test";
const CDN: &str = "cdn.b.test";
const PAGE_TTFB_MS: u64 = 150;
const SEED: u64 = 7;

const PAGE: &str = "<!doctype html><html lang=en><head><title>two origins</title></head>\
<body><script src=/app.js?v=1></script><img src=https://cdn.b.test/img/hero-800.jpg></body></html>\n";
const SCRIPT: &str = "document.title += ' ran';\n";

/// A recorded exchange: method, URL, status, content type, body, server TTFB in ms.
type Recorded<'a> = (&'a str, &'a str, u16, &'a str, &'a [u8], Option<u64>);

/// Writes an archive of `exchanges` into `dir/site`, as the format says: bodies named by
/// their SHA-256.
fn write_archive(dir: &Path, exchanges: &[Recorded<'_>]) -> PathBuf {
    let site = dir.join("site");
    std::fs::create_dir_all(site.join("bodies")).unwrap();
    let mut list = Vec::new();
    for (method, url, status, ctype, body, ttfb) in exchanges {
        let digest = (!body.is_empty()).then(|| sha(body));
        if let Some(d) = &digest {
            std::fs::write(site.join("bodies").join(d), body).unwrap();
        }
        list.push(json!({
            "method": method, "url": url, "status": status,
            "headers": [["content-type", ctype], ["cache-control", "max-age=600"], ["x-recorded", "yes"]],
            "content_encoding": if ctype.starts_with("text/") { json!("gzip") } else { Value::Null },
            "body": digest, "size": body.len(), "server_ttfb_ms": ttfb,
        }));
    }
    let archive = json!({
        "format": "clarke-site", "version": 1, "name": "two-origins",
        "start_url": format!("https://{WWW}/"),
        "source": {"kind": "files", "tool": "origin's tests", "file": "", "recorded_at": "2024-02-29T12:00:00+00:00"},
        "origins": [
            {"host": WWW, "port": 443, "address": "198.18.10.1", "protocols": ["h1", "h2", "h3"], "certificate_names": [WWW]},
            {"host": CDN, "port": 443, "address": "198.18.10.2", "protocols": ["h2", "h3"], "certificate_names": ["*.b.test"]},
        ],
        "exchanges": list,
    });
    std::fs::write(
        site.join("site.json"),
        serde_json::to_vec_pretty(&archive).unwrap(),
    )
    .unwrap();
    site
}

fn options(dir: &Path, archive: PathBuf, scheduler: Scheduler) -> Options {
    let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), b"<p>generated page</p>\n").unwrap();
    // The pages' own certificate: the first host's.
    Options {
        root: dir.join("root"),
        listen: localhost,
        plain_listen: None,
        cert: cert_files(dir, WWW).0,
        key: cert_files(dir, WWW).1,
        control: localhost,
        tcp_cc: TcpCc::Cubic,
        quic_cc: QuicCc::Cubic,
        quic_initial_window: None,
        scheduler,
        log: None,
        alt_svc_max_age: Some(3600),
        cache_bytes: 1 << 20,
        command: "test".into(),
        site: Some(SiteOptions {
            archive,
            listen: vec![localhost, "127.0.0.2:0".parse().unwrap()],
            certs: dir.join("certs"),
            ttfb: Ttfb::Recorded,
            script_seed: Some(SEED),
            clock_ms: None,
            limits: Default::default(),
        }),
    }
}

async fn start(name: &str, scheduler: Scheduler) -> Fixture {
    let dir = scratch("origin-site", name);
    make_certs(&dir, &[WWW, CDN]);
    let image: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let page_url = format!("https://{WWW}/");
    let script_url = format!("https://{WWW}/app.js?v=1");
    let image_url = format!("https://{CDN}/img/hero-800.jpg");
    let archive = write_archive(
        &dir,
        &[
            (
                "GET",
                &page_url,
                200,
                "text/html; charset=utf-8",
                PAGE.as_bytes(),
                Some(PAGE_TTFB_MS),
            ),
            (
                "GET",
                &script_url,
                200,
                "text/javascript",
                SCRIPT.as_bytes(),
                Some(5),
            ),
            ("GET", &image_url, 200, "image/jpeg", &image, None),
        ],
    );
    let server = Server::start(options(&dir, archive, scheduler))
        .await
        .expect("origin starts with the site");
    Fixture {
        dir,
        server: Some(server),
        large_body: image,
    }
}

struct Got {
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

/// GET `url` at `addr` over TLS with ALPN `alpn` (h2 or http/1.1), SNI the URL's host.
async fn tcp_get(addr: SocketAddr, ca: &Path, alpn: &[u8], url: &str) -> Got {
    tcp_get_coded(addr, ca, alpn, url, None).await
}

/// As tcp_get, with an Accept-Encoding header.
async fn tcp_get_coded(addr: SocketAddr, ca: &Path, alpn: &[u8], url: &str, accept: Option<&str>) -> Got {
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.host().unwrap().to_owned();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(client_tls(ca, alpn))
        .connect(ServerName::try_from(host.clone()).unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    let resp = if alpn == b"h2" {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut req = http::Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
        if let Some(a) = accept {
            req.headers_mut().insert("accept-encoding", a.parse().unwrap());
        }
        send.send_request(req).await.unwrap()
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut req = http::Request::get(uri.path_and_query().unwrap().as_str())
            .header("host", host)
            .body(Empty::<Bytes>::new())
            .unwrap();
        if let Some(a) = accept {
            req.headers_mut().insert("accept-encoding", a.parse().unwrap());
        }
        send.send_request(req).await.unwrap()
    };
    let (parts, body) = resp.into_parts();
    Got {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// (status, SHA-256 of the body) of `url` over HTTP/3 at `addr`, SNI the URL's host.
async fn h3_get(addr: SocketAddr, ca: &Path, url: &str) -> (u16, String, Option<String>) {
    let r = h3get::fetch(&h3get::Options {
        url: url.parse().unwrap(),
        connect: Some(addr),
        cacert: ca.to_path_buf(),
        repeat: 1,
        parallel: 1,
        timeout: Duration::from_secs(20),
    })
    .await
    .unwrap();
    assert_eq!(r.protocol, "h3");
    (r.first.status, r.first.sha256, r.first.alt_svc)
}

async fn control_ok(addr: SocketAddr, method: http::Method, path: &str) -> Value {
    let (status, answer) = control(addr, method, path, "").await;
    assert_eq!(status, 200);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_two_origins_over_h1_h2_h3_on_identical_bytes_and_records_misses() {
    let fx = start("replay", Scheduler::Sequential).await;
    let addrs = fx.server.as_ref().unwrap().addrs();
    assert_eq!(addrs.site.len(), 2);
    let ca = fx.dir.join("ca.pem");
    let page = format!("https://{WWW}/");
    let cases = [
        // (url, status, how it is matched)
        (page.clone(), 200, "exact"),
        (format!("https://{WWW}/app.js?v=2&cb=9"), 200, "query"),
        (format!("https://{CDN}/img/hero-800.jpg"), 200, "exact"),
        (format!("https://{CDN}/img/hero-8000.jpg"), 200, "prefix"),
        (format!("https://{WWW}/missing.css"), 404, "miss"),
        (format!("https://{CDN}/app.js?v=1"), 404, "miss"), // another origin's path
    ];
    let mut shas: Vec<Vec<String>> = vec![Vec::new(); cases.len()];
    for (i, (url, status, _)) in cases.iter().enumerate() {
        // Every site listener serves every origin.
        let at = addrs.site[i % 2];
        for alpn in [&b"http/1.1"[..], b"h2"] {
            let started = Instant::now();
            let got = tcp_get(at, &ca, alpn, url).await;
            assert_eq!(got.status, *status, "{url} over {alpn:?}");
            assert_eq!(got.headers["content-length"], got.body.len().to_string().as_str());
            assert_eq!(got.headers["timing-allow-origin"], "*");
            assert!(got.headers.get("content-encoding").is_none());
            assert_eq!(
                got.headers["alt-svc"],
                format!("h3=\":{}\"; ma=3600", at.port()).as_str()
            );
            if *status == 200 {
                assert_eq!(got.headers["x-recorded"], "yes");
                assert!(got.headers.contains_key("date"));
            }
            if url == &page {
                assert!(
                    started.elapsed() >= Duration::from_millis(PAGE_TTFB_MS),
                    "recorded TTFB held"
                );
                let text = std::str::from_utf8(&got.body).unwrap();
                let script = origin::replay::inject::script(SEED, 1_709_208_000_000);
                let want = PAGE.replacen("<head>", &format!("<head>{script}"), 1);
                assert_eq!(text, want, "the deterministic script after <head>");
            }
            if url.ends_with("/hero-800.jpg") || url.ends_with("/hero-8000.jpg") {
                assert_eq!(&got.body[..], &fx.large_body[..]);
            }
            shas[i].push(sha(&got.body));
        }
        let (h3_status, h3_sha, alt_svc) = h3_get(at, &ca, url).await;
        assert_eq!(h3_status, *status, "{url} over h3");
        assert_eq!(
            alt_svc.as_deref(),
            Some(format!("h3=\":{}\"; ma=3600", at.port()).as_str())
        );
        shas[i].push(h3_sha);
        assert!(
            shas[i].iter().all(|s| s == &shas[i][0]),
            "{url}: h1, h2, h3 bodies differ: {:?}",
            shas[i]
        );
    }

    // A text body recorded gzip-coded goes gzip-coded to a client that accepts it, on h1
    // and h2 alike, and decodes to the bytes sent uncoded.
    let plain = tcp_get(addrs.site[0], &ca, b"h2", &page).await;
    let mut coded_shas = Vec::new();
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let got = tcp_get_coded(addrs.site[0], &ca, alpn, &page, Some("gzip, deflate, br")).await;
        assert_eq!(got.headers["content-encoding"], "gzip");
        assert_eq!(got.headers["content-length"], got.body.len().to_string().as_str());
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&got.body[..]), &mut decoded).unwrap();
        assert_eq!(decoded, plain.body);
        coded_shas.push(sha(&got.body));
    }
    assert_eq!(coded_shas[0], coded_shas[1]);
    // An image recorded uncoded stays uncoded.
    let img = tcp_get_coded(addrs.site[1], &ca, b"h2", &cases[2].0, Some("gzip, br")).await;
    assert!(img.headers.get("content-encoding").is_none());

    // A name the site does not have gets no certificate.
    let tcp = tokio::net::TcpStream::connect(addrs.site[0]).await.unwrap();
    let refused = tokio_rustls::TlsConnector::from(client_tls(&ca, b"h2"))
        .connect(ServerName::try_from("www.other.test").unwrap(), tcp)
        .await;
    assert!(refused.is_err(), "a handshake for an unknown host must fail");

    // The pages listener still serves the generated pages.
    let pages = tcp_get(addrs.tls_tcp, &ca, b"h2", &format!("https://{WWW}/")).await;
    assert_eq!(&pages.body[..], b"<p>generated page</p>\n");

    let stats = control_ok(addrs.control, http::Method::GET, "/stats").await;
    let site = &stats["site"];
    let n = |k: &str| site[k].as_u64().unwrap();
    assert_eq!(site["name"], "two-origins");
    assert_eq!(
        (n("requests"), n("exact"), n("query"), n("prefix"), n("missed")),
        (22, 10, 3, 3, 6)
    );
    let misses = site["misses"].as_array().unwrap();
    let mut seen: Vec<(String, String)> = misses
        .iter()
        .map(|m| {
            (
                m["url"].as_str().unwrap().to_owned(),
                m["protocol"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    let mut want = Vec::new();
    for url in [
        format!("https://{CDN}/app.js?v=1"),
        format!("https://{WWW}/missing.css"),
    ] {
        for p in ["h1", "h2", "h3"] {
            want.push((url.clone(), p.to_owned()));
        }
    }
    assert_eq!(seen, want);
    // Each miss names its connection, whose record has the SNI and the exchange's verdict.
    let conns = stats["connections"].as_array().unwrap();
    for m in misses {
        let c = conns
            .iter()
            .find(|c| c["id"] == m["connection"])
            .expect("the miss's connection is in the records");
        assert_eq!(c["site"], true);
        let url = m["url"].as_str().unwrap();
        let host = url.trim_start_matches("https://").split('/').next().unwrap();
        assert_eq!(c["server_name"], host);
        let ex = &c["exchanges"].as_array().unwrap()[0];
        assert_eq!((&ex["authority"], &ex["replay"]), (&json!(host), &json!("miss")));
    }
    let verdicts: Vec<&str> = conns
        .iter()
        .filter(|c| c["site"] == true)
        .flat_map(|c| c["exchanges"].as_array().unwrap().iter())
        .map(|e| e["replay"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts.len(), 22);
    // The schedule of the site's connections is the settings' one.
    assert!(conns
        .iter()
        .filter(|c| c["site"] == true && c["protocol"] != "h1")
        .all(|c| c["scheduler"] == "sequential"));

    let health = control_ok(addrs.control, http::Method::GET, "/health").await;
    assert_eq!(health["site"]["exchanges"], 3);
    assert_eq!(health["site"]["origins"], json!([WWW, CDN]));
    control_ok(addrs.control, http::Method::POST, "/stats/reset").await;
    let stats = control_ok(addrs.control, http::Method::GET, "/stats").await;
    assert_eq!(stats["site"]["requests"], 0);
    assert!(stats["site"]["misses"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_ttfb_serves_at_once() {
    let dir = scratch("origin-site", "zero");
    make_certs(&dir, &[WWW, CDN]);
    let url = format!("https://{WWW}/");
    let archive = write_archive(&dir, &[("GET", &url, 200, "text/html", b"<p>x</p>", Some(5_000))]);
    let mut opts = options(&dir, archive, Scheduler::RoundRobin);
    if let Some(s) = opts.site.as_mut() {
        s.ttfb = Ttfb::Zero;
        s.script_seed = None;
        s.listen.truncate(1);
    }
    let server = Server::start(opts).await.unwrap();
    let at = server.addrs().site[0];
    let started = Instant::now();
    let got = tcp_get(at, &dir.join("ca.pem"), b"h2", &url).await;
    assert!(
        started.elapsed() < Duration::from_millis(4_000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(&got.body[..], b"<p>x</p>", "no script without a seed");
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

async fn start_error(dir: &Path, archive: PathBuf) -> String {
    match Server::start(options(dir, archive, Scheduler::RoundRobin)).await {
        Ok(s) => {
            s.shutdown();
            panic!("origin started with a broken site");
        }
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn a_broken_archive_or_a_missing_certificate_is_refused_naming_the_entry() {
    let dir = scratch("origin-site", "broken");
    make_certs(&dir, &[WWW]);
    let page = format!("https://{WWW}/");
    let good = |dir: &Path| write_archive(dir, &[("GET", &page, 200, "text/html", b"<p>x</p>", None)]);

    // A body whose content is not its name.
    let site = good(&dir);
    let name = sha(b"<p>x</p>");
    std::fs::write(site.join("bodies").join(&name), b"<p>y</p>").unwrap();
    let e = start_error(&dir, site.clone()).await;
    assert!(
        e.contains("exchanges[0] (GET https://www.a.test/)") && e.contains("not its name"),
        "{e}"
    );

    // A missing body.
    std::fs::remove_file(site.join("bodies").join(&name)).unwrap();
    let e = start_error(&dir, site.clone()).await;
    assert!(e.contains("exchanges[0]") && e.contains("missing"), "{e}");

    // An exchange of an origin the archive does not list.
    std::fs::remove_dir_all(&site).unwrap();
    let site = write_archive(
        &dir,
        &[(
            "GET",
            "https://elsewhere.test/",
            200,
            "text/html",
            b"<p>x</p>",
            None,
        )],
    );
    let e = start_error(&dir, site.clone()).await;
    assert!(e.contains("elsewhere.test is not in origins"), "{e}");

    // Another version.
    std::fs::remove_dir_all(&site).unwrap();
    let site = good(&dir);
    let text = std::fs::read_to_string(site.join("site.json")).unwrap();
    std::fs::write(
        site.join("site.json"),
        text.replace("\"version\": 1", "\"version\": 2"),
    )
    .unwrap();
    let e = start_error(&dir, site.clone()).await;
    assert!(e.contains("version"), "{e}");

    // A body whose size is not the one its exchange says.
    std::fs::remove_dir_all(&site).unwrap();
    let site = good(&dir);
    let text = std::fs::read_to_string(site.join("site.json")).unwrap();
    std::fs::write(site.join("site.json"), text.replace("\"size\": 8", "\"size\": 9")).unwrap();
    let e = start_error(&dir, site.clone()).await;
    assert!(e.contains("exchanges[0]") && e.contains("size says 9"), "{e}");

    // An origin without its certificate (cdn.b.test has none here).
    std::fs::remove_dir_all(&site).unwrap();
    let site = good(&dir);
    let e = start_error(&dir, site).await;
    assert!(e.contains("cdn.b.test"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
