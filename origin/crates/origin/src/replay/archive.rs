//! The site archive as origin reads it (format `clarke-site`, version 1: docs/sites.md):
//! `DIR/site.json` (the origins and the exchanges) and `DIR/bodies/<sha256>` (each body
//! once, named by the SHA-256 of its bytes). origin checks what it will serve before
//! anything listens, by the runner's rules (rules.rs: the model; files.rs: no links,
//! regular files of their declared sizes, the limits), and an error names the entry.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::files::{Dir, Limits, INDEX_BYTES};
use super::rules;

pub const FORMAT: &str = "clarke-site";
pub const VERSION: u32 = 1;
pub const SITE_JSON: &str = "site.json";
pub const BODIES: &str = "bodies";
/// The longest recorded server time to first byte the archive format allows (ms).
pub const MAX_TTFB_MS: f64 = 600_000.0;

/// A broken archive, naming the entry.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// site.json cannot be read.
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// site.json is not an archive origin can read.
    #[error("{path}: {why}")]
    Invalid { path: PathBuf, why: String },
    /// An exchange is unusable (bad URL, unknown origin, missing or wrong body).
    #[error("{path}: {entry}: {why}")]
    Entry {
        path: PathBuf,
        entry: String,
        why: String,
    },
}

/// Where the archive came from; origin reads `recorded_at` (ISO 8601) for the
/// deterministic clock.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub kind: String,
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub recorded_at: String,
}

/// An origin: a host and port the page's requests went to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    pub host: String,
    #[serde(default = "https_port")]
    pub port: u16,
    #[serde(default)]
    pub address: Option<String>,
    pub protocols: Vec<String>,
    pub certificate_names: Vec<String>,
}

fn https_port() -> u16 {
    443
}

impl Origin {
    pub fn authority(&self) -> String {
        authority(&self.host, self.port)
    }
}

/// One recorded request and its response.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    pub method: String,
    pub url: String,
    pub status: u16,
    /// Names in lowercase, in recorded order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The coding the server sent the body in; the archive keeps the body decoded.
    #[serde(default)]
    pub content_encoding: Option<String>,
    /// SHA-256 of the body (None: empty).
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub server_ttfb_ms: Option<f64>,
}

impl Exchange {
    /// How errors name it: `exchanges[3] (GET https://...)`.
    pub fn label(&self, index: usize) -> String {
        let url: String = self.url.chars().take(200).collect();
        format!("exchanges[{index}] ({} {url})", self.method)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// site.json, every field of it (an unknown one is refused, as the runner refuses it).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteJson {
    #[serde(default = "format")]
    pub format: String,
    #[serde(default = "version")]
    pub version: u32,
    pub name: String,
    pub start_url: String,
    pub source: Source,
    pub origins: Vec<Origin>,
    pub exchanges: Vec<Exchange>,
}

fn format() -> String {
    FORMAT.to_owned()
}

fn version() -> u32 {
    VERSION
}

/// `host`, or `host:port` where the port is not 443 (as a browser writes an authority).
pub fn authority(host: &str, port: u16) -> String {
    if port == 443 {
        host.to_ascii_lowercase()
    } else {
        format!("{}:{port}", host.to_ascii_lowercase())
    }
}

/// An authority as a request carries it, in the archive's form: lowercase, no `:443`.
pub fn normal_authority(a: &str) -> String {
    let a = a.to_ascii_lowercase();
    match a.strip_suffix(":443") {
        Some(h) => h.to_owned(),
        None => a,
    }
}

/// (authority, path with its query) of an https URL; None for anything else.
pub fn split_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("https://")?;
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };
    if auth.is_empty() || auth.contains('@') || path.contains('#') {
        return None;
    }
    Some((normal_authority(auth), path))
}

/// SHA-256 as lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// An archive read from its directory and checked.
#[derive(Debug)]
pub struct Archive {
    pub dir: PathBuf,
    pub site: SiteJson,
    /// Each exchange's body, in exchange order (shared where the hash is the same).
    pub bodies: Vec<bytes::Bytes>,
}

impl Archive {
    /// Reads `dir/site.json` and every body it names, and checks them, with the
    /// default limits.
    pub fn read(dir: &Path) -> Result<Self, ArchiveError> {
        Self::read_within(dir, Limits::default())
    }

    /// Reads `dir/site.json` and every body it names within `limits`, and checks them.
    pub fn read_within(dir: &Path, limits: Limits) -> Result<Self, ArchiveError> {
        let path = dir.join(SITE_JSON);
        let root = Dir::open(dir).map_err(|source| ArchiveError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let invalid = |why: String| ArchiveError::Invalid {
            path: path.clone(),
            why,
        };
        let text = root
            .read_file(
                SITE_JSON,
                None,
                INDEX_BYTES,
                SITE_JSON,
                "cannot read: it is missing",
            )
            .map_err(&invalid)?;
        let head: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        let (format, version) = (head.get("format"), head.get("version"));
        if format.is_some_and(|f| f.as_str() != Some(FORMAT)) {
            return Err(invalid(format!("format is {format:?}, origin reads {FORMAT:?}")));
        }
        if version.is_some_and(|v| v.as_u64() != Some(u64::from(VERSION))) {
            return Err(invalid(format!(
                "version: origin reads version {VERSION}, not {version:?}"
            )));
        }
        // From the bytes, not from `head`: a map keeps one value of a repeated key, a
        // struct refuses it (as the runner does).
        let site: SiteJson =
            serde_json::from_slice(&text).map_err(|e| invalid(format!("not a site archive: {e}")))?;
        rules::check(&site).map_err(&invalid)?;
        let bodies = read_bodies(&root, &site, limits).map_err(|(entry, why)| ArchiveError::Entry {
            path: path.clone(),
            entry,
            why,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            site,
            bodies,
        })
    }
}

/// Every exchange's body (shared where the hash is the same): the limits checked on the
/// declared sizes before any body is read, then each body read once and hashed; an
/// error is (the entry, why).
fn read_bodies(root: &Dir, site: &SiteJson, limits: Limits) -> Result<Vec<bytes::Bytes>, (String, String)> {
    let mut sizes: std::collections::HashMap<&str, (u64, usize)> = Default::default();
    for (i, e) in site.exchanges.iter().enumerate() {
        if let Some(name) = &e.body {
            let first = *sizes.entry(name.as_str()).or_insert((e.size, i));
            if first.0 != e.size {
                return Err((
                    e.label(i),
                    format!(
                        "size says {}, exchanges[{}] says {} for the same body",
                        e.size, first.1, first.0
                    ),
                ));
            }
        }
    }
    let total: u64 = sizes.values().map(|(s, _)| s).sum();
    if let Some(why) = limits.site_breach(total) {
        return Err((BODIES.to_owned(), why));
    }
    let mut bodies_dir: Option<Dir> = None;
    let mut read: std::collections::HashMap<String, bytes::Bytes> = Default::default();
    let mut bodies = Vec::with_capacity(site.exchanges.len());
    for (i, e) in site.exchanges.iter().enumerate() {
        let body = match &e.body {
            None => bytes::Bytes::new(),
            Some(name) => match read.get(name) {
                Some(b) => b.clone(),
                None => {
                    let what = format!("{BODIES}/{name}");
                    if let Some(why) = limits.body_breach(e.size) {
                        return Err((e.label(i), format!("{what}: size says {} bytes, {why}", e.size)));
                    }
                    if bodies_dir.is_none() {
                        bodies_dir = Some(
                            root.subdir(BODIES, &format!("{BODIES}/"))
                                .map_err(|w| (e.label(i), w))?,
                        );
                    }
                    let dir = bodies_dir.as_ref().expect("opened above");
                    let missing = format!("its body {name} is missing from {BODIES}/");
                    let data = dir
                        .read_file(name, Some(e.size), e.size, &what, &missing)
                        .map_err(|w| (e.label(i), w))?;
                    let hex = sha256_hex(&data);
                    if &hex != name {
                        return Err((
                            e.label(i),
                            format!("{BODIES}/{name} has the SHA-256 {hex}, not its name"),
                        ));
                    }
                    let b = bytes::Bytes::from(data);
                    read.insert(name.clone(), b.clone());
                    b
                }
            },
        };
        bodies.push(body);
    }
    Ok(bodies)
}

/// Unix milliseconds of an ISO 8601 time as Python writes it
/// (`2026-11-27T01:13:44.123456+00:00`, `...Z`, or without a zone: UTC); None if it is
/// not one.
pub fn parse_iso8601_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-');
    let (y, mo, da): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let (clock, offset_min) = if let Some(c) = time.strip_suffix('Z') {
        (c, 0)
    } else if let Some(i) = time.rfind(['+', '-']) {
        let (c, z) = time.split_at(i);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let (h, m) = z[1..].split_once(':').unwrap_or((&z[1..], "0"));
        (c, sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?))
    } else {
        (time, 0)
    };
    let mut c = clock.splitn(3, ':');
    let (h, mi) = (c.next()?.parse::<i64>().ok()?, c.next()?.parse::<i64>().ok()?);
    let sec: f64 = c.next().unwrap_or("0").parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    // Days from the civil date (H. Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 - offset_min * 60;
    Some(secs * 1000 + (sec * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_urls_into_authority_and_path() {
        let s = |u: &str| split_url(u);
        assert_eq!(s("https://A.test/x?y"), Some(("a.test".into(), "/x?y".into())));
        assert_eq!(s("https://a.test:443"), Some(("a.test".into(), "/".into())));
        assert_eq!(s("https://a.test?q=1"), Some(("a.test".into(), "/?q=1".into())));
        assert_eq!(
            s("https://a.test:8443/"),
            Some(("a.test:8443".into(), "/".into()))
        );
        assert_eq!(s("http://a.test/"), None);
        assert_eq!(s("https://u@a.test/"), None);
        assert_eq!(authority("a.test", 443), "a.test");
        assert_eq!(authority("a.test", 8443), "a.test:8443");
        assert_eq!(normal_authority("WWW.A.test:443"), "www.a.test");
    }

    #[test]
    fn reads_iso8601_times() {
        assert_eq!(parse_iso8601_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_iso8601_ms("2024-02-29T12:00:00.250+00:00"),
            Some(1_709_208_000_250)
        );
        assert_eq!(
            parse_iso8601_ms("2024-02-29T14:00:00+02:00"),
            Some(1_709_208_000_000)
        );
        assert_eq!(parse_iso8601_ms("2024-02-29"), None);
        assert_eq!(parse_iso8601_ms("yesterday"), None);
    }
}
