"""Check a composed config against its schema dataclass before any work, in one line.

Both Hydra apps (``python -m emergence``, ``python -m stats``) declare each field's
constraint next to the field, in ``dataclasses.field(metadata=...)``:

- ``min`` / ``max``: inclusive bounds; ``gt`` / ``lt``: strict bounds; ``finite``: no inf/nan;
- ``choices``: a tuple of valid values, or a function returning one (read at check time,
  so a registry another module keeps up to date is always current); ``or_number``: a
  number is valid too (then the bounds apply to it);
- ``pattern`` (a regular expression a string must match) with ``hint`` (the valid form);
- ``items``: a constraint of the same kind for every element of a list, every value of
  a dict or every field of a nested dataclass; ``keys``: choices for a dict's keys.

:func:`check` walks a composed config (a ``DictConfig``) with its schema, refuses keys
the schema does not have (Hydra's ``+key=value`` adds them even to a typed node) and
raises the app's user error with one line naming the value and the valid choices.
:func:`precheck` composes the command line's overrides with Hydra's compose API first
(every value of a ``-m`` sweep), so Hydra's own errors (a wrong type, an unknown key,
an unknown group option) come out as one line too. No torch here: ``stats`` uses it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import typing
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Type

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

#: The constraint keys a field's metadata may hold (a field with none of them is free).
CONSTRAINTS = ("min", "max", "gt", "lt", "finite", "choices", "pattern", "items", "keys")
#: A seed numpy's ``RandomState`` and ``default_rng`` both take.
SEED = {"min": 0, "max": 2**32 - 1}


def constraint(f: dataclasses.Field) -> dict:
    """The constraint declared on a schema field ({} for a free field)."""
    return {k: v for k, v in f.metadata.items() if k in CONSTRAINTS + ("or_number", "hint")}


def _choices(choices) -> Sequence:
    """A ``choices`` (or ``keys``) constraint's values: a tuple, or a function returning one."""
    return tuple(choices() if callable(choices) else choices)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (ListConfig, DictConfig)):
        return str(OmegaConf.to_container(value))
    return str(value)


def _range_text(rule: dict, integer: bool) -> str:
    bounds = ((">=", "min"), (">", "gt"), ("<=", "max"), ("<", "lt"))
    parts = [f"{op} {rule[key]}" for op, key in bounds if key in rule]
    kind = "an integer" if integer else ("a finite number" if rule.get("finite") else "a number")
    return " ".join([kind] + [" and ".join(parts)]).strip()


def problem(value: Any, rule: dict, integer: bool = False) -> Optional[str]:
    """Why ``value`` breaks ``rule`` (the text after ``key=value``), or None."""
    if value is None:
        return None
    if "choices" in rule:
        choices = _choices(rule["choices"])
        if value in choices:
            return None
        if not (rule.get("or_number") and _parses_as_number(value)):
            number = ", or a number" if rule.get("or_number") else ""
            return f"is unknown; valid: {', '.join(map(str, choices))}{number}"
        value = float(value)
    if "pattern" in rule:
        if not isinstance(value, str) or not re.fullmatch(rule["pattern"], value):
            return f"is not valid; valid: {rule.get('hint', rule['pattern'])}"
        return None
    if any(k in rule for k in ("min", "max", "gt", "lt", "finite")):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"must be {_range_text(rule, integer)}"
        bad = ((rule.get("finite") and not math.isfinite(value)) or math.isnan(value)
               or ("min" in rule and value < rule["min"]) or ("max" in rule and value > rule["max"])
               or ("gt" in rule and not value > rule["gt"]) or ("lt" in rule and not value < rule["lt"]))
        if bad:
            return f"must be {_range_text(rule, integer)}"
    return None


def _parses_as_number(value: Any) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def _unwrap(tp: Any) -> Any:
    """``Optional[X]`` -> X."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def check(cfg: DictConfig, schema: Type, error: Type[Exception], prefix: str = "") -> None:
    """Raise ``error`` (one line) on the first value of ``cfg`` its schema refuses."""
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for key in cfg.keys():
        if key not in fields and not (key == "hydra" and not prefix):  # (a sweeper's configs hold Hydra's node)
            where = prefix.rstrip(".") or "the config"
            raise error(f"{prefix}{key} is not a key of {where}; valid: {', '.join(fields)}")
    keys = set(cfg.keys())
    for name, f in fields.items():
        path = f"{prefix}{name}"
        if name not in keys:
            continue
        if OmegaConf.is_missing(cfg, name):
            raise error(f"{path} is not set; set it: {path}=<value>")
        try:
            value = cfg[name]
        except OmegaConfBaseException:  # an interpolation that resolves only in a Hydra run (${hydra:...})
            continue
        _check_value(value, _unwrap(hints[name]), constraint(f), path, error)


def _check_value(value: Any, tp: Any, rule: dict, path: str, error: Type[Exception]) -> None:
    if value is None:
        return
    if dataclasses.is_dataclass(tp) and isinstance(value, DictConfig):
        check(value, tp, error, f"{path}.")
        if "items" in rule:
            hints = typing.get_type_hints(tp)
            for f in dataclasses.fields(tp):
                _check_value(value.get(f.name), _unwrap(hints[f.name]), rule["items"], f"{path}.{f.name}", error)
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(value, ListConfig) and origin in (list, List):
        item_type = _unwrap(args[0]) if args else Any
        for i, item in enumerate(value):
            _check_value(item, item_type, rule.get("items", {}), f"{path}[{i}]", error)
        return
    if isinstance(value, DictConfig):
        item_type = _unwrap(args[1]) if len(args) == 2 else Any
        for key in value.keys():
            if "keys" in rule and key not in _choices(rule["keys"]):
                raise error(f"{path}.{key} is not a key of {path}; valid: {', '.join(_choices(rule['keys']))}")
            _check_value(value[key], item_type, rule.get("items", {}), f"{path}.{key}", error)
        return
    why = problem(value, rule, integer=tp is int)
    if why:
        raise error(f"{path}={_show(value)} {why}")


def constrained_fields(schema: Type, prefix: str = "") -> List[tuple]:
    """(path, field type, constraint) of every field under ``schema`` (nested dataclasses
    walked; a list of dataclasses as ``path[0]``), for tests and docs."""
    out = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp = _unwrap(hints[f.name])
        path = f"{prefix}{f.name}"
        out.append((path, tp, constraint(f)))
        if dataclasses.is_dataclass(tp):
            out += constrained_fields(tp, f"{path}.")
        elif typing.get_origin(tp) is list and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            out += constrained_fields(typing.get_args(tp)[0], f"{path}[0].")
    return out


# --- the command line: compose first, Hydra's errors in one line ---------------------------------

#: Hydra flags that take a value (the value is not an override).
_VALUED_FLAGS = {"--cfg", "-c", "--package", "-p", "--config-dir", "-cd"}
#: Flags after which nothing is composed here (Hydra answers them itself).
_SKIP_FLAGS = {"--help", "-h", "--hydra-help", "--version", "--info", "-i", "--shell-completion", "-sc",
               "--config-path", "-cp", "--config-name", "-cn", "--experimental-rerun"}


def command_overrides(argv: Sequence[str]) -> tuple:
    """(overrides, multirun) of a Hydra command line; overrides is None when Hydra's own
    flags (help, another config) mean nothing should be composed here."""
    overrides, multirun, skip_next = [], False, False
    for arg in argv:
        if skip_next:
            skip_next = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in _SKIP_FLAGS:
            return None, multirun
        if flag in _VALUED_FLAGS:
            skip_next = "=" not in arg
        elif arg in ("-m", "--multirun"):
            multirun = True
        elif arg.startswith("-") and not arg.startswith("~"):
            continue  # --resolve and the like
        else:
            overrides.append(arg)
    return overrides, multirun


def sweep_variants(overrides: List[str]) -> List[List[str]]:
    """The override lists to compose for a ``-m`` sweep: every value of every swept key once
    (the other keys at their first value). Interval sweeps (for optimisers) are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    values = []
    for text, o in zip(overrides, parsed):
        if o.is_sweep_override():
            try:
                values.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
            except Exception:  # noqa: BLE001  (an interval or glob sweep: Hydra expands it)
                values.append([])
        else:
            values.append([text])
    variants = [[v[0] for v in values if v]]
    for i, options in enumerate(values):  # the i-th key at each of its other values
        variants += [[option if j == i else v[0] for j, v in enumerate(values) if v] for option in options[1:]]
    return variants


def _schema_at(schema: Type, path: str) -> Optional[Type]:
    tp = schema
    for part in path.split(".") if path else []:
        if not dataclasses.is_dataclass(tp):
            return None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return None
        tp = _unwrap(hints[part])
    return tp if dataclasses.is_dataclass(tp) else None


def _mapping_keys(schema: Type, path: str) -> Optional[List[str]]:
    """The valid keys of the mapping field at ``path`` (its ``keys`` constraint: a registry's
    names, e.g. the head classes of ``screen.thresholds``), or None when it has none."""
    parent, _, leaf = path.rpartition(".")
    node = _schema_at(schema, parent)
    if node is None or not leaf:
        return None
    field_ = next((f for f in dataclasses.fields(node) if f.name == leaf), None)
    rule = constraint(field_) if field_ is not None else {}
    return list(_choices(rule["keys"])) if "keys" in rule else None


def _override_value(overrides: Sequence[str], key: str) -> Optional[str]:
    for text in overrides:
        k, _, v = text.partition("=")
        if k.lstrip("+~") == key:
            return v
    return None


def _kind(tp: Any) -> str:
    tp = _unwrap(tp)
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    if tp in names:
        return names[tp]
    origin = typing.get_origin(tp)
    if origin is list:
        return "a list, e.g. [a,b]"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping of keys (set them one by one: key.sub=value)"
    return "of another type"


def first_line(text: str, fallback: str = "") -> str:
    """The first line of ``text`` (an error's message), or ``fallback`` when ``text`` is empty."""
    return text.splitlines()[0] if text else fallback


def one_line(exc: BaseException, schema: Type, overrides: Sequence[str] = ()) -> str:
    """Hydra's (or OmegaConf's) error as one line naming the key, the value and the choices."""
    text = str(exc)
    cause = exc
    while cause is not None and getattr(cause, "full_key", None) is None:
        cause = cause.__cause__
    if cause is not None:
        key, kind, details = cause.full_key, type(cause).__name__, str(cause)
    else:  # an error inside a group option's YAML file: Hydra keeps only the text
        found = re.search(r"full_key: (\S+)", text)
        kind_found = re.search(r"(ConfigKeyError|ConfigAttributeError|ValidationError) raised", text)
        key, kind, details = (found[1] if found else None), (kind_found[1] if kind_found else ""), text
    in_file = re.match(r"In '([^']+)':", text)
    where = f" (in {in_file[1]}.yaml)" if in_file and in_file[1] not in ("config", "stats") else ""
    if key:
        parent, _, leaf = key.rpartition(".")
        node = _schema_at(schema, parent)
        valid = [f.name for f in dataclasses.fields(node)] if node is not None else _mapping_keys(schema, parent)
        if kind in ("ConfigKeyError", "ConfigAttributeError") and valid is not None and leaf not in valid:
            return f"{key} is not a key of {parent or 'the config'}{where}; valid: {', '.join(valid)}"
        if kind == "ValidationError":
            value = _override_value(overrides, key)
            if value is None:
                given = re.search(r"Value '(.*?)' of type", details)
                value = given[1] if given else None
            hints = typing.get_type_hints(node) if node is not None else {}
            if value is not None and leaf in hints:
                return f"{key}={value}{where} must be {_kind(hints[leaf])}"
    missing = re.search(r"Could not find '(?P<group>.+)/(?P<option>[^/']+)'", text)
    options = re.findall(r"^\t(\S+)$", text.split("Config search path")[0], flags=re.M)
    if missing and options:
        return f"{missing['group']}={missing['option']} is unknown; valid: {', '.join(options)}"
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not re.match(r"\s*(full_key|reference_type|object_type)", line)
             and not line.startswith(("\t", "See https://", "Available options", "Config search path"))]
    message = " ".join(lines)
    if cause is not None and cause is not exc:
        first = str(cause).splitlines()[0].strip() if str(cause).strip() else ""
        message = f"{message}: {first}" if first else message
    if options:
        message += f"; valid: {', '.join(options)}"
    return message


def precheck(argv: Sequence[str], config_dir: str, config_name: str, schema: Type, error: Type[Exception],
             extra: Optional[Callable[[DictConfig], None]] = None) -> None:
    """Compose ``argv``'s overrides (every value of a ``-m`` sweep) and check each config against
    ``schema`` (and ``extra``); raise ``error`` with one line on the first problem."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    overrides, multirun = command_overrides(argv)
    if overrides is None:
        return
    parser = OverridesParser.create()
    for text in overrides:
        try:
            parser.parse_override(text)
        except HydraException as exc:
            raise error(f"cannot read the override {text!r}: {str(exc).splitlines()[0]}{_quote_hint(text)}") from None
    try:
        variants = sweep_variants(overrides) if multirun else [overrides]
    except (HydraException, OmegaConfBaseException) as exc:
        raise error(one_line(exc, schema, overrides)) from None
    GlobalHydra.instance().clear()  # (a Hydra app run before in this process leaves it set)
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        for variant in variants:
            try:
                cfg = compose(config_name=config_name, overrides=variant)
            except (HydraException, OmegaConfBaseException) as exc:
                raise error(one_line(exc, schema, variant)) from None
            except AssertionError:  # OmegaConf's answer to setting a key under a null node
                raise error(_under_null(compose, config_name, variant)) from None
            check(cfg, schema, error)
            if extra is not None:
                extra(cfg)


def run_folder_problem(argv: Sequence[str], config_dir: str, config_name: str,
                       setting: Optional[str] = None) -> Optional[str]:
    """Why Hydra could not create the run folder of ``argv`` (``hydra.run.dir``, or ``hydra.sweep.dir``
    under ``-m``): a read-only folder, a missing or file parent (``EMERGENCE_HOME`` pointing at a
    file), as one line naming the folder and the setting; None when it can. Composes the
    command line once more, with Hydra's node (after :func:`precheck` passed). ``setting``: the
    setting the message names when the caller derived the run folder from it (stats' ``output_dir``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from emergence.common.storecheck import folder_problem

    overrides, multirun = command_overrides(argv)
    if overrides is None:
        return None
    variant = sweep_variants(overrides)[0] if multirun else overrides
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=variant, return_hydra_config=True)
    GlobalHydra.instance().clear()
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    folder = Path(str(OmegaConf.select(cfg, key))).expanduser()
    setting = setting or key if setting or any(o.lstrip("+").startswith(f"{key}=") for o in variant) else (
        f"{key}, under EMERGENCE_HOME={os.environ['EMERGENCE_HOME']!r}" if os.environ.get("EMERGENCE_HOME")
        else f"{key}, under the working folder")
    return folder_problem(folder, f"the run folder ({setting})")


def _under_null(compose: Callable, config_name: str, overrides: Sequence[str]) -> str:
    """Name the override that sets a key under a node that is null in the composed config."""
    groups = [o for o in overrides if "." not in o.partition("=")[0]]
    cfg = compose(config_name=config_name, overrides=groups)
    for text in overrides:
        key = text.partition("=")[0].lstrip("+~")
        parts = key.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if OmegaConf.select(cfg, parent, default=0) is None:
                return f"{text}: {parent} is null in this config; {_options_setting(compose, config_name, groups, parent)}"
    return f"cannot apply the overrides {' '.join(overrides)}"


def _options_setting(compose: Callable, config_name: str, groups: List[str], parent: str) -> str:
    """Which options of ``parent``'s config group set it (e.g. ``screen=ablation`` for ``screen.ablation``)."""
    from hydra.core.global_hydra import GlobalHydra

    group = parent.split(".")[0]
    found = []
    for option in GlobalHydra.instance().config_loader().get_group_options(group):
        cfg = compose(config_name=config_name, overrides=[g for g in groups if not g.startswith(f"{group}=")]
                      + [f"{group}={option}"])
        if OmegaConf.select(cfg, parent, default=None) is not None:
            found.append(f"{group}={option}")
    return f"valid with: {', '.join(found)}" if found else f"set it whole first: {parent}={{...}}"


# --- a refused run leaves nothing behind ---------------------------------------------------------

def discard_run_dir(outputs: Optional[str] = None) -> None:
    """Remove what Hydra wrote for a single run refused before any work (its ``.hydra/`` record
    and its ``<job>.log``), then the run folder when that leaves it empty, and its empty parents
    up to and including ``outputs`` (the app's outputs folder) when the run folder lies inside
    it. A folder holding anything else is kept. Nothing to do outside a Hydra run or in a sweep
    (the sweeper creates its folder only once every job's input is checked)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode == RunMode.MULTIRUN:
        return
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir).resolve()
    if hc.output_subdir:
        shutil.rmtree(run_dir / hc.output_subdir, ignore_errors=True)
    (run_dir / f"{hc.job.name}.log").unlink(missing_ok=True)
    top = Path(outputs).resolve() if outputs else None
    for folder in [run_dir] + [p for p in run_dir.parents if p == top or top in p.parents]:
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): stop here
            break


def _quote_hint(override: str) -> str:
    """How to quote an override whose value Hydra's grammar cannot read bare (a path with
    non-ASCII letters, spaces or brackets): the value in double quotes, the whole in single
    quotes for the shell."""
    key, sep, value = override.partition("=")
    if not sep or not value or value[0] in "\"'[{" or '"' in value:
        return ""
    return f"; quote the value for Hydra: '{key}=\"{value}\"'"
