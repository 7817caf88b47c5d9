//! The kernel program's overhead, printed and never asserted
//! (docs/design/node-agent.md#kernel-program, "Overhead"):
//!
//! 1. loopback connect + accept + close rate without and with sockwatch attached, alternating
//!    rounds in one run, medians and the loss in percent;
//! 2. the program's own nanoseconds per run from the kernel's BPF statistics (enabled through
//!    a `BPF_ENABLE_STATS` descriptor held for the run, so the previous setting comes back
//!    whatever happens);
//! 3. events lost (DROPS) at about 10k and 50k connections/s and at the highest rate reached,
//!    draining the ring buffer every 100 ms as the agent does.
//!
//! `cargo bench -p pacto-node-agent --bench overhead` (root). Clients close with RST
//! (`SO_LINGER {on, 0}`), so no TIME_WAIT sockets pile up. `OVERHEAD_ROUNDS` (default 7) and
//! `OVERHEAD_SECONDS` (per measurement, default 1) tune the run.

use std::{
    net::{SocketAddr, TcpListener},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use pacto_node_agent::{
    facts::EventSource,
    kernel::{Collector, DEFAULT_BTF_PATH},
};
use socket2::{Domain, Socket, Type};

fn main() {
    if !pacto_testenv::privilege::is_root() {
        println!("overhead bench: skipped, needs root to load the eBPF program");
        return;
    }
    if let Err(e) = run() {
        println!("overhead bench: failed: {e}");
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run() -> Result<(), String> {
    let rounds = env_or("OVERHEAD_ROUNDS", 7).max(5);
    let secs = Duration::from_secs(env_or("OVERHEAD_SECONDS", 1).max(1));
    let before = stats_sysctl();
    let stats_fd = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .map_err(|e| format!("enable BPF stats: {e}"))?;
    println!(
        "kernel.bpf_stats_enabled: {before} before, {} while measuring (statistics come from a held BPF_ENABLE_STATS descriptor, which leaves the sysctl alone)",
        stats_sysctl()
    );

    let (mut none, mut attached) = (Vec::new(), Vec::new());
    let (mut run_ns, mut run_cnt, mut conns_attached) = (0u64, 0u64, 0u64);
    for round in 1..=rounds {
        let plain = load(secs, None, 1, None)?;
        let collector = Collector::start(Path::new(DEFAULT_BTF_PATH)).map_err(|e| e.to_string())?;
        let with = load(secs, None, 1, Some(collector))?;
        if let Some((ns, cnt)) = with.stats {
            run_ns += ns;
            run_cnt += cnt;
        }
        conns_attached += with.conns;
        println!(
            "round {round}: none {:>7.0} conn/s, attached {:>7.0} conn/s (events {}, drops {})",
            plain.rate, with.rate, with.events, with.drops
        );
        none.push(plain.rate);
        attached.push(with.rate);
    }
    let (m_none, m_with) = (median(&mut none), median(&mut attached));
    println!(
        "median: none {m_none:.0} conn/s, attached {m_with:.0} conn/s, ratio {:.3} (loss {:+.1}%)",
        m_with / m_none,
        (1.0 - m_with / m_none) * 100.0
    );
    if run_cnt > 0 {
        println!(
            "program: {:.0} ns per run, {:.1} runs per connection, {:.0} ns per connection",
            run_ns as f64 / run_cnt as f64,
            run_cnt as f64 / conns_attached.max(1) as f64,
            run_ns as f64 / conns_attached.max(1) as f64
        );
    } else {
        println!("program: no run statistics from the kernel");
    }

    for (label, rate, threads) in [
        ("~10k/s", Some(10_000.0), 1),
        ("~50k/s", Some(50_000.0), 2),
        ("max", None, 2),
    ] {
        let collector = Collector::start(Path::new(DEFAULT_BTF_PATH)).map_err(|e| e.to_string())?;
        let r = load(secs * 2, rate, threads, Some(collector))?;
        println!(
            "drops at {label}: reached {:.0} conn/s over {threads} thread(s), {} events drained every 100 ms, {} dropped",
            r.rate, r.events, r.drops
        );
    }
    // The counter works: without draining, a 1 MiB ring buffer fills after 14563 events.
    let collector = Collector::start(Path::new(DEFAULT_BTF_PATH)).map_err(|e| e.to_string())?;
    let r = load_draining(secs * 3, None, 2, Some(collector), false)?;
    println!(
        "drops without draining for {:?}: {:.0} conn/s, {} events kept, {} dropped",
        secs * 3,
        r.rate,
        r.events,
        r.drops
    );
    drop(stats_fd);
    println!(
        "kernel.bpf_stats_enabled: {} after the descriptor closed (unchanged)",
        stats_sysctl()
    );
    Ok(())
}

fn stats_sysctl() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .map_or_else(|e| format!("unreadable ({e})"), |v| v.trim().to_string())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct Outcome {
    rate: f64,
    conns: u64,
    events: u64,
    drops: u64,
    stats: Option<(u64, u64)>,
}

/// Runs connect + accept + close loops on `threads` threads for `duration`, at about `rate`
/// connections/s in total (None: as fast as possible), with the collector (if any) drained
/// every 100 ms on its own thread.
fn load(
    duration: Duration,
    rate: Option<f64>,
    threads: u32,
    collector: Option<Collector>,
) -> Result<Outcome, String> {
    load_draining(duration, rate, threads, collector, true)
}

/// [`load`], draining every 100 ms (`drain`) or only once at the end.
fn load_draining(
    duration: Duration,
    rate: Option<f64>,
    threads: u32,
    collector: Option<Collector>,
    drain: bool,
) -> Result<Outcome, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats_before = collector
        .as_ref()
        .and_then(Collector::program_stats)
        .unwrap_or((0, 0));
    let drainer = collector.map(|mut c| {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut events = 0u64;
            let mut batch = Vec::new();
            loop {
                let last = stop.load(Ordering::Relaxed);
                if !drain && !last {
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
                c.drain(&mut batch);
                events += batch.len() as u64;
                batch.clear();
                if last {
                    return (c, events);
                }
                thread::sleep(Duration::from_millis(100));
            }
        })
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let per_thread = rate.map(|r| r / f64::from(threads));
            thread::spawn(move || connections(duration, per_thread))
        })
        .collect();
    let mut conns = 0;
    let mut failure = None;
    for w in workers {
        match w.join() {
            Ok(Ok(n)) => conns += n,
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some("a load thread panicked".to_string()),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (events, drops, stats) = match drainer {
        Some(d) => {
            let (c, events) = d
                .join()
                .map_err(|_| "the drain thread panicked".to_string())?;
            let stats = c.program_stats().map(|(ns, cnt)| {
                (
                    ns.saturating_sub(stats_before.0),
                    cnt.saturating_sub(stats_before.1),
                )
            });
            (events, c.drops(), stats)
        }
        None => (0, 0, None),
    };
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Outcome {
        rate: conns as f64 / elapsed,
        conns,
        events,
        drops,
        stats,
    })
}

/// One thread's loop: its own listener on 127.0.0.1, blocking sockets, clients closed with RST.
fn connections(duration: Duration, rate: Option<f64>) -> Result<u64, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr: SocketAddr = listener.local_addr().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < duration {
        for _ in 0..32 {
            let client =
                Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| e.to_string())?;
            client
                .connect(&addr.into())
                .map_err(|e| format!("connect: {e}"))?;
            let (accepted, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
            client
                .set_linger(Some(Duration::ZERO))
                .map_err(|e| e.to_string())?;
            drop(client);
            drop(accepted);
            n += 1;
        }
        if let Some(rate) = rate {
            let due = Duration::from_secs_f64(n as f64 / rate);
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                thread::sleep(ahead);
            }
        }
    }
    Ok(n)
}
