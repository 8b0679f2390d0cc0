//! The site archive as origin reads it (format `clarke-site`, version 1: docs/sites.md):
//! `DIR/site.json` (the origins and the exchanges) and `DIR/bodies/<sha256>` (each body
//! once, named by the SHA-256 of its bytes). origin checks what it will serve before
//! anything listens: the format and version, every exchange's origin, every body's
//! presence, size and hash; an error names the entry.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

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
pub struct Source {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub recorded_at: String,
}

/// An origin: a host and port the page's requests went to.
#[derive(Debug, Clone, Deserialize)]
pub struct Origin {
    pub host: String,
    #[serde(default = "https_port")]
    pub port: u16,
    #[serde(default)]
    pub address: Option<String>,
    #[serde(default)]
    pub protocols: Vec<String>,
    #[serde(default)]
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

/// site.json (fields origin does not need are left to other readers).
#[derive(Debug, Clone, Deserialize)]
pub struct SiteJson {
    pub format: String,
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub start_url: String,
    #[serde(default)]
    pub source: Source,
    pub origins: Vec<Origin>,
    pub exchanges: Vec<Exchange>,
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
    /// Reads `dir/site.json` and every body it names, and checks them.
    pub fn read(dir: &Path) -> Result<Self, ArchiveError> {
        let path = dir.join(SITE_JSON);
        let text = std::fs::read(&path).map_err(|source| ArchiveError::Read {
            path: path.clone(),
            source,
        })?;
        let invalid = |why: String| ArchiveError::Invalid {
            path: path.clone(),
            why,
        };
        let head: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        let (format, version) = (head.get("format"), head.get("version"));
        if format.and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(invalid(format!("format is {format:?}, origin reads {FORMAT:?}")));
        }
        if version.and_then(|v| v.as_u64()) != Some(u64::from(VERSION)) {
            return Err(invalid(format!(
                "version: origin reads version {VERSION}, not {version:?}"
            )));
        }
        let site: SiteJson =
            serde_json::from_value(head).map_err(|e| invalid(format!("not a site archive: {e}")))?;
        if site.exchanges.is_empty() {
            return Err(invalid("it has no exchanges".into()));
        }
        let origins: Vec<String> = site.origins.iter().map(Origin::authority).collect();
        let mut read: std::collections::HashMap<String, bytes::Bytes> = Default::default();
        let mut bodies = Vec::with_capacity(site.exchanges.len());
        for (i, e) in site.exchanges.iter().enumerate() {
            let entry = |why: String| ArchiveError::Entry {
                path: path.clone(),
                entry: e.label(i),
                why,
            };
            let Some((auth, _)) = split_url(&e.url) else {
                return Err(entry("its URL is not an https URL".into()));
            };
            if !origins.contains(&auth) {
                return Err(entry(format!("its origin {auth} is not in origins")));
            }
            if let Some(ms) = e.server_ttfb_ms {
                if !(0.0..=MAX_TTFB_MS).contains(&ms) {
                    return Err(entry(format!(
                        "server_ttfb_ms {ms} is not within 0 to {MAX_TTFB_MS}"
                    )));
                }
            }
            let body = match &e.body {
                None if e.size == 0 => bytes::Bytes::new(),
                None => return Err(entry("size is 0 exactly when there is no body".into())),
                Some(_) if e.size == 0 => {
                    return Err(entry("size is 0 exactly when there is no body".into()))
                }
                Some(name) => match read.get(name) {
                    Some(b) => b.clone(),
                    None => {
                        let b = read_body(dir, name).map_err(&entry)?;
                        read.insert(name.clone(), b.clone());
                        b
                    }
                },
            };
            if body.len() as u64 != e.size {
                return Err(entry(format!(
                    "its body has {} bytes, size says {}",
                    body.len(),
                    e.size
                )));
            }
            bodies.push(body);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            site,
            bodies,
        })
    }
}

fn read_body(dir: &Path, name: &str) -> Result<bytes::Bytes, String> {
    if name.len() != 64 || !name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!("its body {name:?} is not a SHA-256 in lowercase hex"));
    }
    let data = std::fs::read(dir.join(BODIES).join(name))
        .map_err(|e| format!("its body {name} is missing from {BODIES}/ ({e})"))?;
    let hex = sha256_hex(&data);
    if hex != name {
        return Err(format!("{BODIES}/{name} has the SHA-256 {hex}, not its name"));
    }
    Ok(bytes::Bytes::from(data))
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
