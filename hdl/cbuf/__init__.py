"""CBUF: the convolution buffer (docs/conv.md "CBUF"; v1_ias_unit_description.rst "Convolution
Buffer").

``banks`` single-port-write / single-port-read RAMs (one ``lib.memory.Memory`` each, so synthesis
infers one block RAM per bank) of ``depth`` entries of ``entry_bytes`` bytes. CDMA writes feature
data and weights through ``dat_wr`` / ``wt_wr``; CSC reads them through ``dat_rd_*`` / ``wt_rd_*``.

Layout (docs/conv.md "Where things live in CBUF"), shared by CDMA and CSC through
:class:`CbufGeometry`:

* entry address ``addr = bank * depth + row`` (``ceil_log2(banks * depth)`` bits);
* data banks ``[0, DATA_BANK+1)``, a ring of DCAP = (DATA_BANK+1) * depth entries: input line
  ``y`` (a slice) of the feature cube starts at entry ``(dat_base + y * EPS) mod DCAP`` (EPS =
  D_ENTRY_PER_SLICE.ENTRIES + 1; ``dat_base`` 0 unless the layer reuses slices kept by the
  previous one, :mod:`hdl.cbuf.keep`); the atom of channel block ``cb`` at column ``x`` is entry
  ``(dat_base + y * EPS + cb * W + x) mod DCAP`` (:meth:`CbufGeometry.dat_entry` is the offset
  from ``dat_base``);
* weight banks follow the data banks: weight entry ``n`` (bytes ``n*entry_bytes ..`` of the
  weight stream) is stored at ``(DATA_BANK+1) * depth + n % WCAP``, WCAP =
  ``(WEIGHT_BANK+1) * depth`` (a ring).
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from hdl.config import NvdlaConfig
from hdl.lib.memory import RDWR_UNDEFINED

__all__ = ["CbufGeometry", "Cbuf", "wr_layout", "rd_req_layout", "rd_resp_layout"]


@dataclass(frozen=True)
class CbufGeometry:
    """Sizes and address arithmetic of CBUF (docs/conv.md "Where things live in CBUF").

    Args:
        banks: number of banks (cfg.cbuf_bank_number).
        depth: entries per bank (cfg.cbuf_bank_depth), a power of two.
        entry_bytes: bytes per entry (cfg.cbuf_bank_width).
        atoms: memory atoms per entry R (cbuf_bank_width / memory atom bytes; 1 on nv_small,
            4 on nv_small_256): with R > 1 the write ports carry a ``mask`` of R atom lanes
            (CDMA writes a feature atom into one lane of its entry, docs/conv.md "CBUF").
        pairs: reads return the row pair of two entries (``cfg.conv16``, docs/conv16.md
            "CBUF"): entries 2i and 2i+1 are one row of ``2 * entry_bytes`` bytes, as NVIDIA's
            nv_full CBUF has 256 rows of 128 B per bank (UD "Convolution Buffer"); a 16-bit
            layer's entry E is entries 2E and 2E+1, an INT8 reader takes its half. Writes are
            unchanged. Needs an even ``depth``.

    Raises ValueError when ``depth``, ``entry_bytes`` or ``atoms`` is not a power of two or a
    size < 1, or ``atoms`` does not divide ``entry_bytes``.
    """
    banks: int
    depth: int
    entry_bytes: int
    atoms: int = 1
    pairs: bool = False

    def __post_init__(self):
        for name in ("banks", "depth", "entry_bytes", "atoms"):
            if getattr(self, name) < 1:
                raise ValueError(f"CBUF {name} must be >= 1, not {getattr(self, name)}")
        for name in ("depth", "entry_bytes", "atoms"):
            v = getattr(self, name)
            if v & (v - 1):
                raise ValueError(f"CBUF {name}={v} must be a power of two")
        if self.entry_bytes % self.atoms:
            raise ValueError(f"CBUF atoms={self.atoms} does not divide entry_bytes={self.entry_bytes}")
        if self.pairs and self.depth < 2:
            raise ValueError("CBUF pairs need a depth of 2 or more")

    @classmethod
    def from_config(cls, cfg: NvdlaConfig) -> "CbufGeometry":
        """The geometry of ``cfg`` (cbuf_bank_number x cbuf_bank_depth x cbuf_bank_width, R =
        cbuf_bank_width / memory atom atoms per entry; row pairs when ``cfg.conv16``)."""
        return cls(cfg.cbuf_bank_number, cfg.cbuf_bank_depth, cfg.cbuf_bank_width,
                   cfg.cbuf_bank_width // cfg.atom_bytes, cfg.conv16)

    @property
    def atom_shift(self) -> int:
        """log2(atoms per entry)."""
        return exact_log2(self.atoms)

    def last_block_shift(self, m: Module, atoms_m1, name: str = "last_block_shift") -> Signal:
        """log2 P, P the pixels sharing an entry in the last channel block of a feature slice
        (docs/conv.md "Where things live in CBUF"): its L = ``atoms_m1`` + 1 memory atoms
        (a value of :attr:`atom_shift` bits) take a power-of-two part R / P of an entry, so
        log2 P = log2 R - ceil(log2 L). CDMA writes and CSC reads the packed block with it.
        Combinational; returns a Signal of ``range(atom_shift + 1)``."""
        lr = self.atom_shift
        lsh = Signal(range(lr + 1), name=name)
        with m.Switch(atoms_m1):
            for v in range(1 << lr):
                with m.Case(v):
                    m.d.comb += lsh.eq(lr - v.bit_length())     # v = L - 1: ceil_log2(L)
        return lsh

    @property
    def entries(self) -> int:
        """Entries in the whole buffer (banks x depth)."""
        return self.banks * self.depth

    @property
    def addr_bits(self) -> int:
        """Bits of an entry address (nv_small: 32 x 512 -> 14)."""
        return max(1, ceil_log2(self.entries))

    @property
    def entry_bits(self) -> int:
        """Bits of one entry (nv_small: 64)."""
        return self.entry_bytes * 8

    @property
    def depth_bits(self) -> int:
        """log2(depth): the row bits of an address (the bank is ``addr >> depth_bits``)."""
        return exact_log2(self.depth)

    @property
    def entry_shift(self) -> int:
        """log2(entry_bytes): weight-stream byte ``b`` is in weight entry ``b >> entry_shift``."""
        return exact_log2(self.entry_bytes)

    def wt_base(self, data_bank):
        """First entry of the weight region: ``(DATA_BANK+1) * depth``. ``data_bank`` is the
        D_BANK.DATA_BANK field: a Python int or an Amaranth value (then an unsigned value of
        :attr:`addr_bits` + 1 bits is returned)."""
        if isinstance(data_bank, int):
            return (data_bank + 1) * self.depth
        return (data_bank + 1) << self.depth_bits

    def wt_cap(self, weight_bank):
        """Entries of the weight ring WCAP = ``(WEIGHT_BANK+1) * depth`` (int or value, as
        :meth:`wt_base`)."""
        if isinstance(weight_bank, int):
            return (weight_bank + 1) * self.depth
        return (weight_bank + 1) << self.depth_bits

    def dat_entry(self, y: int, cb: int, x: int, eps: int, width: int) -> int:
        """Entry of the feature atom (line ``y``, channel block ``cb``, column ``x``):
        ``y * eps + cb * width + x`` (Python reference of the layout)."""
        return y * eps + cb * width + x

    def wt_entry(self, n: int, data_bank: int, weight_bank: int) -> int:
        """Entry address of weight entry ``n`` (cumulative count over the layer's weight stream):
        ``wt_base + n % wt_cap`` (Python reference of the layout)."""
        return self.wt_base(data_bank) + n % self.wt_cap(weight_bank)


def wr_layout(geom: CbufGeometry) -> data.StructLayout:
    """Payload of a write port: ``addr`` (entry address), ``data`` (the entry, byte i in bits
    8i..8i+7) and, when an entry holds several memory atoms (``geom.atoms`` > 1), ``mask``:
    bit j set writes atom lane j (bytes ``j*entry_bytes/atoms ..``), the others keep their
    contents."""
    fields = {"addr": geom.addr_bits, "data": geom.entry_bits}
    if geom.atoms > 1:
        fields["mask"] = geom.atoms
    return data.StructLayout(fields)


def rd_req_layout(geom: CbufGeometry) -> data.StructLayout:
    """Payload of a read request: ``addr`` (entry address)."""
    return data.StructLayout({"addr": geom.addr_bits})


def rd_resp_layout(geom: CbufGeometry) -> data.StructLayout:
    """Payload of a read response: ``data`` (the entry; with ``geom.pairs`` the row pair
    holding the requested entry u: entry u & ~1 in the low ``entry_bits``, u | 1 above)."""
    return data.StructLayout({"data": geom.entry_bits * (2 if geom.pairs else 1)})


_RD_GROUP = 4             # banks per first-stage read mux (registered beside its banks)
_RESP_FIFO_DEPTH = 4      # RAM stage + group stage + 2 queued: full throughput, no ready path


class Cbuf(wiring.Component):
    """The convolution buffer: ``banks`` RAMs of ``depth`` x ``entry_bytes`` bytes.

    Ports (all ``lib.stream``, one entry per transfer, docs/conv.md "CBUF"):

    * ``dat_wr``, ``wt_wr``: In(:func:`wr_layout`). A write accepted in cycle t is read back by
      a request accepted from cycle t+1 on.
    * ``dat_rd_req``, ``wt_rd_req``: In(:func:`rd_req_layout`); ``dat_rd_resp``, ``wt_rd_resp``:
      Out(:func:`rd_resp_layout`): one response per request, in request order.

    Timing: each port takes one item per cycle; a read request accepted in cycle t has its
    response valid from cycle t+3: the banks' read data is selected in two registered stages,
    first among groups of 4 banks (a register per group beside its block RAMs), then among the
    groups into the response FIFO (issue 10: one 32:1 mux from the block RAMs' outputs across
    the device did not make 100 MHz on ECP5, 81.8 MHz). Each read port keeps at most 4 requests
    in flight (RAM stage, group stage and a 4-deep response FIFO, counted by a credit:
    ``*_rd_req.ready`` does not depend on the response's ``ready``), so a consumer always ready
    gets one response per cycle.

    An entry is never read in the cycle it is written (the CDMA/CSC pointers guarantee it): the
    banks carry :data:`hdl.lib.memory.RDWR_UNDEFINED`, so synthesis leaves that collision
    undefined (simulation returns the old entry).

    Bank conflicts: each bank has one write port and one read port. When both write ports (or
    both read ports) address the same bank in one cycle, one of them waits (``ready`` low);
    priority alternates on each conflict so neither starves. No entry is lost or corrupted.

    Args:
        banks, depth, entry_bytes, atoms: see :class:`CbufGeometry` (depth, entry_bytes, atoms
            powers of two; atoms > 1: masked writes of atom lanes, one RAM write enable each).

    Raises ValueError for bad sizes (see :class:`CbufGeometry`).
    """

    def __init__(self, banks: int, depth: int, entry_bytes: int, atoms: int = 1,
                 pairs: bool = False):
        self.geom = g = CbufGeometry(banks, depth, entry_bytes, atoms, pairs)
        super().__init__({
            "dat_wr": In(stream.Signature(wr_layout(g))),
            "wt_wr": In(stream.Signature(wr_layout(g))),
            "dat_rd_req": In(stream.Signature(rd_req_layout(g))),
            "dat_rd_resp": Out(stream.Signature(rd_resp_layout(g))),
            "wt_rd_req": In(stream.Signature(rd_req_layout(g))),
            "wt_rd_resp": Out(stream.Signature(rd_resp_layout(g))),
        })

    @classmethod
    def from_config(cls, cfg: NvdlaConfig) -> "Cbuf":
        """The CBUF of ``cfg`` (:meth:`CbufGeometry.from_config`)."""
        g = CbufGeometry.from_config(cfg)
        return cls(g.banks, g.depth, g.entry_bytes, g.atoms, g.pairs)

    def _bank(self, addr):
        g = self.geom
        return addr[g.depth_bits:] if g.addr_bits > g.depth_bits else 0

    def _arbitrate(self, m, name, a_valid, a_addr, b_valid, b_addr, a_ok=1, b_ok=1):
        """Two requesters of one kind (write or read); returns (a_take, b_take): each is
        accepted this cycle. ``*_ok``: the requester could be accepted (credit)."""
        conflict = Signal(name=f"{name}_conflict")
        prio_b = Signal(name=f"{name}_prio_b")
        a_take, b_take = Signal(name=f"{name}_a_take"), Signal(name=f"{name}_b_take")
        m.d.comb += [
            conflict.eq(a_valid & a_ok & b_valid & b_ok
                        & (self._bank(a_addr) == self._bank(b_addr))),
            a_take.eq(a_valid & a_ok & ~(conflict & prio_b)),
            b_take.eq(b_valid & b_ok & ~(conflict & ~prio_b)),
        ]
        with m.If(conflict):
            m.d.sync += prio_b.eq(~prio_b)
        return a_take, b_take

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        row = lambda addr: addr[:g.depth_bits]       # noqa: E731

        # ---- writes
        dw, ww = self.dat_wr, self.wt_wr
        dw_take, ww_take = self._arbitrate(m, "wr", dw.valid, dw.payload.addr,
                                           ww.valid, ww.payload.addr)
        m.d.comb += [dw.ready.eq(dw_take), ww.ready.eq(ww_take)]

        # ---- reads: credits (free response slots, taken by an accepted request, returned by a
        # delivered response; a counter, not a sum of the FIFO level and the stages: issue 10,
        # the sum ran into the arbitration and every bank's read enable, 9.1 ns)
        dr, wr = self.dat_rd_req, self.wt_rd_req
        credits = {name: Signal(range(_RESP_FIFO_DEPTH + 1), init=_RESP_FIFO_DEPTH,
                                name=f"{name}_credits") for name in ("dat", "wt")}
        dr_take, wr_take = self._arbitrate(m, "rd", dr.valid, dr.payload.addr,
                                           wr.valid, wr.payload.addr,
                                           credits["dat"] != 0, credits["wt"] != 0)
        m.d.comb += [dr.ready.eq(dr_take), wr.ready.eq(wr_take)]

        # ---- banks (with ``pairs``: rows of two entries, entry u in half u & 1 of row
        # (u mod depth) >> 1; a write enables only its half)
        halves = 2 if g.pairs else 1
        row_bits = g.entry_bits * halves
        if g.pairs:
            row = lambda addr: addr[1:g.depth_bits]        # noqa: E731
        lanes = g.atoms * halves

        def enables(take, here, payload):
            if not g.pairs:
                if g.atoms > 1:
                    return Mux(take & here, payload.mask, 0)
                return take & here
            mask = payload.mask if g.atoms > 1 else 1
            return Mux(take & here, Mux(payload.addr[0], mask << g.atoms, mask), 0)

        def wdata(payload):
            return Cat(payload.data, payload.data) if g.pairs else payload.data

        rd_data = []
        for b in range(g.banks):
            # never read in the cycle it is written (CDMA writes only entries CSC released,
            # CSC reads only entries CDMA reported written): bare block RAM (hdl.lib.memory)
            mem = Memory(shape=unsigned(row_bits), depth=g.depth // halves, init=[],
                         attrs=RDWR_UNDEFINED)
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port(granularity=row_bits // lanes) if lanes > 1 else \
                mem.write_port()
            rp = mem.read_port()
            d_here = self._bank(dw.payload.addr) == b
            w_here = self._bank(ww.payload.addr) == b
            m.d.comb += [
                wp.en.eq(enables(dw_take, d_here, dw.payload)
                         | enables(ww_take, w_here, ww.payload)),
                wp.addr.eq(row(ww.payload.addr)),
                wp.data.eq(wdata(ww.payload)),
            ]
            with m.If(dw_take & d_here):
                m.d.comb += [wp.addr.eq(row(dw.payload.addr)), wp.data.eq(wdata(dw.payload))]
            dr_here = self._bank(dr.payload.addr) == b
            wr_here = self._bank(wr.payload.addr) == b
            m.d.comb += [
                rp.en.eq((dr_take & dr_here) | (wr_take & wr_here)),
                rp.addr.eq(row(wr.payload.addr)),
            ]
            with m.If(dr_take & dr_here):
                m.d.comb += rp.addr.eq(row(dr.payload.addr))
            rd_data.append(rp.data)

        # ---- responses: the RAM outputs of the bank read in the previous cycle, selected
        # within each group of _RD_GROUP banks into a register, then among the groups into the
        # response FIFO
        groups = [rd_data[i:i + _RD_GROUP] for i in range(0, g.banks, _RD_GROUP)]
        for name, req, take, resp in (("dat", dr, dr_take, self.dat_rd_resp),
                                      ("wt", wr, wr_take, self.wt_rd_resp)):
            credit = credits[name]
            m.d.sync += credit.eq(credit - take + (resp.valid & resp.ready))
            inflight = Signal(name=f"{name}_inflight")          # a read in the RAM stage
            bank_q = Signal(range(g.banks), name=f"{name}_bank_q")
            m.d.sync += inflight.eq(take)
            with m.If(take):
                m.d.sync += bank_q.eq(self._bank(req.payload.addr))
            sel_bits = min(exact_log2(_RD_GROUP), len(bank_q))
            inflight2 = Signal(name=f"{name}_inflight2")        # ... in the group stage
            group_q = Signal(range(len(groups)), name=f"{name}_group_q")
            m.d.sync += [inflight2.eq(inflight), group_q.eq(bank_q >> sel_bits)]
            picked = []
            for k, members in enumerate(groups):
                reg = Signal(row_bits, name=f"{name}_group{k}_data")
                with m.Switch(bank_q[:sel_bits]):
                    for i, d in enumerate(members):
                        with m.Case(i):
                            m.d.sync += reg.eq(d)
                picked.append(reg)
            fifo = SyncFIFO(width=row_bits, depth=_RESP_FIFO_DEPTH)
            m.submodules[f"{name}_resp_fifo"] = fifo
            with m.Switch(group_q):
                for k, reg in enumerate(picked):
                    with m.Case(k):
                        m.d.comb += fifo.w_data.eq(reg)
            m.d.comb += [
                fifo.w_en.eq(inflight2),
                resp.valid.eq(fifo.r_rdy),
                resp.payload.data.eq(fifo.r_data),
                fifo.r_en.eq(resp.ready),
            ]
        return m
