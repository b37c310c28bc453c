"""Shared DMA plumbing for every NVDLA unit that reads or writes feature cubes.

* :mod:`hdl.dma.cube` -- cube geometry layout and its binding from a unit's registers.
* :mod:`hdl.dma.walker` -- :class:`CubeWalker`: runs of a cube in traversal order, grouped for
  AXI bursts (across lines and surfaces contiguous in memory, never across a 4 KB boundary);
  :class:`RunWalker`, the base of walkers (a unit with another traversal order subclasses it);
  :class:`WalkerDma`, the base of both DMAs (shared parameters, ports, walker);
  :func:`atom_group_layout`, the payload of *wide* atom streams (``wide=True``: up to one beat
  of atoms per transfer, so a DMA moves a beat per cycle where a beat holds several atoms).
* :mod:`hdl.dma.read` -- :class:`ReadDma`: walker + burst requests + latency FIFO with credits +
  lane select.
* :mod:`hdl.dma.write` -- :class:`WriteDma`: walker + beat packing + burst requests + done.
* :mod:`hdl.dma.group` -- :class:`Ungroup`: a wide atom stream one atom per cycle.
* :mod:`hdl.dma.nest` -- loop-nest walkers and DMAs (RUBIK).
* :mod:`hdl.dma.clients` -- the MCIF client table (client index = AXI ID) and
  :func:`dma_params` (DMA parameters from an NvdlaConfig).
"""
from hdl.dma.clients import (READ_CLIENTS, WRITE_CLIENTS, dma_params, read_client, read_dma_params,
                             write_client, write_dma_params)
from hdl.dma.cube import CUBE_DIM_BITS, atom_layout, cube_from_regs, cube_layout, one_run_if_1x1
from hdl.dma.read import ReadDma
from hdl.dma.walker import CubeWalker, RunWalker, WalkerDma, atom_group_layout
from hdl.dma.write import WriteDma

__all__ = ["CUBE_DIM_BITS", "atom_group_layout", "atom_layout", "CubeWalker", "READ_CLIENTS", "ReadDma", "RunWalker", "WRITE_CLIENTS",
           "WalkerDma", "WriteDma",
           "cube_from_regs", "cube_layout", "one_run_if_1x1", "dma_params", "read_client", "read_dma_params",
           "write_client", "write_dma_params"]
