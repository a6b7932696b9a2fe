"""The rules of the code's shape, kept by tests: the engine, journal, pricing and simulator never
import Textual (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CORE_MODULES = [
    "swarm_tui.engine",
    "swarm_tui.journal",
    "swarm_tui.pricing",
    "swarm_tui.sim",
    "swarm_tui.run.session",
    "swarm_tui.frontend.headless",
    "swarm_tui.providers.client",
    "swarm_tui.jobs",
    "swarm_tui.pricing.currency",
    "swarm_tui.estimate",
    "swarm_tui.shadow",
    "swarm_tui.swarm.pipeline",
    "swarm_tui.frontend.attached",
    "swarm_tui.judge.judge",
    "swarm_tui.engine.lanes.batch",
    "swarm_tui.providers.wire",
    "swarm_tui.core.lanes",
]


def test_core_modules_do_not_import_textual():
    code = (
        "import sys, importlib\n"
        f"for name in {CORE_MODULES!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"textual imported by a core module: {out}"


# --------------------------------------------------------------------------- the top level

TOP_LEVEL_MODULES = {"__init__", "__main__", "config", "records"}
"""What stands loose at the top of the package, beside its parts (packages): the entry point, the
user's config and the records every layer reads. A new module belongs in a part."""


def test_the_top_level_holds_parts_not_loose_modules():
    package = Path(__file__).resolve().parent.parent / "swarm_tui"
    loose = {path.stem for path in package.glob("*.py")}
    assert loose == TOP_LEVEL_MODULES, f"loose at the top of swarm_tui: {sorted(loose - TOP_LEVEL_MODULES)}"
    assert len(loose) <= 5


# --------------------------------------------------------------------------- one object, one file
#
# An object's invariants are read in one file: parts are composed, never cut across files by
# inheritance (a chain of mixins that only make sense together), and no file reads or sets a
# private attribute (`self._x`) that only another file sets. A class may still extend a complete
# class of another file (a widget base, an admission controller specialised for Ray): such a base
# stands alone, and its subclass does not reach into its private state.

PACKAGE = Path(__file__).resolve().parent.parent / "swarm_tui"
ABSTRACT_BASES = frozenset(
    {
        "Protocol",
        "ABC",
        "Exception",
        "BaseException",
        "Generic",
        "NamedTuple",
        "TypedDict",
        "Enum",
        "IntEnum",
        "StrEnum",
    }
)


@dataclass
class _ClassInfo:
    path: Path
    bases: list[str]
    annotated_private: set[str] = field(default_factory=set)
    """Private names this class body declares with an annotation and no value (`_x: int`)."""


@dataclass
class _Tree:
    classes: dict[str, _ClassInfo] = field(default_factory=dict)
    assigned: dict[str, set[Path]] = field(default_factory=dict)
    """Each private name, the files that set it (`self._x = ...`) or define it (a method, a value)."""
    used: dict[Path, set[str]] = field(default_factory=dict)
    """Each file, the private names it reads or sets on `self`."""


def _read_tree(package: Path) -> _Tree:
    tree = _Tree()
    for path in sorted(package.rglob("*.py")):
        module = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                info = _ClassInfo(path, [ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases])
                tree.classes.setdefault(node.name, info)
                for member in node.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name.startswith("_"):
                        tree.assigned.setdefault(member.name, set()).add(path)
                    elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                        name = member.target.id
                        if name.startswith("_") and not name.startswith("__"):
                            if member.value is None:
                                info.annotated_private.add(name)
                            else:
                                tree.assigned.setdefault(name, set()).add(path)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                if isinstance(node.ctx, ast.Store):
                    tree.assigned.setdefault(node.attr, set()).add(path)
                tree.used.setdefault(path, set()).add(node.attr)
    return tree


def house_violations(package: Path) -> list[str]:
    """What breaks "one object, one file" in `package`, as lines a reader can act on."""
    tree = _read_tree(package)
    classes = tree.classes

    def abstract(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in ABSTRACT_BASES or name.endswith(("Error", "Exception")):
            return True
        info = classes.get(name)
        return info is not None and name not in seen and any(abstract(b, seen | {name}) for b in info.bases)

    def chain(name: str, seen: list[str]) -> list[str]:
        info = classes.get(name)
        if info is None or name in seen or abstract(name):
            return seen
        seen.append(name)
        for base in info.bases:
            chain(base, seen)
        return seen

    found: list[str] = []
    reported: set[frozenset[str]] = set()
    for name in sorted(classes):
        links = chain(name, [])
        files = {classes[c].path for c in links}
        if len(files) >= 3 and frozenset(links) not in reported:
            reported.add(frozenset(links))
            found.append(f"{name}: one object cut over {len(files)} files ({' -> '.join(links)})")
    for name, info in sorted(classes.items()):
        redeclared = sorted(attr for attr in info.annotated_private if (tree.assigned.get(attr) or set()) - {info.path})
        if redeclared:
            found.append(
                f"{name} ({info.path.relative_to(package.parent)}): re-declares private fields another file "
                f"sets ({', '.join(redeclared)})"
            )
    for path, attrs in sorted(tree.used.items()):
        shared = sorted(a for a in attrs if tree.assigned.get(a) and path not in tree.assigned[a])
        if shared:
            found.append(
                f"{path.relative_to(package.parent)}: private names only other files set ({', '.join(shared)})"
            )
    return found


def test_one_object_is_read_in_one_file():
    found = house_violations(PACKAGE)
    assert not found, "objects spread over files:\n" + "\n".join(found)


def test_the_house_check_names_each_kind_of_spread(tmp_path):
    """The checker itself, on a package made here: a chain of three files, a mixin that re-declares
    its host's private field, and a file that reads a private name only another file sets, are
    each named; a class extending a complete class in another file, and protocols, are not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("class Base:\n    def __init__(self):\n        self._count = 0\n")
    (package / "middle.py").write_text(
        "from pkg.base import Base\n\nclass Middle(Base):\n    _count: int\n\n"
        "    def count(self):\n        return self._count\n"
    )
    (package / "top.py").write_text("from pkg.middle import Middle\n\nclass Top(Middle):\n    pass\n")
    (package / "fine.py").write_text(
        "from typing import Protocol\nfrom pkg.base import Base\n\nclass Port(Protocol):\n    def go(self): ...\n\n"
        "class Special(Base):\n    def __init__(self):\n        super().__init__()\n        self._own = 1\n"
    )
    found = house_violations(package)
    assert found == [
        "Top: one object cut over 3 files (Top -> Middle -> Base)",
        "Middle (pkg/middle.py): re-declares private fields another file sets (_count)",
        "pkg/middle.py: private names only other files set (_count)",
    ], found
