//! The hop protocol of the accelerated mode, between the terminal's proxy and the
//! gateway's hop listener. Pure encoding and decoding over `Read` / `Write`: tested on
//! byte buffers.
//!
//! Opening a hop connection (the terminal connects; nothing else is accepted before):
//!
//! ```text
//!   gateway  -> terminal   CHALLENGE  "CLKC" version nonce[32]
//!   terminal -> gateway    HELLO      "CLKH" version hop_id[8] mac[32]
//!                          mac = HMAC-SHA256(key, "clarke splittcp hop v1" nonce hop_id)
//!   gateway  -> terminal   ACCEPTED   "CLKA" version
//! ```
//!
//! The key is the testbed's (both stations' agents derive it from their token); a
//! replayed HELLO fails, the nonce being new for every connection. Then frames, each a
//! kind (1 byte), a payload length (4 bytes, big endian) and the payload:
//!
//! ```text
//!   OPEN   1  terminal -> gateway  stream[8] destination[4+2] client[4+2] flags[1]
//!   DATA   2  either way           1 .. MAX_DATA bytes of the stream
//!   FIN    3  either way           this direction of the stream ended
//!   RESET  4  either way           this direction of the stream was cut
//! ```
//!
//! One stream at a time per hop connection: OPEN, then each direction ends with FIN or
//! RESET; once both have, the hop connection is idle and may carry the next OPEN.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const VERSION: u8 = 1;
pub const NONCE_LEN: usize = 32;
pub const MAC_LEN: usize = 32;
/// The frame header: kind and payload length.
pub const HEADER: usize = 5;
/// The largest DATA payload (what one read from a socket gives at most).
pub const MAX_DATA: usize = 64 * 1024;
/// The shortest key accepted (128 bits).
pub const MIN_KEY_LEN: usize = 16;

const CHALLENGE_MAGIC: &[u8; 4] = b"CLKC";
const HELLO_MAGIC: &[u8; 4] = b"CLKH";
const ACCEPTED_MAGIC: &[u8; 4] = b"CLKA";
const MAC_LABEL: &[u8] = b"clarke splittcp hop v1";
pub const CHALLENGE_LEN: usize = 5 + NONCE_LEN;
pub const HELLO_LEN: usize = 5 + 8 + MAC_LEN;

const OPEN: u8 = 1;
const DATA: u8 = 2;
const FIN: u8 = 3;
const RESET: u8 = 4;
const OPEN_LEN: usize = 8 + 6 + 6 + 1;
const FLAG_PRE_OPENED: u8 = 1;

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn mac(key: &[u8], nonce: &[u8; NONCE_LEN], hop_id: u64) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(MAC_LABEL);
    m.update(nonce);
    m.update(&hop_id.to_be_bytes());
    m
}

pub fn challenge(nonce: &[u8; NONCE_LEN]) -> [u8; CHALLENGE_LEN] {
    let mut out = [0u8; CHALLENGE_LEN];
    out[..4].copy_from_slice(CHALLENGE_MAGIC);
    out[4] = VERSION;
    out[5..].copy_from_slice(nonce);
    out
}

pub fn parse_challenge(b: &[u8; CHALLENGE_LEN]) -> io::Result<[u8; NONCE_LEN]> {
    if &b[..4] != CHALLENGE_MAGIC || b[4] != VERSION {
        return Err(bad("not a splittcp hop listener (or another version)"));
    }
    Ok(b[5..].try_into().expect("NONCE_LEN bytes"))
}

pub fn hello(key: &[u8], nonce: &[u8; NONCE_LEN], hop_id: u64) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    out[..4].copy_from_slice(HELLO_MAGIC);
    out[4] = VERSION;
    out[5..13].copy_from_slice(&hop_id.to_be_bytes());
    out[13..].copy_from_slice(&mac(key, nonce, hop_id).finalize().into_bytes());
    out
}

/// The hop id of a HELLO whose MAC is right for this key and nonce.
pub fn verify_hello(key: &[u8], nonce: &[u8; NONCE_LEN], b: &[u8; HELLO_LEN]) -> io::Result<u64> {
    if &b[..4] != HELLO_MAGIC || b[4] != VERSION {
        return Err(bad("not a splittcp hop hello"));
    }
    let hop_id = u64::from_be_bytes(b[5..13].try_into().expect("8 bytes"));
    mac(key, nonce, hop_id)
        .verify_slice(&b[13..])
        .map_err(|_| bad("wrong key"))?;
    Ok(hop_id)
}

pub fn accepted() -> [u8; 5] {
    let mut out = [0u8; 5];
    out[..4].copy_from_slice(ACCEPTED_MAGIC);
    out[4] = VERSION;
    out
}

pub fn check_accepted(b: &[u8; 5]) -> io::Result<()> {
    if &b[..4] != ACCEPTED_MAGIC || b[4] != VERSION {
        return Err(bad("the gateway did not accept the hop"));
    }
    Ok(())
}

/// What an OPEN frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    /// The terminal's number for the stream (the gateway lists it too).
    pub stream: u64,
    /// Where the client was going.
    pub destination: SocketAddrV4,
    /// The client (for the gateway's list).
    pub client: SocketAddrV4,
    /// The hop connection was pre-opened (taken from the pool).
    pub pre_opened: bool,
}

/// One frame read; DATA's payload is in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame {
    Open(Open),
    /// This many bytes, at the start of the buffer given to `read_frame`.
    Data(usize),
    Fin,
    Reset,
}

fn put_addr(out: &mut [u8], a: SocketAddrV4) {
    out[..4].copy_from_slice(&a.ip().octets());
    out[4..6].copy_from_slice(&a.port().to_be_bytes());
}

fn get_addr(b: &[u8]) -> SocketAddrV4 {
    let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    SocketAddrV4::new(ip, u16::from_be_bytes([b[4], b[5]]))
}

fn header(kind: u8, len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0] = kind;
    h[1..].copy_from_slice(&(len as u32).to_be_bytes());
    h
}

pub fn write_open(w: &mut impl Write, open: &Open) -> io::Result<()> {
    let mut out = [0u8; HEADER + OPEN_LEN];
    out[..HEADER].copy_from_slice(&header(OPEN, OPEN_LEN));
    let p = &mut out[HEADER..];
    p[..8].copy_from_slice(&open.stream.to_be_bytes());
    put_addr(&mut p[8..14], open.destination);
    put_addr(&mut p[14..20], open.client);
    p[20] = if open.pre_opened { FLAG_PRE_OPENED } else { 0 };
    w.write_all(&out)
}

/// Write the DATA frame whose payload is `buf[HEADER..HEADER + n]` (the header goes in
/// front of it: one write, one segment where it fits).
pub fn write_data(w: &mut impl Write, buf: &mut [u8], n: usize) -> io::Result<()> {
    assert!((1..=MAX_DATA).contains(&n) && buf.len() >= HEADER + n);
    buf[..HEADER].copy_from_slice(&header(DATA, n));
    w.write_all(&buf[..HEADER + n])
}

pub fn write_end(w: &mut impl Write, clean: bool) -> io::Result<()> {
    w.write_all(&header(if clean { FIN } else { RESET }, 0))
}

/// The next frame; DATA's payload goes to `buf[..n]` (`buf` holds MAX_DATA at least).
/// Anything malformed is an InvalidData error: the hop connection is then unusable.
pub fn read_frame(r: &mut impl Read, buf: &mut [u8]) -> io::Result<Frame> {
    let mut h = [0u8; HEADER];
    r.read_exact(&mut h)?;
    let len = u32::from_be_bytes(h[1..].try_into().expect("4 bytes")) as usize;
    match (h[0], len) {
        (OPEN, OPEN_LEN) => {
            let mut p = [0u8; OPEN_LEN];
            r.read_exact(&mut p)?;
            Ok(Frame::Open(Open {
                stream: u64::from_be_bytes(p[..8].try_into().expect("8 bytes")),
                destination: get_addr(&p[8..14]),
                client: get_addr(&p[14..20]),
                pre_opened: p[20] & FLAG_PRE_OPENED != 0,
            }))
        }
        (DATA, 1..=MAX_DATA) if buf.len() >= len => {
            r.read_exact(&mut buf[..len])?;
            Ok(Frame::Data(len))
        }
        (FIN, 0) => Ok(Frame::Fin),
        (RESET, 0) => Ok(Frame::Reset),
        (kind, len) => Err(bad(format!("bad hop frame: kind {kind}, length {len}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn the_hello_proves_the_key_for_this_nonce_only() {
        let nonce = [7u8; NONCE_LEN];
        assert_eq!(parse_challenge(&challenge(&nonce)).unwrap(), nonce);
        let h = hello(KEY, &nonce, 42);
        assert_eq!(verify_hello(KEY, &nonce, &h).unwrap(), 42);
        assert!(verify_hello(b"another key, also 32 bytes long!", &nonce, &h).is_err());
        assert!(
            verify_hello(KEY, &[8u8; NONCE_LEN], &h).is_err(),
            "replayed"
        );
        let mut forged = h;
        forged[5..13].copy_from_slice(&43u64.to_be_bytes());
        assert!(
            verify_hello(KEY, &nonce, &forged).is_err(),
            "another hop id"
        );
        let mut garbage = [0u8; HELLO_LEN];
        garbage[..4].copy_from_slice(b"GET ");
        assert!(verify_hello(KEY, &nonce, &garbage).is_err());
        assert!(check_accepted(&accepted()).is_ok());
        assert!(check_accepted(b"HTTP/").is_err());
    }

    #[test]
    fn frames_round_trip() {
        let open = Open {
            stream: 9,
            destination: "198.18.2.2:443".parse().unwrap(),
            client: "198.18.0.2:50000".parse().unwrap(),
            pre_opened: true,
        };
        let mut wire = Vec::new();
        write_open(&mut wire, &open).unwrap();
        let mut buf = vec![0u8; HEADER + MAX_DATA];
        buf[HEADER..HEADER + 3].copy_from_slice(b"abc");
        write_data(&mut wire, &mut buf, 3).unwrap();
        write_end(&mut wire, true).unwrap();
        write_end(&mut wire, false).unwrap();
        let mut r = Cursor::new(wire);
        let mut out = vec![0u8; MAX_DATA];
        assert_eq!(read_frame(&mut r, &mut out).unwrap(), Frame::Open(open));
        assert_eq!(read_frame(&mut r, &mut out).unwrap(), Frame::Data(3));
        assert_eq!(&out[..3], b"abc");
        assert_eq!(read_frame(&mut r, &mut out).unwrap(), Frame::Fin);
        assert_eq!(read_frame(&mut r, &mut out).unwrap(), Frame::Reset);
        let end = read_frame(&mut r, &mut out).unwrap_err();
        assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn malformed_frames_are_errors() {
        let mut out = vec![0u8; MAX_DATA];
        for wire in [
            vec![DATA, 0, 0, 0, 0],       // empty DATA
            vec![DATA, 0, 2, 0, 1],       // longer than MAX_DATA
            vec![FIN, 0, 0, 0, 1, 0],     // FIN with a payload
            vec![OPEN, 0, 0, 0, 3, 1, 2], // short OPEN
            b"GET / HTTP/1.1\r\n".to_vec(),
        ] {
            let e = read_frame(&mut Cursor::new(wire), &mut out).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
    }
}
