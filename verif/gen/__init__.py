"""Random legal register programs, played on the model and the RTL and compared (issue 11
items 1, 2, 4, 9).

* :mod:`verif.gen.writer`: the trace writer (a program as a ``.cfg`` + ``.dat`` trace directory,
  CRCs from the model);
* :mod:`verif.gen.sdp`, :mod:`verif.gen.pdp`, :mod:`verif.gen.cdp`: generators of random legal
  programs per hardware layer type (one to three layers in both ping-pong groups back to back),
  and of SDP programs whose operand DMAs and operand sources disagree (``mismatch=True``);
* :mod:`verif.gen.run`: generate, compute the model's CRCs, play on the RTL, report mismatches
  with the seed and a command that reproduces them (``scripts/sweep.py`` drives it).
"""
