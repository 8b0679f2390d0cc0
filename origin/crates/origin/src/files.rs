//! Mapping a request to a file under the root and the headers every protocol sends.
//!
//! Responses are never compressed (no `Content-Encoding`, whatever `Accept-Encoding`
//! says), so JPEGs and every other object travel as stored and page bytes equal
//! file bytes. Cache headers forbid any reuse across runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};

/// `Cache-Control` on every response: nothing may be stored or reused.
pub const CACHE_CONTROL: &str = "no-store, no-cache, must-revalidate, max-age=0";

/// A response ready for any of the three protocols.
pub struct FileResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body; empty for HEAD (Content-Length still tells the size).
    pub body: Bytes,
}

/// Content type by file extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "wasm" => "application/wasm",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

/// Decodes `%XX` escapes; `None` for malformed escapes or non-UTF-8 results.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The file a request path names under `root`, or `None` if the path tries to leave
/// the root or is malformed. Directories map to their `index.html`.
pub fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(uri_path)?;
    let mut path = root.to_path_buf();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => return None,
            s if s.contains('\\') || s.contains('\0') => return None,
            s => path.push(s),
        }
    }
    Some(path)
}

/// Whether `path`, its symbolic links followed, still lies under `root`: a link inside
/// the page root must not serve a file from elsewhere on the machine.
fn inside(root: &Path, path: &Path) -> bool {
    match (std::fs::canonicalize(root), std::fs::canonicalize(path)) {
        (Ok(root), Ok(path)) => path.starts_with(root),
        _ => false,
    }
}

fn base_headers(alt_svc: Option<&HeaderValue>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::SERVER,
        HeaderValue::from_static(concat!("origin/", env!("CARGO_PKG_VERSION"))),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(header::EXPIRES, HeaderValue::from_static("0"));
    if let Some(v) = alt_svc {
        h.insert(header::ALT_SVC, v.clone());
    }
    h
}

fn error(status: StatusCode, alt_svc: Option<&HeaderValue>, head: bool) -> FileResponse {
    refused(status, alt_svc, head, "")
}

/// `400 Bad Request` with the reason on a second line of the body.
pub fn bad_request(alt_svc: Option<&HeaderValue>, head: bool, why: &str) -> FileResponse {
    refused(StatusCode::BAD_REQUEST, alt_svc, head, why)
}

/// `404 Not Found` with the reason on a second line of the body.
pub fn not_found(alt_svc: Option<&HeaderValue>, head: bool, why: &str) -> FileResponse {
    refused(StatusCode::NOT_FOUND, alt_svc, head, why)
}

fn refused(status: StatusCode, alt_svc: Option<&HeaderValue>, head: bool, why: &str) -> FileResponse {
    let text = if why.is_empty() {
        format!("{status}\n")
    } else {
        format!("{status}\n{why}\n")
    };
    let mut headers = base_headers(alt_svc);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    FileResponse {
        status,
        headers,
        body: if head { Bytes::new() } else { Bytes::from(text) },
    }
}

/// File contents kept in memory, so a request costs no read(2) and no copy. An entry is
/// used only while the file's size and modification time are unchanged.
pub struct FileCache {
    max_bytes: u64,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    bytes: u64,
    files: HashMap<PathBuf, (u64, SystemTime, Bytes)>,
}

impl FileCache {
    /// A cache holding at most `max_bytes` of file contents (0 disables it).
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    async fn read(&self, path: &Path, meta: &std::fs::Metadata) -> std::io::Result<Bytes> {
        let mtime = meta.modified()?;
        {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((len, t, data)) = inner.files.get(path) {
                if *len == meta.len() && *t == mtime {
                    return Ok(data.clone());
                }
            }
        }
        let data = Bytes::from(tokio::fs::read(path).await?);
        let len = data.len() as u64;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((old, _, _)) = inner.files.remove(path) {
            inner.bytes -= old;
        }
        if len == meta.len() && inner.bytes + len <= self.max_bytes {
            inner.bytes += len;
            inner.files.insert(path.to_path_buf(), (len, mtime, data.clone()));
        }
        Ok(data)
    }
}

/// Serves one request: GET and HEAD of files under `root`.
pub async fn serve(
    root: &Path,
    cache: &FileCache,
    method: &Method,
    uri_path: &str,
    alt_svc: Option<&HeaderValue>,
) -> FileResponse {
    let head = method == Method::HEAD;
    if method != Method::GET && !head {
        return error(StatusCode::METHOD_NOT_ALLOWED, alt_svc, false);
    }
    let Some(mut path) = resolve(root, uri_path) else {
        return error(StatusCode::BAD_REQUEST, alt_svc, head);
    };
    let mut meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(_) => return error(StatusCode::NOT_FOUND, alt_svc, head),
    };
    if meta.is_dir() {
        path.push("index.html");
        meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(_) => return error(StatusCode::NOT_FOUND, alt_svc, head),
        };
    }
    if !meta.is_file() || !inside(root, &path) {
        return error(StatusCode::NOT_FOUND, alt_svc, head);
    }
    let body = match cache.read(&path, &meta).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return error(StatusCode::NOT_FOUND, alt_svc, head)
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return error(StatusCode::FORBIDDEN, alt_svc, head)
        }
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, alt_svc, head),
    };
    let mut headers = base_headers(alt_svc);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&path)),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    FileResponse {
        status: StatusCode::OK,
        headers,
        body: if head { Bytes::new() } else { body },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_inside_the_root_only() {
        let root = Path::new("/srv/pages");
        assert_eq!(
            resolve(root, "/a/b.jpg").unwrap(),
            Path::new("/srv/pages/a/b.jpg")
        );
        assert_eq!(
            resolve(root, "/a%20b.html").unwrap(),
            Path::new("/srv/pages/a b.html")
        );
        assert_eq!(resolve(root, "/").unwrap(), Path::new("/srv/pages"));
        assert!(resolve(root, "/../etc/passwd").is_none());
        assert!(resolve(root, "/a/%2e%2e/%2e%2e/x").is_none());
        assert!(resolve(root, "/bad%zz").is_none());
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(Path::new("x.JPG")), "image/jpeg");
        assert_eq!(content_type(Path::new("index.html")), "text/html; charset=utf-8");
        assert_eq!(content_type(Path::new("blob")), "application/octet-stream");
    }

    #[tokio::test]
    async fn serves_files_with_length_and_no_cache() {
        let dir = crate::scratch::scratch_with("files", "index.html", b"<p>hi</p>");
        let cache = FileCache::new(1 << 20);
        let r = serve(&dir, &cache, &Method::GET, "/", None).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.headers[header::CONTENT_LENGTH], "9");
        assert_eq!(r.headers[header::CACHE_CONTROL], CACHE_CONTROL);
        assert!(r.headers.get(header::CONTENT_ENCODING).is_none());
        let r = serve(&dir, &cache, &Method::HEAD, "/index.html", None).await;
        assert_eq!(r.headers[header::CONTENT_LENGTH], "9");
        assert!(r.body.is_empty());
        assert_eq!(
            serve(&dir, &cache, &Method::GET, "/nope", None).await.status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            serve(&dir, &cache, &Method::POST, "/", None).await.status,
            StatusCode::METHOD_NOT_ALLOWED
        );
        // A changed file is read again.
        std::fs::write(dir.join("index.html"), b"<p>hello</p>").unwrap();
        let r = serve(&dir, &cache, &Method::GET, "/", None).await;
        assert_eq!(&r.body[..], b"<p>hello</p>");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn follows_no_link_out_of_the_root() {
        let base = crate::scratch::scratch("links");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(base.join("secret.txt"), b"outside").unwrap();
        std::fs::write(root.join("sub/page.html"), b"inside").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("out.txt")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("up")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/page.html"), root.join("in.html")).unwrap();
        let cache = FileCache::new(1 << 20);
        for path in ["/out.txt", "/up/secret.txt"] {
            let r = serve(&root, &cache, &Method::GET, path, None).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        }
        let r = serve(&root, &cache, &Method::GET, "/in.html", None).await;
        assert_eq!((r.status, &r.body[..]), (StatusCode::OK, &b"inside"[..]));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
