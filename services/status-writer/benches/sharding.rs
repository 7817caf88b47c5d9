//! Simulation of sharded status-writer leaders (docs/design/scaling.md#simulation): the
//! assignment logic of `shard` (`sharding/shard.rs`) run over N Pactos (default 100,000) through
//! the shard counts 1 -> 2 -> 3 -> 4 -> 8 -> 7 -> 8 and the loss of one shard's leader. For each
//! step it prints the Pactos that change shard (count, % and the ideal %), the largest and mean
//! load per shard, the rebalance time (the assignment under both counts and the moves) and the
//! handoff plan's length. No cluster, no network: only the pure functions.
//!
//! `cargo bench -p pacto-status-writer --bench sharding [-- N]`

#![allow(clippy::expect_used, reason = "bench")]

use std::time::{Duration, Instant};

#[allow(
    dead_code,
    reason = "the module's tests run as the `sharding` test target"
)]
#[path = "sharding/shard.rs"]
mod shard;

use shard::{
    HandoffPlan, HandoffStep, LeaseView, Ownership, ShardCount, ShardKey, handoff_plan,
    ideal_moved_fraction, loads, owner, shard_of, takeover_plan,
};

fn count(n: u32) -> ShardCount {
    ShardCount::new(n).expect("a valid shard count")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Pactos held back at the worst moment of a handoff: the shards Pactos move to have recorded
/// the new count, the shards they leave have not yet (growing: the added shards are new, the
/// kept ones old; shrinking: the kept shards are new, the retired ones old).
fn held_back_at_worst(keys: &[ShardKey], plan: &HandoffPlan) -> usize {
    let (from, to) = (plan.from, plan.to);
    let growing = to > from;
    let view: Vec<LeaseView> = (0..from.get().max(to.get()))
        .map(|shard| {
            let kept = shard < from.get() && shard < to.get();
            let recorded = if shard >= from.get() || (kept && !growing) {
                to
            } else {
                from
            };
            LeaseView {
                shard,
                count: recorded,
                live: true,
            }
        })
        .collect();
    keys.iter()
        .filter(|key| owner(**key, &view) == Ownership::HeldBack)
        .count()
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);

    let started = Instant::now();
    let keys: Vec<ShardKey> = (0..n)
        .map(|i| {
            ShardKey::new(&format!("team-{}", i % 500), &format!("svc-{i}")).expect("a valid key")
        })
        .collect();
    let hashing = started.elapsed();
    println!(
        "{n} Pactos in 500 namespaces; keys hashed (SHA-256 of namespace/name) in {:.1} ms ({:.0} ns per Pacto, once per Pacto seen)",
        ms(hashing),
        hashing.as_secs_f64() * 1e9 / n as f64
    );
    println!();
    println!(
        "{:<22} {:>8} {:>8} {:>8} {:>10} {:>9} {:>12} {:>6} {:>10}",
        "step",
        "moved",
        "moved%",
        "ideal%",
        "max load",
        "max/mean",
        "rebalance ms",
        "plan",
        "held back"
    );

    let sequence = [1u32, 2, 3, 4, 8, 7, 8];
    for pair in sequence.windows(2) {
        let (from, to) = (count(pair[0]), count(pair[1]));
        let started = Instant::now();
        // The assignment under the new count, then the moves and the plan.
        let after = loads(&keys, to);
        let plan = handoff_plan(&keys, from, to);
        let rebalance = started.elapsed();
        let moved = plan.moves.len();
        let max = after.iter().copied().max().unwrap_or(0);
        let mean = n as f64 / f64::from(to.get());
        println!(
            "{:<22} {:>8} {:>7.2}% {:>7.2}% {:>10} {:>9.3} {:>12.1} {:>6} {:>10}",
            format!("{} -> {} shards", from.get(), to.get()),
            moved,
            100.0 * moved as f64 / n as f64,
            100.0 * ideal_moved_fraction(from, to),
            max,
            max as f64 / mean,
            ms(rebalance),
            plan.steps.len(),
            held_back_at_worst(&keys, &plan),
        );
    }

    // The leader of one shard lost at 8 shards: its Lease expires and another replica takes it;
    // the count stays, so no Pacto changes shard, but that shard's Pactos wait for the takeover.
    let at = count(8);
    let lost = 3;
    let started = Instant::now();
    let after = loads(&keys, at);
    let plan = takeover_plan(&keys, at, lost).expect("shard 3 of 8 exists");
    let rebalance = started.elapsed();
    let waiting = match plan.steps.first() {
        Some(HandoffStep::Takeover { pactos, .. }) => *pactos,
        _ => 0,
    };
    let max = after.iter().copied().max().unwrap_or(0);
    println!(
        "{:<22} {:>8} {:>7.2}% {:>7.2}% {:>10} {:>9.3} {:>12.1} {:>6} {:>10}",
        format!("8, leader {lost} lost"),
        plan.moves.len(),
        0.0,
        0.0,
        max,
        max as f64 / (n as f64 / 8.0),
        ms(rebalance),
        plan.steps.len(),
        0,
    );
    println!(
        "  (leader of shard {lost} lost: {waiting} Pactos ({:.2}%) wait until another replica takes its Lease, one lease duration after the last renewal plus one retry period at most; none changes shard)",
        100.0 * waiting as f64 / n as f64
    );

    // The lookup the controller would do per Pacto event.
    let started = Instant::now();
    let mut sum = 0u64;
    for key in &keys {
        sum += u64::from(shard_of(*key, at));
    }
    let lookup = started.elapsed();
    println!();
    println!(
        "one shard lookup (8 shards, key already hashed): {:.1} ns (checksum {sum})",
        lookup.as_secs_f64() * 1e9 / n as f64
    );
    println!(
        "columns: moved = Pactos whose shard changes; ideal = |S - S'| / max(S, S'); max load = Pactos on the fullest shard after the step; \
         rebalance = assignment under the new count + moves + plan; plan = handoff steps (claims, recounts, retirements, adoptions / takeover); \
         held back = Pactos nobody writes at the worst moment of the handoff (the shards they go to recorded the new count, the shards they leave not yet)"
    );
}
