//! Copying one direction of a relayed connection: socket to socket (the pure split),
//! socket to hop frames and hop frames to socket (the accelerated mode). An end of
//! stream is passed on as a half-close (a FIN frame on the hop), an error as a reset
//! (RESET on the hop); bytes are counted in the stats as they go.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use crate::frame::{self, Frame, HEADER, MAX_DATA};
use crate::stats::{ConnInfo, Slot, Stats};
use crate::sys;

/// How a direction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// End of stream, passed on.
    Clean,
    /// An error on the way (or the other side cut it), passed on as a reset.
    Cut,
}

/// Record the hop socket's TCP_INFO as the connection's first data on the hop: read
/// just after the first write, so that it shows the window that write was sent with (a
/// connection idle for longer than its RTO restarts its window as the write goes out).
fn record_first(hop: &TcpStream, stats: &Stats, slot: Slot) {
    if let Ok(info) = sys::tcp_info(hop.as_raw_fd()) {
        stats.update(slot, |c| c.hop_first_data = Some(info));
    }
}

fn read_some(mut from: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match from.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Notes on `info` the local end of the connection it is relayed from (`from`) and
/// the congestion control of its hop's socket.
pub fn note_relay(info: &mut ConnInfo, from: &TcpStream, hop_fd: RawFd) {
    info.relayed_from = from.local_addr().map(|a| a.to_string()).unwrap_or_default();
    info.hop_cc = sys::congestion(hop_fd).unwrap_or_default();
}

/// Socket to socket until the end of `from` (a half-close of `to`) or an error (both
/// shut). `to_is_hop`: `to` crosses the satellite hop (its first data is recorded).
pub fn plain(
    from: &TcpStream,
    mut to: &TcpStream,
    stats: &Stats,
    slot: Slot,
    up: bool,
    to_is_hop: bool,
) -> End {
    let mut buf = vec![0u8; MAX_DATA];
    let mut first = to_is_hop;
    let result = loop {
        let n = match read_some(from, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(e),
        };
        if let Err(e) = to.write_all(&buf[..n]) {
            break Err(e);
        }
        if std::mem::take(&mut first) {
            record_first(to, stats, slot);
        }
        stats.bytes(slot, up, n as u64);
    };
    match result {
        Ok(()) => {
            let _ = to.shutdown(Shutdown::Write);
            End::Clean
        }
        Err(e) => {
            note_error(stats, slot, &e);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            End::Cut
        }
    }
}

fn note_error(stats: &Stats, slot: Slot, e: &io::Error) {
    stats.update(slot, |i| {
        i.error.get_or_insert_with(|| e.to_string());
    });
}

/// Socket to hop as DATA frames, ended by FIN (end of `from`) or RESET (an error
/// reading `from`). Err: writing to the hop failed, the hop connection is broken.
pub fn into_hop(
    from: &TcpStream,
    mut hop: &TcpStream,
    stats: &Stats,
    slot: Slot,
    up: bool,
) -> io::Result<End> {
    let mut buf = vec![0u8; HEADER + MAX_DATA];
    let mut first = true;
    let end = loop {
        let n = match read_some(from, &mut buf[HEADER..]) {
            Ok(0) => break End::Clean,
            Ok(n) => n,
            Err(e) => {
                note_error(stats, slot, &e);
                let _ = from.shutdown(Shutdown::Both);
                break End::Cut;
            }
        };
        frame::write_data(&mut hop, &mut buf, n)?;
        if std::mem::take(&mut first) {
            record_first(hop, stats, slot);
        }
        stats.bytes(slot, up, n as u64);
    };
    frame::write_end(&mut hop, end == End::Clean)?;
    Ok(end)
}

/// Hop frames to socket until this direction's FIN (a half-close of `to`) or RESET
/// (`to` shut both ways). If `to` fails, the rest of the stream is read and dropped,
/// so that the hop connection stays in step. Err: the hop connection is broken (read
/// error, end of stream, or a frame out of place).
pub fn from_hop(
    mut hop: &TcpStream,
    mut to: &TcpStream,
    stats: &Stats,
    slot: Slot,
    up: bool,
) -> io::Result<End> {
    let mut buf = vec![0u8; MAX_DATA];
    let mut to_failed = false;
    loop {
        match frame::read_frame(&mut hop, &mut buf)? {
            Frame::Data(n) => {
                if to_failed {
                    continue;
                }
                if let Err(e) = to.write_all(&buf[..n]) {
                    note_error(stats, slot, &e);
                    to_failed = true;
                    let _ = to.shutdown(Shutdown::Both);
                    continue;
                }
                stats.bytes(slot, up, n as u64);
            }
            Frame::Fin => {
                let _ = to.shutdown(Shutdown::Write);
                return Ok(if to_failed { End::Cut } else { End::Clean });
            }
            Frame::Reset => {
                let _ = to.shutdown(Shutdown::Both);
                return Ok(End::Cut);
            }
            Frame::Open(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "OPEN in the middle of a stream",
                ))
            }
        }
    }
}

/// Both directions of a stream between `local` and a hop connection, until each has
/// ended: `local` to the hop in a thread of its own, the hop to `local` in this one. When
/// the hop connection breaks, both sockets are shut so that the other direction ends
/// too. `local_is_client`: the bytes read from `local` go up (client to server). The
/// connection is then listed closed, with the hop's error if any. Err: the hop
/// connection is broken (the error reading it first).
pub fn with_hop(
    local: &TcpStream,
    hop: &TcpStream,
    stats: &Stats,
    slot: Slot,
    local_is_client: bool,
) -> io::Result<()> {
    let (to_hop, from) = std::thread::scope(|s| {
        let to_hop = s.spawn(|| into_hop(local, hop, stats, slot, local_is_client));
        let from = from_hop(hop, local, stats, slot, !local_is_client);
        if from.is_err() {
            let _ = hop.shutdown(Shutdown::Both);
            let _ = local.shutdown(Shutdown::Both);
        }
        (to_hop.join(), from)
    });
    let result = match (to_hop, from) {
        (Ok(Ok(_)), Ok(_)) => Ok(()),
        (_, Err(e)) | (Ok(Err(e)), _) => Err(e),
        (Err(_), _) => Err(io::Error::other("the relay panicked")),
    };
    stats.update(slot, |c| {
        c.open = false;
        if let Err(e) = &result {
            c.error
                .get_or_insert_with(|| format!("hop connection: {e}"));
        }
    });
    result
}

/// Read and drop the rest of a stream's direction (until its FIN or RESET): a stream
/// the gateway refused or could not connect still ends in step.
pub fn drain_hop(mut hop: &TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_DATA];
    loop {
        match frame::read_frame(&mut hop, &mut buf)? {
            Frame::Data(_) => continue,
            Frame::Fin | Frame::Reset => return Ok(()),
            Frame::Open(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "OPEN in the middle of a stream",
                ))
            }
        }
    }
}
