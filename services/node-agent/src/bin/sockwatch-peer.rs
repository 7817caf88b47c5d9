//! A tiny TCP peer for the privileged tests (tests/privileged.rs), started inside a test
//! network namespace and cgroup:
//!
//! - `sockwatch-peer serve <ip>`: listens on `<ip>:0`, prints `listening <port>`, accepts and
//!   closes connections until its stdin closes, then exits (closing the listener).
//! - `sockwatch-peer connect <ip:port>`: connects, prints `connected <local port>`, exits.
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::ExitCode,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["serve", ip] => serve(ip),
        ["connect", addr] => connect(addr),
        _ => Err("usage: sockwatch-peer serve <ip> | connect <ip:port>".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sockwatch-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(ip: &str) -> Result<(), String> {
    let ip: std::net::IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
    let listener = TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    println!("listening {port}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    // Wait for the test to close stdin; exiting closes the listener.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    Ok(())
}

fn connect(addr: &str) -> Result<(), String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    let port = stream.local_addr().map_err(|e| e.to_string())?.port();
    println!("connected {port}");
    Ok(())
}
