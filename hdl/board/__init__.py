"""NV_nvdla on a real FPGA board (issue 37; docs/fpga.md, "Board top"): the UART bridge to CSB and
memory (:mod:`hdl.board.uart`, :mod:`hdl.board.bridge`, :mod:`hdl.board.host`), block RAM behind
the DBB AXI port (:mod:`hdl.board.axi_ram`), the board-independent top
(:mod:`hdl.board.top`) and the Sipeed Tang Mega 138K platform and bitstream flow
(:mod:`hdl.board.tang_mega_138k`)."""
