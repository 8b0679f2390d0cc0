//! TLS: the server certificate and key (PEM) that the runner generates per testbed, and
//! the rustls configurations (ring provider) for TCP (h2, http/1.1) and QUIC (h3); for
//! a replayed site, one certificate per host (issued by the same testbed CA), chosen by
//! the name the client asks for (SNI).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ResolvesServerCert, ResolvesServerCertUsingSni};
use rustls::sign::CertifiedKey;

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
        let mut cfg = builder(versions)?
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .context("the certificate and private key do not form a usable TLS identity")?;
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(cfg)
    }

    fn certified_key(self) -> anyhow::Result<CertifiedKey> {
        let provider = rustls::crypto::ring::default_provider();
        CertifiedKey::from_der(self.certs, self.key, &provider)
            .context("the certificate and private key do not form a usable TLS identity")
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

fn builder(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> anyhow::Result<rustls::ConfigBuilder<rustls::ServerConfig, rustls::server::WantsServerCert>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .context("TLS protocol versions")?
        .with_no_client_auth())
}

/// TLS for a replayed site's hosts: each host's certificate chain `DIR/<host>.pem` and
/// key `DIR/<host>.key`, served to a client that names the host (SNI); a client that
/// names none or another gets no certificate. For TCP (h2, http/1.1) and QUIC (h3).
pub fn by_host(
    dir: &Path,
    hosts: &[String],
) -> anyhow::Result<(Arc<rustls::ServerConfig>, Arc<QuicServerConfig>)> {
    let mut sni = ResolvesServerCertUsingSni::new();
    for host in hosts {
        let (cert, key) = (dir.join(format!("{host}.pem")), dir.join(format!("{host}.key")));
        let ck = Identity::load(&cert, &key)
            .and_then(Identity::certified_key)
            .with_context(|| format!("the certificate of site host {host}"))?;
        sni.add(host, ck)
            .with_context(|| format!("{} is not a certificate for {host}", cert.display()))?;
    }
    let sni: Arc<dyn ResolvesServerCert> = Arc::new(sni);
    let mut tcp = builder(rustls::DEFAULT_VERSIONS)?.with_cert_resolver(sni.clone());
    tcp.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut quic = builder(&[&rustls::version::TLS13])?.with_cert_resolver(sni);
    quic.alpn_protocols = vec![b"h3".to_vec()];
    let quic = QuicServerConfig::try_from(quic).context("TLS configuration unusable for QUIC")?;
    Ok((Arc::new(tcp), Arc::new(quic)))
}
