//! What a TLS handshake says about the state the client brought to it, read from the
//! handshake messages themselves: whether the ClientHello offered to resume an earlier
//! session (a TLS 1.3 pre-shared key, a TLS 1.2 session ticket) or to send early data
//! (0-RTT), and whether the server resumed (its ServerHello accepted a pre-shared key)
//! and took early data (its EncryptedExtensions say so).
//!
//! A browser whose state is new offers none of these: the runner checks every
//! connection of a load for them (docs/running.md, "Isolation"). The parsers work on
//! byte streams as they arrive (a message may span several reads or QUIC CRYPTO
//! frames), keep at most `MAX_BUFFERED` bytes and stop once they have what they need.
//!
//! The TLS 1.3 "middlebox compatibility" legacy_session_id (RFC 8446, D.4) is random
//! bytes in every ClientHello, so it is not read as an offer to resume.

use serde::Serialize;

/// Handshake message types (RFC 8446, 4).
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const ENCRYPTED_EXTENSIONS: u8 = 8;
/// Extension types (RFC 8446, 4.2; RFC 5077).
const SESSION_TICKET: u16 = 35;
const PRE_SHARED_KEY: u16 = 41;
const EARLY_DATA: u16 = 42;
/// TLS record content type: handshake.
const HANDSHAKE_RECORD: u8 = 22;
/// A ClientHello with post-quantum key shares is about 2 KB; anything past this many
/// buffered bytes is not a hello worth waiting for.
pub const MAX_BUFFERED: usize = 64 * 1024;

/// How the server completed a TLS handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Certificate and key exchange: nothing of an earlier connection was used.
    Full,
    /// An earlier session was resumed (a pre-shared key or ticket accepted).
    Resumed,
    /// Not known (the handshake did not complete, or its hellos could not be read).
    #[default]
    Unknown,
}

/// What the ClientHello offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Offered {
    /// A TLS 1.3 pre_shared_key extension: a session of an earlier connection.
    pub psk: bool,
    /// A non-empty TLS 1.2 session_ticket extension.
    pub ticket: bool,
    /// The early_data extension: the client sends 0-RTT data.
    pub early_data: bool,
}

/// One connection's TLS handshake, as `/stats` reports it (`tls_handshake`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Handshake {
    pub kind: Kind,
    /// Whether the ClientHello was read whole; the offers below mean nothing otherwise.
    pub hello_read: bool,
    pub psk_offered: bool,
    pub ticket_offered: bool,
    pub early_data_offered: bool,
    /// The server accepted 0-RTT data (QUIC: its EncryptedExtensions carried
    /// early_data). Over TCP origin never does (rustls' max_early_data_size is 0), and
    /// early data needs a resumed session anyway.
    pub early_data_accepted: bool,
}

impl Handshake {
    pub fn with_offered(mut self, offered: Option<Offered>) -> Self {
        if let Some(o) = offered {
            self.hello_read = true;
            self.psk_offered = o.psk;
            self.ticket_offered = o.ticket;
            self.early_data_offered = o.early_data;
        }
        self
    }
}

/// A bounds-checked reader over one message.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
}

/// The (type, data) of every extension in an extensions block; None if it is malformed.
fn extensions(block: &[u8]) -> Option<Vec<(u16, &[u8])>> {
    let mut r = Reader(block);
    let mut out = Vec::new();
    while !r.0.is_empty() {
        let kind = r.u16()?;
        out.push((kind, r.vec16()?));
    }
    Some(out)
}

/// What a ClientHello's body offers; None if it is not a well-formed ClientHello.
pub fn client_hello(body: &[u8]) -> Option<Offered> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec8()?; // legacy_session_id (random in TLS 1.3's compatibility mode)
    r.vec16()?; // cipher_suites
    r.vec8()?; // legacy_compression_methods
    let exts = if r.0.is_empty() {
        Vec::new()
    } else {
        extensions(r.vec16()?)?
    };
    let has = |t: u16| exts.iter().any(|(k, _)| *k == t);
    Some(Offered {
        psk: has(PRE_SHARED_KEY),
        ticket: exts.iter().any(|(k, d)| *k == SESSION_TICKET && !d.is_empty()),
        early_data: has(EARLY_DATA),
    })
}

/// Whether a ServerHello's body accepts a pre-shared key; None if it is malformed.
pub fn server_hello_resumes(body: &[u8]) -> Option<bool> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec8()?; // legacy_session_id_echo
    r.take(2 + 1)?; // cipher_suite, legacy_compression_method
    let exts = if r.0.is_empty() {
        Vec::new()
    } else {
        extensions(r.vec16()?)?
    };
    Some(exts.iter().any(|(k, _)| *k == PRE_SHARED_KEY))
}

/// Whether EncryptedExtensions accept early data; None if malformed.
pub fn encrypted_extensions_take_early_data(body: &[u8]) -> Option<bool> {
    let exts = extensions(Reader(body).vec16()?)?;
    Some(exts.iter().any(|(k, _)| *k == EARLY_DATA))
}

/// Handshake messages out of a byte stream (QUIC's CRYPTO frames carry them bare).
#[derive(Debug, Default)]
pub struct Messages {
    buf: Vec<u8>,
    overflowed: bool,
}

impl Messages {
    /// Appends `bytes`; every message now complete, as (type, body), in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        if self.overflowed {
            return Vec::new();
        }
        if self.buf.len() + bytes.len() > MAX_BUFFERED {
            self.overflowed = true;
            self.buf = Vec::new();
            return Vec::new();
        }
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            if self.buf.len() < 4 {
                break;
            }
            let len = u32::from_be_bytes([0, self.buf[1], self.buf[2], self.buf[3]]) as usize;
            if self.buf.len() < 4 + len {
                break;
            }
            let body = self.buf[4..4 + len].to_vec();
            out.push((self.buf[0], body));
            self.buf.drain(..4 + len);
        }
        out
    }
}

/// Handshake messages out of a TLS record stream (TCP), up to the first record that is
/// not a handshake record (after the ClientHello, everything is encrypted).
#[derive(Debug, Default)]
pub struct Records {
    buf: Vec<u8>,
    messages: Messages,
    ended: bool,
}

impl Records {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        if self.ended {
            return Vec::new();
        }
        if self.buf.len() + bytes.len() > MAX_BUFFERED {
            self.ended = true;
            return Vec::new();
        }
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while self.buf.len() >= 5 {
            let len = u16::from_be_bytes([self.buf[3], self.buf[4]]) as usize;
            if self.buf.len() < 5 + len {
                break;
            }
            if self.buf[0] != HANDSHAKE_RECORD {
                self.ended = true;
                break;
            }
            let fragment = self.buf[5..5 + len].to_vec();
            self.buf.drain(..5 + len);
            out.extend(self.messages.push(&fragment));
        }
        out
    }
}

/// Watches what the client sends until its ClientHello is read.
#[derive(Debug, Default)]
pub struct ClientWatch {
    offered: Option<Offered>,
    done: bool,
}

impl ClientWatch {
    pub fn done(&self) -> bool {
        self.done
    }

    pub fn offered(&self) -> Option<Offered> {
        self.offered
    }

    /// Looks at complete messages from the client: the first one is its ClientHello.
    pub fn see(&mut self, messages: &[(u8, Vec<u8>)]) {
        if let Some((kind, body)) = messages.first().filter(|_| !self.done) {
            self.done = true;
            if *kind == CLIENT_HELLO {
                self.offered = client_hello(body);
            }
        }
    }
}

/// Watches what the server sends until its EncryptedExtensions.
#[derive(Debug, Default)]
pub struct ServerWatch {
    pub resumed: Option<bool>,
    pub early_data_accepted: bool,
    done: bool,
}

impl ServerWatch {
    pub fn done(&self) -> bool {
        self.done
    }

    pub fn see(&mut self, messages: &[(u8, Vec<u8>)]) {
        for (kind, body) in messages {
            if self.done {
                return;
            }
            match *kind {
                // A HelloRetryRequest is a ServerHello too: a resumption shows in the last.
                SERVER_HELLO => self.resumed = server_hello_resumes(body).or(self.resumed),
                ENCRYPTED_EXTENSIONS => {
                    self.early_data_accepted = encrypted_extensions_take_early_data(body).unwrap_or(false);
                    self.done = true;
                }
                _ => {}
            }
        }
    }

    pub fn kind(&self) -> Kind {
        match self.resumed {
            Some(true) => Kind::Resumed,
            Some(false) => Kind::Full,
            None => Kind::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

    fn pki() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["www.clarke.test".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (
            cert.der().clone(),
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn configs(early_data: bool) -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
        let (cert, key) = pki();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.clone()).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.enable_early_data = early_data;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        if early_data {
            server.max_early_data_size = 16384;
        }
        (Arc::new(client), Arc::new(server))
    }

    /// One handshake between in-memory peers: what the watches saw of it, and what
    /// rustls itself says the handshake was.
    fn handshake(
        client: &Arc<rustls::ClientConfig>,
        server: &Arc<rustls::ServerConfig>,
    ) -> (ClientWatch, rustls::HandshakeKind) {
        let name = ServerName::try_from("www.clarke.test").unwrap();
        let mut c = rustls::ClientConnection::new(client.clone(), name).unwrap();
        if let Some(mut early) = c.early_data() {
            std::io::Write::write_all(&mut early, b"GET / HTTP/1.1\r\n\r\n").unwrap();
        }
        let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
        let (mut records, mut watch) = (Records::default(), ClientWatch::default());
        for _ in 0..10 {
            let mut wire = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
            // Fed in small pieces, as reads from a socket may come.
            for piece in wire.chunks(7) {
                watch.see(&records.push(piece));
            }
            s.read_tls(&mut wire.as_slice()).unwrap();
            s.process_new_packets().unwrap();
            let mut back = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut back).unwrap();
            }
            c.read_tls(&mut back.as_slice()).unwrap();
            c.process_new_packets().unwrap();
            if !c.is_handshaking() && !s.is_handshaking() && !c.wants_write() {
                break;
            }
        }
        // Tickets arrive after the handshake: let the client read them.
        let mut back = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut back).unwrap();
        }
        c.read_tls(&mut back.as_slice()).unwrap();
        c.process_new_packets().unwrap();
        (watch, s.handshake_kind().unwrap())
    }

    #[test]
    fn a_new_client_offers_nothing_and_a_returning_one_offers_its_session() {
        let (client, server) = configs(false);
        let (first, kind) = handshake(&client, &server);
        assert!(first.done());
        assert_eq!(first.offered(), Some(Offered::default()));
        assert_eq!(kind, rustls::HandshakeKind::Full);
        let (second, kind) = handshake(&client, &server);
        assert_eq!(kind, rustls::HandshakeKind::Resumed);
        let offered = second.offered().unwrap();
        assert!(offered.psk && !offered.early_data, "{offered:?}");
    }

    #[test]
    fn early_data_is_seen_in_the_client_hello() {
        let (client, server) = configs(true);
        handshake(&client, &server);
        let (second, kind) = handshake(&client, &server);
        assert_eq!(kind, rustls::HandshakeKind::Resumed);
        let offered = second.offered().unwrap();
        assert!(offered.psk && offered.early_data, "{offered:?}");
    }

    #[test]
    fn server_hello_and_encrypted_extensions_say_what_was_accepted() {
        // ServerHello: version, random, empty session id, suite, compression, extensions
        // [supported_versions, pre_shared_key].
        let mut hello = vec![3, 3];
        hello.extend([7u8; 32]);
        hello.extend([0, 0x13, 0x01, 0]);
        let exts = [0u8, 43, 0, 2, 3, 4, 0, 41, 0, 2, 0, 0];
        hello.extend((exts.len() as u16).to_be_bytes());
        hello.extend(exts);
        assert_eq!(server_hello_resumes(&hello), Some(true));
        let mut stream = vec![SERVER_HELLO, 0, 0, hello.len() as u8];
        stream.extend(&hello);
        stream.extend([ENCRYPTED_EXTENSIONS, 0, 0, 6, 0, 4, 0, 42, 0, 0]);
        let (mut m, mut w) = (Messages::default(), ServerWatch::default());
        for b in &stream {
            w.see(&m.push(std::slice::from_ref(b)));
        }
        assert!(w.done());
        assert_eq!(w.kind(), Kind::Resumed);
        assert!(w.early_data_accepted);
    }

    #[test]
    fn malformed_or_oversized_input_is_not_a_hello() {
        assert_eq!(client_hello(&[3, 3, 1]), None);
        assert_eq!(server_hello_resumes(&[]), None);
        let mut m = Messages::default();
        assert!(m.push(&[CLIENT_HELLO, 0xff, 0xff, 0xff]).is_empty());
        assert!(m.push(&vec![0; MAX_BUFFERED]).is_empty());
        assert!(m.overflowed);
        let mut r = Records::default();
        // An application-data record first: nothing more is read.
        assert!(r
            .push(&[23, 3, 3, 0, 1, 0, 22, 3, 3, 0, 4, 1, 0, 0, 0])
            .is_empty());
        assert!(r.ended);
        let mut w = ClientWatch::default();
        w.see(&[(SERVER_HELLO, vec![])]);
        assert!(w.done() && w.offered().is_none());
    }
}
