#!/usr/bin/env bash
# Builds and runs every fuzz target of fuzz/ (a cargo-fuzz project, see fuzz/README.md) under a
# memory limit, and fails on any crash, out-of-memory or timeout.
#
#   scripts/fuzz.sh                      build, then the gate: every target, a fixed seed and a fixed
#                                        number of runs (its depth never depends on the machine's
#                                        speed; coverage feedback still varies run to run, fuzz/README.md)
#   scripts/fuzz.sh [TARGET...]          the gate for some targets
#   scripts/fuzz.sh --explore SECONDS [TARGET...]
#                                        time-boxed exploration with a random seed (not a gate: its
#                                        result depends on the machine and the clock); run it locally
#   scripts/fuzz.sh --build-only         build only
#   scripts/fuzz.sh --list               print the targets
#
# Each run starts from the committed corpus fuzz/seeds/<target> and the kept crash inputs
# fuzz/regressions/<target> (both read only; new inputs go to a scratch corpus under the target
# directory) and prints its executions and wall time. A failing input is saved to
# fuzz/artifacts/<target>/ and the run's last lines are printed; keep it as a regression case by
# copying it into fuzz/regressions/<target>/ (`cargo test -p pacto-fuzz-checks` then replays it
# on the stable toolchain), and reproduce it with
# `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>` from the repository root.
#
# Installs what it needs when missing: the nightly toolchain (rustup, minimal profile) and cargo-fuzz
# (pinned version, into $PACTO_CACHE/cargo-fuzz/<version>, reused afterwards).
#
# Environment:
#   PACTO_FUZZ_SEED        libFuzzer -seed of the gate (default 1)
#   PACTO_FUZZ_RUNS_SCALE  multiplies every target's gate run count (default 1; 10 for a deeper,
#                          still deterministic run)
#   PACTO_FUZZ_RSS_MB      libFuzzer -rss_limit_mb (default 256): an input that makes the process
#                          use more memory is reported as out-of-memory
#   PACTO_FUZZ_MALLOC_MB   libFuzzer -malloc_limit_mb (default 256): one allocation that large fails
#   PACTO_FUZZ_TIMEOUT     libFuzzer -timeout, seconds per input (default 10)
#   PACTO_FUZZ_TOOLCHAIN   toolchain for the build (default nightly)
#   PACTO_FUZZ_TARGET_DIR  cargo target directory (default target/fuzz)
#   PACTO_CACHE            cache root (default $HOME/.cache/pacto)
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION="0.13.2"
SEED="${PACTO_FUZZ_SEED:-1}"
RUNS_SCALE="${PACTO_FUZZ_RUNS_SCALE:-1}"
EXPLORE_SECONDS=""
RSS_MB="${PACTO_FUZZ_RSS_MB:-256}"
MALLOC_MB="${PACTO_FUZZ_MALLOC_MB:-256}"
TIMEOUT="${PACTO_FUZZ_TIMEOUT:-10}"
TOOLCHAIN="${PACTO_FUZZ_TOOLCHAIN:-nightly}"
TARGET_DIR="$(pwd)/${PACTO_FUZZ_TARGET_DIR:-target/fuzz}"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
TOOL_ROOT="$CACHE/cargo-fuzz/$CARGO_FUZZ_VERSION"
export PATH="$HOME/.cargo/bin:$PATH"

# target  max input length  gate runs  extra libFuzzer flags
# The gate's run counts give each target 10-90 s on our 2-core machine under load (fuzz/README.md
# has the measurement); they are counts, not times, so a slow machine takes longer, never less deep.
TARGETS=(
  "parse_validate 20480 RUNS_parse_validate -dict=fuzz/pacto.dict"
  "extract_bundle 65536 RUNS_extract_bundle"
  "registry_manifest 65536 RUNS_registry_manifest"
  "registry_tag_list 65536 RUNS_registry_tag_list"
  "registry_layer 131072 RUNS_registry_layer"
  "grpc_requests 16384 RUNS_grpc_requests"
  "evidence_envelope 65536 RUNS_evidence_envelope -dict=fuzz/pacto.dict"
  "evidence_record 65536 RUNS_evidence_record -dict=fuzz/pacto.dict"
)

RUNS_parse_validate=3000
RUNS_extract_bundle=100000
RUNS_registry_manifest=200000
RUNS_registry_tag_list=40000
RUNS_registry_layer=50000
RUNS_grpc_requests=200000
RUNS_evidence_envelope=40000
RUNS_evidence_record=100000

log() { echo "fuzz: $*" >&2; }
die() { echo "fuzz: error: $*" >&2; exit 1; }

build_only=0
selected=()
while [ $# -gt 0 ]; do
  case "$1" in
    --explore) EXPLORE_SECONDS="${2:?--explore needs a number of seconds}"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --list) for t in "${TARGETS[@]}"; do echo "${t%% *}"; done; exit 0 ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) selected+=("$1"); shift ;;
  esac
done
for name in "${selected[@]}"; do
  found=0
  for t in "${TARGETS[@]}"; do [ "${t%% *}" = "$name" ] && found=1; done
  [ "$found" = 1 ] || die "no fuzz target $name (scripts/fuzz.sh --list)"
done
wanted() {
  [ "${#selected[@]}" = 0 ] && return 0
  local s
  for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

# --- tools -----------------------------------------------------------------------------------
if ! rustup run "$TOOLCHAIN" rustc --version >/dev/null 2>&1; then
  log "installing the $TOOLCHAIN toolchain (rustup, minimal profile)"
  rustup toolchain install "$TOOLCHAIN" --profile minimal >&2
fi
if [ ! -x "$TOOL_ROOT/bin/cargo-fuzz" ]; then
  log "installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOL_ROOT"
  mkdir -p "$TOOL_ROOT"
  (cd "$TOOL_ROOT" && cargo +"$TOOLCHAIN" install cargo-fuzz --version "$CARGO_FUZZ_VERSION" \
    --locked --root "$TOOL_ROOT" >&2)
fi
export PATH="$TOOL_ROOT/bin:$PATH"
log "$(rustup run "$TOOLCHAIN" rustc --version), $(cargo-fuzz --version)"

# --- build -----------------------------------------------------------------------------------
# The fuzz project pins the workspace's dependency versions: its lock file starts as a copy of the
# workspace's (git-ignored; cargo adds the fuzz-only crates).
cp Cargo.lock fuzz/Cargo.lock
# Optimisation level 1 and 16 codegen units: a much cheaper build than cargo-fuzz's default
# (level 3, one unit), for somewhat fewer executions per second (fuzz/README.md).
build() {
  (cd fuzz && CARGO_INCREMENTAL=0 CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    cargo +"$TOOLCHAIN" fuzz build -O --debug-assertions --codegen-units 16 \
      --target-dir "$TARGET_DIR" "$@")
}
build_started=$SECONDS
if [ "${#selected[@]}" = 0 ]; then
  build
else
  for name in "${selected[@]}"; do build "$name"; done
fi
log "build: $((SECONDS - build_started)) s"
[ "$build_only" = 1 ] && exit 0

# --- run -------------------------------------------------------------------------------------
# AddressSanitizer keeps freed memory in a quarantine (256 MiB by default), which alone would
# exceed the RSS limit after enough runs; a small one keeps the limit about the input.
export ASAN_OPTIONS="quarantine_size_mb=16:allocator_release_to_os_interval_ms=500${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
triple="$(rustup run "$TOOLCHAIN" rustc -vV | sed -n 's/^host: //p')"
bin_dir="$TARGET_DIR/$triple/release"
failed=()
summary=()
for entry in "${TARGETS[@]}"; do
  read -r name max_len runs_gate extra <<<"$entry"
  wanted "$name" || continue
  corpus="$TARGET_DIR/corpus/$name"
  artifacts="fuzz/artifacts/$name"
  output="$TARGET_DIR/logs/$name.log"
  rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$output")"
  inputs=("fuzz/seeds/$name")
  [ -d "fuzz/regressions/$name" ] && inputs+=("fuzz/regressions/$name")
  if [ -n "$EXPLORE_SECONDS" ]; then
    mode=(-max_total_time="$EXPLORE_SECONDS")
    log "exploring $name for $EXPLORE_SECONDS s, random seed (rss ${RSS_MB} MiB, malloc ${MALLOC_MB} MiB, timeout ${TIMEOUT} s)"
  else
    runs=$(( ${!runs_gate} * RUNS_SCALE ))
    mode=(-seed="$SEED" -runs="$runs")
    log "running $name: seed $SEED, $runs runs (rss ${RSS_MB} MiB, malloc ${MALLOC_MB} MiB, timeout ${TIMEOUT} s)"
  fi
  started="$(date +%s.%N)"
  rc=0
  # shellcheck disable=SC2086 # $extra is a list of flags
  "$bin_dir/$name" "$corpus" "${inputs[@]}" "${mode[@]}" \
    -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB" \
    -timeout="$TIMEOUT" -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" $extra >"$output" 2>&1 || rc=$?
  wall="$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  done_runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$output" | tail -1)"
  line="$(printf '%-18s runs %-10s wall %6s s' "$name" "${done_runs:-?}" "$wall")"
  if [ "$rc" = 0 ]; then
    summary+=("$line  ok")
  else
    summary+=("$line  FAILED (exit $rc)")
    failed+=("$name")
    echo "----- $name: last lines of $output" >&2
    grep -E 'ERROR: libFuzzer|==ERROR|panicked at|SUMMARY|Test unit written' "$output" >&2 || true
    tail -n 25 "$output" >&2
    echo "----- keep the input as a regression case: cp $artifacts/<file> fuzz/regressions/$name/" >&2
  fi
done
printf '%s\n' "${summary[@]}" >&2
if [ "${#failed[@]}" -gt 0 ]; then
  die "${#failed[@]} fuzz target(s) failed: ${failed[*]} (inputs in fuzz/artifacts/)"
fi
log "all targets passed"
