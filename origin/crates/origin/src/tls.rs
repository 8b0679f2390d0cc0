//! TLS: the server certificate and key (PEM) that the runner generates per testbed, and
//! the rustls configurations (ring provider) for TCP (h2, http/1.1) and QUIC (h3).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate chain and its private key.
pub struct Identity {
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    /// Loads a PEM certificate chain (server certificate first) and a PEM private key.
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let certs = CertificateDer::pem_file_iter(cert)
            .with_context(|| format!("failed to read certificate chain file {}", cert.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("invalid PEM in certificate chain file {}", cert.display()))?;
        if certs.is_empty() {
            bail!("no certificate found in {}", cert.display());
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .with_context(|| format!("failed to read private key file {}", key.display()))?;
        Ok(Self { certs, key })
    }

    fn config(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: &[&[u8]],
    ) -> anyhow::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .context("the certificate and private key do not form a usable TLS identity")?;
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(cfg)
    }

    /// TLS 1.2 and 1.3 over TCP, offering h2 and http/1.1 through ALPN.
    pub fn tcp_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        Ok(Arc::new(
            self.config(rustls::DEFAULT_VERSIONS, &[b"h2", b"http/1.1"])?,
        ))
    }

    /// TLS 1.3 for QUIC, offering h3.
    pub fn quic_config(&self) -> anyhow::Result<Arc<QuicServerConfig>> {
        let cfg = self.config(&[&rustls::version::TLS13], &[b"h3"])?;
        Ok(Arc::new(
            QuicServerConfig::try_from(cfg).context("TLS configuration unusable for QUIC")?,
        ))
    }
}
