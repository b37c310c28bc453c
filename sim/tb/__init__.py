"""Simulation-only testbench pieces: the top ``nvdla_tb`` around ``NV_nvdla`` (``top``), the
in-simulation AXI memory in C++ (``axi_mem.cpp``, DPI-C) and its Python API (``simmem``)."""
