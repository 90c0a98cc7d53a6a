"""The one mechanism behind every plug-in table (emergence/common/plugins.py ``Registry``): known
answers for discovery, lazy entries, order, clashes and the one-line error of an unknown name."""

import sys
from dataclasses import dataclass

import pytest

from emergence.common.plugins import Registry


@dataclass(frozen=True)
class Entry:
    name: str
    order: int = 0


def test_discovery_runs_once_on_first_use_and_order_keeps_ties_in_registration_order():
    calls = []

    def discover(table):
        calls.append(1)
        for entry in (Entry("b", 1), Entry("a", 1), Entry("c", 0)):
            table.register(entry)

    table = Registry("thing", discover=discover, order=lambda e: e.order)
    assert calls == []  # nothing is imported or registered before the table is used
    assert table.names() == ("c", "b", "a")
    assert list(table.entries()) == ["c", "b", "a"] and table.get("a") == Entry("a", 1)
    assert calls == [1]
    table.unregister("b")
    assert table.names() == ("c", "a") and "b" not in table


def test_a_clash_is_refused_unless_replaced_and_a_check_refuses_a_bad_entry():
    def check(entry, table):
        if not entry.name.islower():
            raise ValueError(f"bad name {entry.name!r}")

    table = Registry("thing", check=check, error=LookupError)
    first = table.register(Entry("a"))
    assert table.register(first) is first  # the same entry again is no clash
    with pytest.raises(LookupError, match="thing 'a' is registered already; pass replace=True"):
        table.register(Entry("a", 2))
    assert table.register(Entry("a", 2), replace=True).order == 2
    with pytest.raises(ValueError, match="bad name 'A'"):
        table.register(Entry("A"))
    assert table.names() == ("a",)


def test_an_unknown_name_is_one_line_naming_the_choices():
    table = Registry("corpus kind", error=RuntimeError)
    for name in ("x", "y"):
        table.register(Entry(name))
    with pytest.raises(RuntimeError, match=r"^unknown corpus kind 'z'; valid: x, y$"):
        table.get("z")
    with pytest.raises(RuntimeError, match="unknown corpus kind"):
        table.get(["x"])  # not a name at all


def test_lazy_entries_are_named_without_importing_them(tmp_path, monkeypatch):
    (tmp_path / "lazy_entry_module.py").write_text("ENTRY = 'imported'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    table = Registry("thing", lazy={"first": "lazy_entry_module:ENTRY", "second": "lazy_entry_module:ENTRY"})
    table.register(Entry("third"))
    assert table.names() == ("first", "second", "third") and "first" in table
    assert "lazy_entry_module" not in sys.modules
    assert table.get("second") == "imported"
    assert "lazy_entry_module" in sys.modules
    assert table.names() == ("first", "second", "third")  # loading keeps the declared order
    assert table.entries() == {"first": "imported", "second": "imported", "third": Entry("third")}
