"""cocotb test modules run inside the Verilator simulator (see ``verif.trace.rtl_runner``)."""
