#!/usr/bin/env python3
"""Writes seeds/parse_validate/alias-bomb.yaml: the same document as
pacto_contract::testing::alias_bomb("pactoVersion: \"2.0\"\n") (about 16 KiB; 2 * 10^8 nodes once
its aliases are expanded). Run from this directory: python3 seeds_contract.py"""

doc = 'pactoVersion: "2.0"\n' + "base: &l0 [" + ",".join(["x"] * 2000) + "]\n"
for level in range(1, 6):
    doc += f"level{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 10) + "]\n"
while len(doc) < 16 * 1024:
    doc += "# padding\n"
with open("seeds/parse_validate/alias-bomb.yaml", "w") as f:
    f.write(doc)
