"""The FP16 MAC engine of one CMAC half in ``cfg.conv16`` configurations (issue 33; docs/conv16.md
"CMAC", NVIDIA's NV_NVDLA_CMAC_CORE_mac.v / _MAC_mul.v / _MAC_exp.v / _MAC_nan.v as the note
describes them): per MAC cell, the block-floating-point dot product of one atomic operation's
fp16 weights and fp16 data, as a word ``{S, T}`` of value ``S * 2**(4T - 50)``, or a NaN.

Arithmetic (docs/conv16.md "CMAC", FP16 bullets; bit-exact with verif/model/conv_fp16.py
``cmac_words``, which is checked against NVIDIA's RTL):

* a lane (channel) c < ``op.n`` is *active* when its weight and its datum are both non-zero
  (+-0 never reaches a multiplier); lanes from ``op.n`` on are no operands at all;
* every fp16 operand splits into ``hi = e >> 2`` (3 bits) and a 14-bit mantissa
  ``(1024 | f) << (e & 3)`` (``f << 1`` for a denormal), ``|x| = m * 2**(4*hi - 25)``; e = 31
  is not special (infinity is the number 2**16, a NaN's payload is a mantissa like any other);
* ``T = max(hi_w + hi_d)`` over the active lanes (0 when none is);
* each product is the radix-4 Booth carry-save pair (U0, U1) of :func:`booth_pairs` (weight
  recoded, data the multiplicand, 8 rows with a 0x10000 sign-extension constant each, 3:2
  reductions in the order NVIDIA's multiplier uses), ``U0 + U1 = +-mw*md + BOOTH_BIAS``;
  each of U0, U1 is shifted right by ``4(T - t)`` (the lane dropped when that is 32 or more),
  then ``BOOTH_BIAS >> 4(T - t)`` is subtracted: within one unit of the shifted product, not
  always equal to it, which is why the multipliers are LUT logic and not DSP products;
* ``S`` = the exact sum over the lanes;
* NaN: the lowest-lane NaN weight (lanes < n, active or not), else the lowest-lane NaN datum,
  makes the word that NaN; T and S are still computed (and output) as above.

Pipeline of :class:`Cmac16Fp` (``lib.stream`` back-pressure through every stage, one op per
cycle, every stage a registered :class:`hdl.lib.stream.Map`):

1. ``decode``: operand split, activity (incl. the lane count), ``t = hi_w + hi_d``, the
   product's sign; NaN flags reduced to the first NaN of each group of up to 8 lanes.
2. ``booth``: the carry-save pair per (cell, lane); T by a thermometer OR over the lanes
   (no compare tree), then each lane's shift ``k = T - t`` (in units of 4 bits) and whether it
   counts (active, k < 8); the NaN groups reduced to one word NaN per cell.
3. ``align``: the lane's contribution ``c = (U0 >> 4k) + (U1 >> 4k) - (BOOTH_BIAS >> 4k)``
   (0 unless ok) as signed(29) (|c| < 2**28: exact), formed as
   ``((U0 + U1) >> 4k) - (BOOTH_BIAS >> 4k) - carry``, ``carry`` being the carry into bit 4k
   of U0 + U1 (``sum[4k] ^ U0[4k] ^ U1[4k]``): the same value with one barrel shifter instead
   of two (about 13 % fewer LUTs at atomic_c 8).
4. ``sum0``.. : the lane sums, ``levels_per_stage`` pairwise adder levels per stage
   (ceil(log2(atomic_c)) levels, one bit wider each; at least one stage).

Latency ``3 + max(1, ceil(ceil_log2(atomic_c) / levels_per_stage))`` cycles: 6 at atomic_c 64,
5 at 8, 4 at 2 (levels_per_stage 2).

ECP5 (LFE5U-85F-8, nextpnr, out of context; one cell of atomic_c 8 between registers, measured
2026-11-30): 118 MHz, the slowest path in ``align`` (U0/U1 -> c); 7,125 LUT4 and 1,525 FF
with the bench's I/O registers (~330 FF), i.e. about 890 LUT4 per multiplier lane.

The stages' payloads are flat vectors, lane (cell k, channel c) at index ``k * atomic_c + c``
(one statement per field instead of one per lane: Amaranth's elaboration and Python simulation
time grow with the statement and node count, and this unit is wide: 512 multipliers per CMAC
half on nv_full).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hdl.cmac.layouts import op16_layout, psum16_layout
from hdl.lib.stream import Map

__all__ = ["Cmac16Fp", "booth_pairs", "fp16_split", "BOOTH_BIAS", "PAIR_BITS",
           "LANE_BITS"]

#: sum of the 8 Booth rows' 0x10000 sign-extension constants: 0x10000 * (1 + 4 + ... + 4**7)
BOOTH_BIAS = 0x55550000
#: width of U0 and U1: all vectors of the reduction are >= 0 and add up to
#: +-mw*md + BOOTH_BIAS < 16376**2 + 0x55550000 < 2**31, so none has a bit set from 31 on
PAIR_BITS = 31
#: width of a lane's contribution c: |c| <= 16376**2 < 2**28 (shift 0), < 2**24 + 2 otherwise
LANE_BITS = 29
#: the operands' mantissa width: (1024 | f) << 3 < 2**14
MANT_BITS = 14
#: a NaN candidate: {flag, sign, payload[9:0]}
NAN_BITS = 12
#: pairwise levels of the first NaN reduction (stage 1, groups of 8 lanes); stage 2 does the rest
_NAN_GROUP_LEVELS = 3
#: the largest t = hi_w + hi_d
_T_MAX = 14


def fp16_split(x: Value):
    """An fp16 pattern -> ``(sign, hi, m, nonzero, nan)``: ``hi = e >> 2`` (3 bits) and the
    14-bit mantissa ``m = (1024 | f) << (e & 3)``, ``f << 1`` for e = 0, so that
    ``|x| = m * 2**(4*hi - 25)`` (e = 31 included: infinity is 2**16). ``nonzero``: not +-0;
    ``nan``: e = 31 and f != 0."""
    x = Value.cast(x)
    f, e, s = x[0:10], x[10:15], x[15]
    m = Mux(e.any(), Cat(f, 1) << e[0:2], f << 1)
    return s, e[2:5], m, x[0:15].any(), e.all() & f.any()


#: bits per lane in :func:`booth_pairs`' packed vectors (PAIR_BITS used, the top bit kept 0)
SLOT = 32


def _slots(n: int, lo: int, hi: int) -> int:
    """A mask of bits lo..hi-1 of each of ``n`` SLOT-bit slots."""
    return sum(((1 << hi) - (1 << lo)) << (SLOT * i) for i in range(n))


def _csa(m: Module, vectors: list, n: int, name: str) -> tuple:
    """3:2 reduction in the order of verif/model/conv_fp16.py ``_csa`` (the first floor(k/3)
    triples become (sum, carry << 1), left-over vectors follow, until two remain), on ``n``
    lanes packed in SLOT-bit slots; each reduction's outputs are named signals of ``m``
    (``name``). A carry keeps bits 1..PAIR_BITS-1 of its slot (the bit shifted in is 0, the
    one shifted out is 0 by PAIR_BITS' bound), so no lane reaches into another."""
    keep = _slots(n, 1, PAIR_BITS)
    level = 0
    while len(vectors) > 2:
        out = []
        k = len(vectors) // 3
        for i in range(k):
            x, y, z = vectors[3 * i:3 * i + 3]
            s = Signal(SLOT * n, name=f"{name}_s{level}_{i}")
            c = Signal(SLOT * n, name=f"{name}_c{level}_{i}")
            m.d.comb += [s.eq(x ^ y ^ z), c.eq(((x & y) | (x & z) | (y & z)).shift_left(1) & keep)]
            out += [s, c]
        vectors = out + vectors[3 * k:]
        level += 1
    return vectors[0], vectors[1]


def booth_pairs(m: Module, ys: list, zs: list, negs: list, name: str = "booth") -> tuple:
    """The radix-4 Booth carry-save pairs ``(U0, U1)`` of the signed products
    ``+-ys[l] * zs[l]`` of ``n = len(ys)`` lanes: two lists of ``n`` PAIR_BITS-wide unsigned
    values with ``U0 + U1 = (-1)**neg * y*z + BOOTH_BIAS``.

    Args:
        m: the module receiving the rows' and reductions' signals (named ``name``...).
        ys: the weights' 14-bit mantissas (the recoded operands).
        zs: the data's 14-bit mantissas (the multiplicands).
        negs: 1 bit each, the product's sign (it negates every recoded digit).

    Rows (NV_NVDLA_CMAC_CORE_MAC_mul.v as docs/conv16.md describes it): row i recodes
    ``y[2i+1:2i-1]`` (y[-1] = 0), inverted when ``neg``, into a digit in -2..2;
    ``q = 0x10000 + digit*z - nd`` (17 bits: ``0x10000 | {z, 2z}``, ``0xFFFF ^ {z, 2z}`` for a
    negative digit, 0x10000 for 0) with ``nd`` (1 for a negative digit) added at the row's
    weight ``4**i``. Rows 0-3 and 4-7 are each reduced from 5 vectors (``q0, 4q1+n0,
    16q2+4n1, 64q3+16n2, 64n3``) to a pair, then ``(a0, a1, b0 << 8, b1 << 8)`` (kept to
    PAIR_BITS) to the final pair, each reduction in ``_csa``'s order (8 carry-save adders, 5
    levels deep).

    The lanes are independent circuits; they are packed in SLOT-bit slots of wide signals
    (lane l at bit SLOT*l) so that each reduction is one bitwise statement for all lanes
    (masks keep every shifted vector inside its slot)."""
    n = len(ys)
    ys = [Value.cast(y)[:MANT_BITS] for y in ys]
    zs = [Value.cast(z)[:MANT_BITS] for z in zs]
    lsb = _slots(n, 0, 1)
    # per slot: y << 1 (bit 0 is y[-1] = 0), inverted for a negative product
    y = Signal(SLOT * n, name=f"{name}_y")
    x = Signal(SLOT * n, name=f"{name}_x")             # bit j: y[j] ^ y[j+1]
    two = Signal(SLOT * n, name=f"{name}_two")         # bit 2i: row i's |digit| is 2
    nd = Signal(SLOT * n, name=f"{name}_nd")           # bit 2i: row i's digit is < 0
    m.d.comb += [
        y.eq(Cat(*(Cat(Const(0, 1), yl, Const(0, SLOT - MANT_BITS - 1))
                   ^ Mux(neg, (1 << (MANT_BITS + 3)) - 1, 0) for yl, neg in zip(ys, negs)))),
        # (constant shifts as shift_left/shift_right: slices, where ``<<``/``>>`` by an int
        # make shift cells whose every output bit depends on every input bit, and Amaranth's
        # combinational-cycle check is quadratic in these SLOT*n-bit vectors)
        x.eq(y ^ y.shift_right(1)),         # bit 2i: row i's |digit| is 1 (triplets 1 2 5 6)
        two.eq(x.shift_right(1) & ~x),      # triplets 3, 4
        nd.eq(y.shift_right(2) & ~(y.shift_right(1) & y)),  # triplets 4, 5, 6
    ]
    q, nbits = [], []
    for i in range(8):
        qi = Signal(SLOT * n, name=f"{name}_q{i}")
        rows = []
        for lane, zl in enumerate(zs):
            b = SLOT * lane + 2 * i
            rows.append(Cat(Mux(x[b], zl, Mux(two[b], zl << 1, 0)) ^ Mux(nd[b], 0xFFFF, 0),
                            ~nd[b], Const(0, SLOT - 17)))
        m.d.comb += qi.eq(Cat(*rows))
        q.append(qi)
        nbits.append(nd.shift_right(2 * i) & lsb)

    def group(i, g):
        return _csa(m, [q[i], q[i + 1].shift_left(2) | nbits[i],
                        q[i + 2].shift_left(4) | nbits[i + 1].shift_left(2),
                        q[i + 3].shift_left(6) | nbits[i + 2].shift_left(4),
                        nbits[i + 3].shift_left(6)], n, f"{name}_{g}")
    a0, a1 = group(0, "a")
    b0, b1 = group(4, "b")
    keep = _slots(n, 8, PAIR_BITS)
    u0, u1 = _csa(m, [a0, a1, b0.shift_left(8) & keep, b1.shift_left(8) & keep], n, f"{name}_u")
    return ([u0[SLOT * i:SLOT * i + PAIR_BITS] for i in range(n)],
            [u1[SLOT * i:SLOT * i + PAIR_BITS] for i in range(n)])


def _first_nan(m: Module, items: list, levels: int, name: str) -> list:
    """Pairwise priority reduction of NAN_BITS-wide candidates ``{flag, bits}`` (flag in bit
    0), ``levels`` times, the lower index winning; returns the reduced list (length
    ceil(len / 2**levels)), reductions as signals of ``m``."""
    for level in range(levels):
        if len(items) == 1:
            break
        out = []
        for i in range(0, len(items) - 1, 2):
            a, b = items[i], items[i + 1]
            r = Signal(NAN_BITS, name=f"{name}_{level}_{i // 2}")
            m.d.comb += r.eq(Mux(a[0], a, b))
            out.append(r)
        if len(items) % 2:
            out.append(items[-1])
        items = out
    return items


def _thermometer_to_binary(ge: Value) -> Value:
    """``ge[v - 1]`` = (max >= v) for v = 1..len(ge) -> the max as an unsigned value."""
    top = len(ge)
    bits = []
    for b in range(max(1, top.bit_length())):
        terms = []
        # the max has bit b set on the runs [j*2**(b+1) + 2**b, (j+1)*2**(b+1))
        for lo in range(1 << b, top + 1, 1 << (b + 1)):
            hi = lo + (1 << b)
            terms.append(ge[lo - 1] & ~ge[hi - 1] if hi <= top else ge[lo - 1])
        bits.append(Cat(*terms).any())
    return Cat(*bits)


def _split(v: Value, width: int) -> list:
    """A flat vector -> its ``width``-bit elements."""
    v = Value.cast(v)
    return [v[i:i + width] for i in range(0, len(v), width)]


def _sig(m: Module, v, name: str) -> Signal:
    """``v`` (a field of a stage payload) as a named signal of ``m``. Elaboration cost: a slice
    of a signal costs its own width, but a slice of a slice (a payload field's lane) makes
    Amaranth re-emit the whole inner slice at every use, which is quadratic in these wide
    payloads (512 lanes per CMAC half on nv_full)."""
    v = Value.cast(v)
    s = Signal(len(v), name=name)
    m.d.comb += s.eq(v)
    return s


def _sext(v: Value, width: int) -> Value:
    """A signed value sign-extended to ``width`` bits."""
    return Cat(v, v[-1].replicate(width - len(v)))


def _or_tree(values: list) -> Value:
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class Cmac16Fp(wiring.Component):
    """FP16 MAC cells: ``psum.sum[k].fp`` is verif/model/conv_fp16.py ``cmac_words`` of kernel
    ``first_cell + k``'s weights ``op.wt[first_cell + k][:n]`` and the data ``op.data[:n]``.

    Args:
        atomic_c: lanes (channels) per op (cfg.mac_atomic_c; 64 on nv_full, 8 on
            nv_small+feature_data_type=int8_int16_fp16).
        cells: MAC cells (kernels) of this instance (atomic_k // 4 for CMAC_A or CMAC_B).
        stripe_max: positions per stripe (shape of ``pos``).
        first_cell: the first cell of ``op.wt`` this instance computes.
        atomic_k: int8 kernels per op (cfg.mac_atomic_k; ``op.wt`` holds atomic_k // 2 cells).
        levels_per_stage: lane-sum adder levels per register stage (>= 1).

    Ports:
        op: In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))): ``data`` and
            ``wt[j]`` lanes are fp16 patterns; lanes >= ``n`` are ignored entirely.
        psum: Out(stream.Signature(psum16_layout(atomic_c, cells, stripe_max))):
            ``sum[k].fp`` = {s: S (exact, signed(32 + log2 atomic_c)), t: T (0..14),
            nan, nan_bits: the NaN's fp16 pattern, 0 when not nan}; ``pos``/``first``/``last``
            passed through.

    Timing: latency :attr:`latency` = ``3 + max(1, ceil(ceil_log2(atomic_c) /
    levels_per_stage))`` cycles (see the module docstring), one op per cycle; ``op.ready``
    depends combinationally on ``psum.ready`` (Map chain).

    Raises:
        ValueError: sizes < 1, cells outside the op's atomic_k // 2, levels_per_stage < 1.
    """

    def __init__(self, atomic_c: int, cells: int, stripe_max: int, first_cell: int = 0, *,
                 atomic_k: int, levels_per_stage: int = 2):
        if atomic_c < 1 or stripe_max < 1 or cells < 1:
            raise ValueError(f"sizes must be >= 1: atomic_c={atomic_c}, cells={cells}, "
                             f"stripe_max={stripe_max}")
        if atomic_k < 2 or atomic_k % 2:
            raise ValueError(f"atomic_k must be even and >= 2, not {atomic_k}")
        if first_cell < 0 or first_cell + cells > atomic_k // 2:
            raise ValueError(f"cells {first_cell}..{first_cell + cells - 1} outside the "
                             f"{atomic_k // 2} cells of an op")
        if levels_per_stage < 1:
            raise ValueError(f"levels_per_stage must be >= 1, not {levels_per_stage}")
        self.atomic_c, self.cells, self.stripe_max = atomic_c, cells, stripe_max
        self.first_cell, self.atomic_k = first_cell, atomic_k
        self.levels_per_stage = levels_per_stage
        super().__init__({
            "op": In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))),
            "psum": Out(stream.Signature(psum16_layout(atomic_c, cells, stripe_max))),
        })

    @property
    def latency(self) -> int:
        """Cycles from an op's transfer to its psum's first offer at full rate."""
        return 3 + max(1, -(-ceil_log2(self.atomic_c) // self.levels_per_stage))

    def _layout(self, **fields) -> data.StructLayout:
        """A stage payload: flat ``fields`` (widths) and the op's pos/first/last."""
        return data.StructLayout({**fields, "pos": range(self.stripe_max), "first": 1, "last": 1})

    def elaborate(self, platform):
        m = Module()
        ac, cells, fc = self.atomic_c, self.cells, self.first_cell
        lanes = cells * ac
        groups = -(-ac // (1 << _NAN_GROUP_LEVELS))

        def meta(p):
            return {"pos": p.pos, "first": p.first, "last": p.last}

        # 1. decode: per lane act, t (4 bits), mw (14), neg; per channel md (14); NaN groups
        dec_layout = self._layout(act=lanes, t=4 * lanes, mw=MANT_BITS * lanes, neg=lanes,
                                  md=MANT_BITS * ac, wnan=NAN_BITS * groups * cells,
                                  dnan=NAN_BITS * groups)

        def decode(mm, op):
            lane_in = Signal(ac, name="lane_in")            # c < n
            mm.d.comb += lane_in.eq(~(Const((1 << ac) - 1, ac) << op.n))
            data_in = _split(_sig(mm, op.data, "data"), 16)
            wt_in = _split(_sig(mm, op.wt, "wt"), 16)
            dsplit = [fp16_split(data_in[c]) for c in range(ac)]
            act, t, mw, neg, wnan = [], [], [], [], []
            for k in range(cells):
                wts = wt_in[(fc + k) * ac:(fc + k + 1) * ac]
                cands = []
                for c in range(ac):
                    sw, hw, mwc, nzw, nanw = fp16_split(wts[c])
                    sd, hd, _, nzd, _ = dsplit[c]
                    act.append(nzw & nzd & lane_in[c])
                    t.append((hw + hd)[:4])
                    mw.append(mwc)
                    neg.append(sw ^ sd)
                    cands.append(Cat(nanw & lane_in[c], wts[c][0:10], sw))
                wnan += _first_nan(mm, cands, _NAN_GROUP_LEVELS, f"wnan{k}")
            dcands = [Cat(dsplit[c][4] & lane_in[c], data_in[c][0:10], dsplit[c][0])
                      for c in range(ac)]
            return {"act": Cat(*act), "t": Cat(*t), "mw": Cat(*mw), "neg": Cat(*neg),
                    "md": Cat(*(d[2] for d in dsplit)), "wnan": Cat(*wnan),
                    "dnan": Cat(*_first_nan(mm, dcands, _NAN_GROUP_LEVELS, "dnan")), **meta(op)}

        m.submodules.decode = st1 = Map(op16_layout(ac, self.atomic_k, self.stripe_max),
                                        dec_layout, decode)
        wiring.connect(m, wiring.flipped(self.op), st1.i)

        # 2. Booth pairs; T; per lane k = T - t (3 bits) and ok; one NaN candidate per cell
        pair_layout = self._layout(u0=PAIR_BITS * lanes, u1=PAIR_BITS * lanes, k=3 * lanes,
                                   ok=lanes, t=4 * cells, nan=NAN_BITS * cells)

        def booth(mm, d):
            act, t = _split(_sig(mm, d.act, "act"), 1), _split(_sig(mm, d.t, "t"), 4)
            mw, neg = _split(_sig(mm, d.mw, "mw"), MANT_BITS), _split(_sig(mm, d.neg, "neg"), 1)
            md = _split(_sig(mm, d.md, "md"), MANT_BITS)
            dnan = _first_nan(mm, _split(_sig(mm, d.dnan, "dnan"), NAN_BITS), groups, "dnan")[0]
            wnan = _split(_sig(mm, d.wnan, "wnan"), NAN_BITS)
            u0, u1 = booth_pairs(mm, mw, md * cells, neg)
            shift, ok, tw, nan = [], [], [], []
            for k in range(cells):
                # T: (T >= v) for v = 1..14 is the OR over the lanes of (act & t >= v)
                ge = Signal(_T_MAX, name=f"ge{k}")
                tk = Signal(4, name=f"t{k}")
                therm = [Mux(act[i], ~(Const((1 << _T_MAX) - 1, _T_MAX) << t[i]), 0)
                         for i in range(k * ac, (k + 1) * ac)]          # bits 0..t-1
                mm.d.comb += [ge.eq(_or_tree(therm)), tk.eq(_thermometer_to_binary(ge))]
                tw.append(tk)
                for i in range(k * ac, (k + 1) * ac):
                    diff = (tk - t[i])[:4]                   # T >= t on an active lane
                    shift.append(diff[:3])
                    ok.append(act[i] & ~diff[3])
                wn = _first_nan(mm, wnan[k * groups:(k + 1) * groups], groups, f"wnan{k}")[0]
                nan.append(Mux(wn[0], wn, dnan))
            return {"u0": Cat(*u0), "u1": Cat(*u1), "k": Cat(*shift), "ok": Cat(*ok),
                    "t": Cat(*tw), "nan": Cat(*nan), **meta(d)}

        m.submodules.booth = st2 = Map(dec_layout, pair_layout, booth)
        wiring.connect(m, st1.o, st2.i)

        # 3. align and compensate: c = (U0 >> 4k) + (U1 >> 4k) - (BOOTH_BIAS >> 4k), 0 if not ok
        lane_layout = self._layout(c=LANE_BITS * lanes, t=4 * cells, nan=NAN_BITS * cells)
        bias = Const(BOOTH_BIAS, PAIR_BITS)

        def align(mm, p):
            u0 = _split(_sig(mm, p.u0, "u0"), PAIR_BITS)
            u1 = _split(_sig(mm, p.u1, "u1"), PAIR_BITS)
            shift, ok = _split(_sig(mm, p.k, "k"), 3), _split(_sig(mm, p.ok, "ok"), 1)
            out = []
            for i in range(lanes):
                # (U0 >> s) + (U1 >> s) = ((U0 + U1) >> s) - (the carry into bit s of U0 + U1)
                total = Signal(PAIR_BITS + 1, name=f"pair_sum{i}")
                mm.d.comb += total.eq(u0[i] + u1[i])
                carry = Cat(Const(0, 1),
                            *(total[s] ^ u0[i][s] ^ u1[i][s] for s in range(4, 29, 4)))
                sh = Cat(Const(0, 2), shift[i])
                v = Mux(ok[i], total >> sh, 0)
                b = Mux(ok[i], (bias >> sh) + carry.bit_select(shift[i], 1), 0)
                out.append((v - b)[:LANE_BITS])
            return {"c": Cat(*out), "t": p.t, "nan": p.nan, **meta(p)}

        m.submodules.align = st3 = Map(pair_layout, lane_layout, align)
        wiring.connect(m, st2.o, st3.i)

        # 4. lane sums
        out_layout = psum16_layout(ac, cells, self.stripe_max)
        levels = ceil_log2(ac)
        prev, prev_layout, width, n = st3.o, lane_layout, LANE_BITS, ac
        stage = 0
        while True:
            step = min(levels, self.levels_per_stage)
            levels -= step
            final = levels == 0
            out_n = n
            for _ in range(step):
                out_n = -(-out_n // 2)
            o_layout = out_layout if final else self._layout(
                c=(width + step) * out_n * cells, t=4 * cells, nan=NAN_BITS * cells)

            def add(mm, p, n=n, width=width, step=step, final=final, o_layout=o_layout):
                vals = [v.as_signed() for v in _split(_sig(mm, p.c, "c"), width)]
                tw, nan = _split(_sig(mm, p.t, "t"), 4), _split(_sig(mm, p.nan, "nan"), NAN_BITS)
                sums = []
                for k in range(cells):
                    vk = vals[k * n:(k + 1) * n]
                    for _ in range(step):
                        vk = [vk[i] + vk[i + 1] if i + 1 < len(vk) else vk[i]
                              for i in range(0, len(vk), 2)]
                    sums.append(vk)
                if not final:
                    return {"c": Cat(*(_sext(v, width + step) for vk in sums for v in vk)),
                            "t": p.t, "nan": p.nan, **meta(p)}
                s = Signal(o_layout, name="sums")
                for k in range(cells):
                    fp, nk = s.sum[k].fp, nan[k]
                    mm.d.comb += [fp.s.eq(sums[k][0]), fp.t.eq(tw[k]), fp.nan.eq(nk[0]),
                                  fp.nan_bits.eq(Mux(nk[0], Cat(nk[1:11], Const(0x1F, 5), nk[11]),
                                                     0))]
                mm.d.comb += [getattr(s, f).eq(v) for f, v in meta(p).items()]
                return s

            st = Map(prev_layout, o_layout, add)
            m.submodules[f"sum{stage}"] = st
            wiring.connect(m, prev, st.i)
            prev, prev_layout, width, n = st.o, o_layout, width + step, out_n
            stage += 1
            if final:
                break
        wiring.connect(m, prev, wiring.flipped(self.psum))
        return m
