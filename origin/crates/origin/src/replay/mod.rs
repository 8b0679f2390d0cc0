//! Replaying a recorded site (`--site DIR`): each request answered with its recorded
//! exchange (matching.rs) for the origin its `:authority` or Host names, the same bytes
//! on HTTP/1.1, /2 and /3.
//!
//! A response is the recorded status and headers (a fresh Date; none of the headers that
//! belong to one connection, the framing or a content coding; `Timing-Allow-Origin: *`
//! added where the recording had none, so that the browser reports every origin's DNS,
//! connect and TLS times), and the body in the recorded content coding where the request
//! accepts it (gzip at level 6 for gzip, deflate and others; br at quality 5 for br;
//! coded once at start), else as the archive keeps it, decoded. HTML gets the
//! deterministic script (inject.rs) before it is coded. A response waits the
//! recorded server time to first byte, or not (`--site-ttfb zero`). A request without a
//! recorded exchange is answered 404 and noted as a miss (`GET /stats`: `site.misses`,
//! and its exchange's `replay: "miss"` in its connection's record) until the next
//! `POST /stats/reset`.

pub mod archive;
pub mod files;
pub mod inject;
pub mod matching;
pub mod rules;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde::Serialize;

use crate::files::FileResponse;
use archive::{Archive, ArchiveError};
use matching::{How, Index};

/// Misses kept per window (a page has tens of requests; a broken one, hundreds).
pub const MAX_MISSES: usize = 1000;
/// The deterministic clock's start when neither `--site-clock-ms` nor the archive's
/// `source.recorded_at` gives one: 2025-01-01T00:00:00Z.
pub const DEFAULT_CLOCK_MS: i64 = 1_735_689_600_000;
/// Headers a replay never sends from a recording: they belong to one connection (RFC
/// 9110 7.6.1, and HTTP/2 and /3 forbid them), to the framing, to a content coding, or
/// are origin's own (Date, Alt-Svc).
const NOT_REPLAYED: [&str; 12] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "http2-settings",
    "content-length",
    "content-encoding",
    "alt-svc",
    "date",
];

/// Whether responses wait their recorded server time to first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ttfb {
    /// As recorded (`server_ttfb_ms`).
    Recorded,
    /// At once.
    Zero,
}

impl std::str::FromStr for Ttfb {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "recorded" => Ok(Self::Recorded),
            "zero" => Ok(Self::Zero),
            other => Err(format!("{other:?}: expected recorded or zero")),
        }
    }
}

/// How to replay a site.
#[derive(Debug, Clone)]
pub struct SiteOptions {
    /// The archive's directory (site.json, bodies/).
    pub archive: PathBuf,
    /// TLS over TCP and QUIC on each of these; every listener serves every origin.
    pub listen: Vec<std::net::SocketAddr>,
    /// `<host>.pem` (chain, its own certificate first) and `<host>.key` per origin.
    pub certs: PathBuf,
    pub ttfb: Ttfb,
    /// The deterministic script's seed; None: no script is put into HTML.
    pub script_seed: Option<u64>,
    /// Where the script's clock starts (Unix ms); None: the archive's `recorded_at`.
    pub clock_ms: Option<i64>,
    /// What the archive may hold (the runner passes the limits it read it with).
    pub limits: files::Limits,
}

const GZIP_LEVEL: u32 = 6;
const BROTLI_QUALITY: u32 = 5;
const BROTLI_WINDOW_LOG: u32 = 22;

/// A body in a content coding, and the coding's token (what Accept-Encoding must name).
#[derive(Clone)]
struct Coded {
    token: &'static str,
    body: Bytes,
}

/// One recorded exchange, ready to send.
struct Prepared {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    /// The body in its recorded coding (None: recorded uncoded, or empty).
    coded: Option<Coded>,
    ttfb: Option<Duration>,
}

/// `data` in the coding `recorded` names: br as br, anything else (gzip, deflate, zstd,
/// ...) as gzip, which every browser accepts; None for an empty body.
fn encode(data: &[u8], recorded: &str) -> std::io::Result<Option<Coded>> {
    if data.is_empty() {
        return Ok(None);
    }
    if recorded == "br" {
        let mut out = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut out, 64 * 1024, BROTLI_QUALITY, BROTLI_WINDOW_LOG);
            w.write_all(data)?;
        }
        return Ok(Some(Coded {
            token: "br",
            body: Bytes::from(out),
        }));
    }
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
    w.write_all(data)?;
    Ok(Some(Coded {
        token: "gzip",
        body: Bytes::from(w.finish()?),
    }))
}

/// Whether an Accept-Encoding value accepts `token` (named or `*`, without `q=0`).
pub fn accepts(accept_encoding: Option<&HeaderValue>, token: &str) -> bool {
    let Some(v) = accept_encoding.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    v.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let q = parts
            .find_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        (name.eq_ignore_ascii_case(token) || name == "*") && q > 0.0
    })
}

/// A request that found no recorded exchange.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    pub method: String,
    pub url: String,
    /// `h1`, `h2` or `h3`.
    pub protocol: &'static str,
    /// Its connection's id in `connections`.
    pub connection: u64,
    pub unix_ms: u64,
}

/// What the replay answered since the last reset.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayStats {
    pub requests: u64,
    pub exact: u64,
    pub query: u64,
    pub prefix: u64,
    pub missed: u64,
    /// The first MAX_MISSES misses, in order.
    pub misses: Vec<Miss>,
}

/// A site loaded for replay.
pub struct Site {
    pub name: String,
    /// Each origin's authority and the host its certificate is for.
    pub origins: Vec<archive::Origin>,
    pub exchanges: usize,
    pub options: SiteOptions,
    prepared: Vec<Prepared>,
    index: Index,
    stats: Mutex<ReplayStats>,
}

/// Problems loading a site.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// The archive is broken.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// An exchange cannot be sent as recorded.
    #[error("{path}: {entry}: {why}")]
    Unsendable {
        path: PathBuf,
        entry: String,
        why: String,
    },
}

fn is_html(e: &archive::Exchange) -> bool {
    e.header("content-type")
        .is_some_and(|v| v.to_ascii_lowercase().contains("text/html"))
}

impl Site {
    /// Reads and checks the archive and prepares every response.
    pub fn load(options: SiteOptions) -> Result<Self, SiteError> {
        let a = Archive::read_within(&options.archive, options.limits)?;
        let clock = options
            .clock_ms
            .or_else(|| archive::parse_iso8601_ms(&a.site.source.recorded_at))
            .unwrap_or(DEFAULT_CLOCK_MS);
        let script = options
            .script_seed
            .map(|seed| inject::script(seed, clock.max(0) as u64));
        let path = a.dir.join(archive::SITE_JSON);
        let mut index = Index::default();
        let mut prepared = Vec::with_capacity(a.site.exchanges.len());
        // A body shared by many exchanges is coded once per coding (and script), not
        // once per exchange: memory and start-up stay those of the distinct bodies.
        let mut coded_once: std::collections::HashMap<(Option<String>, String, bool), Option<Coded>> =
            Default::default();
        for (i, (e, body)) in a.site.exchanges.iter().zip(&a.bodies).enumerate() {
            let unsendable = |why: String| SiteError::Unsendable {
                path: path.clone(),
                entry: e.label(i),
                why,
            };
            let (auth, path_and_query) = archive::split_url(&e.url).expect("checked on reading");
            index.add(&e.method, &auth, &path_and_query, i);
            let status = StatusCode::from_u16(e.status)
                .ok()
                .filter(|s| s.as_u16() >= 200)
                .ok_or_else(|| unsendable(format!("status {} cannot be replayed", e.status)))?;
            let mut headers = HeaderMap::new();
            for (k, v) in &e.headers {
                let k = k.to_ascii_lowercase();
                if NOT_REPLAYED.contains(&k.as_str()) {
                    continue;
                }
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| unsendable(format!("header name {k:?} is not a valid one")))?;
                let value = HeaderValue::from_str(v)
                    .map_err(|_| unsendable(format!("header {k}: its value is not a valid one")))?;
                headers.append(name, value);
            }
            if !headers.contains_key("timing-allow-origin") {
                headers.insert("timing-allow-origin", HeaderValue::from_static("*"));
            }
            let injected = script.is_some() && status == StatusCode::OK && is_html(e);
            let body = match &script {
                Some(s) if injected => Bytes::from(inject::inject(body, s)),
                _ => body.clone(),
            };
            let coded = match e.content_encoding.as_deref() {
                Some(c) => {
                    let key = (e.body.clone(), c.to_owned(), injected);
                    match coded_once.get(&key) {
                        Some(done) => done.clone(),
                        None => {
                            let done = encode(&body, c)
                                .map_err(|err| unsendable(format!("coding its body: {err}")))?;
                            coded_once.insert(key, done.clone());
                            done
                        }
                    }
                }
                None => None,
            };
            let ttfb = match (options.ttfb, e.server_ttfb_ms) {
                (Ttfb::Recorded, Some(ms)) if ms > 0.0 => Some(Duration::from_secs_f64(ms / 1000.0)),
                _ => None,
            };
            prepared.push(Prepared {
                status,
                headers,
                body,
                coded,
                ttfb,
            });
        }
        Ok(Self {
            name: a.site.name.clone(),
            origins: a.site.origins.clone(),
            exchanges: prepared.len(),
            options,
            prepared,
            index,
            stats: Mutex::new(ReplayStats::default()),
        })
    }

    /// The archive's directory.
    pub fn dir(&self) -> &Path {
        &self.options.archive
    }

    /// What was answered since the last reset.
    pub fn stats(&self) -> ReplayStats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A new window (`POST /stats/reset`).
    pub fn reset(&self) {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = ReplayStats::default();
    }

    /// Which exchange answers a request, and how it was found (None: a miss).
    pub fn find(&self, method: &Method, authority: &str, path_and_query: &str) -> Option<(usize, How)> {
        self.index.find(
            method.as_str(),
            &archive::normal_authority(authority),
            path_and_query,
        )
    }

    fn count(&self, found: Option<How>, miss: impl FnOnce() -> Miss) {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.requests += 1;
        match found {
            Some(How::Exact) => s.exact += 1,
            Some(How::Query) => s.query += 1,
            Some(How::Prefix) => s.prefix += 1,
            None => {
                s.missed += 1;
                if s.misses.len() < MAX_MISSES {
                    s.misses.push(miss());
                }
            }
        }
    }

    /// The response to a request; `found` is [`Site::find`]'s answer for it, counted
    /// here (a miss with its URL, protocol and connection).
    pub async fn serve(
        &self,
        req: &Request<'_>,
        found: Option<(usize, How)>,
        alt_svc: Option<&HeaderValue>,
    ) -> FileResponse {
        let auth = archive::normal_authority(req.authority);
        let url = format!("https://{auth}{}", req.path_and_query);
        self.count(found.map(|(_, h)| h), || Miss {
            method: req.method.to_string(),
            url: url.clone(),
            protocol: req.protocol,
            connection: req.connection,
            unix_ms: crate::stats::now_ms(),
        });
        let head = req.method == Method::HEAD;
        let Some((i, _)) = found else {
            let why = format!(
                "replay of site {}: no recorded response for {} {url}",
                self.name, req.method
            );
            let mut r = crate::files::not_found(alt_svc, head, &why);
            r.headers
                .insert("timing-allow-origin", HeaderValue::from_static("*"));
            return r;
        };
        let p = &self.prepared[i];
        if let Some(d) = p.ttfb {
            tokio::time::sleep(d).await;
        }
        let mut headers = p.headers.clone();
        headers.insert(header::DATE, http_date(SystemTime::now()));
        if let Some(v) = alt_svc {
            headers.insert(header::ALT_SVC, v.clone());
        }
        let body = match &p.coded {
            Some(c) if accepts(req.accept_encoding, c.token) => {
                headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(c.token));
                &c.body
            }
            _ => &p.body,
        };
        let bodiless = p.status == StatusCode::NO_CONTENT || p.status == StatusCode::NOT_MODIFIED;
        if !bodiless {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        FileResponse {
            status: p.status,
            headers,
            body: if head || bodiless {
                Bytes::new()
            } else {
                body.clone()
            },
        }
    }
}

/// The origin a request asks: its `:authority` (h2, h3; hyper and h3 put it in the URI)
/// or its Host header (h1).
pub fn authority_of<'a>(uri: &'a http::Uri, headers: &'a HeaderMap) -> &'a str {
    uri.authority()
        .map(|a| a.as_str())
        .or_else(|| headers.get(header::HOST).and_then(|h| h.to_str().ok()))
        .unwrap_or("")
}

/// Answers a request to the replayed site and notes in exchange `key` of the connection
/// which origin it asked and how it was answered (its recorded exchange, or a miss).
pub async fn answer(
    site: &Site,
    counters: &crate::stats::Counters,
    key: u64,
    req: &Request<'_>,
    alt_svc: Option<&HeaderValue>,
) -> FileResponse {
    let found = site.find(req.method, req.authority, req.path_and_query);
    let how = found.map_or("miss", |(_, h)| h.name());
    counters
        .exchanges
        .site(key, &archive::normal_authority(req.authority), how);
    if found.is_none() {
        tracing::info!(method = %req.method, authority = req.authority, path = req.path_and_query, protocol = req.protocol, "site miss");
    }
    site.serve(req, found, alt_svc).await
}

/// A request to a replayed site, as every protocol sees it.
pub struct Request<'a> {
    pub method: &'a Method,
    /// `:authority` (h2, h3) or Host (h1).
    pub authority: &'a str,
    pub path_and_query: &'a str,
    pub accept_encoding: Option<&'a HeaderValue>,
    pub protocol: &'static str,
    pub connection: u64,
}

impl<'a> Request<'a> {
    /// `req` as the replay matches it, received over `protocol` on `connection`.
    pub fn of<B>(req: &'a http::Request<B>, protocol: &'static str, connection: u64) -> Self {
        Request {
            method: req.method(),
            authority: authority_of(req.uri(), req.headers()),
            path_and_query: req.uri().path_and_query().map_or("/", |p| p.as_str()),
            accept_encoding: req.headers().get(header::ACCEPT_ENCODING),
            protocol,
            connection,
        }
    }
}

/// An IMF-fixdate (RFC 9110 5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> HeaderValue {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // The civil date of a day count (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let text = format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_read_with_its_weights() {
        let v = |s: &'static str| HeaderValue::from_static(s);
        assert!(accepts(Some(&v("gzip, deflate, br, zstd")), "br"));
        assert!(accepts(Some(&v("gzip;q=1.0, br;q=0.5")), "br"));
        assert!(!accepts(Some(&v("gzip, br;q=0")), "br"));
        assert!(!accepts(Some(&v("identity")), "gzip"));
        assert!(accepts(Some(&v("*")), "gzip"));
        assert!(!accepts(None, "gzip"));
    }

    #[test]
    fn bodies_are_coded_as_recorded() {
        use std::io::Read;
        let data = b"body{color:red}".repeat(100);
        let gz = encode(&data, "gzip").unwrap().unwrap();
        assert_eq!(gz.token, "gzip");
        assert!(gz.body.len() < data.len() / 4);
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&gz.body[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, data);
        let br = encode(&data, "br").unwrap().unwrap();
        assert_eq!(br.token, "br");
        let mut plain = Vec::new();
        brotli::Decompressor::new(&br.body[..], 4096)
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, data);
        assert_eq!(encode(&data, "zstd").unwrap().unwrap().token, "gzip");
        assert!(encode(b"", "gzip").unwrap().is_none());
    }

    #[test]
    fn dates_are_imf_fixdates() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_208_000); // a leap day
        assert_eq!(http_date(t), "Thu, 29 Feb 2024 12:00:00 GMT");
    }
}
