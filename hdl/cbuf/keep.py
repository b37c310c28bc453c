"""What CBUF keeps from one convolution layer for the next (docs/conv.md "Data and weight reuse
across layers"; programming guide "<CDMA|CSC>.DATA_REUSE / WEIGHT_REUSE", "CSC.D_RELEASE",
Limitation "CSC::RLS_SLICES").

Facts (settled on NVIDIA's nv_small RTL and recorded by the model, ``verif/model/conv.py``
``ConvCore._data`` / ``_release_data`` / ``_weights``; cited, not copied):

* a finishing layer keeps its last ``H - (RLS_SLICES+1)`` input slices in CBUF (H = CSC
  DATAIN_HEIGHT_EXT+1), all H of them when D_MISC_CFG.SKIP_DATA_RLS is set (NV_NVDLA_CSC_dl
  slice_left);
* the next layer uses the kept slices as its first slices when it sets DATA_REUSE and has the
  same mode (CONV_MODE, DATAIN_FORMAT) and D_BANK; after a SKIP_DATA_RLS layer that is all its
  data and CDMA fetches nothing (NV_NVDLA_CDMA_dc skips the fetch), otherwise CDMA fetches its
  own DATAIN_HEIGHT+1 lines after the kept ones ("partial reuse"); without DATA_REUSE the kept
  slices are dropped;
* WEIGHT_REUSE after a SKIP_WEIGHT_RLS layer of the same mode and D_BANK keeps the weights: no
  weight fetch.

Where the slices live (ours): the data banks are a ring of DCAP = (DATA_BANK+1) x depth entries;
a layer's slice y starts at entry ``(dat_base + y x EPS) mod DCAP``. A layer that reuses nothing
starts at ``dat_base = 0`` (the layout of docs/conv.md "Where things live in CBUF"); a layer that
reuses slices starts where the kept slices start, so its fetched slices follow them. The whole
input of a layer fits the data banks (full-input mode), so every offset ``y x EPS + cb x W + x``
is below DCAP and one compare-and-subtract maps ``dat_base + offset`` into the ring. Weights stay
where they are (weight entry n at ring slot n mod WCAP from slot 0), so kept weights are exactly
where a fetch would have put them, provided they fit the weight banks (D_WEIGHT_BYTES <= WCAP
entries; a layer whose weights overflow the ring cannot keep them).

In 16-bit configurations (``geom.pairs``, docs/conv16.md "CBUF") addresses count
cbuf_bank_width-byte units: an INT16/FP16 layer's entry is two units, so its slice step is
2 x (ENTRIES+1) units, and D_MISC_CFG.PROC_PRECISION joins the reuse key (slices kept by a layer
of another precision are dropped: the model refuses that reuse, docs/conv16.md open question 2).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.cbuf import CbufGeometry
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP

__all__ = ["SLICE_BITS", "keep_layout", "CbufKeep", "keep_reference"]

#: bits of a slice count (DATAIN_HEIGHT_EXT is 13 bits: at most 8192 slices)
SLICE_BITS = 14


def keep_layout(geom: CbufGeometry) -> data.StructLayout:
    """What a layer finds in CBUF at its start (given to CDMA and CSC, stable for the layer):

    * ``dat_base`` (addr_bits): entry of the layer's slice 0 (in the data-bank ring);
    * ``dat_kept`` (:data:`SLICE_BITS`): slices already in CBUF (the first ones of the layer);
    * ``dat_next`` (addr_bits): entry of the first slice CDMA fetches, where the previous
      layer's slices ended (``(dat_base + dat_kept x EPS) mod DCAP`` when both layers have the
      same D_ENTRY_PER_SLICE, which reusing slices laid out by the previous layer needs);
    * ``dat_reused`` (1): every slice is kept, CDMA fetches no data;
    * ``wt_reused`` (1): the weights are kept, CDMA fetches no weights.

    All zero (the reset value) is a layer that reuses nothing: slices from entry 0, both
    fetches run."""
    return data.StructLayout({"dat_base": geom.addr_bits, "dat_kept": SLICE_BITS,
                              "dat_next": geom.addr_bits, "dat_reused": 1, "wt_reused": 1})


def keep_reference(layers, depth: int, pairs: bool = False) -> list[dict]:
    """Plain-Python reference of :class:`CbufKeep`: for each layer (a dict of the CSC fields
    ``CONV_MODE``, ``DATAIN_FORMAT``, ``DATA_BANK``, ``WEIGHT_BANK``, ``DATA_REUSE``,
    ``WEIGHT_REUSE``, ``SKIP_DATA_RLS``, ``SKIP_WEIGHT_RLS``, ``RLS_SLICES``,
    ``DATAIN_HEIGHT_EXT``, ``ENTRIES``), what it finds at its start: a dict of the
    :func:`keep_layout` fields. ``depth``: entries per CBUF bank. ``pairs``: a 16-bit
    configuration (then each layer also has ``PROC_PRECISION``; addresses count units)."""
    left = None
    out = []
    for r in layers:
        key = (r["CONV_MODE"], r["DATAIN_FORMAT"], r["DATA_BANK"], r["WEIGHT_BANK"])
        cap = (r["DATA_BANK"] + 1) * depth
        eps = r["ENTRIES"] + 1
        if pairs:
            key += (r["PROC_PRECISION"],)
            eps *= 2 if r["PROC_PRECISION"] else 1
        match = left is not None and left["key"] == key
        use = bool(r["DATA_REUSE"]) and match
        cur = {"dat_base": left["base"] if use else 0, "dat_kept": left["kept"] if use else 0,
               "dat_reused": int(use and left["skip"]),
               "wt_reused": int(bool(r["WEIGHT_REUSE"]) and match and left["wt"])}
        # where the previous layer's slices ended (its EPS; = dat_base + dat_kept x EPS when
        # both layers have the same EPS, as data reuse needs)
        cur["dat_next"] = left["end"] if use else 0
        out.append(cur)
        h, rls = r["DATAIN_HEIGHT_EXT"] + 1, r["RLS_SLICES"] + 1
        end = (cur["dat_base"] + h * eps) % cap
        if r["SKIP_DATA_RLS"]:
            base, kept = cur["dat_base"], h
        elif h > rls:
            base, kept = (cur["dat_base"] + rls * eps) % cap, h - rls
        else:
            base, kept = end, 0
        left = {"key": key, "base": base, "kept": kept, "end": end,
                "skip": bool(r["SKIP_DATA_RLS"]), "wt": bool(r["SKIP_WEIGHT_RLS"])}
    return out


class CbufKeep(wiring.Component):
    """The CBUF state one convolution layer leaves to the next (module docstring).

    Parameter: ``geom`` (:class:`hdl.cbuf.CbufGeometry`).

    Ports:
      ``regs`` In(unit_layout(CSC, "cfg")): the layer's CSC registers (D_MISC_CFG, D_BANK,
      D_DATAIN_FORMAT, D_RELEASE, D_DATAIN_SIZE_EXT_0, D_ENTRY_PER_SLICE), read in the
      ``start`` cycle (CDMA's copies hold the same values: programming guide "Register
      definition");
      ``start`` In(1): the pipeline's layer start pulse; the layer's registers are latched;
      ``done`` In(1): the layer's end pulse: what it keeps becomes the state the next layer sees
      (from the next cycle);
      ``layer`` Out(:func:`keep_layout`): what the layer starting now finds in CBUF, a
      combinational function of the state and ``regs``: valid in the ``start`` cycle and stable
      until the layer's ``done`` (the state only changes at ``done``; ``regs`` are stable).

    The state after reset: nothing kept (the first layer reuses nothing whatever its bits).
    Reference: :func:`keep_reference`.
    """

    def __init__(self, geom: CbufGeometry):
        self.geom = geom
        super().__init__({
            "regs": In(unit_layout(REGMAP.unit("CSC"), "cfg")),
            "start": In(1),
            "done": In(1),
            "layer": Out(keep_layout(geom)),
        })

    def elaborate(self, platform):
        m = Module()
        g, regs = self.geom, self.regs
        ab = g.addr_bits
        misc = regs.d_misc_cfg
        # the enum fields as plain bits
        conv_mode, fmt = misc.conv_mode.as_value(), regs.d_datain_format.datain_format.as_value()
        data_reuse, weight_reuse = misc.data_reuse.as_value(), misc.weight_reuse.as_value()
        skip_data, skip_weight = misc.skip_data_rls.as_value(), misc.skip_weight_rls.as_value()
        fields = [conv_mode, fmt, regs.d_bank.data_bank, regs.d_bank.weight_bank]
        if g.pairs:
            # 16-bit configurations (docs/conv16.md "CBUF"): the precision is part of the key
            # (the model refuses reuse across a PROC_PRECISION change; dropping the kept
            # slices is the safe reading), and a 16-bit layer's entry is two units
            prec = misc.proc_precision.as_value()
            fields.append(prec)
        key = Signal(sum(len(f) for f in fields))
        m.d.comb += key.eq(Cat(*fields))
        cap = Signal(ab + 1)
        eps = Signal(len(regs.d_entry_per_slice.entries) + 1 + g.pairs)
        m.d.comb += cap.eq(g.wt_base(regs.d_bank.data_bank))
        if g.pairs:
            m.d.comb += eps.eq((regs.d_entry_per_slice.entries + 1) << (prec != 0))
        else:
            m.d.comb += eps.eq(regs.d_entry_per_slice.entries + 1)

        # ---- what the last finished layer left
        l_valid, l_key = Signal(), Signal.like(key)
        l_base, l_end = Signal(ab), Signal(ab)
        l_kept = Signal(SLICE_BITS)
        l_skip, l_wt = Signal(), Signal()

        # ---- the layer starting now
        match = l_valid & (l_key == key)
        use = data_reuse & match
        out = self.layer
        m.d.comb += [
            out.dat_base.eq(Mux(use, l_base, 0)),
            out.dat_kept.eq(Mux(use, l_kept, 0)),
            # the kept slices end where the previous layer's data ended
            out.dat_next.eq(Mux(use, l_end, 0)),
            out.dat_reused.eq(use & l_skip),
            out.wt_reused.eq(weight_reuse & match & l_wt),
        ]

        # ---- latched at start: what this layer will leave
        c_key = Signal.like(key)
        c_base = Signal(ab)
        c_cap = Signal(ab + 1)
        c_eps = Signal.like(eps)
        c_h = Signal(SLICE_BITS)
        c_rls = Signal(len(regs.d_release.rls_slices) + 1)
        c_skip, c_wt = Signal(), Signal()
        with m.If(self.start):
            m.d.sync += [c_key.eq(key), c_base.eq(out.dat_base), c_cap.eq(cap), c_eps.eq(eps),
                         c_h.eq(regs.d_datain_size_ext_0.datain_height_ext + 1),
                         c_rls.eq(regs.d_release.rls_slices + 1),
                         c_skip.eq(skip_data), c_wt.eq(skip_weight)]

        def ring(x):
            # x < 2 * DCAP: one compare-and-subtract
            return Mux(x >= c_cap, x - c_cap, x)

        # products of registers latched at start, used at done (many cycles later)
        h_off = Signal(len(c_h) + len(c_eps))
        r_off = Signal(len(c_rls) + len(c_eps))
        m.d.comb += [h_off.eq(c_h * c_eps), r_off.eq(c_rls * c_eps)]
        end = Signal(ab)
        rbase = Signal(ab)
        m.d.comb += [end.eq(ring(c_base + h_off)), rbase.eq(ring(c_base + r_off))]
        with m.If(self.done):
            m.d.sync += [l_valid.eq(1), l_key.eq(c_key), l_end.eq(end), l_skip.eq(c_skip),
                         l_wt.eq(c_wt)]
            with m.If(c_skip):
                m.d.sync += [l_base.eq(c_base), l_kept.eq(c_h)]
            with m.Elif(c_h > c_rls):
                m.d.sync += [l_base.eq(rbase), l_kept.eq(c_h - c_rls)]
            with m.Else():
                m.d.sync += [l_base.eq(end), l_kept.eq(0)]
        return m
