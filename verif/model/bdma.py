"""Bridge DMA (BDMA) model: the operation queue, groups and copies of NVIDIA's nvdlav1 BDMA.

Unit description "Bridge DMA", programming guide "BDMA programming"; where those are silent or
wrong, NVIDIA's nvdlav1 RTL (vmod/nvdla/bdma, facts read from it, not its code):

* Registers are single (no ping-pong groups). ``CFG_OP.EN``, ``CFG_LAUNCH0/1`` are plain flops
  that read back what was written; a write with bit 0 set acts (NV_NVDLA_BDMA_csb.v).
* Writing EN=1 queues an *operation*: a snapshot of the source and destination addresses, line
  size, RAM types, repeats and strides; later register writes do not change it. The queue is a
  20-entry FIFO plus its output register: ``STATUS.FREE_SLOT`` is 20 while at most one
  operation waits, ``21 - k`` for ``k`` waiting operations; a 22nd is dropped by the RTL (and
  its group then runs stale registers): :class:`ModelConfigError` here.
* Writing LAUNCHg=1 makes a *group* of every operation queued since the previous launch and
  runs it; when the group's last write completes, ``GRPg_BUSY`` clears and GLB's
  ``BDMA_DONE_STATUSg`` rises. A launch with no operation never completes (the RTL's launch
  stage waits for an operation that never comes): BDMA stays busy and every later group too.
* An operation copies ``SURF_REPEAT + 1`` surfaces of ``LINE_REPEAT + 1`` lines of
  ``(SIZE + 1) * 32`` bytes; line ``l`` of surface ``s`` is at ``base + s * surf_stride + l *
  line_stride`` (64-bit addresses: ``ADDR_HIGH`` gives bits 63:32; low 5 bits of addresses and
  strides are 0). The guide's "(CFG_LINE - 1) * 32" is a documentation error. RAM type 0 is the
  secondary memory (CV SRAM, through CVIF), 1 the primary one (MCIF).
* The RTL carries only 13 bits of LINE_REPEAT/SURF_REPEAT from its read to its write stage: with
  either at 8192 or more it reads ``N + 1`` lines and writes ``(N mod 8192) + 1``
  (:class:`ModelConfigError`).
* Reads of an operation run ahead of its writes and of the writes of the operation before it, with
  no ordering between them: a group whose operation reads bytes that it or an earlier operation
  of the group writes has a timing-dependent result (:class:`ModelConfigError`; put the reader in
  a later group, after the interrupt, as the guide asks).

The model is untimed: a group runs within the CSB write that launches it. The stall counters
(``STATUS_GRP*_*_STALL``) count cycles and read 0 here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verif.model.formats import ModelConfigError
from verif.model.memory import Memory, ram

ATOM = 32                 # bytes: BDMA moves 32-byte atoms (CFG_LINE.SIZE counts them)
SLOTS = 20                # the command FIFO's depth (STATUS.FREE_SLOT after reset)
CAPACITY = SLOTS + 1      # FIFO plus its output register
REPEAT_LIMIT = 1 << 13    # repeats the RTL's write stage can count (13-bit counters)
#: lines above which the overlap check compares bounding ranges only
EXACT_OVERLAP_LINES = 1 << 16


@dataclass(frozen=True)
class BdmaOp:
    """One queued operation (the registers snapshot at the CFG_OP.EN write). Addresses and
    strides in bytes; ``src_mc``/``dst_mc``: the RAM type is MC (1) rather than CV SRAM (0)."""
    src: int
    dst: int
    line_bytes: int
    lines: int
    surfaces: int
    src_line: int
    dst_line: int
    src_surf: int
    dst_surf: int
    src_mc: bool
    dst_mc: bool

    def line_addrs(self, dst: bool) -> np.ndarray:
        """Start address of every line in copy order (surface-major), uint64 (wrapping)."""
        base, ls, ss = ((self.dst, self.dst_line, self.dst_surf) if dst else
                        (self.src, self.src_line, self.src_surf))
        s = np.arange(self.surfaces, dtype=np.uint64)[:, None] * np.uint64(ss)
        line = np.arange(self.lines, dtype=np.uint64)[None, :] * np.uint64(ls)
        return (np.uint64(base) + s + line).reshape(-1)


def _overlap(a_starts: np.ndarray, b_starts: np.ndarray, n: int, mask: int) -> bool:
    """Do intervals ``[a, a + n)`` and ``[b, b + n)`` (addresses modulo ``mask + 1``) meet?"""
    a = np.sort(a_starts & np.uint64(mask))
    b = np.sort(b_starts & np.uint64(mask))
    # for each b, the nearest a at or below it and above it
    i = np.searchsorted(a, b, side="right")
    below = a[np.clip(i - 1, 0, len(a) - 1)]
    hit_below = (i > 0) & (b - below < np.uint64(n))
    above = a[np.clip(i, 0, len(a) - 1)]
    hit_above = (i < len(a)) & (above - b < np.uint64(n))
    return bool(np.any(hit_below | hit_above))


class BdmaCore:
    """The BDMA of one model instance. ``mem``/``cv_mem``: primary and secondary memory
    (``cv_mem`` None without the secondary memory interface: every access then goes to
    ``mem``). ``raise_intr(group)`` raises GLB's BDMA_DONE_STATUS<group>.

    ``on_write``/``on_read`` are called by :class:`verif.model.Nvdla` for CSB accesses of the
    BDMA unit. Raises ModelConfigError for programs whose result NVIDIA's RTL leaves undefined
    (see the module docstring)."""

    def __init__(self, mem: Memory, cv_mem: Memory | None, address_width: int, raise_intr):
        self.mem, self.cv_mem = mem, cv_mem
        self.addr_mask = (1 << address_width) - 1
        self.raise_intr = raise_intr
        self.queue: list[BdmaOp] = []
        self.busy = [False, False]
        #: why BDMA never finishes (a launch without operations), None while it works
        self.wedged: str | None = None

    # ---- CSB ----
    def _snapshot(self, regs) -> BdmaOp:
        r = regs.single

        def addr(high, low):
            return ((r[high] << 32) | (r[low] & ~(ATOM - 1))) & self.addr_mask
        size = r["CFG_LINE"] & 0x1FFF
        lines, surfs = (r["CFG_LINE_REPEAT"] & 0xFFFFFF), (r["CFG_SURF_REPEAT"] & 0xFFFFFF)
        for name, n in (("CFG_LINE_REPEAT", lines), ("CFG_SURF_REPEAT", surfs)):
            if n >= REPEAT_LIMIT:
                raise ModelConfigError(
                    f"BDMA {name}.NUMBER = {n}: NVIDIA's RTL passes only 13 bits of it from its read "
                    f"to its write stage and writes {n % REPEAT_LIMIT + 1} of the {n + 1} "
                    f"{'lines' if 'LINE' in name else 'surfaces'} it reads (use at most {REPEAT_LIMIT - 1})")
        cmd = r["CFG_CMD"]
        return BdmaOp(src=addr("CFG_SRC_ADDR_HIGH", "CFG_SRC_ADDR_LOW"),
                      dst=addr("CFG_DST_ADDR_HIGH", "CFG_DST_ADDR_LOW"),
                      line_bytes=(size + 1) * ATOM, lines=lines + 1, surfaces=surfs + 1,
                      src_line=r["CFG_SRC_LINE"] & ~(ATOM - 1), dst_line=r["CFG_DST_LINE"] & ~(ATOM - 1),
                      src_surf=r["CFG_SRC_SURF"] & ~(ATOM - 1), dst_surf=r["CFG_DST_SURF"] & ~(ATOM - 1),
                      src_mc=bool(cmd & 1), dst_mc=bool(cmd & 2))

    def on_write(self, regs, name: str, value: int) -> None:
        """After the CSB write of ``value`` to register ``name`` (``regs``: BDMA's UnitRegs)."""
        if not value & 1:
            return
        if name == "CFG_OP":
            if len(self.queue) >= CAPACITY:
                raise ModelConfigError(
                    f"BDMA CFG_OP.EN with {len(self.queue)} operations waiting (STATUS.FREE_SLOT = 0): "
                    "NVIDIA's RTL drops the operation but still counts it into the next group, "
                    "which then runs stale registers; poll FREE_SLOT first")
            self.queue.append(self._snapshot(regs))
        elif name in ("CFG_LAUNCH0", "CFG_LAUNCH1"):
            self._launch(int(name[-1]))

    def on_read(self, regs, name: str) -> int | None:
        """The value of read-only register ``name`` (None: the register file's own value)."""
        if name == "STATUS":
            waiting = len(self.queue)
            free = SLOTS - max(0, waiting - 1)
            idle = not waiting and not any(self.busy)
            return free | (int(idle) << 8) | (int(self.busy[0]) << 9) | (int(self.busy[1]) << 10)
        if name.startswith("STATUS_GRP"):
            return 0
        return None

    # ---- hardware ----
    def _launch(self, group: int) -> None:
        self.busy[group] = True
        if self.wedged:
            return            # an earlier group never completes; this one never starts
        ops, self.queue = self.queue, []
        if not ops:
            self.wedged = (f"CFG_LAUNCH{group} launched group {group} with no operation queued: "
                           "NVIDIA's BDMA never completes it")
            return
        self._check_order(ops, group)
        for op in ops:
            self._copy(op)
        self.busy[group] = False
        self.raise_intr(group)

    def _mem(self, mc: bool) -> Memory:
        return ram(self.mem, self.cv_mem, int(mc))

    def _check_order(self, ops: list[BdmaOp], group: int) -> None:
        """ModelConfigError when an operation reads bytes that it or an earlier operation of the
        group writes (the RTL's reads run ahead of those writes)."""
        for j, reader in enumerate(ops):
            src_mem = self._mem(reader.src_mc)
            for i in range(j + 1):
                writer = ops[i]
                if self._mem(writer.dst_mc) is not src_mem:
                    continue
                if self._meets(writer, reader):
                    who = "itself" if i == j else f"operation {i} of the group"
                    raise ModelConfigError(
                        f"BDMA group {group}: operation {j} reads bytes that {who} writes; NVIDIA's "
                        "BDMA reads ahead of its writes, so the result depends on timing (copy in a "
                        "later group, after this one's interrupt)")

    def _meets(self, writer: BdmaOp, reader: BdmaOp) -> bool:
        mask = self.addr_mask
        w, r = writer.line_addrs(True), reader.line_addrs(False)
        wl, rl = writer.line_bytes, reader.line_bytes
        # bounding ranges first; a line that wraps past the top of the address space counts as
        # meeting (conservative)
        wlo, whi = int(w.min()), int(w.max()) + wl
        rlo, rhi = int(r.min()), int(r.max()) + rl
        if whi > mask + 1 or rhi > mask + 1:
            return True
        if whi <= rlo or rhi <= wlo:
            return False
        if len(w) + len(r) > EXACT_OVERLAP_LINES:
            return True
        if wl == rl:
            return _overlap(w, r, wl, mask)
        # different line lengths: compare 32-byte atoms
        wa = (w[:, None] + np.arange(0, wl, ATOM, dtype=np.uint64)[None, :]).reshape(-1)
        ra = (r[:, None] + np.arange(0, rl, ATOM, dtype=np.uint64)[None, :]).reshape(-1)
        return _overlap(wa, ra, ATOM, mask)

    def _copy(self, op: BdmaOp) -> None:
        src_mem, dst_mem = self._mem(op.src_mc), self._mem(op.dst_mc)
        for s_addr, d_addr in zip(op.line_addrs(False).tolist(), op.line_addrs(True).tolist()):
            dst_mem.write(d_addr, src_mem.read(s_addr, op.line_bytes))
