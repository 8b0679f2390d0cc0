//! What both loopback test files need: a scratch directory with a CA and a certificate
//! per host, the running server torn down with its directory, a client TLS
//! configuration trusting the CA, and the control API.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use origin::Server;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A running origin, its scratch directory, and the large body it serves (what a test
/// compares the bytes received with). Dropped: the server stops, the directory goes.
pub struct Fixture {
    pub dir: PathBuf,
    pub server: Option<Server>,
    pub large_body: Vec<u8>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An empty directory `<prefix>-<name>-<pid>` in the temporary directory.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA (`ca.pem`) and, in `certs/`, `<host>.pem` (the chain) and `<host>.key` for each
/// host.
pub fn make_certs(dir: &Path, hosts: &[&str]) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "origin test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    for host in hosts {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![host.to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let (chain, key_file) = cert_files(dir, host);
        std::fs::write(chain, cert.pem() + &ca_cert.pem()).unwrap();
        std::fs::write(key_file, key.serialize_pem()).unwrap();
    }
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
}

/// The certificate chain and key [`make_certs`] wrote for `host`.
pub fn cert_files(dir: &Path, host: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("certs/{host}.pem")),
        dir.join(format!("certs/{host}.key")),
    )
}

/// A client trusting only the CA in `ca`, offering `alpn`.
pub fn client_tls(ca: &Path, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let mut cfg =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(cfg)
}

pub fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

/// `method` `path` with `body` on the control API at `addr`: the status and the JSON
/// answer.
pub async fn control(addr: SocketAddr, method: http::Method, path: &str, body: &str) -> (u16, Value) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let answer = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&answer).unwrap())
}
