//! The ring-buffer record of the sockwatch program, parsed by offset
//! (docs/design/node-agent.md#kernel-program). The layout is `struct sockwatch_event` in
//! `libbpf-programs/sockwatch.h`: 64 bytes, native byte order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::facts::{SocketEvent, SocketEventKind};

/// Size of one record.
pub const RECORD_LEN: usize = 64;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// Why a record could not be turned into an event (counted, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("record of {0} bytes, expected {RECORD_LEN}")]
    Short(usize),
    #[error("unknown event kind {0}")]
    Kind(u8),
    #[error("unknown address family {0}")]
    Family(u16),
}

/// Parses one record. Longer input is accepted (only the first 64 bytes are read); shorter input,
/// an unknown kind or an unknown family is [`Malformed`].
pub fn parse(record: &[u8]) -> Result<SocketEvent, Malformed> {
    let Some(r) = record.get(..RECORD_LEN) else {
        return Err(Malformed::Short(record.len()));
    };
    let u64_at = |o: usize| u64::from_ne_bytes(array(&r[o..o + 8]));
    let u32_at = |o: usize| u32::from_ne_bytes(array(&r[o..o + 4]));
    let u16_at = |o: usize| u16::from_ne_bytes(array(&r[o..o + 2]));

    let kind = match r[50] {
        1 => SocketEventKind::Listen,
        2 => SocketEventKind::ListenClosed,
        3 => SocketEventKind::Outbound,
        4 => SocketEventKind::Inbound,
        other => return Err(Malformed::Kind(other)),
    };
    let family = u16_at(48);
    let local = address(family, &r[8..24])?;
    let peer = address(family, &r[24..40])?;
    let (sport, dport) = (u16_at(44), u16_at(46));
    let peer = if matches!(
        kind,
        SocketEventKind::Listen | SocketEventKind::ListenClosed
    ) {
        SocketAddr::new(unspecified_like(peer), 0)
    } else {
        SocketAddr::new(peer, dport)
    };
    Ok(SocketEvent {
        kind,
        cgroup_id: u64_at(0),
        netns_ino: u32_at(40),
        local: SocketAddr::new(local, sport),
        peer,
        cookie: u64_at(56),
    })
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    out
}

fn address(family: u16, bytes: &[u8]) -> Result<IpAddr, Malformed> {
    match family {
        AF_INET => Ok(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))),
        AF_INET6 => Ok(unmap(Ipv6Addr::from(array::<16>(bytes)))),
        other => Err(Malformed::Family(other)),
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports for IPv4
/// peers) as plain IPv4; every other IPv6 address unchanged.
pub fn unmap(addr: Ipv6Addr) -> IpAddr {
    match addr.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(addr),
    }
}

fn unspecified_like(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = parse(&bytes);
        }
    }

    struct Rec {
        kind: u8,
        family: u16,
        saddr: [u8; 16],
        daddr: [u8; 16],
        sport: u16,
        dport: u16,
    }

    fn encode(r: &Rec) -> Vec<u8> {
        let mut b = vec![0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&44u64.to_ne_bytes());
        b[8..24].copy_from_slice(&r.saddr);
        b[24..40].copy_from_slice(&r.daddr);
        b[40..44].copy_from_slice(&4_026_532_174u32.to_ne_bytes());
        b[44..46].copy_from_slice(&r.sport.to_ne_bytes());
        b[46..48].copy_from_slice(&r.dport.to_ne_bytes());
        b[48..50].copy_from_slice(&r.family.to_ne_bytes());
        b[50] = r.kind;
        b[56..64].copy_from_slice(&1_240_535u64.to_ne_bytes());
        b
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut out = [0; 16];
        out[..4].copy_from_slice(&a);
        out
    }

    #[test]
    fn inbound_ipv4_record() {
        let e = parse(&encode(&Rec {
            kind: 4,
            family: 2,
            saddr: v4([10, 199, 0, 2]),
            daddr: v4([10, 199, 0, 1]),
            sport: 18080,
            dport: 44408,
        }))
        .unwrap();
        assert_eq!(e.kind, SocketEventKind::Inbound);
        assert_eq!(e.cgroup_id, 44);
        assert_eq!(e.netns_ino, 4_026_532_174);
        assert_eq!(e.local, "10.199.0.2:18080".parse().unwrap());
        assert_eq!(e.peer, "10.199.0.1:44408".parse().unwrap());
        assert_eq!(e.cookie, 1_240_535);
    }

    #[test]
    fn v4_mapped_ipv6_becomes_ipv4_and_listeners_have_no_peer() {
        let mapped: Ipv6Addr = "::ffff:127.0.0.1".parse().unwrap();
        let e = parse(&encode(&Rec {
            kind: 3,
            family: 10,
            saddr: mapped.octets(),
            daddr: mapped.octets(),
            sport: 51950,
            dport: 8080,
        }))
        .unwrap();
        assert_eq!(e.kind, SocketEventKind::Outbound);
        assert_eq!(e.local, "127.0.0.1:51950".parse().unwrap());
        assert_eq!(e.peer, "127.0.0.1:8080".parse().unwrap());

        let e = parse(&encode(&Rec {
            kind: 1,
            family: 10,
            saddr: Ipv6Addr::LOCALHOST.octets(),
            daddr: [0; 16],
            sport: 8080,
            dport: 0,
        }))
        .unwrap();
        assert_eq!(e.kind, SocketEventKind::Listen);
        assert_eq!(e.local, "[::1]:8080".parse().unwrap());
        assert_eq!(e.peer, "[::]:0".parse().unwrap());
    }

    #[test]
    fn short_or_unknown_records_are_malformed() {
        let good = encode(&Rec {
            kind: 2,
            family: 2,
            saddr: [0; 16],
            daddr: [0; 16],
            sport: 0,
            dport: 0,
        });
        assert_eq!(parse(&good).unwrap().kind, SocketEventKind::ListenClosed);
        for len in 0..RECORD_LEN {
            assert_eq!(parse(&good[..len]), Err(Malformed::Short(len)));
        }
        let mut bad = good.clone();
        bad[50] = 9;
        assert_eq!(parse(&bad), Err(Malformed::Kind(9)));
        let mut bad = good;
        bad[48..50].copy_from_slice(&1u16.to_ne_bytes());
        assert_eq!(parse(&bad), Err(Malformed::Family(1)));
    }
}
