//! A response held back on request: `?delay_ms=N` makes origin wait N ms after the
//! request has arrived before it answers, so a test page can have objects finish in a
//! known order. The wait is an async sleep in the request's own task: other requests on
//! the same connection (HTTP/2 and HTTP/3 streams) go on meanwhile.

use std::time::Duration;

use http::{HeaderValue, Method, Uri};

use crate::files::{self, FileCache, FileResponse};

/// The query parameter that asks for a held response.
pub const PARAM: &str = "delay_ms";
/// The longest hold origin grants (ms); a longer one is refused with `400`.
pub const MAX_DELAY_MS: u64 = 30_000;

/// The hold a request's query asks for: `None` without `delay_ms`, an error naming the
/// problem for a malformed, repeated or too long one. Other parameters are ignored.
pub fn requested(query: Option<&str>) -> Result<Option<Duration>, String> {
    let mut found: Option<Duration> = None;
    for pair in query.unwrap_or("").split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != PARAM {
            continue;
        }
        if found.is_some() {
            return Err(format!("{PARAM} given more than once"));
        }
        // Digits only: no sign, no fraction, no spaces; at most 5 of them before parsing.
        if value.is_empty() || value.len() > 5 || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{PARAM}={value:?}: expected whole milliseconds from 0 to {MAX_DELAY_MS}"
            ));
        }
        let ms: u64 = value.parse().map_err(|e| format!("{PARAM}={value:?}: {e}"))?;
        if ms > MAX_DELAY_MS {
            return Err(format!("{PARAM}={ms}: at most {MAX_DELAY_MS} ms"));
        }
        found = Some(Duration::from_millis(ms));
    }
    Ok(found)
}

/// Serves one request as `files::serve` does, first holding it for the `delay_ms` its
/// query asks for; `400` with the reason for a malformed one, at once.
pub async fn serve(
    root: &std::path::Path,
    cache: &FileCache,
    method: &Method,
    uri: &Uri,
    alt_svc: Option<&HeaderValue>,
) -> FileResponse {
    match requested(uri.query()) {
        Err(why) => files::bad_request(alt_svc, method == Method::HEAD, &why),
        Ok(hold) => {
            if let Some(d) = hold.filter(|d| !d.is_zero()) {
                tokio::time::sleep(d).await;
            }
            files::serve(root, cache, method, uri.path(), alt_svc).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_delay_and_refuses_bad_ones() {
        let ms = |v: u64| Ok(Some(Duration::from_millis(v)));
        assert_eq!(requested(None), Ok(None));
        assert_eq!(requested(Some("")), Ok(None));
        assert_eq!(requested(Some("x=1&y")), Ok(None));
        assert_eq!(requested(Some("delay_ms=0")), ms(0));
        assert_eq!(requested(Some("delay_ms=600")), ms(600));
        assert_eq!(requested(Some("a=b&delay_ms=30000&c")), ms(30_000));
        assert_eq!(requested(Some("delay_ms=00042")), ms(42));
        for bad in [
            "delay_ms",
            "delay_ms=",
            "delay_ms=-1",
            "delay_ms=+5",
            "delay_ms=1.5",
            "delay_ms=abc",
            "delay_ms=%31",
            "delay_ms=30001",
            "delay_ms=999999999999999999999",
            "delay_ms=1&delay_ms=1",
        ] {
            let e = requested(Some(bad)).expect_err(bad);
            assert!(e.contains(PARAM), "{bad}: {e}");
        }
        assert!(requested(Some("delay_ms=30001"))
            .unwrap_err()
            .contains("at most 30000"));
    }

    #[tokio::test]
    async fn holds_the_response_and_answers_400_at_once_for_a_bad_delay() {
        let dir = crate::scratch::scratch_with("delay", "a.txt", b"held");
        let cache = FileCache::new(1 << 20);
        let uri: Uri = "/a.txt?delay_ms=120".parse().unwrap();
        let t = std::time::Instant::now();
        let r = serve(&dir, &cache, &Method::GET, &uri, None).await;
        assert!(t.elapsed() >= Duration::from_millis(120), "{:?}", t.elapsed());
        assert_eq!((r.status, &r.body[..]), (http::StatusCode::OK, &b"held"[..]));
        let uri: Uri = "/a.txt?delay_ms=30001".parse().unwrap();
        let r = serve(&dir, &cache, &Method::GET, &uri, None).await;
        assert_eq!(r.status, http::StatusCode::BAD_REQUEST);
        assert!(std::str::from_utf8(&r.body).unwrap().contains("at most 30000 ms"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
