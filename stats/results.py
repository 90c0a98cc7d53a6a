"""Results objects: what each stage of the analysis returns, in the statsmodels manner.

A results object is a dataclass whose fields are the stage's results. It has

- ``summary()``: readable text (one line per written entry by default; stages that have a
  natural one-line statement override it);
- ``to_dict()``: the JSON-ready record that ``summary.json`` and the tables write, *derived*
  from the fields by :func:`record`: every field in declaration order, named as the field
  unless the class's :attr:`Results.RENAME` says otherwise (the head class is written
  ``class``), less the fields in :attr:`Results.EXCLUDE` (bootstrap draws, tables and
  objects the figures read); a nested results object is written as its own record, an array as
  a list.
  A value the record shows but that is computed from other fields is a field too
  (``field(init=False)``, set in ``__post_init__``), at its place in the record.

:func:`json_safe` turns a record into JSON (numpy scalars to Python, NaN and inf to null).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Mapping, Tuple

import numpy as np

#: The written name of the head-class field of every record (CSV column and JSON key ``class``).
HEAD_CLASS_KEY: Mapping[str, str] = {"head_class": "class"}


class Results:
    """Base of the results objects (dataclasses); see the module docstring."""

    #: ``{field: written name}`` where the record's key differs from the field's name
    RENAME: ClassVar[Mapping[str, str]] = {}
    #: fields left out of the record
    EXCLUDE: ClassVar[Tuple[str, ...]] = ()

    def to_dict(self) -> dict:
        """The record of this object (module docstring)."""
        return record(self)

    def summary(self) -> str:
        """Readable text: one ``key: value`` line per entry of the record that is a scalar or short."""
        texts = ((key, _short(value)) for key, value in self.to_dict().items())
        return "\n".join([type(self).__name__] + [f"  {key}: {text}" for key, text in texts if text is not None])


def record(obj: Results) -> dict:
    """``obj``'s fields as a dict: renamed by ``obj.RENAME``, less ``obj.EXCLUDE``, nested results
    objects (also inside lists and dicts) as their records."""
    rename, exclude = type(obj).RENAME, type(obj).EXCLUDE
    return {rename.get(f.name, f.name): written(getattr(obj, f.name))
            for f in dataclasses.fields(obj) if f.name not in exclude}


def written(value):
    """A field's value as a record holds it: a results object as its record, an array as a list, lists
    and dicts walked."""
    if isinstance(value, Results):
        return value.to_dict()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [written(v) for v in value]
    if isinstance(value, dict):
        return {k: written(v) for k, v in value.items()}
    return value


def _short(value):
    """``value`` as one short piece of text, or None when it is long (a list, a mapping, a record)."""
    if isinstance(value, (list, tuple)) and len(value) <= 2 and all(np.isscalar(v) or v is None for v in value):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None or isinstance(value, (str, bool, int, np.integer, np.floating)):
        return str(value)
    return None


def json_safe(obj):
    """Recursively turn numpy scalars into Python ones and NaN/inf into None."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj
