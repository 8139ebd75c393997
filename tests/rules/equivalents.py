"""The equivalent-mutant arguments of tests/rules/EQUIVALENT_MUTANTS.md, each pinned to the code
it argues about.

An argument ("no test can tell this mutant from the real code") holds for the function as it was
written when it was made; mutmut also renumbers a function's mutants when the function changes.
So each entry names the function its mutants come from with a digest of that function's source
(`code module.function@digest`). tests/rules/test_equivalent_mutants.py fails when the function
changed since, naming the entry to re-check; `scripts/mutation --pins` prints the current pins.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

EQUIVALENT = Path(__file__).with_name("EQUIVALENT_MUTANTS.md")
SEP = "ǁ"  # mutmut's class separator in mutant names
MUTANT = re.compile(r"`([\w.]+\.x(?:_[\w]+|" + SEP + r"\w+" + SEP + r"\w+)__mutmut_\d+)`")
PIN = re.compile(r"`code ([\w.]+)@([0-9a-f]{12})`")


@dataclass(frozen=True)
class Entry:
    """One bullet of the file: the mutants it argues for and the code it pins."""

    text: str
    mutants: tuple[str, ...]
    pins: tuple[tuple[str, str], ...]  # (module.function or module.Class.method, digest)


def code_of(mutant: str) -> str:
    """The function a mutant is of: `a.b.x_f__mutmut_3` -> `a.b.f` (mutmut names it "x_" + the
    function's name, so `x__claim` is `_claim`), `a.b.xǁCǁm__mutmut_3` -> `a.b.C.m`."""
    module, _, name = mutant.rpartition(".")
    name = re.sub(r"__mutmut_\d+$", "", name)
    if name.startswith("x" + SEP):
        return f"{module}." + ".".join(part for part in name[1:].split(SEP) if part)
    return f"{module}.{name.removeprefix('x_')}"


def digest(qualified: str) -> str:
    """The first 12 hex digits of the SHA-256 of the function's source, trailing spaces dropped."""
    # The module is the longest importable prefix: `reconcile.decisions.engine.decide`.
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        break
    else:
        raise LookupError(f"no module holds {qualified}")
    source = "\n".join(line.rstrip() for line in inspect.getsource(target).splitlines())
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def entries(text: str | None = None) -> list[Entry]:
    """Every bullet that names a mutant, with its pins."""
    text = EQUIVALENT.read_text() if text is None else text
    found = []
    for bullet in re.split(r"\n(?=- )", text):
        mutants = tuple(MUTANT.findall(bullet))
        if mutants:
            found.append(Entry(bullet, mutants, tuple(PIN.findall(bullet))))
    return found


def stale(text: str | None = None) -> list[str]:
    """Why each entry no longer argues about the code as it is (empty when every pin holds)."""
    problems = []
    for entry in entries(text):
        pinned = dict(entry.pins)
        for mutant in entry.mutants:
            code = code_of(mutant)
            if code not in pinned:
                problems.append(f"{mutant}: its entry pins no `code {code}@…`")
                continue
            now = digest(code)
            if now != pinned[code]:
                problems.append(
                    f"{mutant}: {code} changed since the argument was made "
                    f"(pinned {pinned[code]}, now {now}): re-check it with mutmut show"
                )
        # An argument may also rest on other code (the function a flag is passed to): its pin
        # holds the argument to that code as well.
        codes = {code_of(m) for m in entry.mutants}
        for code, pin in entry.pins:
            if code not in codes and digest(code) != pin:
                problems.append(
                    f"{', '.join(entry.mutants)}: the argument rests on {code}, changed since it was "
                    f"made (pinned {pin}, now {digest(code)}): re-check it"
                )
    return problems
