#!/usr/bin/env python3
"""fatbin-prune.py SO [list | prune KEEP_ARCHS OUT]: shrink a CUDA library to the GPUs it meets.

A CUDA shared object carries its kernels for every GPU architecture it was built for, in the
ELF section .nv_fatbin. `list` prints each (kind, architecture) entry with its count and size;
`prune 90 OUT` writes a copy of SO in which the payload of every entry for another
architecture is overwritten with zeros, keeping the layout and every offset (the loader finds
what it did before; the zeros compress to almost nothing). prepare-sglang-kit.sh prunes every
CUDA library of sgl_kernel to sm_90, the H200's architecture, which is what makes the SGLang
kit small enough to carry in a few device calls.
"""

import collections
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50


def section(data: bytes | bytearray, wanted: str) -> tuple[int, int]:
    """(offset, size) of an ELF64 section, found through the section headers."""
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)

    names = header(e_shstrndx)[4]
    for i in range(e_shnum):
        s = header(i)
        start = names + s[0]
        if bytes(data[start : data.index(b"\0", start)]).decode() == wanted:
            return s[4], s[5]
    raise SystemExit(f"no {wanted} section")


def main() -> None:
    path = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "list"
    keep = {int(a) for a in sys.argv[3].split(",")} if len(sys.argv) > 3 else set()
    with open(path, "rb") as f:
        data = bytearray(f.read())
    off, size = section(data, ".nv_fatbin")
    end = off + size
    sizes: collections.Counter[tuple[str, int]] = collections.Counter()
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    zeroed = 0
    p = off
    while p < end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, p)
        if magic != FATBIN_MAGIC:
            p += 8  # alignment padding
            continue
        q = p + header_size
        q_end = q + fat_size
        while q < q_end:
            kind, _unused, entry_header, payload = struct.unpack_from("<HHIQ", data, q)
            (arch,) = struct.unpack_from("<I", data, q + 28)
            name = "ptx" if kind == 1 else "elf" if kind == 2 else str(kind)
            sizes[(name, arch)] += payload
            counts[(name, arch)] += 1
            if mode == "prune" and arch not in keep:
                data[q + entry_header : q + entry_header + payload] = bytes(payload)
                zeroed += payload
            q += entry_header + payload
        p = q_end
    for key in sorted(sizes):
        print(key, counts[key], sizes[key] // 1000000, "MB")
    if mode == "prune":
        with open(sys.argv[4], "wb") as f:
            f.write(data)
        print("zeroed", zeroed // 1000000, "MB")


if __name__ == "__main__":
    main()
