//! Free TCP ports for the servers a test starts (every helper server and every service process).
//!
//! Binding `127.0.0.1:0` and handing the number to a child process races twice: the kernel gives
//! that port out again as the local port of the next outgoing connection (a test opens thousands:
//! API server watches, registry pulls, scrapes), and a parallel test of the same binary may be
//! given the same number. Either way the child fails with "Address already in use" at start-up,
//! a failure that depends on timing, not on the code under test (docs/testing.md, "Ports").
//!
//! So ports come from [`RANGE`], below the kernel's ephemeral range (never an outgoing
//! connection's local port) and outside the NodePort range, handed out by one counter
//! per process (never twice in one test binary), starting at an offset derived from the process id
//! (test binaries running one after another start in different places), and each is checked by
//! binding it on every address it will be used on before it is returned.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where ports come from: below Linux's default ephemeral range (32768–60999, see
/// `/proc/sys/net/ipv4/ip_local_port_range`), and not the Kubernetes NodePort range (30000–32767).
pub const RANGE: std::ops::Range<u16> = 20000..30000;

/// The next candidate's position in [`RANGE`] (an offset added to the process's start offset).
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A port on 127.0.0.1 that nothing listens on now and that no other caller in this process gets.
pub fn free_port() -> io::Result<u16> {
    free_port_on(&[Ipv4Addr::LOCALHOST])
}

/// [`free_port`] as `127.0.0.1:<port>`.
pub fn free_addr() -> io::Result<SocketAddr> {
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?)))
}

/// A port free on every address of `ips` at once (replicas that share one port on several loopback
/// addresses), that no other caller in this process gets.
pub fn free_port_on(ips: &[Ipv4Addr]) -> io::Result<u16> {
    let mut last = None;
    for _ in RANGE {
        let port = candidate(NEXT.fetch_add(1, Ordering::Relaxed));
        match bindable(ips, port) {
            Ok(()) => return Ok(port),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::AddrInUse, "no port left")))
}

/// The `n`th port this process tries: [`RANGE`] walked from an offset derived from the process id.
fn candidate(n: usize) -> u16 {
    let span = usize::from(RANGE.end - RANGE.start);
    let start = usize::try_from(std::process::id())
        .unwrap_or(0)
        .wrapping_mul(7919);
    let position = start.wrapping_add(n) % span;
    RANGE.start + u16::try_from(position).unwrap_or(0)
}

fn bindable(ips: &[Ipv4Addr], port: u16) -> io::Result<()> {
    // Held together, then released together: each must be free while the others are bound.
    let _held = ips
        .iter()
        .map(|ip| TcpListener::bind((IpAddr::V4(*ip), port)))
        .collect::<io::Result<Vec<_>>>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_in_range_and_skip_ports_in_use() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let port = free_port().unwrap();
            assert!(RANGE.contains(&port), "{port} outside {RANGE:?}");
            assert!(seen.insert(port), "{port} handed out twice");
        }
        // A port in use is skipped: hold the next candidate, then ask.
        let busy = candidate(NEXT.load(Ordering::Relaxed));
        if let Ok(_occupied) = TcpListener::bind((Ipv4Addr::LOCALHOST, busy)) {
            let port = free_port().unwrap();
            assert_ne!(port, busy, "a port somebody listens on was handed out");
        }
    }

    #[test]
    fn a_port_for_several_addresses_is_free_on_each() {
        let ips = [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3)];
        let port = free_port_on(&ips).unwrap();
        for ip in ips {
            TcpListener::bind((ip, port)).unwrap();
        }
    }
}
