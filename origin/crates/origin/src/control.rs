//! The control endpoint: plain HTTP with JSON on the management network.
//!
//! `GET /health`, `GET /stats`, `POST /stats/reset`, `POST /config`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::shared::Shared;
use crate::stats::now_ms;

/// Serves the control endpoint until the task is aborted.
pub async fn serve(listener: Arc<TcpListener>, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(req, &shared).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn reply(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut text = serde_json::to_vec_pretty(body).unwrap_or_default();
    text.push(b'\n');
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(text)))
        .unwrap_or_default()
}

fn health(shared: &Shared) -> Value {
    json!({
        "name": "origin",
        "version": env!("CARGO_PKG_VERSION"),
        "listen": shared.addrs,
        "root": shared.root.display().to_string(),
        "settings": shared.settings(),
        "tcp_available": crate::cc::tcp_available().unwrap_or_default(),
        "quic_available": ["cubic", "bbr", "newreno"],
        "site": shared.site.as_ref().map(|s| json!({
            "name": s.name,
            "archive": s.dir().display().to_string(),
            "origins": s.origins.iter().map(|o| o.authority()).collect::<Vec<_>>(),
            "exchanges": s.exchanges,
            "listen": shared.addrs.site,
            "ttfb": s.options.ttfb,
            "script_seed": s.options.script_seed,
        })),
    })
}

/// The most a request body may hold (a `POST /config` is a few fields).
const MAX_BODY: usize = 64 * 1024;

async fn route(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    // Every request's body is read, whatever the answer: a connection whose last body
    // was left unread is closed after the reply, and a client that sent its next
    // request on it meanwhile sees it cut (a loaded CI run saw that).
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let mut r = reply(
                StatusCode::BAD_REQUEST,
                &json!({"error": format!("cannot read the body: {e}")}),
            );
            r.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
            return r;
        }
    };
    let path = parts.uri.path().to_owned();
    match (parts.method, path.as_str()) {
        (Method::GET, "/health") => reply(StatusCode::OK, &health(shared)),
        (Method::GET, "/stats") => {
            let mut body = json!({
                "now_unix_ms": now_ms(),
                "settings": shared.settings(),
                "connections": shared.registry.snapshot(),
                "lingering": shared.registry.lingering(),
            });
            if let Some(site) = &shared.site {
                let mut stats = serde_json::to_value(site.stats()).unwrap_or_default();
                stats["name"] = json!(site.name);
                body["site"] = stats;
            }
            reply(StatusCode::OK, &body)
        }
        (Method::POST, "/stats/reset") => {
            if let Some(site) = &shared.site {
                site.reset();
            }
            reply(StatusCode::OK, &json!({"removed": shared.registry.reset()}))
        }
        (Method::POST, "/config") => match shared.update(&body) {
            Ok(s) => reply(StatusCode::OK, &json!({"settings": s})),
            Err(e) => reply(StatusCode::BAD_REQUEST, &json!({"error": e.to_string()})),
        },
        (_, "/health" | "/stats" | "/stats/reset" | "/config") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "method not allowed"}),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": "not found", "endpoints": ["GET /health", "GET /stats", "POST /stats/reset", "POST /config"]}),
        ),
    }
}
