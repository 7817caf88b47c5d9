#!/usr/bin/env python3
"""Writes the committed seeds of the pacto-oci fuzz targets (seeds/<target>/*). Run from this
directory: python3 seeds.py"""
import gzip
import hashlib
import io
import json
import os
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG = "application/vnd.docker.container.image.v1+json"
LAYER = "application/vnd.pacto.bundle.layer.v1.tar+gzip"

def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()

def compact(value):
    return json.dumps(value, separators=(",", ":")).encode()

def write(target, name, data):
    os.makedirs(f"seeds/{target}", exist_ok=True)
    with open(f"seeds/{target}/{name}", "wb") as f:
        f.write(data)

def descriptor(media_type, data_or_size, name="x"):
    size = data_or_size if isinstance(data_or_size, int) else len(data_or_size)
    return {"mediaType": media_type, "digest": digest(name.encode()), "size": size}

# registry_manifest: manifests and config blobs as the client reads them.
config = compact({
    "architecture": "", "created": "0001-01-01T00:00:00Z", "history": [{}], "os": "",
    "rootfs": {"type": "layers", "diff_ids": [digest(b"tar")]},
    "config": {"Labels": {"io.pacto.name": "orders-api", "io.pacto.version": "3.4.1",
                          "io.pacto.pactoVersion": "2.0"}},
})
write("registry_manifest", "config.json", config)
write("registry_manifest", "bundle.json", compact({
    "schemaVersion": 2, "mediaType": MANIFEST,
    "config": descriptor(CONFIG, config, "config"), "layers": [descriptor(LAYER, 1518, "layer")]}))
write("registry_manifest", "docker-v2.json", json.dumps({
    "schemaVersion": 2, "mediaType": DOCKER,
    "config": descriptor(CONFIG, 7023, "c"),
    "layers": [descriptor("application/vnd.docker.image.rootfs.diff.tar.gzip", 32654, "l")]},
    indent=3).encode())
write("registry_manifest", "index.json", compact({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [dict(descriptor(MANIFEST, 500, "m"), platform={"os": "linux", "architecture": "amd64"})]}))
write("registry_manifest", "schema1.json", compact({"schemaVersion": 1, "name": "x", "tag": "1"}))
# Oversized: declared sizes far past every limit, and many layers (the client accepts the body,
# then refuses anything but exactly one layer).
write("registry_manifest", "oversized-declared.json", compact({
    "schemaVersion": 2, "mediaType": MANIFEST,
    "config": descriptor(CONFIG, 2**64 - 1, "c"), "layers": [descriptor(LAYER, 200 * 2**20, "l")]}))
write("registry_manifest", "many-layers.json", compact({
    "schemaVersion": 2, "config": descriptor(CONFIG, 10, "c"),
    "layers": [descriptor(LAYER, i, str(i)) for i in range(400)]}))

# registry_tag_list: page bodies separated by 0xFF.
SEP = b"\xff"
write("registry_tag_list", "one-page.json", compact({"name": "acme/svc", "tags": ["1.0.0", "v1.2.0", "1.10.0-rc.1", "latest", "2.0"]}))
write("registry_tag_list", "null-tags.json", b'{"name":"acme/svc","tags":null}')
full1 = [f"1.0.{i}" for i in range(1000)]
full2 = [f"1.1.{i}" for i in range(1000)]
write("registry_tag_list", "two-full-pages", compact({"tags": full1}) + SEP + compact({"tags": full2}) + SEP + compact({"tags": ["2.0.0"]}))
# A flood: a registry that ignores last= and sends the same full page again and again.
write("registry_tag_list", "flood-same-page", SEP.join([compact({"tags": full1})] * 3))

# registry_layer: bundle layers, and a gzip bomb.
def tar_gz(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)

contract = open("seeds/parse_validate/spec-7.1.yaml", "rb").read()
write("registry_layer", "bundle.tar.gz", tar_gz([("pacto.yaml", contract),
                                                 ("interfaces/openapi.yaml", b"openapi: 3.0.3\n")]))
# 64 MiB of zeros in one file (past the 10 MiB file limit and the 50 MiB total) in ~64 KiB.
write("registry_layer", "gzip-bomb.tar.gz", tar_gz([("pacto.yaml", b'pactoVersion: "2.0"\n'),
                                                    ("zeros", bytes(64 * 2**20))]))
