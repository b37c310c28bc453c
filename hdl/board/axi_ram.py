"""AXI4 slave on on-chip block RAM for NV_nvdla's DBB port (``nvdla_core2dbb_*``), with a second,
32-bit port for the host (the UART bridge, :mod:`hdl.board.bridge`). docs/fpga.md, "Board top".
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.axi import AXI_ID_WIDTH, AXI_LEN_WIDTH, AxiMasterSignature

__all__ = ["HostMemSignature", "AxiRam"]


class HostMemSignature(wiring.Signature):
    """A 32-bit memory port, the requester's view: ``valid``/``ready`` hand over one request
    (``write``, byte address ``addr`` of a 32-bit word (bits 1:0 ignored), ``wdata``); a read's
    ``rdata`` comes with ``rvalid`` one or more cycles after its handshake."""

    def __init__(self):
        super().__init__({"valid": Out(1), "ready": In(1), "write": Out(1), "addr": Out(32),
                          "wdata": Out(32), "rvalid": In(1), "rdata": In(32)})


class AxiRam(wiring.Component):
    """``size`` bytes of block RAM (``data_width``-bit words, a power of two number of them)
    behind an AXI4 slave port ``axi`` (``In(AxiMasterSignature(addr_width, data_width))``:
    NV_nvdla's DBB master connects to it) and a host port ``host``
    (``In(HostMemSignature())``).

    Addresses wrap at ``size``: byte address ``a`` is RAM byte ``a % size`` (NVIDIA's traces
    place their surfaces at 0x80000000 and up; a design whose surfaces are less than ``size``
    apart modulo ``size`` sees its own memory). INCR bursts only (NVDLA's; up to 16 beats, no
    4 KB crossing), one burst at a time, reads and writes taken in turn; any ID, echoed back.
    Serving one burst at a time cannot deadlock NVDLA: its write DMAs request a burst only once
    all its beats are buffered (hdl/dma/write.py), so W never waits on a read.
    The host port is served only while no AXI burst is in progress (it is for loading and
    reading back memory while NVDLA is idle), so an AXI burst stalls nothing and the host waits.
    ``size``: bytes, a power of two multiple of ``data_width // 8`` (ValueError otherwise)."""

    @staticmethod
    def check_size(size: int, data_width: int) -> None:
        """ValueError unless ``size`` bytes is a power of two of at least one ``data_width``-bit
        word and ``data_width`` one of 32 to 512 bits (a power of two)."""
        if (data_width not in (32, 64, 128, 256, 512) or not isinstance(size, int)
                or size < data_width // 8 or size & (size - 1)):
            raise ValueError(f"AxiRam: size {size} bytes must be a power of two of at least one "
                             f"{data_width}-bit word (data_width 32 to 512)")

    def __init__(self, size: int, *, addr_width: int = 32, data_width: int = 64):
        self.check_size(size, data_width)
        nbytes = data_width // 8
        self.size, self.addr_width, self.data_width = size, addr_width, data_width
        self.depth = size // nbytes
        super().__init__({"axi": In(AxiMasterSignature(addr_width, data_width)),
                          "host": In(HostMemSignature())})

    def elaborate(self, platform):
        m = Module()
        axi, host = self.axi, self.host
        dw, nbytes = self.data_width, self.data_width // 8
        shift = (nbytes - 1).bit_length()           # byte address -> word index
        aw = (self.depth - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=dw, depth=self.depth, init=[])
        rd = mem.read_port(transparent_for=())
        wr = mem.write_port(granularity=8)

        def word(addr):
            return addr[shift:shift + aw] if aw else 0

        addr = Signal(aw)                    # word index of the burst's next beat
        left = Signal(AXI_LEN_WIDTH + 1)     # beats still to issue (reads) / take (writes)
        bid = Signal(AXI_ID_WIDTH)
        last_was_read = Signal()
        r_valid = Signal()
        r_last = Signal()
        stall = r_valid & ~axi.r_rready
        host_half = Signal(max(shift - 2, 0))   # which 32-bit lane of the word the host read
        host_rd = Signal()

        m.d.comb += [axi.r_rvalid.eq(r_valid), axi.r_rlast.eq(r_last), axi.r_rdata.eq(rd.data),
                     axi.r_rid.eq(bid), axi.b_bid.eq(bid), rd.en.eq(~stall)]
        m.d.sync += host_rd.eq(0)
        m.d.comb += host.rvalid.eq(host_rd)
        if shift > 2:
            m.d.comb += host.rdata.eq(rd.data.word_select(host_half, 32))
        else:
            m.d.comb += host.rdata.eq(rd.data)
        with m.If(~stall):
            m.d.sync += [r_valid.eq(0), r_last.eq(0)]

        with m.FSM():
            with m.State("IDLE"):
                take_read = axi.ar_arvalid & ~(axi.aw_awvalid & last_was_read)
                with m.If(take_read):
                    m.d.comb += axi.ar_arready.eq(1)
                    m.d.sync += [addr.eq(word(axi.ar_araddr)), left.eq(axi.ar_arlen + 1),
                                 bid.eq(axi.ar_arid), last_was_read.eq(1)]
                    m.next = "READ"
                with m.Elif(axi.aw_awvalid):
                    m.d.comb += axi.aw_awready.eq(1)
                    m.d.sync += [addr.eq(word(axi.aw_awaddr)), bid.eq(axi.aw_awid),
                                 last_was_read.eq(0)]
                    m.next = "WRITE"
                with m.Elif(host.valid):
                    m.d.comb += host.ready.eq(1)
                    lane = host.addr[2:shift] if shift > 2 else 0
                    m.d.comb += [rd.addr.eq(word(host.addr)), wr.addr.eq(word(host.addr)),
                                 wr.data.eq(host.wdata.replicate(dw // 32))]
                    with m.If(host.write):
                        if shift > 2:
                            m.d.comb += wr.en.word_select(lane, 4).eq(0xF)
                        else:
                            m.d.comb += wr.en.eq(0xF)
                    with m.Else():
                        m.d.sync += host_rd.eq(1)
                        if shift > 2:
                            m.d.sync += host_half.eq(lane)
            with m.State("READ"):
                m.d.comb += rd.addr.eq(addr)
                with m.If(~stall & (left != 0)):
                    m.d.sync += [r_valid.eq(1), r_last.eq(left == 1), left.eq(left - 1),
                                 addr.eq(addr + 1)]
                # one beat at most in flight (the R register): done when the last is taken
                with m.If((left == 0) & (~r_valid | axi.r_rready)):
                    m.next = "IDLE"
            with m.State("WRITE"):
                m.d.comb += [axi.w_wready.eq(1), wr.addr.eq(addr), wr.data.eq(axi.w_wdata)]
                with m.If(axi.w_wvalid):
                    m.d.comb += wr.en.eq(axi.w_wstrb)
                    m.d.sync += addr.eq(addr + 1)
                    with m.If(axi.w_wlast):
                        m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += axi.b_bvalid.eq(1)
                with m.If(axi.b_bready):
                    m.next = "IDLE"
        return m
