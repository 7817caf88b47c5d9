#!/usr/bin/env bash
# Builds and runs for another CPU with Debian's cross toolchain and the Rust target
# (docs/images.md#architectures). The one place that knows how a platform maps to a Rust target,
# a C cross compiler, a sysroot and a qemu-user emulator; scripts/release.sh and
# scripts/arm64-smoke.sh call it.
#
#   scripts/cross.sh triple PLATFORM          prints the Rust target of linux/amd64 or linux/arm64
#   scripts/cross.sh sysroot TRIPLE           prints the C library's sysroot for TRIPLE ("" for the
#                                             build machine's own target: its libraries are found by ldd)
#   scripts/cross.sh check TRIPLE             exits 0 when everything the target needs is here, else
#                                             prints what is missing, one line, and exits 1
#   scripts/cross.sh run TRIPLE COMMAND…      runs COMMAND (e.g. cargo build --target TRIPLE …) with
#                                             cargo's linker, the cc crate's compiler and archiver, and
#                                             cargo's runner (qemu-user) set for TRIPLE; adds the Rust
#                                             target to the pinned toolchain first if it is missing
#
# For aarch64-unknown-linux-gnu: Debian's gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (the
# glibc the binaries link and the images carry, sysroot /usr/aarch64-linux-gnu), qemu-user for
# running the binaries here (scripts/install-deps.sh --cross), and `rustup target add
# aarch64-unknown-linux-gnu`. The build machine's own target needs nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { printf "cross: error: %b\n" "$*" >&2; exit 1; }
usage="usage: scripts/cross.sh triple PLATFORM | sysroot TRIPLE | check TRIPLE | run TRIPLE COMMAND..."

host_triple() { rustc -vV | sed -n 's/^host: //p'; }

# The C toolchain prefix, sysroot and emulator of a target other than the build machine's.
gnu_of() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo "aarch64-linux-gnu /usr/aarch64-linux-gnu qemu-aarch64" ;;
    x86_64-unknown-linux-gnu) echo "x86_64-linux-gnu /usr/x86_64-linux-gnu qemu-x86_64" ;;
    *) die "no cross toolchain known for '$1' (supported: aarch64-unknown-linux-gnu, x86_64-unknown-linux-gnu)" ;;
  esac
}

# What is missing for TRIPLE, one item a line; nothing when it is all here.
missing() {
  local triple="$1" prefix sysroot qemu
  [ "$triple" = "$(host_triple)" ] && return 0
  read -r prefix sysroot qemu <<<"$(gnu_of "$triple")"
  command -v "$prefix-gcc" >/dev/null 2>&1 || echo "$prefix-gcc (Debian: gcc-$prefix)"
  command -v "$prefix-strip" >/dev/null 2>&1 || echo "$prefix-strip (Debian: binutils-$prefix)"
  [ -f "$sysroot/lib/libc.so.6" ] || echo "$sysroot/lib/libc.so.6 (Debian: libc6-dev-${triple%%-*}-cross)"
  if [ "${CROSS_NEED_QEMU:-0}" = 1 ]; then
    command -v "$qemu" >/dev/null 2>&1 || echo "$qemu (Debian: qemu-user)"
  fi
  if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
    command -v rustup >/dev/null 2>&1 || echo "the Rust target $triple (no rustup to add it)"
  fi
}

[ "$#" -ge 2 ] || die "$usage"
cmd="$1" arg="$2"
shift 2
case "$cmd" in
  triple)
    case "$arg" in
      linux/amd64) echo x86_64-unknown-linux-gnu ;;
      linux/arm64) echo aarch64-unknown-linux-gnu ;;
      *) die "unsupported platform '$arg' (linux/amd64, linux/arm64)" ;;
    esac ;;
  sysroot)
    if [ "$arg" = "$(host_triple)" ]; then echo ""; else read -r _ sysroot _ <<<"$(gnu_of "$arg")"; echo "$sysroot"; fi ;;
  check)
    gaps="$(missing "$arg")"
    [ -z "$gaps" ] || { echo "cross: missing for $arg: $(paste -sd';' <<<"$gaps" | sed 's/;/; /g') (scripts/install-deps.sh --cross)"; exit 1; }
    ;;
  run)
    [ "$#" -ge 1 ] || die "$usage"
    if [ "$arg" != "$(host_triple)" ]; then
      gaps="$(missing "$arg")"
      [ -z "$gaps" ] || die "missing for $arg: $(paste -sd';' <<<"$gaps" | sed 's/;/; /g') (scripts/install-deps.sh --cross)"
      if ! rustup target list --installed | grep -qx "$arg"; then
        # rustup reads rust-toolchain.toml here: the target goes to the pinned toolchain.
        (cd "$REPO" && rustup target add "$arg" >&2) || die "rustup target add $arg failed"
      fi
      read -r prefix sysroot qemu <<<"$(gnu_of "$arg")"
      env_triple="$(tr 'a-z-' 'A-Z_' <<<"$arg")"
      cc_triple="${arg//-/_}"
      export "CARGO_TARGET_${env_triple}_LINKER=$prefix-gcc"
      export "CARGO_TARGET_${env_triple}_RUNNER=$qemu -L $sysroot"
      export "CC_${cc_triple}=$prefix-gcc" "AR_${cc_triple}=$prefix-ar" "STRIP_${cc_triple}=$prefix-strip"
    fi
    exec "$@" ;;
  *) die "$usage" ;;
esac
