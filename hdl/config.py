"""The one hardware configuration object that parameterises every unit, the model and the tests.

Parameters are NVDLA's (``../shared/nvdla/spec/defs/*.spec`` and the derived values of
``projects.spec``; v2_scalability.rst "Parameters"). Presets: NVIDIA's six v2 configurations
(nv_small, nv_small_256, nv_small_256_full, nv_medium_512, nv_medium_1024_full, nv_large) and v1's
nv_full; ``tests/test_config.py`` proves each equal to NVIDIA's spec file. Which of them the RTL
builds today: :func:`hdl.support.unbuilt` (``hdl.build`` refuses the others in one line).

Units: sizes named ``*_width`` are bits unless the name says bytes; atomic sizes are elements.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace


class ConfigError(ValueError):
    """An invalid configuration; the message names the parameter and the values it allows."""


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass(frozen=True)
class NvdlaConfig:
    """NVDLA hardware configuration (v2_scalability.rst; spec/defs/*.spec).

    Raises ConfigError on construction when a parameter is outside the set NVDLA defines.
    """
    name: str
    # data types (v2_scalability "Data type": int8 only or int16/fp16 too)
    # "int8"; "int16_fp16" (v2_scalability: NVDLA_BPE 16, every size in 16-bit elements); or
    # "int8_int16_fp16": NVDLA v1's nv_full, which computes all three with its sizes counted in
    # int8 elements (a 32-byte atom holds 32 int8 or 16 int16/fp16 channels; unit description
    # "Convolution MAC": 2048 int8 or 1024 int16/fp16 MACs), see ``precisions``
    feature_data_type: str = "int8"
    weight_data_type: str = "int8"
    # optional features
    weight_compression: bool = False
    winograd: bool = False
    batch: bool = False
    secondary_memif: bool = False
    sdp_lut: bool = False
    sdp_bs: bool = True
    sdp_bn: bool = True
    sdp_ew: bool = False
    bdma: bool = False
    rubik: bool = False
    rubik_contract: bool = False
    rubik_reshape: bool = False
    pdp: bool = True
    cdp: bool = True
    retiming: bool = False
    # sizes
    mac_atomic_c: int = 8                  # elements (NVDLA_MAC_ATOMIC_C_SIZE)
    mac_atomic_k: int = 8                  # kernels (NVDLA_MAC_ATOMIC_K_SIZE)
    memory_atomic: int = 8                 # elements per memory atom (NVDLA_MEMORY_ATOMIC_SIZE)
    max_batch: int | None = None           # None: batch disabled ("x")
    cbuf_bank_number: int = 32
    cbuf_bank_width: int = 8               # bytes per CBUF entry (NVDLA_CBUF_BANK_WIDTH)
    cbuf_bank_depth: int = 512             # entries per bank
    sdp_bs_throughput: int = 1             # elements per cycle; 0 when the sub-unit is disabled
    sdp_bn_throughput: int = 1
    sdp_ew_throughput: int = 0
    pdp_throughput: int = 1
    cdp_throughput: int = 1
    primary_memif_latency: int = 50        # cycles
    secondary_memif_latency: int | None = None
    primary_memif_max_burst: int = 1       # beats
    primary_memif_width: int = 64          # bits (AXI data width)
    secondary_memif_max_burst: int | None = None
    secondary_memif_width: int | None = 512
    mem_address_width: int = 32            # bits
    num_dma_read_clients: int = 7
    num_dma_write_clients: int = 3
    # register map: "v2" (NVIDIA's master and nv_small branches) or "v1" (the nvdlav1 branch:
    # nv_full's RTL, v1 traces and firmware; other unit base addresses, hdl/regmap/v1.py)
    register_map: str = "v2"

    def __post_init__(self):
        def one_of(param, allowed):
            v = getattr(self, param)
            if v not in allowed:
                raise ConfigError(f"{self.name}: {param}={v!r} is not one of {sorted(allowed, key=str)}")
        one_of("feature_data_type", {"int8", "int16_fp16", "int8_int16_fp16"})
        one_of("register_map", {"v1", "v2"})
        one_of("weight_data_type", {"int8", "int16_fp16", "int8_int16_fp16"})
        # the values projects.spec (v1, nv_full) and projects.master.spec (v2) allow
        one_of("mac_atomic_c", {8, 32, 64})
        one_of("mac_atomic_k", {8, 16, 32})
        one_of("memory_atomic", {8, 16, 32})
        one_of("max_batch", {None, 32})
        one_of("cbuf_bank_number", {16, 32})
        one_of("cbuf_bank_width", {8, 32, 64})
        one_of("cbuf_bank_depth", {128, 512})
        one_of("primary_memif_width", {64, 128, 256, 512})
        one_of("secondary_memif_width", {None, 64, 128, 256, 512})
        one_of("mem_address_width", {32, 64})
        one_of("primary_memif_max_burst", {1, 4})
        one_of("secondary_memif_max_burst", {None, 1, 4})
        one_of("pdp_throughput", {1, 2, 4, 8})
        one_of("cdp_throughput", {1, 2, 4, 8})
        allowed_tp = {"bs": {1, 2, 4, 8, 16}, "bn": {1, 2, 4, 8, 16}, "ew": {1, 2, 4}}
        for unit in ("bs", "bn", "ew"):
            en, tp = getattr(self, f"sdp_{unit}"), getattr(self, f"sdp_{unit}_throughput")
            if en and tp not in allowed_tp[unit]:
                raise ConfigError(f"{self.name}: sdp_{unit}_throughput={tp} is not one of "
                                  f"{sorted(allowed_tp[unit])} (sdp_{unit} is enabled)")
            if not en and tp != 0:
                raise ConfigError(f"{self.name}: sdp_{unit}_throughput must be 0 when sdp_{unit} is disabled")
        for param in ("primary_memif_latency", "secondary_memif_latency"):
            v = getattr(self, param)
            if v is not None and v <= 0:
                raise ConfigError(f"{self.name}: {param}={v} must be a positive number of cycles")
        for param in ("num_dma_read_clients", "num_dma_write_clients"):
            if getattr(self, param) < 1:
                raise ConfigError(f"{self.name}: {param} must be >= 1")
        if self.mac_atomic_k > self.mac_atomic_c:
            raise ConfigError(f"{self.name}: mac_atomic_k={self.mac_atomic_k} exceeds mac_atomic_c={self.mac_atomic_c}")
        if self.cbuf_bank_width * 8 != self.mac_atomic_c * self.bpe:
            raise ConfigError(f"{self.name}: cbuf_bank_width={self.cbuf_bank_width} bytes must hold one "
                              f"atomic C ({self.mac_atomic_c} x {self.bpe} bits; NVDLA_CBUF_ENTRY_WIDTH)")
        if self.memory_atomic > self.mac_atomic_c:
            raise ConfigError(f"{self.name}: memory_atomic={self.memory_atomic} exceeds mac_atomic_c="
                              f"{self.mac_atomic_c} (a CBUF entry holds whole memory atoms)")
        if self.batch and self.max_batch is None:
            raise ConfigError(f"{self.name}: batch needs max_batch")
        if self.rubik_contract and not self.rubik or self.rubik_reshape and not self.rubik:
            raise ConfigError(f"{self.name}: rubik_contract/rubik_reshape need rubik")
        if self.sdp_lut and not self.sdp_ew:
            raise ConfigError(f"{self.name}: sdp_lut needs sdp_ew (the LUT sits in the X2/EW sub-unit)")
        if self.secondary_memif and (self.secondary_memif_width is None or self.secondary_memif_latency is None):
            raise ConfigError(f"{self.name}: secondary_memif needs secondary_memif_width and _latency")
        if not _pow2(self.memif_width // 8):
            raise ConfigError(f"{self.name}: memif width {self.memif_width} is not a power of two bytes")

    # ---- derived values (projects.spec) ----
    @property
    def bpe(self) -> int:
        """Bits per element: NVDLA_BPE (8 for "int8_int16_fp16", whose sizes count int8
        elements)."""
        return 16 if self.feature_data_type == "int16_fp16" else 8

    @property
    def precisions(self) -> tuple[str, ...]:
        """Feature data precisions the configuration computes, of "int8", "int16", "fp16"."""
        return {"int8": ("int8",), "int16_fp16": ("int16", "fp16"),
                "int8_int16_fp16": ("int8", "int16", "fp16")}[self.feature_data_type]

    @property
    def conv16(self) -> bool:
        """The convolution pipeline computes INT16 and FP16 layers beside INT8 ones on one-byte
        element sizes ("int8_int16_fp16", nv_full): 16-bit layers use entries of 2 x
        cbuf_bank_width bytes, atomic_k / 2 kernels per atomic operation and 16-bit CMAC
        lanes (docs/conv16.md). False for every other configuration, which builds none of it."""
        return "int16" in self.precisions and self.bpe == 8

    @property
    def memif_width(self) -> int:
        """NVDLA_MEMIF_WIDTH in bits: internal DMA data path width."""
        w = [self.primary_memif_width, self.memory_atomic * self.bpe]
        if self.secondary_memif:
            w.append(self.secondary_memif_width)
        return max(w)

    @property
    def dma_mask_bits(self) -> int:
        """NVDLA_DMA_MASK_BIT: memory atoms per DMA beat."""
        return self.memif_width // self.bpe // self.memory_atomic

    @property
    def atom_bytes(self) -> int:
        """Bytes in one memory atom (format.rst: 32 B on nv_full, 8 B on nv_small)."""
        return self.memory_atomic * self.bpe // 8

    @property
    def axi_data_bytes(self) -> int:
        """Bytes per AXI data beat on the primary (DBB) interface."""
        return self.primary_memif_width // 8

    @property
    def sdp_max_throughput(self) -> int:
        return max(self.sdp_bs_throughput, self.sdp_bn_throughput, self.sdp_ew_throughput)

    @property
    def sdp2pdp_width(self) -> int:
        return self.sdp_max_throughput * self.bpe

    @property
    def cbuf_entry_width(self) -> int:
        """Bits per CBUF entry: NVDLA_CBUF_ENTRY_WIDTH."""
        return self.mac_atomic_c * self.bpe

    @property
    def cbuf_entries(self) -> int:
        return self.cbuf_bank_number * self.cbuf_bank_depth

    @property
    def cbuf_bytes(self) -> int:
        return self.cbuf_entries * self.cbuf_bank_width

    @property
    def mac_result_width(self) -> int:
        """NVDLA_MAC_RESULT_WIDTH: bits of one CMAC partial sum."""
        return self.bpe * 2 + int(math.log2(self.mac_atomic_c))

    def units(self) -> tuple[str, ...]:
        """Register-file units present in this configuration (NVDLA names; v1 has no CFGROM)."""
        u = ["CFGROM"] if self.register_map == "v2" else []
        u += ["GLB", "MCIF", "CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP_RDMA", "SDP"]
        if self.pdp:
            u += ["PDP_RDMA", "PDP"]
        if self.cdp:
            u += ["CDP_RDMA", "CDP"]
        if self.secondary_memif:
            u.append("CVIF")
        if self.bdma:
            u.append("BDMA")
        if self.rubik:
            u.append("RBK")
        return tuple(u)

    def as_dict(self) -> dict:
        return asdict(self)

    def derive(self, **changes) -> "NvdlaConfig":
        """A copy with some parameters changed (validated again)."""
        return replace(self, **changes)


NV_SMALL = NvdlaConfig(name="nv_small")

# NVIDIA's v2 configurations (spec/defs/<name>.spec, with projects.master.spec's values).
NV_SMALL_256 = NvdlaConfig(
    name="nv_small_256", mac_atomic_c=32, cbuf_bank_width=32, cbuf_bank_depth=128,
    primary_memif_latency=64, secondary_memif_width=None)

NV_SMALL_256_FULL = NvdlaConfig(
    name="nv_small_256_full", secondary_memif=True, sdp_lut=True, sdp_ew=True,
    mac_atomic_c=32, cbuf_bank_width=32, cbuf_bank_depth=128,
    sdp_bs_throughput=2, sdp_bn_throughput=2, sdp_ew_throughput=1,
    primary_memif_latency=64, secondary_memif_latency=64, primary_memif_max_burst=4,
    secondary_memif_max_burst=4, secondary_memif_width=64, num_dma_read_clients=8)

NV_MEDIUM_512 = NvdlaConfig(
    name="nv_medium_512", mac_atomic_c=32, mac_atomic_k=16, memory_atomic=16,
    cbuf_bank_width=32, sdp_bs_throughput=4, sdp_bn_throughput=4,
    pdp_throughput=2, cdp_throughput=2, primary_memif_latency=256,
    primary_memif_max_burst=4, primary_memif_width=128, secondary_memif_width=None,
    mem_address_width=64)

NV_MEDIUM_1024_FULL = NvdlaConfig(
    name="nv_medium_1024_full", secondary_memif=True, sdp_lut=True, sdp_ew=True,
    mac_atomic_c=32, mac_atomic_k=32, memory_atomic=32, cbuf_bank_width=32,
    sdp_bs_throughput=8, sdp_bn_throughput=8, sdp_ew_throughput=2,
    pdp_throughput=4, cdp_throughput=4, primary_memif_latency=1024,
    secondary_memif_latency=1024, primary_memif_max_burst=4, primary_memif_width=256,
    secondary_memif_max_burst=4, secondary_memif_width=256, mem_address_width=64,
    num_dma_read_clients=8)

# NVIDIA's nv_large (nv_large.master.spec): int8, no Winograd/batch/BDMA/RUBIK, 256-bit AXI; the
# configuration NVIDIA has v2 RTL and traces for (MAX_BATCH_SIZE_32 is defined but unused there).
NV_LARGE = NvdlaConfig(
    name="nv_large", secondary_memif=True, sdp_lut=True, sdp_ew=True,
    mac_atomic_c=64, mac_atomic_k=32, memory_atomic=32, max_batch=32,
    cbuf_bank_number=16, cbuf_bank_width=64, cbuf_bank_depth=512,
    sdp_bs_throughput=16, sdp_bn_throughput=16, sdp_ew_throughput=4,
    pdp_throughput=8, cdp_throughput=8, primary_memif_latency=1024,
    secondary_memif_latency=1024, primary_memif_max_burst=1, primary_memif_width=256,
    secondary_memif_max_burst=1, secondary_memif_width=256, mem_address_width=64,
    num_dma_read_clients=8)

# NVDLA v1's nv_full (nv_full.spec; the values it leaves out from v1's nv_large.spec): the
# configuration the programming guide and unit description describe; nv_large plus v1's
# features, its memory latencies and 512-bit interfaces.
NV_FULL = NV_LARGE.derive(
    name="nv_full",
    weight_compression=True, winograd=True, batch=True, bdma=True, rubik=True,
    rubik_contract=True, rubik_reshape=True, retiming=True,
    primary_memif_latency=1200, secondary_memif_latency=128, primary_memif_width=512,
    secondary_memif_max_burst=4, secondary_memif_width=512,
    num_dma_read_clients=10, num_dma_write_clients=5, register_map="v1",
)

# nv_small with SDP's element-wise (X2/EW) sub-unit and LUT switched on: the configuration
# NVIDIA's four sdp_*_ew_* nv_small traces were written for (../shared/nvdla/README.md).
NV_SMALL_EW = NV_SMALL.derive(name="nv_small_ew", sdp_ew=True, sdp_lut=True, sdp_ew_throughput=1)

#: every preset by name; each but nv_small_ew equals NVIDIA's spec file of that name
#: (tests/test_config.py)
PRESETS = {c.name: c for c in (NV_SMALL, NV_SMALL_256, NV_SMALL_256_FULL, NV_MEDIUM_512,
                                NV_MEDIUM_1024_FULL, NV_LARGE, NV_FULL, NV_SMALL_EW)}

#: separates a preset name from its overrides in a configuration spec (``nv_small+a=1+b=2``)
SPEC_SEP = "+"


def _parse_value(name: str, text: str):
    """Parse ``text`` as the type of configuration field ``name``. Raises ConfigError."""
    types = {f.name: str(f.type) for f in fields(NvdlaConfig)}
    if name not in types or name == "name":
        known = ", ".join(sorted(k for k in types if k != "name"))
        raise ConfigError(f"--set {name}=...: no configuration parameter {name!r} (parameters: {known})")
    t, v = types[name], text.strip()
    if "None" in t and v.lower() in ("none", "x"):
        return None
    try:
        if t.startswith("bool"):
            if v.lower() in ("1", "true", "yes", "on"):
                return True
            if v.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(v)
        if t.startswith("int"):
            return int(v, 0)
    except ValueError:
        raise ConfigError(f"--set {name}={text}: {text!r} is not a {t.split(' ')[0]}") from None
    return v


def parse_overrides(items) -> dict:
    """``["NAME=VALUE", ...]`` (the ``--set`` option) as ``{name: typed value}``.
    Raises ConfigError for a malformed item, an unknown parameter or a value of the wrong type."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = _parse_value(k.strip(), v)
    return out


def get_config(spec: str, overrides=()) -> NvdlaConfig:
    """Configuration by spec: a preset name, optionally followed by ``+NAME=VALUE`` overrides
    (``nv_small+primary_memif_max_burst=4``, the form :attr:`NvdlaConfig.name` takes after
    overrides), plus the ``overrides`` items (``NAME=VALUE`` strings, as ``--set`` gives them).

    The result is validated; its ``name`` is the canonical spec (preset, then the overrides that
    change a value, sorted), so it round-trips through ``get_config`` and names build directories.
    Raises ConfigError naming the preset, parameter or value that is wrong.
    """
    base, *items = spec.split(SPEC_SEP)
    try:
        preset = PRESETS[base]
    except KeyError:
        raise ConfigError(f"unknown configuration {base!r}; presets: {', '.join(PRESETS)}") from None
    changes = parse_overrides(list(items) + list(overrides))
    changes = {k: v for k, v in changes.items() if getattr(preset, k) != v}
    if not changes:
        return preset
    name = SPEC_SEP.join([base] + [f"{k}={changes[k]}" for k in sorted(changes)])
    return preset.derive(name=name, **changes)


def add_config_arguments(parser) -> None:
    """Add ``--config PRESET`` and repeatable ``--set NAME=VALUE`` to an argparse parser."""
    parser.add_argument("--config", default="nv_small",
                        help=f"hardware configuration preset ({', '.join(PRESETS)}; default nv_small)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="override one configuration parameter (repeatable), e.g. "
                             "--set primary_memif_max_burst=4")


def config_from_args(args, parser=None) -> NvdlaConfig:
    """The configuration named by the ``--config``/``--set`` options of
    :func:`add_config_arguments`. Raises ConfigError; with ``parser`` (the argparse parser) a bad
    configuration is instead reported through ``parser.error`` (one line, exit status 2)."""
    try:
        return get_config(args.config, getattr(args, "overrides", ()))
    except ConfigError as e:
        if parser is None:
            raise
        parser.error(str(e))
