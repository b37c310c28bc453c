"""Bit-exact numpy reference model of NVDLA (``from verif.model import Nvdla``).

See verif/model/nvdla.py for the sequencing and README.md for an example.
"""
from verif.model.formats import LimitationWarning, ModelConfigError
from verif.model.memory import Memory
from verif.model.nvdla import Nvdla, RegisterAccessError

__all__ = ["Nvdla", "Memory", "LimitationWarning", "ModelConfigError", "RegisterAccessError"]
