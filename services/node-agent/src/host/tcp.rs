//! Parsing `/proc/<pid>/net/tcp` and `tcp6` (docs/design/node-agent.md#attribution). The parser
//! takes any text: a line it does not understand (the header, a truncated or garbled line) is
//! skipped, never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::kernel::record::unmap;

/// TCP states as `/proc/net/tcp` prints them (`st` column, hex).
pub const STATE_ESTABLISHED: u8 = 0x01;
pub const STATE_LISTEN: u8 = 0x0A;

/// One socket line: local and peer address and the TCP state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLine {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub state: u8,
}

/// Parses one line of `net/tcp` (`v6` false) or `net/tcp6` (`v6` true); `None` for the header or
/// anything malformed. IPv4-mapped IPv6 addresses come back as IPv4.
pub fn parse_line(line: &str, v6: bool) -> Option<TcpLine> {
    let mut fields = line.split_whitespace();
    let slot = fields.next()?;
    if !slot.ends_with(':') {
        return None;
    }
    let local = endpoint(fields.next()?, v6)?;
    let peer = endpoint(fields.next()?, v6)?;
    let state = fields.next()?;
    if state.len() != 2 {
        return None;
    }
    let state = u8::from_str_radix(state, 16).ok()?;
    Some(TcpLine { local, peer, state })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6). The kernel prints each 32-bit word
/// of the address as it lies in memory, read as a native integer; the port in host order.
fn endpoint(text: &str, v6: bool) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    if port.len() != 4 || !port.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let port = u16::from_str_radix(port, 16).ok()?;
    let want = if v6 { 32 } else { 8 };
    if addr.len() != want || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, chunk) in addr.as_bytes().chunks(8).enumerate() {
        let word = u32::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
        bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
    }
    let ip = if v6 {
        unmap(Ipv6Addr::from(bytes))
    } else {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
pub(crate) fn format_endpoint(addr: SocketAddr) -> String {
    use std::fmt::Write as _;
    let words: Vec<[u8; 4]> = match addr.ip() {
        IpAddr::V4(v4) => vec![v4.octets()],
        IpAddr::V6(v6) => v6
            .octets()
            .chunks(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
    };
    let mut hex = String::new();
    for w in words {
        let _ = write!(hex, "{:08X}", u32::from_ne_bytes(w));
    }
    format!("{hex}:{:04X}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ipv4_listener_and_connection() {
        let listen = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 24518 1 0000000000000000 100 0 0 10 0";
        let l = parse_line(listen, false).unwrap();
        assert_eq!(l.local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(l.peer, "0.0.0.0:0".parse().unwrap());
        assert_eq!(l.state, STATE_LISTEN);
        let est = "   1: 0100007F:1F90 0100007F:AD6E 01 00000000:00000000 00:00000000 00000000     0        0 24519";
        let e = parse_line(est, false).unwrap();
        assert_eq!(e.peer, "127.0.0.1:44398".parse().unwrap());
        assert_eq!(e.state, STATE_ESTABLISHED);
    }

    #[test]
    fn ipv6_and_v4_mapped() {
        let any = "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1";
        assert_eq!(
            parse_line(any, true).unwrap().local,
            "[::]:8080".parse().unwrap()
        );
        let line = format!(
            "   1: {} {} 01 0",
            format_endpoint("[::ffff:10.1.2.3]:80".parse().unwrap()),
            format_endpoint("[2001:db8::1]:4242".parse().unwrap())
        );
        let e = parse_line(&line, true).unwrap();
        assert_eq!(e.local, "10.1.2.3:80".parse().unwrap());
        assert_eq!(e.peer, "[2001:db8::1]:4242".parse().unwrap());
    }

    #[test]
    fn header_and_garbage_are_skipped() {
        for line in [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
            "",
            "   0: 0100007F:1F90",
            "   0: 0100007F:1F90 00000000:0000",
            "   0: 0100007F:1F9 00000000:0000 0A",
            "   0: 0100007G:1F90 00000000:0000 0A",
            "   0: 0100007F:1F90 00000000:0000 XYZ",
            "   0: 0100007F1F90 00000000:0000 0A",
            "   0: 0100007F:+F90 00000000:0000 0A",
            "   0: é100007F:1F90 00000000:0000 0A",
        ] {
            assert_eq!(parse_line(line, false), None, "{line:?}");
        }
        // An IPv4 line read as IPv6 (and the reverse) is malformed too.
        assert_eq!(
            parse_line("   0: 0100007F:1F90 00000000:0000 0A", true),
            None
        );
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,200}", v6 in any::<bool>()) {
            let _ = parse_line(&line, v6);
        }

        #[test]
        fn never_panics_on_near_valid_lines(
            line in "[ 0-9:]{0,6}[0-9A-Fa-f:]{0,40} [0-9A-Fa-f:]{0,40} [0-9A-Fa-f]{0,3}.{0,20}",
            v6 in any::<bool>(),
        ) {
            let _ = parse_line(&line, v6);
        }

        #[test]
        fn round_trips(local in any::<std::net::SocketAddrV4>(), peer in any::<std::net::SocketAddrV6>(), st in 1u8..12) {
            let line = format!("  7: {} {} {st:02X} 0", format_endpoint(local.into()), format_endpoint(local.into()));
            let parsed = parse_line(&line, false).unwrap();
            prop_assert_eq!(parsed.local, SocketAddr::from(local));
            prop_assert_eq!(parsed.state, st);
            let line = format!("  7: {} {} {st:02X} 0", format_endpoint(peer.into()), format_endpoint(peer.into()));
            let parsed = parse_line(&line, true).unwrap();
            prop_assert_eq!(parsed.peer.ip(), unmap(*peer.ip()));
            prop_assert_eq!(parsed.peer.port(), peer.port());
        }
    }
}
