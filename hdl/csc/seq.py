"""CSC sequencers (docs/conv.md "CSC"): the layer parameters CSC derives from its registers, the
op sequencer (one item per atomic operation: where its data atom is) and the weight sequencer
(one item per CBUF weight entry to read, tagged with the weight set it belongs to).

Both walk the same nest (docs/conv.md): kernel group g, stripe of up to ``stripe_max`` output
pixels in raster order, (channel block cb, kernel row r, kernel column s); the op sequencer then
walks the stripe's pixels, the weight sequencer the CBUF entries of the weight set (g, cb, r, s).
Every address is kept incrementally (adds only, no multiplier in the loop).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.cbuf import CbufGeometry

__all__ = ["stripe_counter", "params_layout", "dop_layout", "wreq_layout", "OpSeq", "WtSeq"]

DIM = 14          # sizes of the ..._EXT fields + 1 (13-bit fields)
BATCH_MAX = 32    # D_BATCH_NUMBER.BATCHES is 5 bits: up to 32 batches


def params_layout(geom: CbufGeometry, atomic_c: int, atomic_k: int,
                  conv16: bool = False, batch: bool = False) -> data.StructLayout:
    """Layer parameters (sizes, not the registers' minus-one values), held stable for a layer:
    input ``w``/``h``, output ``wo``/``ho``, kernel ``r``/``s``, ``eps`` (entries per slice),
    strides ``sx``/``sy``, dilations ``dx``/``dy``, paddings ``pl``/``pt``, ``ncb`` channel
    blocks and ``cw_last`` channels of the last one, ``ng`` kernel groups and ``kg_last``
    kernels of the last one, ``npix`` = wo*ho, the products ``sye`` = sy*eps, ``dye`` = dy*eps,
    ``pte`` = pt*eps (the three products modulo 2**(addr_bits+1): entry addresses are
    computed modulo that, see :func:`dop_layout`), the weight ring ``wt_base``/``wcap``
    (entries; ``wt_base`` is also the size DCAP of the data-bank ring), the ``pad`` value and
    ``dat_base``, the entry of slice 0 in the data-bank ring (hdl/cbuf/keep.py); ``cw_full``:
    channels of a weight set of a channel block other than the last (atomic_c; image mode:
    hdl/csc/image.py).

    ``conv16`` (configurations computing INT16/FP16 beside INT8, ``cfg.conv16``;
    docs/conv16.md "CSC"): ``pad`` is all 16 bits of PAD_VALUE, and four more fields:
    ``wide`` (1 in an INT16/FP16 direct-convolution layer: 2-byte elements, entries of two
    CBUF units), ``kg_full`` (kernels of a full kernel group: atomic_k, or atomic_k / 2 when
    ``wide``), ``dxu``/``wu`` (dilation x and input width in CBUF units: dx, w, doubled when
    ``wide``). Entry addresses (``sye``, ``dye``, ``pte``, ``dat_base``, ``wt_base``, ``wcap``)
    then count CBUF units of ``geom.entry_bytes`` bytes in every precision (a 16-bit entry E
    is units 2E and 2E+1), ``ng``/``kg_last`` count kernel groups of ``kg_full``.

    ``batch`` (configurations with ``cfg.batch``; docs/conv.md "Multi-batch"): four more
    fields: ``nb`` the layer's batches N (D_BATCH_NUMBER.BATCHES+1), ``spx`` the most pixels
    of a stripe (the sequencer's ``stripe_max`` // N, so that a stripe's N x pixels fit CACC's
    assembly buffer), ``hep`` the entries (CBUF units) of one input cube, H x EPS, modulo
    2**(addr_bits+1) (cube b's slice y starts ``b x hep`` after cube 0's), ``nsl`` the slices of
    all N cubes, N x H."""
    fields = {
        "w": DIM, "h": DIM, "wo": DIM, "ho": DIM, "r": 6, "s": 6, "eps": 15,
        "sx": 4, "sy": 4, "dx": 6, "dy": 6, "pl": 5, "pt": 5,
        "ncb": DIM, "cw_last": range(atomic_c + 1), "ng": DIM, "kg_last": range(atomic_k + 1),
        "npix": 2 * DIM, "sye": geom.addr_bits + 1, "dye": geom.addr_bits + 1,
        "pte": geom.addr_bits + 1,
        "wt_base": geom.addr_bits + 1, "wcap": geom.addr_bits + 1,
        "pad": signed(16 if conv16 else 8), "dat_base": geom.addr_bits,
        "cw_full": range(atomic_c + 1),
    }
    if conv16:
        fields.update({"wide": 1, "kg_full": range(atomic_k + 1), "dxu": 7, "wu": DIM + 1})
    if batch:
        fields.update({"nb": range(BATCH_MAX + 1), "spx": DIM, "hep": geom.addr_bits + 1,
                       "nsl": DIM + 6})
    return data.StructLayout(fields)


def dop_layout(stripe_max: int, addr_w: int) -> data.StructLayout:
    """One atomic operation as the op sequencer emits it: pixel bases ``xb`` = xo*sx - pl,
    ``yb`` = yo*sy - pt, ``ye`` = dat_base + yb*eps; kernel offsets ``xs`` = s*dx, ``yr`` = r*dy,
    ``rs_off`` = r*dy*eps + cb*w + s*dx; the channel block ``cb``; the op's
    ``pos``/``first``/``last``; ``set_last`` (last pixel of the weight set: the set is
    consumed) and ``end`` (the layer's last op).

    ``ye`` and ``rs_off`` are kept modulo ``2**addr_w`` (``addr_w`` = CBUF ``addr_bits`` + 1):
    an op inside the input reads entry ``dat_base + y*eps + cb*w + x`` < 2*DCAP <=
    ``2**addr_w`` (the whole input fits the data banks, docs/conv.md "CBUF"), so the sum of
    the truncated terms is exact there; outside the input the address is not used."""
    return data.StructLayout({
        "xb": signed(20), "yb": signed(20), "ye": addr_w,
        "xs": 11, "yr": 11, "rs_off": addr_w, "cb": DIM,
        "pos": range(stripe_max), "first": 1, "last": 1, "set_last": 1, "end": 1,
    })


def wreq_layout(geom: CbufGeometry, atomic_c: int, atomic_k: int) -> data.StructLayout:
    """One weight-entry read: CBUF ``addr``, cumulative entry number ``e`` (to wait for
    CDMA's wt_entries), the set's ``set_first``/``set_last`` entry flags, its byte offset
    ``off`` inside the first entry, ``kg`` kernels and ``cw`` channels; ``rls``: the set's last
    entry in its kernel group's last stripe: the entries before it (and it, ``rls_inc``, when
    the set ends at the entry's end) are no longer needed, wt_released becomes ``e + rls_inc``."""
    return data.StructLayout({
        "addr": geom.addr_bits, "e": 32, "set_first": 1, "set_last": 1,
        "off": max(1, geom.entry_shift), "kg": range(atomic_k + 1), "cw": range(atomic_c + 1),
        "rls": 1, "rls_inc": 1,
    })


def stripe_len(m: Module, remaining, stripe_max: int, smax=None) -> Signal:
    """Pixels of the next stripe when ``remaining`` output pixels of the kernel group are left:
    ``stripe_max``, all of them when at most ``stripe_max`` are left, and half of them (rounded
    up) when fewer than two full stripes are left, so that the last two stripes are balanced
    and the last is at least ``stripe_max / 2`` pixels long. A short stripe re-uses its weight
    set for few operations and waits for the next set's CBUF reads (docs/conv.md "CSC"), so a
    layer of 98 pixels runs as 32, 32, 17, 17 rather than 32, 32, 32, 2.

    ``smax`` (a signal, at most ``stripe_max``, at least 1; multi-batch layers, the
    ``spx`` parameter): the limit in its place."""
    n = Signal(range(stripe_max + 1), name="stripe_len")
    lim = stripe_max if smax is None else smax
    m.d.comb += n.eq(Mux(remaining <= lim, remaining,
                         Mux(remaining < 2 * lim, (remaining + 1) >> 1, lim)))
    return n


def stripe_counter(m: Module, npix, stripe_max: int, smax=None):
    """The stripe bookkeeping of a pixel sequencer: ``last`` (the current stripe's last pixel
    index, its :func:`stripe_len` minus 1) and ``after`` (the kernel group's pixels after the
    current stripe), registers loaded when a stripe starts, from registers only (issue 10:
    :func:`stripe_len` of a value computed in the same cycle, and of the layer parameter
    ``npix``, were CSC's critical path on ECP5, into the image op sequencer's registers):

    * the next stripe's last index ``next_last`` = stripe_len(after) - 1 is a register
      following ``after`` one cycle later. It is read when the current stripe ends, at least
      two cycles after ``after`` was loaded: a stripe followed by another is at least
      ``ceil((stripe_max + 1) / 2)`` >= 2 pixels long when ``stripe_max`` >= 2 (one op each at least),
      and with ``stripe_max`` = 1 every length is 1, so ``next_last`` = 0 even one cycle late;
    * a group's first stripe (``group_last``, ``group_after``) comes from registers following
      ``npix``: CSC registers its parameters from its registers and starts the sequencers two
      cycles after its own ``start`` (hdl/csc/__init__.py), so these are settled by then.

    ``npix``: the kernel group's pixels (stable in a layer); ``smax``: :func:`stripe_len`'s
    (a multi-batch layer's stripes take N cycles or more per pixel, so ``next_last`` is settled
    in time whatever their length). Returns ``(last, again, after)``:
    the ``last`` Signal and the statements that start a group's first stripe (``again``: all
    ``npix`` pixels left) or the stripe after the current one (``after``)."""
    last = Signal(range(stripe_max), name="stripe_last_pos")
    after = Signal(2 * DIM, name="remaining_after")
    next_last = Signal(range(stripe_max), name="next_stripe_last_pos")
    group_last = Signal(range(stripe_max), name="group_stripe_last_pos")
    group_after = Signal(2 * DIM, name="group_remaining_after")
    group_len = stripe_len(m, npix, stripe_max, smax)
    m.d.sync += [next_last.eq(stripe_len(m, after, stripe_max, smax) - 1),
                 group_last.eq(group_len - 1), group_after.eq(npix - group_len)]
    return (last, [after.eq(group_after), last.eq(group_last)],
            [after.eq(after - (next_last + 1)), last.eq(next_last)])


class OpSeq(wiring.Component):
    """The op sequencer: one item of :func:`dop_layout` per atomic operation, in the order of
    docs/conv.md (g, stripe, cb, r, s, pixel), one per cycle.

    Ports: ``params`` In(:func:`params_layout`), stable from the cycle before ``start`` to the
    end of the layer (:func:`stripe_counter` registers what it derives from them);
    ``start`` In(1) one-cycle pulse; ``o`` Out(stream of :func:`dop_layout`); ``busy`` Out(1)
    (items left to emit).

    ``conv16``: the parameters of ``params_layout(..., conv16=True)``; the address offsets
    (``rs_off``, ``ye``) step by ``dxu``/``wu`` and the unit products, so that they count CBUF
    units in 16-bit layers too; positions (``xb``, ``yb``, ``xs``, ``yr``) stay in elements.

    ``batch`` (docs/conv.md "Multi-batch"): the parameters of ``params_layout(...,
    batch=True)``; stripes of at most ``spx`` pixels, and each pixel of a stripe is N ops, one
    per batch b (batch innermost), at ``pos`` = pixel x N + b, its ``ye`` ``b x hep`` further
    into the data banks (cube b's slices follow cube 0's); ``set_last`` and ``end`` on the last
    batch's op. With N = 1 the ops are the ordinary ones.
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, atomic_k: int, stripe_max: int,
                 conv16: bool = False, batch: bool = False):
        self.stripe_max = stripe_max
        self.aw = geom.addr_bits + 1
        self.conv16 = conv16
        self.batch = batch
        super().__init__({
            "params": In(params_layout(geom, atomic_c, atomic_k, conv16, batch)),
            "start": In(1),
            "o": Out(stream.Signature(dop_layout(stripe_max, self.aw))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, o = self.params, self.o
        # address steps of a kernel column and a channel block (CBUF units)
        dx_a, w_a = (p.dxu, p.wu) if self.conv16 else (p.dx, p.w)
        run = Signal()
        g, cb = Signal(DIM), Signal(DIM)
        r, s = Signal(6), Signal(6)
        i = Signal(range(self.stripe_max))
        xo, yo = Signal(DIM), Signal(DIM)
        aw = self.aw                                # entry addresses modulo 2**aw
        xb, yb, ye = Signal(signed(20)), Signal(signed(20)), Signal(aw)
        # the stripe's first pixel
        xo0, yo0 = Signal(DIM), Signal(DIM)
        xb0, yb0, ye0 = Signal(signed(20)), Signal(signed(20)), Signal(aw)
        xs, yr, rs_off = Signal(11), Signal(11), Signal(aw)
        rye, cbw = Signal(aw), Signal(aw)           # r*dy*eps, cb*w

        # the raster pixel after (xo, yo)
        nxo, nyo = Signal(DIM), Signal(DIM)
        nxb, nyb, nye = Signal(signed(20)), Signal(signed(20)), Signal(aw)
        row_end = xo == p.wo - 1
        m.d.comb += [
            nxo.eq(Mux(row_end, 0, xo + 1)), nyo.eq(Mux(row_end, yo + 1, yo)),
            nxb.eq(Mux(row_end, -p.pl, xb + p.sx)), nyb.eq(Mux(row_end, yb + p.sy, yb)),
            nye.eq(Mux(row_end, ye + p.sye, ye)),
        ]
        cube_end = row_end & (yo == p.ho - 1)
        i_last, group_start, next_stripe = stripe_counter(
            m, p.npix, self.stripe_max, p.spx if self.batch else None)
        pix_end = (i == i_last) | cube_end
        s_end, r_end = s == p.s - 1, r == p.r - 1
        cb_end, g_end = cb == p.ncb - 1, g == p.ng - 1
        last = cb_end & r_end & s_end
        pos, ye_b = i, ye
        if self.batch:
            # batch bi of the pixel (innermost), its position q = i*N + bi and cube offset
            bi = Signal(range(BATCH_MAX))
            q = Signal(range(self.stripe_max))
            bofs = Signal(aw)
            more = bi != p.nb - 1               # more batches of this pixel
            pos, ye_b = q, (ye + bofs)[:aw]
            pix_end = pix_end & ~more

        m.d.comb += [
            o.valid.eq(run), self.busy.eq(run),
            o.payload.xb.eq(xb), o.payload.yb.eq(yb), o.payload.ye.eq(ye_b),
            o.payload.xs.eq(xs), o.payload.yr.eq(yr), o.payload.rs_off.eq(rs_off),
            o.payload.cb.eq(cb), o.payload.pos.eq(pos),
            o.payload.first.eq((cb == 0) & (r == 0) & (s == 0)),
            o.payload.last.eq(last), o.payload.set_last.eq(pix_end),
            o.payload.end.eq(pix_end & last & cube_end & g_end),
        ]

        def cur_eq(vals):
            return [a.eq(b) for a, b in zip((xo, yo, xb, yb, ye), vals)]

        def first_pixel():
            return (0, 0, -p.pl, -p.pt, p.dat_base - p.pte)

        def set_stripe_start(vals):
            return cur_eq(vals) + [a.eq(b) for a, b in zip((xo0, yo0, xb0, yb0, ye0), vals)]

        fire = o.valid & o.ready
        if self.batch:
            with m.If(self.start):
                m.d.sync += [bi.eq(0), q.eq(0), bofs.eq(0)]
            with m.Elif(fire):
                with m.If(more):
                    m.d.sync += [bi.eq(bi + 1), q.eq(q + 1), bofs.eq(bofs + p.hep)]
                with m.Else():
                    m.d.sync += [bi.eq(0), bofs.eq(0), q.eq(Mux(pix_end, 0, q + 1))]
            fire = fire & ~more
        with m.If(self.start):
            m.d.sync += [run.eq(1), g.eq(0), cb.eq(0), r.eq(0), s.eq(0), i.eq(0),
                         xs.eq(0), yr.eq(0), rs_off.eq(0), rye.eq(0), cbw.eq(0)]
            m.d.sync += group_start
            m.d.sync += set_stripe_start(first_pixel())
        with m.Elif(fire):
            with m.If(~pix_end):
                m.d.sync += [i.eq(i + 1)] + cur_eq((nxo, nyo, nxb, nyb, nye))
            with m.Else():
                m.d.sync += i.eq(0)
                m.d.sync += cur_eq((xo0, yo0, xb0, yb0, ye0))
                with m.If(~s_end):
                    m.d.sync += [s.eq(s + 1), xs.eq(xs + p.dx), rs_off.eq(rs_off + dx_a)]
                with m.Elif(~r_end):
                    m.d.sync += [s.eq(0), xs.eq(0), r.eq(r + 1), yr.eq(yr + p.dy),
                                 rye.eq(rye + p.dye), rs_off.eq(rye + p.dye + cbw)]
                with m.Elif(~cb_end):
                    m.d.sync += [s.eq(0), xs.eq(0), r.eq(0), yr.eq(0), rye.eq(0),
                                 cb.eq(cb + 1), cbw.eq(cbw + w_a), rs_off.eq(cbw + w_a)]
                with m.Else():                      # stripe done
                    m.d.sync += [s.eq(0), xs.eq(0), r.eq(0), yr.eq(0), rye.eq(0),
                                 cb.eq(0), cbw.eq(0), rs_off.eq(0)]
                    with m.If(cube_end):
                        m.d.sync += set_stripe_start(first_pixel()) + group_start
                        with m.If(g_end):
                            m.d.sync += run.eq(0)
                        with m.Else():
                            m.d.sync += g.eq(g + 1)
                    with m.Else():
                        m.d.sync += set_stripe_start((nxo, nyo, nxb, nyb, nye)) + next_stripe
        return m


class WtSeq(wiring.Component):
    """The weight sequencer: for every weight set (g, stripe, cb, r, s) in op order, one item of
    :func:`wreq_layout` per CBUF entry the set touches, one per cycle.

    Weight set (g, cb, r, s) = ``kg*cw`` bytes (cw = ``cw_full``, or ``cw_last`` for the last
    channel block) at weight-stream byte
    ``g*atomic_k*R*S*C + cb*atomic_c*R*S*kg + (r*S + s)*kg*cw`` (docs/conv.md; format.rst "Basic
    Weight for Direct Convolution": the sets of a group are consecutive in the stream, so the
    byte pointer only advances, and returns to the group's base for each stripe). Weight entry
    ``e`` (bytes ``e*entry_bytes ..``) lives at ring slot ``e % wcap``. A set that ends inside
    an entry shares that entry with the next set (read again).

    Ports: ``params``, ``start``, ``busy`` as :class:`OpSeq`; ``o`` Out(stream of
    :func:`wreq_layout`).

    ``batch``: the parameters of ``params_layout(..., batch=True)``: stripes of at most
    ``spx`` pixels, as :class:`OpSeq`'s.

    ``conv16``: the parameters of ``params_layout(..., conv16=True)``: full kernel groups of
    ``kg_full`` kernels, sets of ``kg*cw << wide`` bytes (2-byte elements in INT16/FP16
    layers: the offsets of format.rst / model ``read_weights(elem_bytes=2)``, docs/conv16.md
    "CSC"). ``geom`` is then the geometry of CBUF *rows* (two units of the CBUF's, whose
    weight-stream bytes are the same in every precision): entries, ``wt_base`` and ``wcap``
    count rows.
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, atomic_k: int, stripe_max: int,
                 conv16: bool = False, batch: bool = False):
        self.geom, self.ac, self.ak, self.stripe_max = geom, atomic_c, atomic_k, stripe_max
        self.conv16 = conv16
        self.batch = batch
        super().__init__({
            "params": In(params_layout(geom, atomic_c, atomic_k, conv16, batch)),
            "start": In(1),
            "o": Out(stream.Signature(wreq_layout(geom, atomic_c, atomic_k))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, o, geom = self.params, self.o, self.geom
        es = geom.entry_shift
        ring = geom.addr_bits + 1
        run = Signal()
        # the set's position as counts of what is left after it (down to 0), so that the end
        # conditions compare with 0 instead of with the parameters (issue 10: the parameter
        # comparisons started CSC's critical path)
        g, cb = Signal(DIM), Signal(DIM)
        r, s = Signal(6), Signal(6)
        remaining = Signal(2 * DIM + 1)            # pixels of the group from this stripe on
        j = Signal(range(self.ak * self.ac // geom.entry_bytes + 2))
        b, e, er = Signal(32), Signal(32), Signal(ring)
        bg, eg, erg = Signal(32), Signal(32), Signal(ring)      # the kernel group's first set

        s_end, r_end = s == 0, r == 0
        s_first, r_first, cb_first, g_first = p.s - 1, p.r - 1, p.ncb - 1, p.ng - 1
        # last channel block / kernel group: registers loaded with the counters (they select
        # the set's byte count, which decides where the set ends)
        cb_end, g_end = Signal(), Signal()

        def cb_step(reload):
            """Statements: the next channel block (``reload``: the first one again)."""
            return ([cb.eq(cb_first), cb_end.eq(p.ncb == 1)] if reload else
                    [cb.eq(cb - 1), cb_end.eq(cb == 1)])

        def g_step(reload):
            """Statements: the next kernel group (``reload``: the first one)."""
            return ([g.eq(g_first), g_end.eq(p.ng == 1)] if reload else
                    [g.eq(g - 1), g_end.eq(g == 1)])

        kg, cw = Signal(range(self.ak + 1)), Signal(range(self.ac + 1))
        n = Signal(range(self.ak * self.ac + 1))
        off = Signal(max(1, es))
        jlast = Signal(len(j))
        # the set's byte count kg * cw for the four (last group?, last block?) cases: registers
        # following the parameters (issue 10: the product was on CSC's critical path), valid
        # from the cycle after ``start`` on, the first cycle of ``run``
        n_case = Signal(data.ArrayLayout(len(n), 4))
        if self.conv16:
            kg_full = p.kg_full
            m.d.sync += [n_case[2 * gl + cl].eq((Mux(gl, p.kg_last, kg_full)
                                                 * Mux(cl, p.cw_last, p.cw_full)) << p.wide)
                         for gl in (0, 1) for cl in (0, 1)]
        else:
            kg_full = self.ak
            m.d.sync += [n_case[2 * gl + cl].eq(Mux(gl, p.kg_last, self.ak)
                                                * Mux(cl, p.cw_last, p.cw_full))
                         for gl in (0, 1) for cl in (0, 1)]
        m.d.comb += [
            kg.eq(Mux(g_end, p.kg_last, kg_full)),
            cw.eq(Mux(cb_end, p.cw_last, p.cw_full)),
            n.eq(n_case[Cat(cb_end, g_end)]),
            off.eq(b[:es] if es else 0),
            jlast.eq((off + n - 1) >> es),
        ]

        def wrap_inc(x):
            return Mux(x + 1 == p.wcap, 0, x + 1)

        set_end = j == jlast
        bn = Signal(32)
        aligned = Signal()
        en, ern = Signal(32), Signal(ring)
        m.d.comb += [
            bn.eq(b + n),
            aligned.eq(bn[:es] == 0 if es else 1),
            en.eq(e + aligned),
            ern.eq(Mux(aligned, wrap_inc(er), er)),
        ]
        smax = p.spx if self.batch else None
        slen = stripe_len(m, remaining, self.stripe_max, smax)
        stripe_last = remaining <= (self.stripe_max if smax is None else smax)

        m.d.comb += [
            o.valid.eq(run), self.busy.eq(run),
            o.payload.addr.eq(p.wt_base + er), o.payload.e.eq(e),
            o.payload.set_first.eq(j == 0), o.payload.set_last.eq(set_end),
            o.payload.off.eq(off), o.payload.kg.eq(kg), o.payload.cw.eq(cw),
            # in a kernel group's last stripe every set is read for the last time, in ring
            # order: release the entries before the set's end as each set is read (the entry it
            # shares with the next set, unless it ends aligned, stays), so that CDMA refills
            # the ring with the next group's weights during the last stripe, not after it
            o.payload.rls.eq(set_end & stripe_last), o.payload.rls_inc.eq(aligned),
        ]

        with m.If(self.start):
            m.d.sync += [run.eq(1), r.eq(r_first), s.eq(s_first), remaining.eq(p.npix),
                         j.eq(0), b.eq(0), e.eq(0), er.eq(0), bg.eq(0), eg.eq(0), erg.eq(0)]
            m.d.sync += g_step(True) + cb_step(True)
        with m.Elif(o.valid & o.ready):
            with m.If(~set_end):
                m.d.sync += [j.eq(j + 1), e.eq(e + 1), er.eq(wrap_inc(er))]
            with m.Else():
                m.d.sync += j.eq(0)
                nxt = [b.eq(bn), e.eq(en), er.eq(ern)]
                with m.If(~s_end):
                    m.d.sync += [s.eq(s - 1)] + nxt
                with m.Elif(~r_end):
                    m.d.sync += [s.eq(s_first), r.eq(r - 1)] + nxt
                with m.Elif(~cb_end):
                    m.d.sync += [s.eq(s_first), r.eq(r_first)] + cb_step(False) + nxt
                with m.Else():
                    m.d.sync += [s.eq(s_first), r.eq(r_first)] + cb_step(True)
                    with m.If(~stripe_last):
                        m.d.sync += [remaining.eq(remaining - slen), b.eq(bg), e.eq(eg),
                                     er.eq(erg)]
                    with m.Else():
                        m.d.sync += [remaining.eq(p.npix), bg.eq(bn), eg.eq(en),
                                     erg.eq(ern)] + nxt
                        with m.If(g_end):
                            m.d.sync += run.eq(0)
                        with m.Else():
                            m.d.sync += g_step(False)
        return m
