//! The memory plan (docs/design/resolution.md#memory): the container's memory limit
//! (`--memory-limit`, which the chart sets from `resources.limits.memory`) split into a fixed
//! reserve, concurrent bundle pulls, concurrent validations and the caches, each at its worst
//! case, so that their sum never exceeds the limit.

use std::fmt;

const MIB: u64 = 1024 * 1024;

/// The process itself: its idle resident set (23 MiB measured for a debug build), the runtime's
/// and TLS buffers, the 16,384 remembered tag digests, gRPC messages of the calls in flight and
/// allocator slack.
pub const RESERVE_BYTES: u64 = 48 * MIB;

/// One validation at its worst: a `pacto.yaml` at the token ceiling, then an interface document
/// at the document ceiling while the contract is held, the JSON Schema budget, the effective
/// YAML. The worst measured is 42.5 MiB (`cargo run --release -p pacto-contract --features
/// test-support --example yaml_bomb_rss`, docs/design/contract.md#yaml-limits).
pub const VALIDATION_BYTES: u64 = 48 * MIB;

/// Per bundle pull besides its layer and its files: the tar entries' names and map nodes (up to
/// 10,000 entries), the decompressor, the HTTP body buffers.
pub const PULL_OVERHEAD_BYTES: u64 = 4 * MIB;

/// Most validations at once (the status-writer's default concurrent reconciles).
pub const MAX_CONCURRENT_VALIDATIONS: usize = 16;

/// Most pulls at once, whatever the memory.
pub const MAX_CONCURRENT_PULLS: usize = 8;

/// The tag-list cache's share: at most this, or a sixty-fourth of what the reserve leaves.
pub const MAX_TAGS_CACHE_BYTES: u64 = 64 * MIB;

/// What the plan is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanInput {
    /// The container's memory limit, in bytes.
    pub limit: u64,
    /// Largest accepted layer (`--max-bundle-bytes`).
    pub max_layer_bytes: u64,
    /// Most bytes of files a layer may expand to (the extraction limit).
    pub max_files_bytes: u64,
    /// `--max-concurrent-pulls`, when given.
    pub pulls: Option<usize>,
    /// `--bundle-cache-bytes`, when given.
    pub cache_bytes: Option<u64>,
}

/// How the memory limit is spent (docs/design/resolution.md#memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    /// The container's memory limit, in bytes.
    pub limit: u64,
    /// The process itself ([`RESERVE_BYTES`]).
    pub reserve: u64,
    /// What one pull holds at most: the layer, its files and [`PULL_OVERHEAD_BYTES`].
    pub pull_bytes: u64,
    /// Pulls at once.
    pub concurrent_pulls: usize,
    /// What one validation (a parse of `pacto.yaml` and the documents it names) holds at most.
    pub validation_bytes: u64,
    /// Validations at once.
    pub concurrent_parses: usize,
    /// Bytes of tag lists cached.
    pub tags_cache_bytes: u64,
    /// Bytes of (validated, trimmed) bundles cached.
    pub bundle_cache_bytes: u64,
}

impl MemoryPlan {
    /// Splits `input.limit`: the reserve first; then as many pulls as half of the rest holds
    /// (at least one, at most [`MAX_CONCURRENT_PULLS`] or `--max-concurrent-pulls`); as many
    /// validations as half of what is left holds (at least one, at most
    /// [`MAX_CONCURRENT_VALIDATIONS`]); the tag-list cache; and the bundle cache gets the rest
    /// (or `--bundle-cache-bytes`). A limit too small for one of each gives a plan whose
    /// [`MemoryPlan::total`] is over it, which the resolver refuses at start-up.
    pub fn derive(input: &PlanInput) -> Self {
        let reserve = RESERVE_BYTES;
        let pull_bytes = input
            .max_layer_bytes
            .saturating_add(input.max_files_bytes)
            .saturating_add(PULL_OVERHEAD_BYTES);
        let available = input.limit.saturating_sub(reserve);
        let concurrent_pulls = input.pulls.unwrap_or_else(|| {
            usize::try_from(available / 2 / pull_bytes.max(1))
                .unwrap_or(usize::MAX)
                .clamp(1, MAX_CONCURRENT_PULLS)
        });
        let after_pulls =
            available.saturating_sub(pull_bytes.saturating_mul(concurrent_pulls as u64));
        let validation_bytes = VALIDATION_BYTES;
        let concurrent_parses = usize::try_from(after_pulls / 2 / validation_bytes)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_CONCURRENT_VALIDATIONS);
        let after_parses =
            after_pulls.saturating_sub(validation_bytes.saturating_mul(concurrent_parses as u64));
        let tags_cache_bytes = (after_parses / 8).min(MAX_TAGS_CACHE_BYTES);
        let bundle_cache_bytes = input
            .cache_bytes
            .unwrap_or_else(|| after_parses.saturating_sub(tags_cache_bytes));
        Self {
            limit: input.limit,
            reserve,
            pull_bytes,
            concurrent_pulls,
            validation_bytes,
            concurrent_parses,
            tags_cache_bytes,
            bundle_cache_bytes,
        }
    }

    /// The sum of every budget: the most the resolver can hold.
    pub fn total(&self) -> u64 {
        self.reserve
            .saturating_add(self.pull_bytes.saturating_mul(self.concurrent_pulls as u64))
            .saturating_add(
                self.validation_bytes
                    .saturating_mul(self.concurrent_parses as u64),
            )
            .saturating_add(self.tags_cache_bytes)
            .saturating_add(self.bundle_cache_bytes)
    }

    /// Whether the budgets fit the limit.
    pub fn fits(&self) -> bool {
        self.total() <= self.limit
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / MIB as f64;
        write!(
            f,
            "memory limit {:.1} MiB = reserve {:.1} + {} pulls x {:.1} + {} validations x {:.1} \
             + tag lists {:.1} + bundle cache {:.1} (sum {:.1} MiB)",
            mib(self.limit),
            mib(self.reserve),
            self.concurrent_pulls,
            mib(self.pull_bytes),
            self.concurrent_parses,
            mib(self.validation_bytes),
            mib(self.tags_cache_bytes),
            mib(self.bundle_cache_bytes),
            mib(self.total())
        )
    }
}

/// Parses a Kubernetes memory quantity: plain bytes, or a number with a binary (`Ki`, `Mi`,
/// `Gi`, `Ti`) or decimal (`k`, `M`, `G`, `T`) suffix.
pub fn parse_quantity(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a memory quantity such as 256Mi"))?;
    let unit: u64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "{text:?}: unknown suffix {other:?} (use Ki, Mi, Gi, Ti, k, M, G or T)"
            ));
        }
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(limit: u64) -> PlanInput {
        PlanInput {
            limit,
            max_layer_bytes: 50 * MIB,
            max_files_bytes: 50 * MIB,
            pulls: None,
            cache_bytes: None,
        }
    }

    #[test]
    fn the_default_limit_is_split_within_itself() {
        let plan = MemoryPlan::derive(&input(256 * MIB));
        assert!(plan.fits(), "{plan}");
        assert_eq!(plan.concurrent_pulls, 1, "{plan}");
        assert_eq!(plan.concurrent_parses, 1, "{plan}");
        assert!(plan.bundle_cache_bytes >= 32 * MIB, "{plan}");
        // More memory, more of everything, still within it.
        let big = MemoryPlan::derive(&input(2048 * MIB));
        assert!(big.fits(), "{big}");
        assert!(
            big.concurrent_pulls > 1 && big.concurrent_parses > 1,
            "{big}"
        );
        // Explicit values over the limit make a plan that does not fit (refused at start-up).
        let over = MemoryPlan::derive(&PlanInput {
            pulls: Some(8),
            ..input(256 * MIB)
        });
        assert!(!over.fits(), "{over}");
        assert!(!MemoryPlan::derive(&input(64 * MIB)).fits());
    }

    #[test]
    fn quantities_parse() {
        assert_eq!(parse_quantity("256Mi"), Ok(256 * MIB));
        assert_eq!(parse_quantity("1Gi"), Ok(1024 * MIB));
        assert_eq!(parse_quantity("300M"), Ok(300_000_000));
        assert_eq!(parse_quantity("1048576"), Ok(MIB));
        assert!(parse_quantity("12Xi").is_err());
        assert!(parse_quantity("Mi").is_err());
    }
}
