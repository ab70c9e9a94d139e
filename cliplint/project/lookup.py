"""What a name imported from the project is, read from the summaries alone (JSON, no parse).

`Lookup.chain(table, "models.build")` follows a dotted name from a module's import table (its
entries and star imports): a module entry goes on into the module's names and submodules; a
name is looked up where it is defined, re-exported (an `__init__`'s `from .models import build`),
or star-imported, each (module, name) at most once, so import cycles end.
"""
from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from .resolve import Entry, submodule

Table = Tuple[Dict[str, Entry], List[str]]  # a module's project imports: entries, star-imported modules
MAX_STEPS = 64  # (module, name) pairs looked at for one name: re-export chains are short


def table_of(summary: dict) -> Table:
    return {name: tuple(entry) for name, entry in summary["imports"].items()}, summary["stars"]


class Lookup:
    """`home`: the file being linted and its top-level names, which are definitions whatever its
    summary keeps (its importers' names resolve to its own nodes, `link.Linked.imported`)."""

    def __init__(self, summary_of: Callable[[str], Optional[dict]],
                 home: Optional[Tuple[str, FrozenSet[str]]] = None) -> None:
        self.summary_of = summary_of
        self.home = home
        self._tables: Dict[str, Table] = {}  # module file -> its summary's table

    def table(self, ref: str, summary: dict) -> Table:
        if ref not in self._tables:
            self._tables[ref] = table_of(summary)
        return self._tables[ref]

    def chain(self, table: Table, dotted: str) -> Optional[Entry]:
        """("def", module, name) for the first definition `dotted` reaches (`models.Net.call`
        reaches Net), ("module", ref) for a module, None when it leaves the summarised project."""
        head, *rest = dotted.split(".")
        seen: Set[Tuple[str, str]] = set()
        target = self._entry(table, head, seen)
        for part in rest:
            if target is None or target[0] != "module":
                break
            target = self._find(target[1], part, seen)
        return target

    def _entry(self, table: Table, name: str, seen: Set[Tuple[str, str]]) -> Optional[Entry]:
        entries, stars = table
        if name in entries:
            entry = entries[name]
            return entry if entry[0] == "module" else self._find(entry[1], entry[2], seen)
        for ref in stars:
            summary = self.summary_of(ref)
            if summary is not None and name in summary["public"]:
                found = self._find(ref, name, seen)
                if found is not None:
                    return found
        return None

    def _find(self, ref: str, name: str, seen: Set[Tuple[str, str]]) -> Optional[Entry]:
        if (ref, name) in seen or len(seen) > MAX_STEPS:
            return None
        seen.add((ref, name))
        if self.home is not None and ref == self.home[0] and name in self.home[1]:
            return ("def", ref, name)
        summary = self.summary_of(ref)
        if summary is not None:
            if name in summary["defined"]:
                return ("def", ref, name)
            found = self._entry(self.table(ref, summary), name, seen)
            if found is not None:
                return found
        sub = submodule(ref, name)
        return ("module", sub) if sub is not None else None
