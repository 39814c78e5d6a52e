"""One source of defaults: ``dafka._native.DEFAULTS`` (read from the Rust configs'
``Default`` impls) is what the signatures show, what the stubs say and what the
"## Defaults" tables of docs/python.md say; and every public name of the stubs has a
docstring (what IDEs show)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import dafka
from dafka import _native

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "dafka" / "_native.pyi"
DOCS = ROOT / "docs" / "python.md"

# The read clients' per-call arguments: literals of their signatures, not config.
PER_CALL = {
    "timeout",
    "settle",
    "listen",
    "topic",
    "fail_on_loss",
    "partitions",
    "exclude",
    "with_meta",
}

NODE_ENTRIES = [
    "Tower",
    "Producer",
    "Consumer",
    "Store",
    "HeadsWatch",
    "heads",
    "offsets",
    "fetch_range",
    "fetch_ranges",
    "check_node",
    "offsets_for_times",
    "topics",
    "list_groups",
    "describe_group",
    "cluster_view",
]


def _runtime(entry: str) -> Any:
    return dafka.Log if entry == "Log" else getattr(_native, entry)


def _signature_defaults(obj: Any) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(obj).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _stub_defaults() -> dict[str, dict[str, Any]]:
    """``{entry: {keyword: default}}`` of the stub's functions and classes' ``__new__``."""
    tree = ast.parse(STUB.read_text())
    out: dict[str, dict[str, Any]] = {}

    def defaults(fn: ast.FunctionDef) -> dict[str, Any]:
        a = fn.args
        positional = a.posonlyargs + a.args
        got = {
            arg.arg: ast.literal_eval(d)
            for arg, d in zip(
                positional[len(positional) - len(a.defaults) :], a.defaults, strict=True
            )
        }
        got.update(
            {
                arg.arg: ast.literal_eval(d)
                for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                if d
            }
        )
        return got

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = defaults(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__new__":
                    out[node.name] = defaults(item)
    return out


def _docs_tables() -> dict[str, dict[str, str]]:
    """The "## Defaults" section's tables: ``{heading's first word: {option: cell}}``,
    the cell without its backticks."""
    text = DOCS.read_text()
    m = re.search(r"^## Defaults\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "docs/python.md has no '## Defaults' section"
    tables: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in m.group(1).splitlines():
        if line.startswith("### "):
            word = re.match(r"\W*(\w+)", line[4:])
            assert word, line
            current = tables.setdefault(word.group(1), {})
        elif line.startswith("| `") and current is not None:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert len(cells) == 3, f"a row is | option | default | meaning |: {line}"
            option, default = cells[0].strip("`"), cells[1]
            assert default.startswith("`") and default.endswith("`"), line
            current[option] = default[1:-1]
    return tables


def test_defaults_cover_every_configurable_keyword() -> None:
    assert set(_native.DEFAULTS) == {*NODE_ENTRIES, "Log"}
    with pytest.raises(TypeError):
        _native.DEFAULTS["Producer"]["bind"] = "tcp://*:0"  # type: ignore[index]
    for entry, defaults in _native.DEFAULTS.items():
        sig = _signature_defaults(_runtime(entry))
        assert set(defaults) == set(sig) - PER_CALL, entry


@pytest.mark.parametrize("entry", [*NODE_ENTRIES, "Log"])
def test_signatures_show_the_defaults(entry: str) -> None:
    sig = _signature_defaults(_runtime(entry))
    for name, want in _native.DEFAULTS[entry].items():
        got = sig[name]
        assert type(got) is type(want) and got == want, (entry, name, got, want)


def test_signed_functions_stay_what_they_were() -> None:
    """The read clients carry the defaults in their text signature and are still the
    module's builtins: picklable by name, named, documented."""
    import pickle

    for name in [
        "heads",
        "offsets",
        "fetch_range",
        "fetch_ranges",
        "check_node",
        "offsets_for_times",
        "topics",
        "list_groups",
        "describe_group",
        "cluster_view",
    ]:
        f = getattr(_native, name)
        assert f.__name__ == name and f.__module__ == "dafka._native"
        assert pickle.loads(pickle.dumps(f)) is f
        assert f.__doc__ and "bind='tcp://" in (f.__text_signature__ or "")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        _native.check_node(nope=1)  # type: ignore[call-arg]
    with pytest.raises(dafka.ConfigError, match="wire dialect"):
        _native.check_node(wire="x")


@pytest.mark.parametrize("entry", NODE_ENTRIES)
def test_stub_says_the_defaults(entry: str) -> None:
    stub = _stub_defaults()[entry]
    sig = _signature_defaults(_runtime(entry))
    assert set(stub) == set(sig), entry
    for name, want in sig.items():
        got = stub[name]
        assert type(got) is type(want) and got == want, (entry, name, got, want)


def _documented(doc: str) -> dict[str, Any]:
    """The ``name : type, default VALUE`` lines of a numpy-style docstring."""
    return {
        m.group(1): ast.literal_eval(m.group(2))
        for m in re.finditer(r"^\s*(\w+) : [^\n]*?, default (\S+)", doc, re.M)
    }


@pytest.mark.parametrize("entry", ["Tower", "Producer", "Consumer", "Store"])
def test_class_docstrings_say_the_defaults(entry: str) -> None:
    """The Parameters sections of the Rust doc text and of the stub's docstring."""
    stub = ast.parse(STUB.read_text())
    (cls,) = [n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == entry]
    defaults = _native.DEFAULTS[entry]
    for doc in (_runtime(entry).__doc__, ast.get_docstring(cls)):
        documented = _documented(doc or "")
        assert set(documented) == set(defaults), entry
        for name, want in defaults.items():
            got = documented[name]
            assert type(got) is type(want) and got == want, (entry, name, got, want)


def test_docs_table_says_the_defaults() -> None:
    tables = _docs_tables()
    discovery = tables.get("Discovery", {})
    used: set[tuple[str, str]] = set()
    for entry, defaults in _native.DEFAULTS.items():
        own = tables.get(entry, {})
        for name in own:
            assert name in defaults, f"docs: {entry} has no option {name}"
        for name, want in defaults.items():
            table = entry if name in own else "Discovery"
            cell = own.get(name, discovery.get(name))
            assert cell is not None, f"docs: no default for {entry}({name}=)"
            assert cell == repr(want), (entry, name, cell, want)
            used.add((table, name))
    for table, rows in tables.items():
        for name in rows:
            assert (table, name) in used, f"docs: {table} row {name} is no entry's"


def test_every_public_stub_name_has_a_docstring() -> None:
    tree = ast.parse(STUB.read_text())
    missing = []

    def check(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                public = not node.name.startswith("_") or node.name in (
                    "__enter__",
                    "__exit__",
                    "__iter__",
                    "__next__",
                )
                if public and ast.get_docstring(node) is None:
                    missing.append(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    check(node.body, f"{node.name}.")

    check(tree.body, "")
    assert not missing, f"no docstring in _native.pyi: {missing}"


def test_generated_files_are_what_gen_api_writes() -> None:
    """The docstrings have one source, the Rust ``///`` text (what ``help()`` shows);
    the stub's docstrings and option parameters, the docs' option tables and
    ``dafka.Log``'s options are generated from it by ``scripts/gen_api.py``. This is
    its ``--check`` (which CI also runs): every generated file is as it would write
    it. (It replaces a test that compared the stub's docstrings with the runtime's
    one by one, when both were written by hand.)"""
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "scripts" / "gen_api.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stale = [
        str(path.relative_to(ROOT)) for path, make in gen.TARGETS if make() != path.read_text()
    ]
    assert not stale, f"out of date, run `python scripts/gen_api.py`: {stale}"
