#!/usr/bin/env bash
# The arm64 smoke test (docs/images.md#architectures): builds the CLI and the node agent for
# aarch64-unknown-linux-gnu with Debian's cross toolchain (scripts/cross.sh), runs them under
# qemu-user, and checks the node agent's kernel program against the BTF of Debian's arm64 kernel.
#
#   scripts/arm64-smoke.sh
#
# Checks, each failing the script:
#   1. both binaries are AArch64 ELF executables;
#   2. `pacto --version` prints the crate's version;
#   3. `pacto validate` of a valid fixture contract says valid (exit 0), and of an invalid one names
#      its error codes (exit 1);
#   4. the node agent without a Kubernetes configuration exits 1 with an error line naming it (then
#      its causes), no panic;
#   5. the node agent with --btf-path=/nonexistent (a kubeconfig naming a closed local port, so no
#      cluster is needed) publishes collection Failed/BTFUnavailable naming the path, as on a node
#      without BTF (docs/design/node-agent.md#kernel-program), and stops cleanly (exit 0) on SIGTERM;
#   6. the kernel object built for aarch64 is byte-identical to the committed one (the one the
#      x86-64 tests load), and every CO-RE relocation in it resolves against the vmlinux BTF of
#      Debian's current arm64 kernel (bpftool gen min_core_btf), but the pre-5.15 cgroup flavour,
#      which must not; the tp_btf target btf_trace_inet_sock_set_state is there with 4 arguments.
#      The BTF is read out of the kernel image in Debian's linux-image-*-arm64-unsigned package
#      (fetched once with private apt lists, cached under ~/.cache/pacto/arm64-btf).
#
# Needs: scripts/install-deps.sh --arm64-smoke (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross,
# qemu-user, bpftool) and the Rust target (added by scripts/cross.sh). Without them it prints one
# "skipped" line and passes, except under CI (CI=1 or true), where it fails. The build is a debug
# build in the workspace's target directory (target/aarch64-unknown-linux-gnu/debug), so a second
# run rebuilds nothing. The last line gives the wall time of each part.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TRIPLE=aarch64-unknown-linux-gnu
SYSROOT=/usr/aarch64-linux-gnu
log() { echo "arm64-smoke: $*" >&2; }
die() { printf "arm64-smoke: FAILED: %b\n" "$*" >&2; exit 1; }
in_ci() { case "${CI:-}" in 1 | true) return 0 ;; *) return 1 ;; esac; }

# ---------------------------------------------------------------- tools
gaps="$(CROSS_NEED_QEMU=1 "$REPO/scripts/cross.sh" check "$TRIPLE" || true)"
command -v bpftool >/dev/null 2>&1 || gaps="${gaps:+$gaps; }bpftool (Debian: bpftool)"
if [ -n "$gaps" ]; then
  if in_ci; then die "$gaps (scripts/install-deps.sh --arm64-smoke)"; fi
  echo "arm64-smoke: skipped: $gaps (scripts/install-deps.sh --arm64-smoke)"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pacto-arm64-smoke.XXXXXX")"
agent_pid=""
cleanup() {
  if [ -n "$agent_pid" ]; then kill "$agent_pid" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
qemu() { qemu-aarch64 -L "$SYSROOT" "$@"; }
started=$SECONDS

# ---------------------------------------------------------------- build
target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
case "$target_dir" in /*) ;; *) target_dir="$REPO/$target_dir" ;; esac
bin_dir="$target_dir/$TRIPLE/debug"
log "cargo build --target $TRIPLE -p pacto -p pacto-node-agent (debug)"
(cd "$REPO" && "$REPO/scripts/cross.sh" run "$TRIPLE" \
  cargo build --locked --target "$TRIPLE" -p pacto -p pacto-node-agent) || die "the aarch64 build failed"
build_s=$((SECONDS - started))
pacto="$bin_dir/pacto" agent="$bin_dir/pacto-node-agent"

# ---------------------------------------------------------------- 1. the binaries
for b in "$pacto" "$agent"; do
  machine="$(readelf -h "$b" | sed -n 's/^ *Machine: *//p')"
  [ "$machine" = AArch64 ] || die "$b is built for '$machine', not AArch64"
done
log "1. pacto and pacto-node-agent are AArch64 executables"
runs_started=$SECONDS

# ---------------------------------------------------------------- 2. pacto --version
version="$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$REPO/services/cli/Cargo.toml" | head -1)"
out="$(qemu "$pacto" --version)" || die "pacto --version under qemu-aarch64 failed"
[ "$out" = "pacto $version" ] || die "pacto --version printed '$out', not 'pacto $version'"
log "2. qemu-aarch64 pacto --version: $out"

# ---------------------------------------------------------------- 3. pacto validate
valid="tests/fixtures/contracts/valid/local-policy-satisfied"
invalid="tests/fixtures/contracts/invalid/config-values-fail-schema"
out="$(cd "$REPO" && qemu "$pacto" validate "$valid" 2>&1)" || die "pacto validate $valid failed:\n$out"
[ "$out" = "$valid: valid (0 errors, 0 warnings)" ] || die "pacto validate $valid printed:\n$out"
log "3. qemu-aarch64 pacto validate $valid: $out"
set +e
out="$(cd "$REPO" && qemu "$pacto" validate "$invalid" 2>&1)"
rc=$?
set -e
[ "$rc" = 1 ] || die "pacto validate $invalid exited $rc, not 1:\n$out"
grep -q 'CONFIG_VALUES_VALIDATION_FAILED' <<<"$out" || die "pacto validate $invalid did not name CONFIG_VALUES_VALIDATION_FAILED:\n$out"
log "3. qemu-aarch64 pacto validate $invalid: exit 1, $(head -1 <<<"$out")"

# ---------------------------------------------------------------- 4. the agent without Kubernetes
agent_args=(--node-name arm64-smoke --btf-path /nonexistent --observer-addr 127.0.0.1:1
  --admin-addr 127.0.0.1:0 --insecure --log-format json)
set +e
out="$(env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE HOME="$WORK" \
  qemu-aarch64 -L "$SYSROOT" "$agent" "${agent_args[@]}" 2>&1)"
rc=$?
set -e
[ "$rc" = 1 ] || die "the agent without a Kubernetes configuration exited $rc, not 1:\n$out"
if grep -q panicked <<<"$out"; then die "the agent panicked:\n$out"; fi
line="Error: no Kubernetes client configuration (in-cluster or KUBECONFIG)"
grep -qxF "$line" <<<"$out" || die "the agent did not say '$line':\n$out"
log "4. qemu-aarch64 pacto-node-agent without a cluster: exit 1, '$line' (+ $(grep -c '^ *[0-9]*:' <<<"$out") causes)"

# ---------------------------------------------------------------- 5. the agent without BTF
cat >"$WORK/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- name: closed
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: closed
  user: {token: smoke}
contexts:
- name: closed
  context: {cluster: closed, user: closed}
current-context: closed
EOF
: >"$WORK/agent.log"
KUBECONFIG="$WORK/kubeconfig" RUST_BACKTRACE=1 qemu-aarch64 -L "$SYSROOT" "$agent" "${agent_args[@]}" \
  >"$WORK/agent.log" 2>&1 &
agent_pid=$!
# The agent waits up to 10 s for its first pod list before starting collection (PODS_WAIT in
# services/node-agent/src/agent.rs); under emulation allow 90 s.
deadline=$((SECONDS + 90))
until grep -q '"reason":"BTFUnavailable"' "$WORK/agent.log"; do
  kill -0 "$agent_pid" 2>/dev/null || die "the agent exited before reporting BTFUnavailable:\n$(tail -20 "$WORK/agent.log")"
  [ "$SECONDS" -lt "$deadline" ] || die "no BTFUnavailable from the agent within 90 s:\n$(tail -20 "$WORK/agent.log")"
  sleep 0.2 # poll the log until the deadline
done
failed="$(grep '"reason":"BTFUnavailable"' "$WORK/agent.log" | head -1)"
grep -q 'kernel BTF unavailable at /nonexistent' <<<"$failed" || die "the BTFUnavailable line does not name the path:\n$failed"
kill -TERM "$agent_pid"
set +e
wait "$agent_pid"
rc=$?
set -e
agent_pid=""
[ "$rc" = 0 ] || die "the agent exited $rc on SIGTERM, not 0:\n$(tail -20 "$WORK/agent.log")"
if grep -q panicked "$WORK/agent.log"; then die "the agent panicked:\n$(grep -m3 panicked "$WORK/agent.log")"; fi
grep -q 'node-agent stopped' "$WORK/agent.log" || die "the agent did not log 'node-agent stopped'"
log "5. qemu-aarch64 pacto-node-agent --btf-path /nonexistent: $(python3 -c 'import json,sys; l=json.loads(sys.argv[1]); print(l.get("reason",""), "|", l.get("error",""))' "$failed" 2>/dev/null || echo "$failed"); SIGTERM: exit 0"
runs_s=$((SECONDS - runs_started))

# ---------------------------------------------------------------- 6. the kernel program on arm64 BTF
core_started=$SECONDS
obj="$(ls -t "$target_dir/$TRIPLE"/debug/build/pacto-node-agent-*/out/sockwatch.bpf.o 2>/dev/null | head -1)"
[ -n "$obj" ] || die "no sockwatch.bpf.o under $target_dir/$TRIPLE/debug/build"
prebuilt="$REPO/services/node-agent/libbpf-programs/prebuilt/sockwatch.bpf.o"
cmp -s "$obj" "$prebuilt" \
  || die "the aarch64 build's kernel object differs from the committed one ($(sha256sum <"$obj" | cut -c1-16) vs $(sha256sum <"$prebuilt" | cut -c1-16))"
log "6. the aarch64 build's sockwatch.bpf.o is the committed object (sha256 $(sha256sum <"$obj" | cut -c1-16)…)"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/pacto/arm64-btf"
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial"
echo "deb [arch=arm64] http://deb.debian.org/debian bookworm main" >"$cache/apt/sources.list"
apt_opts=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o "Dir::Etc::SourceList=$cache/apt/sources.list"
  -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache=$cache/apt"
  -o Dir::State::status=/dev/null -o Debug::NoLocking=1)
# The newest generic arm64 kernel image package (not -cloud or -rt) the archive serves.
pkg="$(apt-cache "${apt_opts[@]}" pkgnames linux-image- 2>/dev/null | grep -E '^linux-image-[0-9.]+-[0-9]+-arm64-unsigned$' | sort -V | tail -1 || true)"
if [ -z "$pkg" ] || [ ! -f "$cache/$pkg.btf" ]; then
  apt-get "${apt_opts[@]}" -qq update >/dev/null 2>&1 || die "apt-get update of the arm64 package lists failed"
  pkg="$(apt-cache "${apt_opts[@]}" pkgnames linux-image- | grep -E '^linux-image-[0-9.]+-[0-9]+-arm64-unsigned$' | sort -V | tail -1)"
  [ -n "$pkg" ] || die "no linux-image-*-arm64-unsigned package in Debian's bookworm arm64 lists"
fi
btf="$cache/$pkg.btf"
if [ ! -f "$btf" ]; then
  (cd "$WORK" && apt-get "${apt_opts[@]}" -qq download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
  mkdir -p "$WORK/deb"
  dpkg-deb --fsys-tarfile "$WORK"/"$pkg"_*.deb | tar -x -C "$WORK/deb" --wildcards './boot/vmlinuz-*' './boot/config-*'
  grep -qx 'CONFIG_DEBUG_INFO_BTF=y' "$WORK"/deb/boot/config-* || die "$pkg is built without CONFIG_DEBUG_INFO_BTF"
  # The arm64 Image carries the kernel's .BTF section as is (what /sys/kernel/btf/vmlinux serves):
  # find its header (magic 0xeB9F, version 1, 24-byte header, types then strings) and cut it out.
  python3 - "$WORK"/deb/boot/vmlinuz-* "$btf.tmp" <<'EOF' || die "no vmlinux BTF found in the kernel image of $pkg"
import gzip, struct, sys
data = open(sys.argv[1], "rb").read()
if data[:2] == b"\x1f\x8b":
    data = gzip.decompress(data)
best = None
at = data.find(b"\x9f\xeb\x01\x00")
while at >= 0:
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", data, at + 4)
    size = hdr_len + str_off + str_len
    if hdr_len == 24 and type_off == 0 and str_off == type_len and at + size <= len(data):
        if best is None or size > best[1]:
            best = (at, size)
    at = data.find(b"\x9f\xeb\x01\x00", at + 1)
if best is None or best[1] < 1 << 20:
    sys.exit(1)
open(sys.argv[2], "wb").write(data[best[0]:best[0] + best[1]])
EOF
  mv "$btf.tmp" "$btf"
fi
bpftool btf dump file "$btf" >"$WORK/btf.txt" || die "bpftool cannot read $btf"
types="$(grep -c '^\[' "$WORK/btf.txt")"
log "6. arm64 vmlinux BTF of $pkg: $types types ($(numfmt --to=iec --suffix=B "$(stat -c %s "$btf")"), $btf)"

proto="$(awk '
  /^\[[0-9]+\] TYPEDEF .btf_trace_inet_sock_set_state. / { want = $NF; sub("type_id=", "", want); next }
  want && $1 == "[" want "]" && $2 == "PTR" { ptr = $NF; sub("type_id=", "", ptr); next }
  ptr && $1 == "[" ptr "]" && $2 == "FUNC_PROTO" { print $NF; exit }' "$WORK/btf.txt")"
[ "$proto" = "vlen=4" ] || die "btf_trace_inet_sock_set_state in $pkg's BTF: '${proto:-missing}', not a 4-argument prototype"
log "6. tp_btf target btf_trace_inet_sock_set_state: 4 arguments (ctx, sk, oldstate, newstate)"

bpftool -d gen min_core_btf "$btf" "$WORK/min.btf" "$obj" >"$WORK/relo.log" 2>&1 \
  || die "bpftool gen min_core_btf failed:\n$(tail -20 "$WORK/relo.log")"
relos="$(grep -cE 'relo #[0-9]+: <' "$WORK/relo.log" || true)"
matched="$(grep -E 'relo #[0-9]+: matching candidate' "$WORK/relo.log" | sed -E 's/.*relo #([0-9]+):.*> \[[0-9]+\] (.*)$/#\1 \2/')"
unmatched="$(grep -E 'relo #[0-9]+: no matching targets found' "$WORK/relo.log" | sed -E 's/.*relo #([0-9]+):.*/\1/')"
for n in $unmatched; do
  what="$(grep -E "relo #$n: <" "$WORK/relo.log" | head -1)"
  # Only the pre-5.15 packed cgroup layout may be absent: its branch is dead where
  # sk_cgrp_data.cgroup exists (the program checks with bpf_core_field_exists).
  grep -q 'struct sock_cgroup_data___old.val' <<<"$what" \
    || die "CO-RE relocation #$n does not resolve on arm64:\n$what"
done
grep -q 'field_exists> .*struct sock.sk_cgrp_data.cgroup' <<<"$(grep -E 'matching candidate' "$WORK/relo.log")" \
  || die "sk_cgrp_data.cgroup is not found in the arm64 BTF"
[ "$relos" -gt 0 ] || die "bpftool reported no CO-RE relocation for $obj"
log "6. CO-RE relocations against arm64 BTF: $(wc -l <<<"$matched") resolved, ${unmatched:+1 absent as expected (sock_cgroup_data___old.val)}:"
sed 's/^/     /' <<<"$matched" >&2
core_s=$((SECONDS - core_started))

echo "arm64-smoke: passed in $((SECONDS - started)) s (build ${build_s} s, qemu runs ${runs_s} s, CO-RE check ${core_s} s)"
