//! What a site archive may say, by the rules of Clarke's runner (the `SiteArchive`
//! model in `clarke/sites/archive.py`): origin refuses exactly what `clarke site check`
//! refuses, so an archive that passed the check is one origin serves, and one that
//! failed it never reaches a browser. Each rule has its twin there; the hostile
//! archives of `tests/security/test_site_archives.py` are run through both.

use super::archive::{Exchange, Origin, SiteJson, Source};

pub const MAX_URL: usize = 8192;
pub const MAX_ORIGINS: usize = 2000;
pub const MAX_EXCHANGES: usize = 100_000;
pub const MAX_HEADERS: usize = 500;
pub const MAX_HEADER_NAME: usize = 256;
pub const MAX_HEADER_VALUE: usize = 65536;
pub const MAX_CERTIFICATE_NAMES: usize = 500;
pub const MAX_HOST: usize = 253;
pub const MAX_SITE_NAME: usize = 64;
pub const FIRST_FINAL_STATUS: u16 = 200;
pub const LAST_STATUS: u16 = 599;
pub const PROTOCOLS: [&str; 3] = ["h1", "h2", "h3"];
pub const SOURCE_KINDS: [&str; 4] = ["har", "warc", "generator", "files"];

/// A DNS label as the archive keeps it: `[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?`.
fn label_ok(label: &str) -> bool {
    let b = label.as_bytes();
    let inner = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_';
    !b.is_empty()
        && b.len() <= 63
        && inner(b[0])
        && inner(b[b.len() - 1])
        && b.iter().all(|&c| inner(c) || c == b'-')
}

fn dns_name_ok(name: &str) -> bool {
    name.len() <= MAX_HOST && name.split('.').all(label_ok)
}

/// Why a replay cannot serve `host` (an IP address literal, a name a browser reads as
/// one, localhost), if it cannot.
pub fn host_problem(host: &str) -> Option<&'static str> {
    if host.starts_with('[') || host.contains(':') {
        return Some("is an IPv6 address literal: a replay serves names, not addresses");
    }
    let last = host.trim_end_matches('.').rsplit('.').next().unwrap_or("");
    let numeric = (!last.is_empty() && last.bytes().all(|c| c.is_ascii_digit()))
        || ((last.starts_with("0x") || last.starts_with("0X"))
            && last[2..].bytes().all(|c| c.is_ascii_hexdigit()));
    if numeric {
        return Some("is an IP address literal (or ends in a number, which a browser reads as one)");
    }
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("is localhost, which a browser answers with its own loopback");
    }
    None
}

fn host_ok(host: &str) -> Result<(), String> {
    if !dns_name_ok(host) {
        return Err(format!(
            "{:?} is not a host name of lowercase labels",
            trunc(host, 80)
        ));
    }
    match host_problem(host) {
        Some(p) => Err(format!("the host {} {p}", trunc(host, 80))),
        None => Ok(()),
    }
}

fn trunc(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// (host, port, path with its query) of an https URL as the archive keeps it, or why
/// it is not one: https, no user name, no fragment, a lowercase host a replay can serve,
/// a port from 1 to 65535, printable ASCII only.
pub fn split_url(url: &str) -> Result<(String, u16, String), String> {
    if url.len() > MAX_URL {
        return Err(format!("longer than {MAX_URL} characters"));
    }
    if !url.bytes().all(|c| (0x21..=0x7e).contains(&c)) {
        return Err(
            "has a space, a control character or a non-ASCII one (a browser sends them percent-encoded)"
                .into(),
        );
    }
    let Some(rest) = url.strip_prefix("https://") else {
        return Err("must be an https URL".into());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (netloc, tail) = rest.split_at(end);
    if netloc.contains('@') {
        return Err("must not carry a user name or password".into());
    }
    if tail.contains('#') {
        return Err("must not carry a fragment (#...): browsers do not send it".into());
    }
    let (host, port) = match netloc.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => (h, Some(p)),
        _ => (netloc, None),
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if let Some(p) = host_problem(host) {
        return Err(format!("its host {p}"));
    }
    if host.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err("must have a lowercase host".into());
    }
    let port = match port {
        None | Some("") => 443,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|c| c.is_ascii_digit()) => n,
            _ => return Err(format!("has a bad port {:?}", trunc(p, 20))),
        },
    };
    let path = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    Ok((host.to_owned(), port, path))
}

/// Whether a certificate with these names is valid for `host` (RFC 6125).
pub fn covers(names: &[String], host: &str) -> bool {
    names.iter().any(|n| {
        n == host
            || n.strip_prefix("*.")
                .is_some_and(|rest| host.split_once('.').is_some_and(|(_, h)| h == rest))
    })
}

fn check_source(s: &Source) -> Result<(), String> {
    if !SOURCE_KINDS.contains(&s.kind.as_str()) {
        return Err(format!(
            "source.kind: {:?} is not one of {SOURCE_KINDS:?}",
            trunc(&s.kind, 40)
        ));
    }
    for (name, value, max) in [
        ("tool", &s.tool, 200),
        ("file", &s.file, 1000),
        ("recorded_at", &s.recorded_at, 64),
    ] {
        if value.chars().count() > max {
            return Err(format!("source.{name}: longer than {max} characters"));
        }
    }
    Ok(())
}

fn check_origin(i: usize, o: &Origin) -> Result<(), String> {
    let at = |why: String| format!("origins[{i}]: {why}");
    host_ok(&o.host).map_err(|e| at(format!("host: {e}")))?;
    if o.port == 0 {
        return Err(at("port: must be from 1 to 65535".into()));
    }
    if let Some(a) = &o.address {
        a.parse::<std::net::IpAddr>()
            .map_err(|_| at(format!("address: {:?} is not an IP address", trunc(a, 60))))?;
    }
    if o.protocols.is_empty() || o.protocols.len() > PROTOCOLS.len() {
        return Err(at("protocols: one to three of h1, h2, h3".into()));
    }
    for (j, p) in o.protocols.iter().enumerate() {
        if !PROTOCOLS.contains(&p.as_str()) {
            return Err(at(format!(
                "protocols[{j}]: {:?} is not one of h1, h2, h3",
                trunc(p, 20)
            )));
        }
        if o.protocols[..j].contains(p) {
            return Err(at("protocols: a protocol is listed more than once".into()));
        }
    }
    if o.certificate_names.is_empty() || o.certificate_names.len() > MAX_CERTIFICATE_NAMES {
        return Err(at(format!(
            "certificate_names: one to {MAX_CERTIFICATE_NAMES} names"
        )));
    }
    for (j, n) in o.certificate_names.iter().enumerate() {
        if !dns_name_ok(n.strip_prefix("*.").unwrap_or(n)) {
            return Err(at(format!(
                "certificate_names[{j}]: {:?} is not a certificate name",
                trunc(n, 80)
            )));
        }
    }
    if !covers(&o.certificate_names, &o.host) {
        return Err(at(format!(
            "certificate_names: no certificate name covers the host {}",
            o.host
        )));
    }
    Ok(())
}

fn header_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HEADER_NAME
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"!#$%&'*+.^_`|~-".contains(&c))
}

fn header_value_ok(value: &str) -> bool {
    value.chars().count() <= MAX_HEADER_VALUE && value.bytes().all(|c| c == b'\t' || (c >= 0x20 && c != 0x7f))
}

fn check_exchange(e: &Exchange) -> Result<String, String> {
    if e.method.is_empty() || e.method.len() > 16 || !e.method.bytes().all(|c| c.is_ascii_uppercase()) {
        return Err(format!(
            "method: {:?} is not 1 to 16 capital letters",
            trunc(&e.method, 20)
        ));
    }
    let (host, port, _) = split_url(&e.url).map_err(|w| format!("url: {w}"))?;
    if !(FIRST_FINAL_STATUS..=LAST_STATUS).contains(&e.status) {
        return Err(format!(
            "status: {} is not a final status ({FIRST_FINAL_STATUS} to {LAST_STATUS})",
            e.status
        ));
    }
    if e.headers.len() > MAX_HEADERS {
        return Err(format!("headers: more than {MAX_HEADERS}"));
    }
    for (j, (name, value)) in e.headers.iter().enumerate() {
        if !header_name_ok(name) {
            return Err(format!(
                "headers[{j}]: {:?} is not a lowercase header name",
                trunc(name, 60)
            ));
        }
        if !header_value_ok(value) {
            return Err(format!(
                "headers[{j}] ({name}): its value holds a control character or is too long"
            ));
        }
    }
    if let Some(c) = &e.content_encoding {
        if c.is_empty()
            || c.len() > 32
            || !c
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(format!(
                "content_encoding: {:?} is not a content coding",
                trunc(c, 40)
            ));
        }
    }
    if let Some(b) = &e.body {
        if b.len() != 64 || !b.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!(
                "body: {:?} is not a SHA-256 in lowercase hex",
                trunc(b, 80)
            ));
        }
    }
    if e.body.is_none() != (e.size == 0) {
        return Err("size: size is 0 exactly when there is no body".into());
    }
    if let Some(ms) = e.server_ttfb_ms {
        if !(0.0..=super::archive::MAX_TTFB_MS).contains(&ms) {
            return Err(format!(
                "server_ttfb_ms: {ms} is not within 0 to {}",
                super::archive::MAX_TTFB_MS
            ));
        }
    }
    Ok(super::archive::authority(&host, port))
}

/// Every rule of the model, or the first broken one, named as the runner names it
/// (`exchanges[3] (GET https://...): status: ...`).
pub fn check(site: &SiteJson) -> Result<(), String> {
    let name_ok = !site.name.is_empty()
        && site.name.len() <= MAX_SITE_NAME
        && site.name.as_bytes()[0].is_ascii_alphanumeric()
        && !site.name.bytes().any(|c| c.is_ascii_uppercase())
        && site
            .name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_.-".contains(&c));
    if !name_ok {
        return Err(format!("name: {:?} is not a site name", trunc(&site.name, 80)));
    }
    check_source(&site.source)?;
    if site.origins.is_empty() || site.origins.len() > MAX_ORIGINS {
        return Err(format!("origins: one to {MAX_ORIGINS}"));
    }
    if site.exchanges.is_empty() || site.exchanges.len() > MAX_EXCHANGES {
        return Err(format!("exchanges: one to {MAX_EXCHANGES}"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, o) in site.origins.iter().enumerate() {
        check_origin(i, o)?;
        if !seen.insert(o.authority()) {
            return Err(format!("origins[{i}]: origin {} is listed twice", o.authority()));
        }
    }
    for (i, e) in site.exchanges.iter().enumerate() {
        let authority = check_exchange(e).map_err(|why| format!("{}: {why}", e.label(i)))?;
        if !seen.contains(&authority) {
            return Err(format!(
                "{}: its origin {authority} is not in origins",
                e.label(i)
            ));
        }
    }
    split_url(&site.start_url).map_err(|w| format!("start_url: {w}"))?;
    if !site
        .exchanges
        .iter()
        .any(|e| e.method == "GET" && e.url == site.start_url)
    {
        return Err(format!(
            "start_url: no GET exchange has the URL {}",
            trunc(&site.start_url, 200)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_a_replay_can_serve() {
        for bad in [
            "127.0.0.1",
            "127.1",
            "10.0.0.0x1",
            "a.0x7f",
            "localhost",
            "x.localhost",
            "[::1]",
            "::1",
        ] {
            assert!(host_problem(bad).is_some(), "{bad}");
        }
        for good in ["www.example.org", "a1.b2", "x.localhost.example", "1a.test"] {
            assert!(host_problem(good).is_none(), "{good}");
        }
    }

    #[test]
    fn urls_as_the_runner_reads_them() {
        assert_eq!(
            split_url("https://a.test/x?y").unwrap(),
            ("a.test".into(), 443, "/x?y".into())
        );
        assert_eq!(
            split_url("https://a.test:8443").unwrap(),
            ("a.test".into(), 8443, "/".into())
        );
        assert_eq!(
            split_url("https://a.test?q").unwrap(),
            ("a.test".into(), 443, "/?q".into())
        );
        for bad in [
            "http://a.test/",
            "https://u@a.test/",
            "https://a.test/#f",
            "https://A.test/",
            "https://a.test:0/",
            "https://a.test:99999/",
            "https://127.0.0.1/",
            "https:///x",
            "https://a.test/a b",
            "https://a.test/\r\n",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }
}
