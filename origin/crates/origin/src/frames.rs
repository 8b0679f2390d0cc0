//! Reading HTTP/2 frames off a connection's byte stream and HTTP/3 frames off the
//! client's control stream, to see the priority signals neither hyper/h2 nor h3 passes on
//! (h2 ignores PRIORITY frames and the HEADERS priority fields and skips PRIORITY_UPDATE
//! as an unknown frame type; h3 0.0.8 skips PRIORITY_UPDATE likewise), and the DATA
//! frames origin writes, in order. Parsers only: bytes in, events out, nothing changed.

use serde::Serialize;

/// RFC 7540 5.3 priority (deprecated by RFC 9113, still sent by some browsers): from a
/// HEADERS frame with the PRIORITY flag, or a PRIORITY frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rfc7540Priority {
    pub exclusive: bool,
    pub depends_on: u32,
    /// 1..=256
    pub weight: u16,
}

impl Rfc7540Priority {
    fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: [u8; 5] = b.get(..5)?.try_into().ok()?;
        Some(Self {
            exclusive: b[0] & 0x80 != 0,
            depends_on: u32::from_be_bytes([b[0] & 0x7f, b[1], b[2], b[3]]),
            weight: u16::from(b[4]) + 1,
        })
    }
}

/// What an HTTP/2 frame says about priorities and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H2Event {
    /// SETTINGS (not an ACK): identifier and value pairs.
    Settings(Vec<(u16, u32)>),
    /// A HEADERS frame, with its priority fields when its PRIORITY flag is set.
    Headers {
        stream: u32,
        priority: Option<Rfc7540Priority>,
    },
    /// A PRIORITY frame.
    Priority { stream: u32, priority: Rfc7540Priority },
    /// RFC 9218 7.1 PRIORITY_UPDATE (type 0x10): the prioritized stream and field value.
    PriorityUpdate { stream: u32, value: String },
    /// RST_STREAM (either side).
    Reset { stream: u32 },
    /// A DATA frame, once its last byte has passed.
    Data { stream: u32, len: u32, end_stream: bool },
}

/// RFC 9113 3.4: what a client sends first.
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const H2_DATA: u8 = 0x0;
const H2_HEADERS: u8 = 0x1;
const H2_PRIORITY: u8 = 0x2;
const H2_RST_STREAM: u8 = 0x3;
const H2_SETTINGS: u8 = 0x4;
/// RFC 9218 7.1.
pub const H2_PRIORITY_UPDATE: u8 = 0x10;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_ACK: u8 = 0x1;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// The most payload bytes kept of a frame whose payload is read (a field value, settings).
const KEEP_MAX: usize = 1024;

/// The payload of the frame being read: how much of it is left, and its first bytes
/// kept (as many as the frame's kind needs, at most [`KEEP_MAX`]).
#[derive(Debug, Default)]
struct Payload {
    left: usize,
    kept: Vec<u8>,
    keep_want: usize,
}

impl Payload {
    /// A frame of `len` payload bytes, of which the first `keep` are kept.
    fn start(&mut self, len: usize, keep: usize) {
        self.left = len;
        self.kept.clear();
        self.keep_want = keep.min(len);
    }

    /// Takes what of `bytes` belongs to the payload; true once the payload is complete.
    fn take(&mut self, bytes: &mut &[u8]) -> bool {
        let n = self.left.min(bytes.len());
        let keep = (self.keep_want - self.kept.len()).min(n);
        self.kept.extend_from_slice(&bytes[..keep]);
        self.left -= n;
        *bytes = &bytes[n..];
        self.left == 0
    }
}

#[derive(Debug, Clone, Copy)]
struct H2Header {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

/// An HTTP/2 byte stream, one direction, fed as it passes.
#[derive(Debug)]
pub struct H2Parser {
    preface_left: usize,
    head: Vec<u8>,
    frame: Option<H2Header>,
    payload: Payload,
    /// The stream is not HTTP/2 as expected (a bad preface): nothing more is read.
    lost: bool,
}

impl H2Parser {
    /// What a server reads: the client's preface, then frames.
    pub fn from_client() -> Self {
        Self::new(H2_PREFACE.len())
    }

    /// What a server writes: frames from the first byte.
    pub fn from_server() -> Self {
        Self::new(0)
    }

    fn new(preface_left: usize) -> Self {
        Self {
            preface_left,
            head: Vec::with_capacity(9),
            frame: None,
            payload: Payload::default(),
            lost: false,
        }
    }

    /// Feeds the next bytes; events of the frames they complete go to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<H2Event>) {
        while !bytes.is_empty() && !self.lost {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                let at = H2_PREFACE.len() - self.preface_left;
                if bytes[..n] != H2_PREFACE[at..at + n] {
                    self.lost = true;
                    return;
                }
                self.preface_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            if self.frame.is_none() {
                let n = (9 - self.head.len()).min(bytes.len());
                self.head.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if self.head.len() == 9 {
                    self.start_frame();
                    if self.payload.left == 0 {
                        self.end_frame(out);
                    }
                }
                continue;
            }
            if self.payload.take(&mut bytes) {
                self.end_frame(out);
            }
        }
    }

    fn start_frame(&mut self) {
        let h = &self.head;
        let frame = H2Header {
            len: usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]),
        };
        self.head.clear();
        let keep = match frame.kind {
            H2_HEADERS => 6, // pad length and the priority fields
            H2_PRIORITY => 5,
            H2_SETTINGS | H2_PRIORITY_UPDATE => KEEP_MAX,
            _ => 0,
        };
        self.payload.start(frame.len, keep);
        self.frame = Some(frame);
    }

    fn end_frame(&mut self, out: &mut Vec<H2Event>) {
        let Some(f) = self.frame.take() else { return };
        let k = &self.payload.kept;
        let event = match f.kind {
            H2_DATA => Some(H2Event::Data {
                stream: f.stream,
                len: f.len as u32,
                end_stream: f.flags & FLAG_END_STREAM != 0,
            }),
            H2_HEADERS => {
                let at = usize::from(f.flags & FLAG_PADDED != 0);
                let priority = if f.flags & FLAG_PRIORITY != 0 {
                    k.get(at..).and_then(Rfc7540Priority::from_bytes)
                } else {
                    None
                };
                Some(H2Event::Headers {
                    stream: f.stream,
                    priority,
                })
            }
            H2_RST_STREAM => Some(H2Event::Reset { stream: f.stream }),
            H2_PRIORITY => Rfc7540Priority::from_bytes(k).map(|priority| H2Event::Priority {
                stream: f.stream,
                priority,
            }),
            H2_SETTINGS if f.flags & FLAG_ACK == 0 => Some(H2Event::Settings(
                k.chunks_exact(6)
                    .map(|c| {
                        (
                            u16::from_be_bytes([c[0], c[1]]),
                            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                        )
                    })
                    .collect(),
            )),
            H2_PRIORITY_UPDATE if f.stream == 0 && k.len() >= 4 => Some(H2Event::PriorityUpdate {
                stream: u32::from_be_bytes([k[0] & 0x7f, k[1], k[2], k[3]]),
                value: String::from_utf8_lossy(&k[4..]).into_owned(),
            }),
            _ => None,
        };
        out.extend(event);
        self.payload.kept.clear();
    }
}

/// What the client's HTTP/3 control stream says about priorities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H3Event {
    /// SETTINGS: identifier and value pairs.
    Settings(Vec<(u64, u64)>),
    /// RFC 9218 7.2 PRIORITY_UPDATE for a request stream (type 0xF0700).
    PriorityUpdate { stream: u64, value: String },
}

const H3_CONTROL_STREAM: u64 = 0x00;
const H3_SETTINGS: u64 = 0x04;
/// RFC 9218 7.2: PRIORITY_UPDATE for a request stream.
pub const H3_PRIORITY_UPDATE_REQUEST: u64 = 0xF0700;

/// A QUIC variable-length integer at the start of `b` and its length (RFC 9000 16), or
/// None when `b` holds only part of it.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for x in &bytes[1..] {
        v = v << 8 | u64::from(*x);
    }
    Some((v, len))
}

/// A unidirectional stream the client opened, fed as it arrives: read when it is the
/// control stream, ignored otherwise (QPACK streams, unknown types).
#[derive(Debug, Default)]
pub struct H3ControlParser {
    /// Bytes of a stream type or frame header not yet complete.
    pending: Vec<u8>,
    kind: Option<u64>,
    frame: Option<(u64, usize)>,
    payload: Payload,
}

impl H3ControlParser {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<H3Event>) {
        while !bytes.is_empty() {
            match self.kind {
                Some(k) if k != H3_CONTROL_STREAM => return,
                None => {
                    let Some(v) = self.take_varints(&mut bytes, 1) else {
                        return;
                    };
                    self.kind = Some(v[0]);
                    continue;
                }
                Some(_) => {}
            }
            if self.frame.is_none() {
                let Some(v) = self.take_varints(&mut bytes, 2) else {
                    return;
                };
                let len = usize::try_from(v[1]).unwrap_or(usize::MAX);
                self.frame = Some((v[0], len));
                let keep = match v[0] {
                    H3_SETTINGS | H3_PRIORITY_UPDATE_REQUEST => KEEP_MAX,
                    _ => 0,
                };
                self.payload.start(len, keep);
                if len == 0 {
                    self.end_frame(out);
                }
                continue;
            }
            if self.payload.take(&mut bytes) {
                self.end_frame(out);
            }
        }
    }

    /// `count` varints from `pending` + `bytes`, consuming them; None (everything kept
    /// in `pending`) while they are incomplete.
    fn take_varints(&mut self, bytes: &mut &[u8], count: usize) -> Option<Vec<u64>> {
        // At most 8 bytes per varint: never more than that is buffered.
        let need = 8 * count;
        let n = (need.saturating_sub(self.pending.len())).min(bytes.len());
        let start = self.pending.len();
        self.pending.extend_from_slice(&bytes[..n]);
        let mut at = 0;
        let mut values = Vec::with_capacity(count);
        for _ in 0..count {
            match varint(&self.pending[at..]) {
                Some((v, len)) => {
                    values.push(v);
                    at += len;
                }
                None => {
                    *bytes = &bytes[n..];
                    return None;
                }
            }
        }
        // Give back what the varints did not use.
        let used_of_new = at - start;
        *bytes = &bytes[used_of_new..];
        self.pending.clear();
        Some(values)
    }

    fn end_frame(&mut self, out: &mut Vec<H3Event>) {
        let Some((kind, _)) = self.frame.take() else {
            return;
        };
        let k = &self.payload.kept;
        match kind {
            H3_SETTINGS => {
                let mut pairs = Vec::new();
                let mut at = 0;
                while let Some((id, a)) = varint(&k[at..]) {
                    let Some((value, b)) = varint(&k[at + a..]) else {
                        break;
                    };
                    pairs.push((id, value));
                    at += a + b;
                }
                out.push(H3Event::Settings(pairs));
            }
            H3_PRIORITY_UPDATE_REQUEST => {
                if let Some((stream, n)) = varint(k) {
                    out.push(H3Event::PriorityUpdate {
                        stream,
                        value: String::from_utf8_lossy(&k[n..]).into_owned(),
                    });
                }
            }
            _ => {}
        }
        self.payload.kept.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn feed_bytewise(p: &mut H2Parser, bytes: &[u8]) -> Vec<H2Event> {
        let mut out = Vec::new();
        for b in bytes {
            p.feed(std::slice::from_ref(b), &mut out);
        }
        out
    }

    #[test]
    fn reads_a_clients_priority_signals_whatever_the_cuts() {
        let mut wire = H2_PREFACE.to_vec();
        // SETTINGS: SETTINGS_NO_RFC7540_PRIORITIES (9) = 1, initial window 12 MiB.
        let mut s = vec![0, 9, 0, 0, 0, 1];
        s.extend_from_slice(&[0, 4, 0, 0xc0, 0, 0]);
        wire.extend(h2_frame(H2_SETTINGS, 0, 0, &s));
        wire.extend(h2_frame(H2_SETTINGS, FLAG_ACK, 0, &[]));
        // HEADERS with PADDED and PRIORITY: pad 2, exclusive on 3, weight 42; block; pad.
        let mut h = vec![2, 0x80, 0, 0, 3, 41];
        h.extend_from_slice(b"hpack");
        h.extend_from_slice(&[0, 0]);
        wire.extend(h2_frame(H2_HEADERS, 0x4 | FLAG_PADDED | FLAG_PRIORITY, 5, &h));
        wire.extend(h2_frame(H2_HEADERS, 0x4, 7, b"hp"));
        wire.extend(h2_frame(H2_PRIORITY, 0, 7, &[0, 0, 0, 5, 255]));
        let mut pu = 9u32.to_be_bytes().to_vec();
        pu.extend_from_slice(b"u=1, i");
        wire.extend(h2_frame(H2_PRIORITY_UPDATE, 0, 0, &pu));
        wire.extend(h2_frame(0x8, 0, 0, &[0, 0, 1, 0])); // WINDOW_UPDATE: nothing
        let expected = vec![
            H2Event::Settings(vec![(9, 1), (4, 12 << 20)]),
            H2Event::Headers {
                stream: 5,
                priority: Some(Rfc7540Priority {
                    exclusive: true,
                    depends_on: 3,
                    weight: 42,
                }),
            },
            H2Event::Headers {
                stream: 7,
                priority: None,
            },
            H2Event::Priority {
                stream: 7,
                priority: Rfc7540Priority {
                    exclusive: false,
                    depends_on: 5,
                    weight: 256,
                },
            },
            H2Event::PriorityUpdate {
                stream: 9,
                value: "u=1, i".into(),
            },
        ];
        let mut all = Vec::new();
        H2Parser::from_client().feed(&wire, &mut all);
        assert_eq!(all, expected);
        assert_eq!(feed_bytewise(&mut H2Parser::from_client(), &wire), expected);
    }

    #[test]
    fn reads_the_data_frames_a_server_writes_in_order() {
        let mut wire = h2_frame(H2_SETTINGS, 0, 0, &[]);
        wire.extend(h2_frame(H2_HEADERS, 0x4, 1, b"hdrs"));
        wire.extend(h2_frame(H2_DATA, 0, 1, &[7; 16384]));
        wire.extend(h2_frame(H2_DATA, 0, 3, &[7; 100]));
        wire.extend(h2_frame(H2_DATA, FLAG_END_STREAM, 1, &[7; 5]));
        wire.extend(h2_frame(H2_DATA, FLAG_END_STREAM, 3, &[]));
        let data = |stream, len, end_stream| H2Event::Data {
            stream,
            len,
            end_stream,
        };
        let mut out = Vec::new();
        let mut p = H2Parser::from_server();
        for piece in wire.chunks(1000) {
            p.feed(piece, &mut out);
        }
        out.retain(|e| matches!(e, H2Event::Data { .. }));
        assert_eq!(
            out,
            [
                data(1, 16384, false),
                data(3, 100, false),
                data(1, 5, true),
                data(3, 0, true)
            ]
        );
    }

    #[test]
    fn stops_reading_a_stream_that_is_not_http2() {
        let mut out = Vec::new();
        let mut p = H2Parser::from_client();
        p.feed(b"GET / HTTP/1.1\r\n\r\n", &mut out);
        p.feed(&h2_frame(H2_PRIORITY, 0, 1, &[0, 0, 0, 0, 1]), &mut out);
        assert!(out.is_empty());
    }

    fn varint_bytes(v: u64) -> Vec<u8> {
        match v {
            0..=63 => vec![v as u8],
            64..=16383 => (v as u16 | 0x4000).to_be_bytes().to_vec(),
            16384..=1_073_741_823 => (v as u32 | 0x8000_0000).to_be_bytes().to_vec(),
            _ => (v | 0xc000_0000_0000_0000).to_be_bytes().to_vec(),
        }
    }

    fn h3_frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut f = varint_bytes(kind);
        f.extend(varint_bytes(payload.len() as u64));
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn reads_priority_updates_off_the_control_stream_whatever_the_cuts() {
        let mut wire = varint_bytes(H3_CONTROL_STREAM);
        let mut s = varint_bytes(0x1);
        s.extend(varint_bytes(65536));
        s.extend(varint_bytes(0x33));
        s.extend(varint_bytes(1));
        wire.extend(h3_frame(H3_SETTINGS, &s));
        wire.extend(h3_frame(0x21, b"reserved")); // a grease frame: skipped
        let mut pu = varint_bytes(8);
        pu.extend_from_slice(b"u=2");
        wire.extend(h3_frame(H3_PRIORITY_UPDATE_REQUEST, &pu));
        let expected = vec![
            H3Event::Settings(vec![(0x1, 65536), (0x33, 1)]),
            H3Event::PriorityUpdate {
                stream: 8,
                value: "u=2".into(),
            },
        ];
        let mut out = Vec::new();
        H3ControlParser::new().feed(&wire, &mut out);
        assert_eq!(out, expected);
        let mut out = Vec::new();
        let mut p = H3ControlParser::new();
        for b in &wire {
            p.feed(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn ignores_other_unidirectional_streams() {
        let mut wire = varint_bytes(0x02); // QPACK encoder stream
        wire.extend(h3_frame(H3_PRIORITY_UPDATE_REQUEST, &[0, b'u']));
        let mut out = Vec::new();
        H3ControlParser::new().feed(&wire, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn decodes_varints() {
        assert_eq!(varint(&[0x25]), Some((37, 1)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494_878_333, 4)));
        assert_eq!(varint(&[0x9d, 0x7f]), None);
        assert_eq!(varint(&[]), None);
        assert_eq!(varint(&varint_bytes(0xF0700)), Some((0xF0700, 4)));
    }
}
