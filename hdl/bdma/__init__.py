"""BDMA: the Bridge DMA (unit description "Bridge DMA", programming guide "BDMA programming"),
copying cubes of 32-byte atoms between the primary memory (MCIF) and the on-chip SRAM (CVIF).

Behaviour (the facts of NVIDIA's nvdlav1 RTL, vmod/nvdla/bdma, as verif/model/bdma.py lists
them; shared with the model only through the register map):

* single registers; ``CFG_OP.EN``, ``CFG_LAUNCH0/1`` are plain flops that also act when written
  with bit 0 set;
* an EN write queues an *operation*: the registers as the write finds them (:func:`op_layout`)
  go into the operation queue (:class:`hdl.lib.fifo`-style ``SyncFIFOBuffered`` of
  ``QUEUE_DEPTH`` = 21 entries: NVIDIA's 20-entry FIFO and its output register).
  ``STATUS.FREE_SLOT`` = ``20 - max(0, waiting - 1)``; an EN with no room is dropped;
* a LAUNCHg write makes a *group* of the operations queued since the previous launch (counted at
  the launch; NVIDIA's RTL counts until the previous group has been handed out, which differs
  only for operations written after a launch while the group before it is still being handed
  out); groups run in launch order; ``GRPg_BUSY`` is set from the launch until the group's last
  write response, when ``done_grp[g]`` pulses (GLB's BDMA_DONE_STATUSg); a group of no operation
  never completes, nor does anything after it;
* an operation moves ``SURF_REPEAT + 1`` surfaces of ``LINE_REPEAT + 1`` lines of ``SIZE + 1``
  atoms: the source and destination are cubes of :func:`hdl.dma.cube.cube_layout` with one
  32-byte atom per channel surface (``atom_elems`` = 1: width = SIZE, height = LINE_REPEAT,
  channel = SURF_REPEAT, 13 bits each: the repeats NVIDIA's write stage can count), read by an
  :class:`hdl.dma.ReadDma` and written by an :class:`hdl.dma.WriteDma` joined by a *wide* atom
  stream (each transfer the atoms of one source beat, repacked to the destination's beats:
  one beat per cycle each way, two atoms on 512-bit beats); CFG_CMD's RAM types choose the
  memory of each (0 = CV SRAM, 1 = MC);
* an operation's reads start as soon as the previous operation's read requests have left, its
  writes as soon as the previous one's writes have left (a pipelined WriteDma counts the write
  responses per operation): reads of one operation overlap the writes of the one before, as in
  NVIDIA's BDMA, and nothing waits for a write response but the group's done. ``IDLE`` = no
  operation waiting or in flight and no launched group.

Stall counters as NVIDIA's: a read stall (request valid, not taken) counts for the group being
handed out, write stalls (request or data) in one counter; ``CFG_STATUS.STALL_COUNT_EN``
freezes them; ``STATUS_GRPn_*_STALL`` read 0 from group n's launch and take the counts at its
done. They count cycles of this design, so they differ from NVIDIA's (and the untimed model
reads 0).

Parameters come from the configuration: atoms of 32 bytes on AXI beats of
``cfg.primary_memif_width`` bits (at least 256: an atom must fit a beat), bursts of
``cfg.primary_memif_max_burst`` beats.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import Out

from hdl.config import NvdlaConfig
from hdl.dma import ReadDma, WriteDma, read_dma_params, write_dma_params
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS, cube_layout
from hdl.regfile import reg_word
from hdl.regmap import REGMAP
from hdl.unit import DatapathUnit, connect_dma

__all__ = ["Bdma", "op_layout", "ATOM_BYTES", "SLOTS", "QUEUE_DEPTH"]

ATOM_BYTES = 32           # CFG_LINE.SIZE counts 32-byte atoms (programming guide)
SLOTS = 20                # STATUS.FREE_SLOT after reset
QUEUE_DEPTH = SLOTS + 1   # NVIDIA's FIFO plus its output register


def op_layout(addr_width: int) -> data.StructLayout:
    """One queued operation: source and destination byte addresses (``addr_width`` bits), line
    size in atoms minus one, lines and surfaces minus one (13 bits each), the four byte strides
    (32 bits) and the RAM types (1 = MC, 0 = CV SRAM)."""
    return data.StructLayout({
        "src": unsigned(addr_width), "dst": unsigned(addr_width),
        "size": unsigned(CUBE_DIM_BITS), "lines": unsigned(CUBE_DIM_BITS),
        "surfs": unsigned(CUBE_DIM_BITS),
        "src_line": unsigned(STRIDE_BITS), "dst_line": unsigned(STRIDE_BITS),
        "src_surf": unsigned(STRIDE_BITS), "dst_surf": unsigned(STRIDE_BITS),
        "src_mc": 1, "dst_mc": 1,
    })


class _CopyReadDma(ReadDma):
    """ReadDma with ``walking`` Out(1): the cube's read requests have not all left yet (its
    walker or run buffer holds runs); a next cube may start when it is low."""

    def dma_members(self):
        return {**super().dma_members(), "walking": Out(1)}

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.walking.eq(m.submodules.walker.busy | m.submodules.run_skid.o.valid)
        return m


def _cube(addr, line, surf, op) -> Cat:
    """The bits of a :func:`hdl.dma.cube.cube_layout` view of one side of ``op``."""
    return Cat(addr, line, surf, op.size, op.lines, op.surfs)


class Bdma(DatapathUnit):
    """The BDMA unit (module docstring) of configuration ``cfg`` (needs cfg.bdma, AXI beats of
    at least 32 bytes: ValueError otherwise).

    Ports (hdl/unit.py convention): ``csb_bdma`` In(RegBusSignature); ``bdma_rd``
    Out(DmaReadSignature) and ``bdma_wr`` Out(DmaWriteSignature) (requests with ``cv`` when
    cfg.secondary_memif); ``done_grp`` Out(2); ``busy`` Out(1) (an operation is queued or runs).
    """

    REGISTER_FILES = ("BDMA",)
    READ_CLIENTS = ("bdma_rd",)
    WRITE_CLIENTS = ("bdma_wr",)
    INTERRUPT = "bdma"

    def __init__(self, cfg: NvdlaConfig):
        if not cfg.bdma:
            raise ValueError(f"{cfg.name}: no BDMA in this configuration (bdma=False)")
        if cfg.axi_data_bytes < ATOM_BYTES:
            raise ValueError(f"{cfg.name}: BDMA moves {ATOM_BYTES}-byte atoms; AXI beats of "
                             f"{cfg.axi_data_bytes} bytes are narrower")
        super().__init__(cfg)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        aw = cfg.mem_address_width
        unit = REGMAP.unit("BDMA")
        rf = self.add_register_file(m, "BDMA")
        r = rf.cfg
        bus = self.csb_bdma

        def written(reg: str):
            """A CSB write of ``reg`` with bit 0 set, in the cycle it lands (the register file
            stores it at the same edge)."""
            return bus.we & (bus.addr == reg_word(unit, reg)) & bus.wdata[0]

        # ---- the operation queue ----
        lay = op_layout(aw)
        m.submodules.ops = ops = fifo.SyncFIFOBuffered(width=lay.size, depth=QUEUE_DEPTH)
        new = data.View(lay, ops.w_data)

        def raw(reg: str):
            return getattr(r, reg).as_value()
        src = Cat(raw("cfg_src_addr_low"), raw("cfg_src_addr_high"))[:aw]
        dst = Cat(raw("cfg_dst_addr_low"), raw("cfg_dst_addr_high"))[:aw]
        cmd = raw("cfg_cmd")
        m.d.comb += [
            new.src.eq(src), new.dst.eq(dst),
            new.size.eq(raw("cfg_line")[:CUBE_DIM_BITS]),
            new.lines.eq(raw("cfg_line_repeat")[:CUBE_DIM_BITS]),
            new.surfs.eq(raw("cfg_surf_repeat")[:CUBE_DIM_BITS]),
            new.src_line.eq(raw("cfg_src_line")), new.dst_line.eq(raw("cfg_dst_line")),
            new.src_surf.eq(raw("cfg_src_surf")), new.dst_surf.eq(raw("cfg_dst_surf")),
            new.src_mc.eq(cmd[0]), new.dst_mc.eq(cmd[1]),
            ops.w_en.eq(written("CFG_OP")),        # dropped by the FIFO when it is full
        ]

        # operations queued since the last launch, and the launched groups (group, count)
        gather = Signal(range(QUEUE_DEPTH + 1))
        pushed = ops.w_en & ops.w_rdy
        launch = [written("CFG_LAUNCH0"), written("CFG_LAUNCH1")]
        any_launch = launch[0] | launch[1]
        grp_layout = data.StructLayout({"group": 1, "count": range(QUEUE_DEPTH + 1)})
        m.submodules.groups = groups = fifo.SyncFIFOBuffered(width=grp_layout.size, depth=2)
        gnew = data.View(grp_layout, groups.w_data)
        m.d.comb += [gnew.group.eq(launch[1]), gnew.count.eq(gather),
                     groups.w_en.eq(any_launch)]
        with m.If(any_launch):
            m.d.sync += gather.eq(pushed)
        with m.Elif(pushed):
            m.d.sync += gather.eq(gather + 1)

        busy = [Signal(name=f"grp{g}_busy") for g in range(2)]
        done_grp = Signal(2)
        for g in range(2):
            with m.If(launch[g]):
                m.d.sync += busy[g].eq(1)
            with m.Elif(done_grp[g]):
                m.d.sync += busy[g].eq(0)

        # ---- the engines ----
        atoms = {"atom_bytes": ATOM_BYTES, "atom_elems": 1}   # one 32-byte atom per surface
        # wide atom streams: one AXI beat per cycle each way (two atoms on 512-bit beats)
        rd = _CopyReadDma(wide=True, **{**read_dma_params(cfg), **atoms})
        wr = WriteDma(pipelined=True, wide=True, **{**write_dma_params(cfg), **atoms})
        m.submodules.rd, m.submodules.wr = rd, wr
        wiring.connect(m, rd.atoms, wr.atoms)

        # ---- the sequencer ----
        # groups in launch order; an operation's read starts as soon as the previous one's read
        # requests have all left (its destination cube then waits in ``pending`` for the write
        # engine), its write as soon as the previous one's writes have left (their responses
        # are counted per cube by the pipelined WriteDma): reads of one operation overlap the
        # writes of the one before, as in NVIDIA's BDMA
        running = Signal()          # a group has been taken from the launch queue
        group = Signal()
        left = Signal(range(QUEUE_DEPTH + 1))     # operations of the group not started
        head = data.View(grp_layout, groups.r_data)
        op = data.View(lay, ops.r_data)
        dst_layout = data.StructLayout({"cube": cube_layout(aw), "mc": 1, "last": 1, "group": 1})
        m.submodules.pending = pending = fifo.SyncFIFOBuffered(width=dst_layout.size, depth=2)
        m.submodules.writing = writing = fifo.SyncFIFOBuffered(width=2, depth=WriteDma.PIPELINED_CUBES + 1)
        pnew, phead = data.View(dst_layout, pending.w_data), data.View(dst_layout, pending.r_data)
        src_mc, dst_mc = Signal(), Signal()   # RAM types of the requests leaving each engine
        rd_go, wr_go = Signal(), Signal()
        m.d.comb += [
            rd_go.eq(running & (left != 0) & ops.r_rdy & ~rd.walking & pending.w_rdy),
            ops.r_en.eq(rd_go), rd.start.eq(rd_go),
            rd.cube.eq(_cube(op.src, op.src_line, op.src_surf, op)),
            pending.w_en.eq(rd_go),
            pnew.cube.eq(_cube(op.dst, op.dst_line, op.dst_surf, op)), pnew.mc.eq(op.dst_mc),
            pnew.last.eq(left == 1), pnew.group.eq(group),
            groups.r_en.eq(~running),
            wr_go.eq(pending.r_rdy & ~wr.busy & writing.w_rdy),
            pending.r_en.eq(wr_go), wr.start.eq(wr_go), wr.cube.eq(phead.cube),
            writing.w_en.eq(wr_go), writing.w_data.eq(Cat(phead.last, phead.group)),
        ]
        with m.If(~running & groups.r_rdy):
            # a group of no operation stays running forever (NVIDIA's BDMA never completes it)
            m.d.sync += [running.eq(1), group.eq(head.group), left.eq(head.count)]
        with m.If(rd_go):
            m.d.sync += [left.eq(left - 1), src_mc.eq(op.src_mc)]
            with m.If(left == 1):
                m.d.sync += running.eq(0)
        with m.If(wr_go):
            m.d.sync += dst_mc.eq(phead.mc)
        # a cube's writes all acknowledged: the group's done when it was its last operation
        m.d.comb += writing.r_en.eq(wr.done)
        with m.If(wr.done & writing.r_data[0]):
            m.d.comb += done_grp.eq(Mux(writing.r_data[1], 0b10, 0b01))
        connect_dma(m, rd.dma, self.bdma_rd, src_mc)
        connect_dma(m, wr.dma, self.bdma_wr, dst_mc)
        m.d.comb += self.done_grp.eq(done_grp)
        copying = rd.busy | wr.busy | (pending.level != 0) | (writing.level != 0)

        # ---- stall counters (NVIDIA's nvdlav1 BDMA, verif/model/bdma.py lists the facts) ----
        # a read stall (request valid, not taken) counts for the group whose operations are
        # being handed out, a write stall (request or data valid, not taken) in one counter for
        # both; CFG_STATUS.STALL_COUNT_EN freezes them; a group's STATUS_GRPn_* registers read 0
        # from its launch and take the counts at its done, when its read counter and the write
        # counter restart from 0
        count_en = raw("cfg_status")[0]
        rd_stall = self.bdma_rd.req.valid & ~self.bdma_rd.req.ready
        wr_stall = ((self.bdma_wr.req.valid & ~self.bdma_wr.req.ready)
                    | (self.bdma_wr.data.valid & ~self.bdma_wr.data.ready))
        rd_count = [Signal(32, name=f"rd_stall{g}") for g in range(2)]
        wr_count = Signal(32)
        snap_rd = [Signal(32, name=f"grp{g}_read_stall") for g in range(2)]
        snap_wr = [Signal(32, name=f"grp{g}_write_stall") for g in range(2)]
        for g in range(2):
            with m.If(done_grp[g]):
                m.d.sync += [snap_rd[g].eq(rd_count[g]), snap_wr[g].eq(wr_count)]
                with m.If(count_en):
                    m.d.sync += rd_count[g].eq(0)
            with m.Elif(count_en & rd_stall & (group == g)):
                m.d.sync += rd_count[g].eq(rd_count[g] + 1)
            with m.If(launch[g]):
                m.d.sync += [snap_rd[g].eq(0), snap_wr[g].eq(0)]
        with m.If(count_en):
            with m.If(done_grp.any()):
                m.d.sync += wr_count.eq(0)
            with m.Elif(wr_stall):
                m.d.sync += wr_count.eq(wr_count + 1)

        # ---- status ----
        level = ops.level
        free = Signal(8)
        m.d.comb += free.eq(Mux(level > 1, QUEUE_DEPTH - level, SLOTS))
        hw = rf.hw
        m.d.comb += [
            hw.status["free_slot"].eq(free),
            hw.status["idle"].eq((level == 0) & ~running & ~groups.r_rdy & ~copying),
            hw.status["grp0_busy"].eq(busy[0]),
            hw.status["grp1_busy"].eq(busy[1]),
            hw.status_grp0_read_stall["count"].eq(snap_rd[0]),
            hw.status_grp0_write_stall["count"].eq(snap_wr[0]),
            hw.status_grp1_read_stall["count"].eq(snap_rd[1]),
            hw.status_grp1_write_stall["count"].eq(snap_wr[1]),
            self.busy.eq(running | copying | (level != 0)),
        ]
        return m
