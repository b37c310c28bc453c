"""Generic read DMA: reads a feature cube from memory through an MCIF read client and returns its
atoms in traversal order (format.rst "Feature data": surface, line, atom).

Structure: a :class:`hdl.dma.walker.CubeWalker` produces runs (contiguous atoms inside one burst
window), through a :class:`hdl.lib.stream.SkidBuffer`; each run becomes one AXI burst request.
Returned beats go into a latency FIFO of ``depth`` beats; a request is only issued when the FIFO
has room for all its beats, counting the beats still in flight (credit rule of
:class:`hdl.axi.DmaReadSignature`), so read data is always accepted at once. The output stage
selects each atom's lane from its beat (several atoms per beat when ``atom_bytes <
beat_bytes``).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream
from amaranth.lib.wiring import Out

from hdl.axi import DmaReadSignature
from hdl.dma.walker import WalkerDma, log2, run_request

__all__ = ["ReadDma"]


class ReadDma(WalkerDma):
    """Read DMA for one feature cube.

    Parameters: ``addr_width`` (bits), ``atom_bytes``, ``atom_elems`` (channels per atom),
    ``beat_bytes`` (AXI data bytes), ``max_burst`` (beats per AXI burst), ``depth`` (latency
    FIFO entries, beats; should exceed memory latency x request rate for full throughput, and
    must be >= ``max_burst``), ``atom_shape`` (payload shape of ``atoms``; default
    ``unsigned(8 * atom_bytes)``, byte i of the atom in bits [8i+7:8i]).

    Ports: ``start`` In(1) pulse (ignored while ``busy``); ``cube`` In(cube_layout) sampled at
    ``start``; ``dma`` Out(:class:`hdl.axi.DmaReadSignature`) to MCIF; ``atoms`` Out(stream of
    ``atom_shape``) in traversal order; ``busy`` Out(1): runs or beats remain.
    Throughput: one atom per cycle when memory keeps up; with ``wide`` (see
    :class:`hdl.dma.walker.WalkerDma`) one beat per cycle, each transfer the atoms of one run
    in one beat.

    Raises ValueError: see :func:`hdl.dma.walker.check_dma_params`, or ``depth < max_burst``.
    """

    def dma_members(self):
        return {"dma": Out(DmaReadSignature(self.addr_width, self.beat_bytes * 8)),
                "atoms": Out(stream.Signature(self.atom_shape))}

    def elaborate(self, platform):
        m = Module()
        walker, runs = self.add_runs(m)
        run = runs.payload
        beat_addr, length, lane0 = run_request(run, self.atom_bytes, self.beat_bytes)

        m.submodules.lat_fifo = lat = fifo.SyncFIFOBuffered(width=self.beat_bytes * 8,
                                                            depth=self.depth)
        inflight = Signal(range(self.depth + 1))       # beats requested, not yet popped
        credit = Signal()
        issue = Signal()
        pop = Signal()
        room = Signal()          # space for the run's lane record (always, with one atom per beat)
        m.d.comb += [
            credit.eq((inflight + length + 1 <= self.depth) & room),
            self.dma.req.valid.eq(runs.valid & credit),
            runs.ready.eq(self.dma.req.ready & credit),
            self.dma.req.payload.addr.eq(beat_addr),
            self.dma.req.payload.len.eq(length),
            issue.eq(self.dma.req.valid & self.dma.req.ready),
            lat.w_data.eq(self.dma.rsp.payload),
            lat.w_en.eq(self.dma.rsp.valid),
            self.dma.rsp.ready.eq(lat.w_rdy),
            self.busy.eq(walker.busy | runs.valid | (inflight != 0)),
        ]
        m.d.sync += inflight.eq(inflight + Mux(issue, length + 1, 0) - pop)

        if self.lanes == 1:
            # one atom per beat: the run structure is not needed after the request
            m.d.comb += [room.eq(1), self.atoms.valid.eq(lat.r_rdy)]
            if self.wide:
                m.d.comb += [self.atoms.payload.data.eq(lat.r_data),
                             self.atoms.payload.count.eq(1)]
            else:
                m.d.comb += self.atoms.payload.eq(lat.r_data)
            m.d.comb += [pop.eq(lat.r_rdy & self.atoms.ready), lat.r_en.eq(pop)]
            return m

        # several atoms per beat: remember (first lane, atom count) of every issued run
        lane_bits = log2(self.lanes)
        count_shape = run.count.shape()
        runq_layout = data.StructLayout({"lane0": unsigned(lane_bits), "count": count_shape})
        m.submodules.run_fifo = runq = fifo.SyncFIFOBuffered(width=runq_layout.size,
                                                             depth=self.depth)
        m.d.comb += [room.eq(runq.w_rdy), runq.w_en.eq(issue)]
        wq = data.View(runq_layout, runq.w_data)
        rq = data.View(runq_layout, runq.r_data)
        m.d.comb += [wq.lane0.eq(lane0), wq.count.eq(run.count)]

        started = Signal()                         # part of the head run already emitted
        cur_lane = Signal(lane_bits)
        cur_left = Signal(count_shape)
        lane = Signal(lane_bits)
        left = Signal(count_shape)
        fire = Signal()
        if self.wide:
            # one transfer per beat: the run's atoms in it, from its first lane (0 after the
            # run's first beat; runs start on a new request, so a beat holds one run's atoms)
            n = Signal(range(self.lanes + 1))
            m.d.comb += [
                lane.eq(Mux(started, 0, rq.lane0)),
                left.eq(Mux(started, cur_left, rq.count)),
                n.eq(Mux(left < self.lanes - lane, left, self.lanes - lane)),
                self.atoms.valid.eq(lat.r_rdy & runq.r_rdy),
                self.atoms.payload.data.eq(lat.r_data >> (lane * self.atom_bits)),
                self.atoms.payload.count.eq(n),
                fire.eq(self.atoms.valid & self.atoms.ready),
                pop.eq(fire), lat.r_en.eq(pop),
                runq.r_en.eq(fire & (left == n)),
            ]
            with m.If(fire):
                m.d.sync += [started.eq(left != n), cur_left.eq(left - n)]
            return m
        end_beat = Signal()
        m.d.comb += [
            lane.eq(Mux(started, cur_lane, rq.lane0)),
            left.eq(Mux(started, cur_left, rq.count)),
            self.atoms.valid.eq(lat.r_rdy & runq.r_rdy),
            self.atoms.payload.eq(lat.r_data.word_select(lane, self.atom_bits)),
            fire.eq(self.atoms.valid & self.atoms.ready),
            end_beat.eq((lane == self.lanes - 1) | (left == 1)),
            pop.eq(fire & end_beat), lat.r_en.eq(pop),
            runq.r_en.eq(fire & (left == 1)),
        ]
        with m.If(fire):
            m.d.sync += [started.eq(left != 1), cur_lane.eq(lane + 1), cur_left.eq(left - 1)]
        return m
