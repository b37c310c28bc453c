"""Generic write DMA: writes a feature cube's atoms, arriving in traversal order (format.rst
"Feature data": surface, line, atom), to memory through an MCIF write client.

Structure: a :class:`hdl.dma.walker.CubeWalker` gives the runs (contiguous atoms inside one
burst window), through a :class:`hdl.lib.stream.SkidBuffer`. Incoming atoms are packed into beats (an atom's strobes cover its bytes; several
atoms per beat when ``atom_bytes < beat_bytes``) and queued in a data FIFO of ``depth`` beats.
When the last atom of a run is packed, the run's burst request (address, length) is queued; so a
burst is only requested once all its beats are buffered, and MCIF's W channel, held for the
burst until WLAST, never waits on this client. ``done`` pulses when every burst of the cube has
its write response.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, stream
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaWriteSignature, write_data_layout, write_req_layout
from hdl.dma.walker import WalkerDma, log2, run_request

__all__ = ["WriteDma"]

OUTSTANDING_BITS = 20    # bursts requested and not yet acknowledged


class WriteDma(WalkerDma):
    """Write DMA for one feature cube.

    Parameters: ``addr_width`` (bits), ``atom_bytes``, ``atom_elems`` (channels per atom),
    ``beat_bytes`` (AXI data bytes), ``max_burst`` (beats per AXI burst), ``depth`` (data FIFO,
    beats; must be > ``max_burst``, 2 x ``max_burst`` or more for full throughput),
    ``atom_shape`` (payload shape of ``atoms``; default ``unsigned(8 * atom_bytes)``).

    Ports: ``start`` In(1) pulse (ignored while ``busy``); ``cube`` In(cube_layout) sampled at
    ``start``; ``atoms`` In(stream of ``atom_shape``) in traversal order; ``dma``
    Out(:class:`hdl.axi.DmaWriteSignature`) to MCIF; ``done`` Out(1) one-cycle pulse when the
    whole cube is written and acknowledged; ``busy`` Out(1) from ``start`` to ``done``.
    Throughput: one atom per cycle; with ``wide`` (see :class:`hdl.dma.walker.WalkerDma`)
    one beat per cycle: transfers of up to one beat of atoms, repacked to the destination's
    lanes.

    ``pipelined`` (default False): cubes follow each other without waiting for write
    responses. ``busy`` then covers a cube until its last request and data beat have left (its
    atoms are all packed and sent), so the next cube may start while responses are due;
    ``done`` pulses once per cube, in order, when that cube's bursts are all acknowledged (up to
    ``PIPELINED_CUBES`` cubes awaiting responses; ``busy`` stays high while that many are).

    Raises ValueError: see :func:`hdl.dma.walker.check_dma_params`, or ``depth <= max_burst``.
    """

    spare_depth = 1      # a burst is queued whole before its request: one more beat keeps flowing
    PIPELINED_CUBES = 4  # cubes awaiting their write responses in pipelined mode

    def __init__(self, *, pipelined: bool = False, **kw):
        self.pipelined = pipelined
        super().__init__(**kw)

    def dma_members(self):
        return {"atoms": In(stream.Signature(self.atom_shape)),
                "dma": Out(DmaWriteSignature(self.addr_width, self.beat_bytes * 8)),
                "done": Out(1)}

    def elaborate(self, platform):
        m = Module()
        _, runs = self.add_runs(m)
        run = runs.payload
        beat_addr, length, lane0 = run_request(run, self.atom_bytes, self.beat_bytes)

        req_layout = write_req_layout(self.addr_width)
        dat_layout = write_data_layout(self.beat_bytes * 8)
        m.submodules.req_fifo = reqq = fifo.SyncFIFOBuffered(width=req_layout.size,
                                                             depth=self.depth)
        m.submodules.data_fifo = datq = fifo.SyncFIFOBuffered(width=dat_layout.size,
                                                              depth=self.depth)
        wreq = data.View(req_layout, reqq.w_data)
        wdat = data.View(dat_layout, datq.w_data)
        m.d.comb += [
            wreq.addr.eq(beat_addr), wreq.len.eq(length),
            self.dma.req.valid.eq(reqq.r_rdy), self.dma.req.payload.eq(reqq.r_data),
            reqq.r_en.eq(self.dma.req.ready),
            self.dma.data.valid.eq(datq.r_rdy), self.dma.data.payload.eq(datq.r_data),
            datq.r_en.eq(self.dma.data.ready),
        ]

        if self.wide and self.lanes > 1:
            self._pack_groups(m, runs, run, lane0, reqq, datq, wdat)
        else:
            # one atom per beat, wide or not: every transfer is one atom (count 1)
            self._pack_atoms(m, runs, run, lane0, reqq, datq, wdat)

        if self.pipelined:
            self._pipelined_done(m, reqq, datq, runs, run)
            return m

        # completion: every queued burst acknowledged after the cube's last run
        running = Signal()
        all_queued = Signal()
        outstanding = Signal(OUTSTANDING_BITS)
        outstanding_next = Signal(OUTSTANDING_BITS)
        # ``outstanding == 0`` as a register of its own, from the next count (issue 10: the
        # counter's comparison started the path from ``done`` into the units' register files,
        # whose layer-done load enables fan out to every configuration register)
        none_outstanding = Signal(init=1)
        queued = reqq.w_en
        m.d.comb += outstanding_next.eq(outstanding + queued - self.dma.done)
        m.d.sync += [outstanding.eq(outstanding_next), none_outstanding.eq(outstanding_next == 0)]
        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), all_queued.eq(0)]
        with m.If(queued & run.last):
            m.d.sync += all_queued.eq(1)
        with m.If(running & all_queued & none_outstanding):
            m.d.comb += self.done.eq(1)
            m.d.sync += [running.eq(0), all_queued.eq(0)]
        m.d.comb += self.busy.eq(running)
        return m

    def _pack_atoms(self, m: Module, runs, run, lane0, reqq, datq, wdat) -> None:
        """One atom per cycle into beats; the run at the walker's output is the one being
        packed."""
        atom = self.atoms.payload.data if self.wide else Value.cast(self.atoms.payload)
        fire = Signal()
        count_shape = run.count.shape()
        started = Signal()                      # part of the current run already packed
        cur_left = Signal(count_shape)
        left = Signal(count_shape)              # atoms of the run still to pack
        last_of_run = Signal()
        m.d.comb += [left.eq(Mux(started, cur_left, run.count)), last_of_run.eq(left == 1)]
        with m.If(fire):
            m.d.sync += [started.eq(~last_of_run), cur_left.eq(left - 1)]
        if self.lanes == 1:
            m.d.comb += [wdat.data.eq(atom), wdat.strb.eq((1 << self.beat_bytes) - 1),
                         datq.w_en.eq(fire)]
        else:
            lane_bits = log2(self.lanes)
            cur_lane = Signal(lane_bits)
            lane = Signal(lane_bits)
            acc_data = Signal(self.beat_bytes * 8)  # lanes packed so far into the current beat
            acc_strb = Signal(self.beat_bytes)
            end_beat = Signal()
            atom_strb = (1 << self.atom_bytes) - 1
            m.d.comb += [
                lane.eq(Mux(started, cur_lane, lane0)),
                end_beat.eq((lane == self.lanes - 1) | last_of_run),
                wdat.data.eq(acc_data | (atom << (lane * self.atom_bits))),
                wdat.strb.eq(acc_strb | (atom_strb << (lane * self.atom_bytes))),
                datq.w_en.eq(fire & end_beat),
            ]
            with m.If(fire):
                m.d.sync += cur_lane.eq(lane + 1)
                with m.If(end_beat):
                    m.d.sync += [acc_data.eq(0), acc_strb.eq(0)]
                with m.Else():
                    m.d.sync += [acc_data.eq(wdat.data), acc_strb.eq(wdat.strb)]

        m.d.comb += [
            self.atoms.ready.eq(runs.valid & datq.w_rdy & reqq.w_rdy),
            fire.eq(self.atoms.valid & self.atoms.ready),
            runs.ready.eq(fire & last_of_run),
            reqq.w_en.eq(fire & last_of_run),
        ]

    def _pack_groups(self, m: Module, runs, run, lane0, reqq, datq, wdat) -> None:
        """``wide``: transfers of up to ``lanes`` atoms into beats, one beat per cycle. The
        transfers follow the source's beats, the beats here the destination's lanes, so atoms
        wait in a carry buffer of ``2 * lanes - 1`` atoms (a transfer is taken while at most
        ``lanes - 1`` atoms stay after this cycle's beat). A beat is written when the buffer
        holds all its atoms: ``min(lanes - lane, atoms left in the run)`` from the run's first
        lane (0 after its first beat). Transfers are taken before the cube's runs are known
        (also the next cube's, while this one's last beats leave): a cube's atoms are all
        written when its last beat is, so what the buffer holds then belongs to later cubes
        and ``busy`` does not count it."""
        lanes, ab = self.lanes, self.atom_bits
        cap = 2 * lanes - 1
        buf = Signal(cap * ab)                  # atom i in bits [ab*(i+1)-1 : ab*i]
        held = Signal(range(cap + 1))
        count_shape = run.count.shape()
        started = Signal()                      # part of the current run already written
        cur_left = Signal(count_shape)
        left = Signal(count_shape)              # atoms of the run still to write
        need = Signal(range(lanes + 1))         # atoms of the run in this beat
        emit = Signal()
        k = Signal(range(lanes + 1))            # atoms leaving the buffer this cycle
        kept = Signal(range(cap + 1))
        fire = Signal()
        last_of_run = Signal()
        lane = Signal(range(lanes))             # lanes > 1: one atom per beat packs atoms
        m.d.comb += [lane.eq(Mux(started, 0, lane0)),
                     need.eq(Mux(left < lanes - lane, left, lanes - lane))]
        m.d.comb += [
            left.eq(Mux(started, cur_left, run.count)),
            last_of_run.eq(left == need),
            emit.eq(runs.valid & datq.w_rdy & reqq.w_rdy & (held >= need)),
            k.eq(Mux(emit, need, 0)),
            kept.eq(held - k),
            self.atoms.ready.eq(kept < lanes),
            fire.eq(self.atoms.valid & self.atoms.ready),
        ]
        n_in = self.atoms.payload.count
        incoming = Cat(*(Mux(i < n_in, self.atoms.payload.data.word_select(i, ab), 0)
                         for i in range(lanes)))
        head = Cat(*(Mux(i < need, buf.word_select(i, ab), 0) for i in range(lanes)))
        strb = Cat(*(Value.cast((j >= lane) & (j < lane + need)).replicate(self.atom_bytes)
                     for j in range(lanes)))
        shifted = Signal(cap * ab)
        m.d.comb += [
            shifted.eq((buf >> (k * ab)) | Mux(fire, incoming << (kept * ab), 0)),
            wdat.data.eq(head << (lane * ab)),
            wdat.strb.eq(strb),
            datq.w_en.eq(emit),
            runs.ready.eq(emit & last_of_run),
            reqq.w_en.eq(emit & last_of_run),
        ]
        m.d.sync += [buf.eq(shifted), held.eq(kept + Mux(fire, n_in, 0))]
        with m.If(emit):
            m.d.sync += [started.eq(~last_of_run), cur_left.eq(left - need)]

    def _pipelined_done(self, m: Module, reqq, datq, runs, run) -> None:
        """``done`` per cube in pipelined mode (class docstring): the bursts of each cube are
        counted as they are queued and pushed, at its last run, into a FIFO; write responses
        (in order: one client, one AXI ID) count toward the oldest cube of it."""
        m.submodules.cube_bursts = cq = fifo.SyncFIFOBuffered(width=OUTSTANDING_BITS,
                                                              depth=self.PIPELINED_CUBES)
        queued = reqq.w_en
        bursts = Signal(OUTSTANDING_BITS)           # bursts queued of the cube being packed
        acked = Signal(OUTSTANDING_BITS)            # responses toward the oldest cube
        with m.If(queued):
            m.d.sync += bursts.eq(Mux(run.last, 0, bursts + 1))
        m.d.comb += [cq.w_data.eq(bursts + 1), cq.w_en.eq(queued & run.last)]
        total = Signal(OUTSTANDING_BITS)
        finish = Signal()
        m.d.comb += [total.eq(acked + self.dma.done),
                     finish.eq(cq.r_rdy & (total == cq.r_data)),
                     cq.r_en.eq(finish), self.done.eq(finish)]
        m.d.sync += acked.eq(Mux(finish, 0, total))
        # levels, not r_rdy: an entry is in a buffered FIFO a cycle before it can be read
        m.d.comb += self.busy.eq(runs.valid | (reqq.level != 0) | (datq.level != 0) | ~cq.w_rdy
                                 | m.submodules.walker.busy)
