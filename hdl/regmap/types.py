"""Amaranth shapes of register fields, from the register map: the typed register binding.

``field_shape(unit, reg, field)`` is

* an :class:`amaranth.lib.enum.Enum` subclass when the field has enum values in NVIDIA's RDL
  (members named as the RDL names them, shape ``unsigned(width)``; one class per field, cached, so
  ``rf.cfg.d_feature_mode_cfg.flying_mode == field_enum("SDP", "D_FEATURE_MODE_CFG",
  "FLYING_MODE").ON`` compares with the right type);
* ``signed(width)`` when the field is two's complement (``hdl/regmap/signed_fields.py``);
* ``unsigned(width)`` otherwise.

:func:`hdl.regfile.reg_layout` builds register layouts from these shapes, so a unit's register
file view (``rf.cfg.<register>.<field>``) is typed: signed fields sign-extend in arithmetic, enum
fields accept only their own members in comparisons.
"""
from __future__ import annotations

import types
from functools import lru_cache

from amaranth.hdl import signed, unsigned
from amaranth.lib import enum

from hdl.regmap import REGMAP, Field

__all__ = ["field_shape", "field_enum", "enum_class_name"]


def enum_class_name(unit: str, reg: str, field: str) -> str:
    """CamelCase name of a field's enum class: ``SdpDFeatureModeCfgFlyingMode``."""
    return "".join(p.capitalize() for p in f"{unit}_{reg}_{field}".lower().split("_"))


@lru_cache(maxsize=None)
def _enum(unit: str, reg: str, field: str) -> type:
    f = REGMAP.lookup(f"{unit}.{reg}").reg.field(field)
    if not f.enums:
        raise KeyError(f"{unit}.{reg}.{field} has no enum values")

    def body(ns):
        for k, v in f.enums.items():
            ns[k] = v
    return types.new_class(enum_class_name(unit, reg, field), (enum.Enum,),
                           {"shape": unsigned(f.width)}, body)


def field_enum(unit: str, reg: str, field: str) -> type:
    """The :class:`amaranth.lib.enum.Enum` class of an enum field. Raises KeyError when the
    register or field does not exist or the field has no enum values."""
    return _enum(unit.upper().removeprefix("NVDLA_"), reg.upper(), field.upper())


def field_shape(unit: str, reg: str, f: Field):
    """Shape of field ``f`` of register ``reg`` in ``unit`` (see module docstring)."""
    if f.enums:
        return field_enum(unit, reg, f.name)
    return signed(f.width) if f.signed else unsigned(f.width)

