"""Random BDMA register programs (programming guide "BDMA programming"; the facts of NVIDIA's
nvdlav1 RTL in verif/model/bdma.py).

A program is 1 to 4 *groups* launched one after the other through CFG_LAUNCH0/1, each of 1 to 8
*operations* (CFG_OP.EN): a copy of ``SURF_REPEAT + 1`` surfaces of ``LINE_REPEAT + 1`` lines of
``(SIZE + 1) * 32`` bytes between the primary (MC) and the secondary (CV SRAM) memory, any of
the four directions, each operation its own source and destination. Drawn per operation: line
size 1..16 atoms (sometimes up to 128), 1..16 lines (sometimes up to 64), 1..8 surfaces;
destination strides at least the line (surface) with random gaps; source strides the same, or
smaller than a line, or 0 (lines read twice: legal, reads only); random bits 4:0 in the
address and stride registers (the hardware drops them); some operations above 4 GiB
(``ADDR_HIGH``) where the address space has 64 bits. A group is launched in register group 0 or
1; a group id is launched again only after its interrupt, and at most two groups are in flight
(a third launch would be lost, NV_NVDLA_BDMA_csb.v). At most 20 operations wait at any time.

Every destination region (with its gaps) is zeroed first and checked by CRC after its group's
interrupt. No operation reads what any operation of the program writes, except that a later
group may copy an earlier group's output once the earlier group's interrupt was seen (a chain):
NVIDIA's BDMA has no ordering between one operation's writes and a later one's reads.

Source regions of the secondary memory are allocated from 0x5000_0000, of the primary one from
0x8000_0000 (NVIDIA's v1 testbench maps its memories there, verif/trace/v1.py), so the program is
also correct on a configuration whose RAM type CV reaches the primary memory.
"""
from __future__ import annotations

import random

from verif.gen.common import Alloc, Layer, Program, rand_bytes
from verif.gen.writer import TraceWriter

ATOM = 32
CV_BASE, MC_BASE = 0x5000_0000, 0x8000_0000
MEMS = {0: "sec_mem", 1: "pri_mem"}          # CFG_CMD RAM type: 0 = CV SRAM, 1 = MC
MAX_GROUP_OPS = 8


def _line_geometry(rng: random.Random):
    size = rng.randint(0, 15) if rng.random() < 0.85 else rng.randint(16, 127)
    lines = rng.randint(0, 15) if rng.random() < 0.9 else rng.randint(16, 63)
    surfs = rng.randint(0, 7)
    if (size + 1) * (lines + 1) * (surfs + 1) > 4096:      # at most 128 KiB per operation
        lines, surfs = min(lines, 3), min(surfs, 1)
    return size, lines, surfs


def _strides(rng: random.Random, lb: int, lines: int, dst: bool) -> tuple[int, int]:
    """(line stride, surface stride) in bytes; a destination's never overlap its own lines."""
    r = rng.random()
    if dst or r < 0.7:
        line = lb + ATOM * rng.choice((0, 0, 0, 1, 2, 7))
    elif r < 0.85:
        line = ATOM * rng.randint(0, max(0, lb // ATOM - 1))   # overlapping source lines
    else:
        line = 0
    surf_min = line * lines + lb if line else lb
    r = rng.random()
    if dst or r < 0.8:
        surf = surf_min + ATOM * rng.choice((0, 0, 1, 3))
    else:
        surf = ATOM * rng.randint(0, max(0, surf_min // ATOM))  # overlapping source surfaces
    return line, surf


def _extent(lb: int, lines: int, surfs: int, line: int, surf: int) -> int:
    return surf * surfs + line * lines + lb


def generate(seed: int, cfg) -> Program:
    """The BDMA program of ``seed`` for ``cfg`` (which must have BDMA: ValueError otherwise)."""
    if not cfg.bdma:
        raise ValueError(f"{cfg.name} has no BDMA (bdma=False)")
    rng = random.Random(f"bdma-{seed}")
    w = TraceWriter(f"bdma_{seed}")
    prog = Program("bdma", seed, w)
    wide = cfg.mem_address_width > 32
    allocs = {0: Alloc(rng, CV_BASE), 1: Alloc(rng, MC_BASE)}
    high_allocs = {k: Alloc(rng, (1 << 32) + base) for k, base in ((0, CV_BASE), (1, MC_BASE))}
    done_outputs = []              # (ram, base, line bytes, lines, surfs, line, surf): chainable
    in_flight = []                 # (group id, sync) launched and not waited for
    next_id = rng.randint(0, 1)
    inits, checks, body = [], [], []

    def take(ram: int, size: int) -> int:
        high = wide and rng.random() < 0.2
        return (high_allocs if high else allocs)[ram].take(size)

    def low_bits() -> int:
        return rng.getrandbits(5) if rng.random() < 0.3 else 0

    def reg(name: str, value: int) -> None:
        body.append(("reg", name, value & 0xFFFF_FFFF))

    for gi in range(rng.randint(1, 4)):
        g = next_id
        next_id ^= 1 if rng.random() < 0.8 else 0
        # never relaunch a busy group id, never more than two groups in flight
        while in_flight and (len(in_flight) >= 2 or any(x[0] == g for x in in_flight)):
            body.append(("wait", *in_flight.pop(0)))
        outputs = []
        n_ops = rng.randint(1, MAX_GROUP_OPS)
        for _ in range(n_ops):
            chain = [o for o in done_outputs if not any(x[1] == o[-1] for x in in_flight)]
            if chain and rng.random() < 0.25:
                src_ram, src, lb, lines, surfs, sline, ssurf, _ = rng.choice(chain)
                size = lb // ATOM - 1
                lines, surfs = lines - 1, surfs - 1
            else:
                size, lines, surfs = _line_geometry(rng)
                lb = (size + 1) * ATOM
                sline, ssurf = _strides(rng, lb, lines, False)
                src_ram = rng.randint(0, 1)
                n = _extent(lb, lines, surfs, sline, ssurf)
                src = take(src_ram, n)
                body.append(("load", src, rand_bytes(rng, n), MEMS[src_ram]))
            dline, dsurf = _strides(rng, lb, lines, True)
            dst_ram = rng.randint(0, 1)
            dn = _extent(lb, lines, surfs, dline, dsurf)
            dst = take(dst_ram, dn)
            inits.append((dst, dn, MEMS[dst_ram]))
            outputs.append((dst_ram, dst, lb, lines + 1, surfs + 1, dline, dsurf, f"g{gi}"))
            reg("CFG_SRC_ADDR_LOW", (src & 0xFFFF_FFFF) | low_bits())
            reg("CFG_SRC_ADDR_HIGH", src >> 32)
            reg("CFG_DST_ADDR_LOW", (dst & 0xFFFF_FFFF) | low_bits())
            reg("CFG_DST_ADDR_HIGH", dst >> 32)
            reg("CFG_LINE", size)
            reg("CFG_CMD", src_ram | (dst_ram << 1))
            reg("CFG_LINE_REPEAT", lines)
            reg("CFG_SRC_LINE", sline | low_bits())
            reg("CFG_DST_LINE", dline | low_bits())
            reg("CFG_SURF_REPEAT", surfs)
            reg("CFG_SRC_SURF", ssurf | low_bits())
            reg("CFG_DST_SURF", dsurf | low_bits())
            reg("CFG_OP", 1)
            prog.layers.append(Layer(("BDMA",), [], [(dst, dn)],
                                     f"g{gi}/grp{g} {MEMS[src_ram][:2]}->{MEMS[dst_ram][:2]} "
                                     f"{lb}Bx{lines + 1}x{surfs + 1} src {src:#x} dst {dst:#x}"))
        reg("CFG_STATUS", rng.getrandbits(1))
        reg(f"CFG_LAUNCH{g}", 1)
        sync = f"g{gi}"
        in_flight.append((g, sync))
        for o in outputs:
            checks.append((sync, o[1], _extent(o[2], o[3] - 1, o[4] - 1, o[5], o[6]), MEMS[o[0]]))
        done_outputs += outputs
    while in_flight:
        body.append(("wait", *in_flight.pop(0)))

    w.comment(f"random BDMA program, seed {seed} ({cfg.name})")
    for base, size, mem in inits:
        w.mem_init(base, size, mem)
    for item in body:
        if item[0] == "reg":
            w.reg_write(("BDMA", item[1]), item[2])
        elif item[0] == "load":
            w.mem_load(item[1], item[2], mem=item[3])
        else:
            w.intr_notify(f"BDMA_{item[1]}", item[2])
    for sync, base, size, mem in checks:
        w.check_crc(sync, base, size, mem=mem)
    return prog
