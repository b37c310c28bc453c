"""Python side of the in-simulation AXI memory (``sim/tb/axi_mem.cpp``), through ``ctypes``.

Only usable inside a simulator process built by ``sim.build`` (the executable exports the
``simmem_*`` functions: ``ctypes.CDLL(None)`` finds them). The memory has one instance per
AXI port of ``NV_nvdla`` (``PORT_DBB`` = 0: ``nvdla_core2dbb_*``, the primary memory;
``PORT_CV`` = 1: ``nvdla_core2cvsram_*``, the secondary memory ``sec_mem``, wired by the
testbench top when the DUT has that port), each with its own contents, timing profile, monitor
and counters. Three objects, each bound to one port:

* :class:`SimMemLib` - the raw API of one port (``SimMemLib(port)``): :meth:`SimMemLib.configure`
  (timing profile, data bytes per beat, address width, allowed AXI IDs, monitor on/off),
  ``reset``, ``set_mode``, ...
* :class:`SimMemory` - the backdoor with the interface of :class:`verif.mem.SparseMemory` the
  engines use: ``write(addr, data)``, ``fill(addr, size, value)``, ``read(addr, size)`` (a
  ``np.uint8`` array), ``read_bytes``, ``read_word``/``write_word``, ``clear()``; addresses wrap
  at ``address_width`` bits as in ``verif.mem``.
* :class:`SimAxi` - what the rtl engine reads of its AXI slave: counters ``rd_beats``,
  ``wr_beats``, ``rd_reqs``, ``wr_reqs``, ``error`` (the first protocol error, a string with
  cycle and channel, or None), ``idle``, the monitor's ``quiet`` flag and ``check_idle(now)``
  (``core``/``monitor`` point to itself so code written for ``AxiResponder.core.monitor``
  works unchanged).

Raises :class:`SimMemError` when the running simulator has no in-simulation memory.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

PROFILE_CODES = {"nvidia": 0, "fast": 1, "random": 2}
#: instances of the in-simulation memory (sim/tb/top.py PORTS)
PORT_DBB, PORT_CV = 0, 1
#: simmem_set_mode: readies and valids low (the DUT in reset), idle outputs, running
MODE_QUIET, MODE_IDLE, MODE_RUN = 0, 1, 2

_u64, _int, _p = ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p


class SimMemError(RuntimeError):
    """The simulator process has no in-simulation memory (not a ``sim.build`` simulator)."""


class SimMemLib:
    """The ``simmem_*`` functions of the running simulator for one port (module docstring;
    ``port``: ``PORT_DBB`` or ``PORT_CV``); ``c_<name>(...)`` calls ``simmem_<name>(port, ...)``.
    Raises :class:`SimMemError` without an in-simulation memory, ValueError for a port the
    simulator's memory does not have."""

    def __init__(self, port: int = PORT_DBB):
        try:
            lib = ctypes.CDLL(None)
            lib.simmem_present
            lib.simmem_ports
        except (OSError, AttributeError) as e:
            raise SimMemError("this simulator has no in-simulation AXI memory with ports "
                              f"(simmem_* not exported; rebuild with sim.build): {e}") from None
        lib.simmem_ports.restype, lib.simmem_ports.argtypes = _int, []
        if not 0 <= port < lib.simmem_ports():
            raise ValueError(f"port {port}: the in-simulation memory has ports 0..{lib.simmem_ports() - 1}")
        #: the instance (``PORT_DBB``/``PORT_CV``)
        self.port = int(port)
        sigs = {
            "simmem_configure": (_int, [_int, _int, _int, _u64, _int, _int, _p, _p, _int]),
            "simmem_reset": (None, [_int]), "simmem_set_mode": (None, [_int]),
            "simmem_clear": (None, []), "simmem_write": (None, [_u64, _p, _u64]),
            "simmem_read": (None, [_u64, _p, _u64]), "simmem_fill": (None, [_u64, _u64, _int]),
            "simmem_pages": (_u64, []), "simmem_counters": (None, [_p]),
            "simmem_error": (ctypes.c_char_p, []), "simmem_set_error": (None, [ctypes.c_char_p]),
            "simmem_idle": (_int, []), "simmem_get_quiet": (_int, []),
            "simmem_set_quiet": (None, [_int]), "simmem_check_idle": (None, [_u64]),
            "simmem_any_stall": (_int, []),
        }
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, [_int] + args
            setattr(self, "c_" + name[len("simmem_"):], functools.partial(f, self.port))
        self._ctr = (_u64 * 10)()

    def configure(self, timing, data_bytes: int, address_width: int, ids: dict | None = None,
                  monitor: bool = True) -> None:
        """``timing``: a ``verif.axi_slave.MemTiming``; ``ids``: ``{"read": [...], "write":
        [...]}`` allowed ARID/AWID values (None: any). Clears the memory; mode quiet.
        The random profile's seed is taken as Python's ``random.Random`` takes it (its
        absolute value); raises SimMemError for one of 2**64 or more."""
        if ids is None:
            rd = wr = None
        else:
            rd, wr = (bytes(1 if i in set(ids[k]) else 0 for i in range(256)) for k in ("read", "write"))
        seed = abs(int(timing.seed))
        if seed >> 64:
            raise SimMemError(f"random profile seed {timing.seed}: the in-simulation memory "
                              "takes seeds below 2**64 (in absolute value)")
        rc = self.c_configure(PROFILE_CODES[timing.profile], timing.read_latency,
                              timing.accept_every, seed, int(data_bytes),
                              int(address_width), rd, wr, 1 if monitor else 0)
        if rc:
            raise SimMemError(f"simmem_configure: data_bytes={data_bytes} (1..64) or "
                              f"address_width={address_width} (12..64) not supported")

    def counters(self) -> list[int]:
        """[rd_beats, wr_beats, rd_reqs, wr_reqs, now, handshakes ar, aw, w, r, b]."""
        self.c_counters(ctypes.addressof(self._ctr))
        return list(self._ctr)


class SimMemory:
    """Backdoor to the in-simulation memory with ``verif.mem.SparseMemory``'s interface (the
    part the engines and test benches use); ``address_width`` in bits."""

    def __init__(self, lib: SimMemLib, address_width: int):
        self.lib = lib
        self.address_width = int(address_width)
        self.mask = (1 << self.address_width) - 1

    def clear(self) -> None:
        """Every byte reads 0 again (pages freed)."""
        self.lib.c_clear()

    def write(self, addr: int, data) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            buf = bytes(data)
            self.lib.c_write(addr & self.mask, buf, len(buf))
        else:
            a = np.ascontiguousarray(np.asarray(data, dtype=np.uint8).ravel())
            self.lib.c_write(addr & self.mask, a.ctypes.data, a.size)

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        if size < 0:
            raise ValueError(f"negative size {size}")
        self.lib.c_fill(addr & self.mask, size, value & 0xFF)

    def read(self, addr: int, size: int) -> np.ndarray:
        if size < 0:
            raise ValueError(f"negative size {size}")
        out = np.empty(size, np.uint8)
        if size:
            self.lib.c_read(addr & self.mask, out.ctypes.data, size)
        return out

    def read_bytes(self, addr: int, size: int) -> bytes:
        return self.read(addr, size).tobytes()

    def read_word(self, addr: int, nbytes: int) -> int:
        return int.from_bytes(self.read_bytes(addr, nbytes), "little")

    def write_word(self, addr: int, nbytes: int, value: int, strb: int) -> None:
        data = bytearray(self.read_bytes(addr, nbytes))
        new = value.to_bytes(nbytes, "little")
        for i in range(nbytes):
            if strb >> i & 1:
                data[i] = new[i]
        self.write(addr, bytes(data))

    @property
    def pages(self) -> int:
        """Number of allocated pages (64 KiB each)."""
        return self.lib.c_pages()


class SimAxi:
    """Counters, protocol error and monitor flags of the in-simulation AXI slave (module
    docstring); ``core`` and ``monitor`` are the object itself."""

    def __init__(self, lib: SimMemLib):
        self.lib = lib
        self.core = self.monitor = self

    def _c(self, i: int) -> int:
        return self.lib.counters()[i]

    rd_beats = property(lambda self: self._c(0))
    wr_beats = property(lambda self: self._c(1))
    rd_reqs = property(lambda self: self._c(2))
    wr_reqs = property(lambda self: self._c(3))
    now = property(lambda self: self._c(4))

    @property
    def handshakes(self) -> dict:
        c = self.lib.counters()
        return dict(zip(("ar", "aw", "w", "r", "b"), c[5:10]))

    @property
    def error(self) -> str | None:
        e = self.lib.c_error()
        return None if e is None else e.decode(errors="replace")

    @error.setter
    def error(self, msg: str) -> None:
        """Record ``msg`` unless an error is already recorded (the first one wins)."""
        self.lib.c_set_error(str(msg).encode())

    @property
    def idle(self) -> bool:
        return bool(self.lib.c_idle())

    @property
    def quiet(self) -> bool:
        return bool(self.lib.c_get_quiet())

    @quiet.setter
    def quiet(self, v: bool) -> None:
        self.lib.c_set_quiet(1 if v else 0)

    def check_idle(self, now: int) -> None:
        self.lib.c_check_idle(int(now))

    def reset(self, keep_error: bool = False) -> None:
        self.lib.c_reset(1 if keep_error else 0)

    def set_mode(self, mode: int) -> None:
        self.lib.c_set_mode(mode)
