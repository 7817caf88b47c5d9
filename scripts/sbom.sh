#!/usr/bin/env bash
# Writes a CycloneDX 1.5 JSON SBOM of one released binary on stdout (scripts/release.sh, one per
# image and one for the CLI):
#   - every crate compiled into it: `cargo tree --locked -e normal` of the crate for the host target
#     (what is linked, not dev or build dependencies), as pkg:cargo purls with their registry or path;
#   - with ROOTFS (a staged image context's rootfs/, scripts/stage-service-image.sh), every file
#     under it that a Debian package owns (the glibc libraries, the loader, the CA bundle), as
#     pkg:deb purls with the package's installed version.
#
#   scripts/sbom.sh CRATE VERSION [ROOTFS]
#
# The output is deterministic for one checkout and machine (SOURCE_DATE_EPOCH gives its timestamp).
set -euo pipefail

die() { printf "sbom: error: %b\n" "$*" >&2; exit 1; }
[ "$#" -ge 2 ] && [ "$#" -le 3 ] || die "usage: scripts/sbom.sh CRATE VERSION [ROOTFS]"
crate="$1" version="$2" rootfs="${3:-}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"

crates="$(cd "$REPO" && cargo tree --locked -p "$crate" -e normal --prefix none --format '{p}' 2>/dev/null | sort -u)" \
  || die "cargo tree -p $crate failed"
debs=""
if [ -n "$rootfs" ]; then
  [ -d "$rootfs" ] || die "no directory '$rootfs'"
  while read -r f; do
    # dpkg -S knows /lib/x86_64-linux-gnu/... and /usr/lib/...; try the file as staged, then under /usr,
    # then where it was copied from (the context's `sources`: a cross sysroot's library, owned by
    # e.g. libc6-arm64-cross, scripts/stage-service-image.sh --sysroot).
    from="$(awk -v f="$f" '$1 == f { print $2; exit }' "$rootfs/../sources" 2>/dev/null || true)"
    owner="$(dpkg -S "$f" 2>/dev/null || dpkg -S "/usr$f" 2>/dev/null \
      || { [ -n "$from" ] && dpkg -S "$from" 2>/dev/null; } || true)"
    [ -n "$owner" ] || continue
    pkg="${owner%%:*}"
    arch="$(dpkg-query -W -f='${Architecture}' "$pkg" 2>/dev/null || echo unknown)"
    ver="$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo unknown)"
    debs+="$pkg $ver $arch $f"$'\n'
  done < <(cd "$rootfs" && find . -type f ! -path './usr/local/bin/*' ! -path './etc/passwd' ! -path './etc/group' \
             ! -path './etc/nsswitch.conf' | sed 's|^\.||' | sort)
fi

CRATES="$crates" DEBS="$debs" NAME="$crate" VERSION="$version" EPOCH="${SOURCE_DATE_EPOCH:-0}" python3 - <<'PY'
import datetime, json, os, re
components, seen = [], set()
for line in os.environ["CRATES"].splitlines():
    m = re.match(r"^(\S+) v(\S+)(?: \((.*)\))?", line.strip())
    if not m:
        continue
    name, ver, src = m.group(1), m.group(2), m.group(3) or ""
    key = ("cargo", name, ver)
    if key in seen or (name == os.environ["NAME"] and ver == os.environ["VERSION"]):
        continue
    seen.add(key)
    c = {"type": "library", "name": name, "version": ver,
         "purl": f"pkg:cargo/{name}@{ver}", "bom-ref": f"pkg:cargo/{name}@{ver}"}
    if src and src != "*":
        c["properties"] = [{"name": "pacto:source", "value": "workspace" if src.startswith("/") else src}]
    components.append(c)
debs = {}
for line in os.environ["DEBS"].splitlines():
    if not line.strip():
        continue
    pkg, ver, arch, path = line.split(" ", 3)
    debs.setdefault((pkg, ver, arch), []).append(path)
for (pkg, ver, arch), paths in sorted(debs.items()):
    purl = f"pkg:deb/debian/{pkg}@{ver}?arch={arch}"
    components.append({"type": "library", "name": pkg, "version": ver, "purl": purl, "bom-ref": purl,
                       "properties": [{"name": "pacto:file", "value": p} for p in sorted(paths)]})
ts = datetime.datetime.fromtimestamp(int(os.environ["EPOCH"]), datetime.timezone.utc)
main = f"pkg:cargo/{os.environ['NAME']}@{os.environ['VERSION']}"
bom = {
    "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
    "metadata": {"timestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "tools": {"components": [{"type": "application", "name": "scripts/sbom.sh"}]},
                 "component": {"type": "application", "name": os.environ["NAME"],
                               "version": os.environ["VERSION"], "purl": main, "bom-ref": main}},
    "components": components,
    "dependencies": [{"ref": main, "dependsOn": [c["bom-ref"] for c in components]}],
}
print(json.dumps(bom, indent=1, sort_keys=True))
PY
