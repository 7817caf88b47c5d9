#!/usr/bin/env python3
"""Writes the committed seeds of grpc_requests (seeds/grpc_requests/*.bin): a selector byte
(see fuzz_targets/grpc_requests.rs) followed by a hand-encoded protobuf message. Run from this
directory: python3 seeds.py"""
import os

def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def field(num, value):
    """A length-delimited field (bytes/str/message) or a varint field (int/bool)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value

def msg(*fields):
    return b"".join(fields)

def ts(seconds, nanos=0):
    return msg(field(1, seconds), field(2, nanos) if nanos else b"")

CONTRACT = open("seeds/parse_validate/spec-7.1.yaml", "rb").read()
SMALL = b'pactoVersion: "2.0"\nservice: {name: orders, version: 1.0.0}\nworkload: service\n'

def subject(kind, name):
    return msg(field(1, kind), field(2, name))

def observation(kind, skind, name, outcome, value=None):
    parts = [field(1, kind), field(2, subject(skind, name)), field(3, outcome)]
    if value:
        parts.append(field(value[0], value[1]))
    parts.append(field(10, msg(field(1, "k8s-observer"), field(2, ts(1_700_000_000)))))
    return msg(*parts)

EVIDENCE = msg(
    field(1, subject("service", "shop/orders")),
    field(2, "oci://registry/orders@sha256:00"),
    field(3, "k8s"),
    field(4, ts(1_700_000_001)),
    field(5, observation(2, "interface", "http-public", 1, (5, msg(field(1, "http"), field(2, True))))),
    field(5, observation(3, "dependency", "inventory", 3)),
    field(5, observation(1, "capability", "health", 1, (4, msg(field(1, True))))),
    field(5, observation(5, "workload", "orders-api", 1, (8, msg(field(1, "service"))))),
)

def evaluate(contract, evidence=EVIDENCE, warnings=(), at=None):
    parts = [field(1, msg(field(1, contract))), field(2, evidence)]
    for code, path, message in warnings:
        parts.append(field(3, msg(field(1, code), field(2, path), field(3, message))))
    if at is not None:
        parts.append(field(4, ts(*at)))
    return msg(*parts)

SEEDS = {
    "evaluate-spec-7.1": b"\x00" + evaluate(CONTRACT, at=(1_800_000_000,)),
    "evaluate-small-warnings": b"\x00" + evaluate(
        SMALL, warnings=[("PACTO_W001", "service.owner", "owner is recommended")]),
    "evaluate-bad-nanos": b"\x00" + evaluate(SMALL, at=(1, 1_000_000_000)),
    "assess-spec-7.1": b"\x01" + msg(field(1, msg(field(1, CONTRACT))), field(2, ts(1_800_000_000))),
    "observe": b"\x02" + msg(
        field(1, msg(field(1, "shop"), field(2, "orders"))),
        field(2, msg(field(1, SMALL))),
        field(3, msg(field(1, "runtime"), field(2, b'{"type":"object"}'))),
        field(4, "oci://registry/orders@sha256:00"),
        field(5, msg(field(1, "DependencyReachable"), field(2, "inventory"), field(3, ts(1_700_000_000)))),
        field(6, msg(field(1, 300))),
    ),
    "evaluate-response": b"\x03" + msg(
        field(1, msg(field(1, "PACTO_E101"), field(2, 1), field(3, "dependency"),
                     field(4, subject("dependency", "inventory")), field(5, "dependencies[0]"),
                     field(6, "inventory is unreachable"))),
        field(2, msg(field(1, 3), field(2, 4))),
        field(3, msg(field(1, 1))),
        field(4, 3),
    ),
    "resolve": b"\x04" + msg(field(1, "team"), field(2, "svc"),
                             field(3, msg(field(1, "ghcr.io/acme/svc"), field(3, "pull"))),
                             field(4, msg(field(1, "app"), field(2, msg(field(1, "k"), field(2, "v")))))),
    "list-revisions": b"\x05" + msg(field(1, "team"), field(2, "svc")),
    "node-report": b"\x06" + msg(
        field(1, "node-1"), field(2, "0.1.0"), field(3, ts(1_700_000_000)),
        field(4, msg(field(1, "6.1.0"))),
        field(5, msg(field(1, "Running"))),
        field(6, msg(field(1, "uid-1"), field(2, "shop"), field(3, "orders-0"), field(4, "Complete"))),
    ),
}

os.makedirs("seeds/grpc_requests", exist_ok=True)
for name, data in SEEDS.items():
    with open(f"seeds/grpc_requests/{name}.bin", "wb") as f:
        f.write(data)
