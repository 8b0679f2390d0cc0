//! The flow of an IP packet, for FQ-CoDel's flow queues: a hash of its 5-tuple
//! (protocol, addresses, and ports for TCP, UDP, UDP-Lite, SCTP and DCCP), as RFC 8290
//! §4.1.1 and Linux's fq_codel classify. Fragments after the first, and IPv6 packets
//! with extension headers before the transport header, hash on the 3-tuple.

use std::hash::{DefaultHasher, Hash, Hasher};

/// Transport protocols whose first 4 bytes are the source and destination ports.
fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 33 | 132 | 136)
}

/// The 5-tuple hash of the IP packet `ip` (from its first byte, the IP header); 0 for
/// what is not IPv4 or IPv6. The hasher's keys are fixed: the same packet always goes
/// to the same flow queue.
pub fn flow_hash(ip: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    let ports = |at: usize| ip.get(at..at + 4);
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let proto = ip[9];
            let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            (4u8, proto, &ip[12..20]).hash(&mut h);
            if has_ports(proto) && !later_fragment {
                ports(ihl).hash(&mut h);
            }
        }
        Some(6) if ip.len() >= 40 => {
            let next = ip[6];
            (6u8, next, &ip[8..40]).hash(&mut h);
            if has_ports(next) {
                ports(40).hash(&mut h);
            }
        }
        _ => return 0,
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(src_port: u16, dst_port: u16) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 1, 1]);
        p[20..22].copy_from_slice(&src_port.to_be_bytes());
        p[22..24].copy_from_slice(&dst_port.to_be_bytes());
        p
    }

    #[test]
    fn the_5_tuple_decides_the_flow() {
        assert_eq!(flow_hash(&udp4(1000, 53)), flow_hash(&udp4(1000, 53)));
        assert_ne!(flow_hash(&udp4(1000, 53)), flow_hash(&udp4(1001, 53)));
        // The payload does not count.
        let mut other = udp4(1000, 53);
        other[27] = 9;
        assert_eq!(flow_hash(&other), flow_hash(&udp4(1000, 53)));
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 6;
        let a = flow_hash(&v6);
        v6[41] = 1;
        assert_ne!(a, flow_hash(&v6));
        assert_eq!(flow_hash(&[0x10; 40]), 0);
        assert_eq!(flow_hash(&[]), 0);
    }
}
