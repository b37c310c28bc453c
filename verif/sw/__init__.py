"""NVIDIA's own software stack on the project's engines (issue 31).

NVIDIA's UMD runtime application and KMD firmware (``../shared/nvdla/sw``, compiled into
``build/sw`` by :mod:`verif.sw.build`) run as one child process; the project's port layer and
OS hooks (``csrc/``) send every register access, memory access and interrupt wait over a pipe
(:mod:`verif.sw.protocol`) to :mod:`verif.sw.host`, which plays them on an engine of the trace
player (``model``, ``rtl``, ``amaranth``). ``python -m verif.sw run LOADABLE`` (``__main__``)
runs a loadable and compares the output image with NVIDIA's golden md5.
"""
