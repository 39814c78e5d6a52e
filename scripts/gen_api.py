"""Writes what follows from the Rust declarations of the options and the Rust doc
text (run after ``maturin develop``; CI runs it with ``--check``):

- ``python/dafka/_native.pyi``: every entry point's option parameters (name,
  annotation, default, from ``_native._OPTIONS`` and ``_native.DEFAULTS``), and every
  docstring of the stub's functions, classes, methods and properties (the runtime
  ``__doc__``, which is the Rust ``///`` text);
- ``docs/python.md``: the option tables between ``<!-- options: GROUP ... -->`` and
  ``<!-- /options -->`` (each option's default and the first sentence of its doc);
- ``python/dafka/log.py``: ``Log.__init__``'s options and what it passes on, between
  ``# <options>`` and ``# </options>`` markers.

The rest of the stub (the types of methods, positional and per-call parameters) is
written by hand; this keeps its hand-written parts and regenerates the others.

``python scripts/gen_api.py`` rewrites the files; ``--check`` changes nothing and
exits 1, showing the difference, when a file is not what it would write.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dafka import _native

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "dafka" / "_native.pyi"
DOCS = ROOT / "docs" / "python.md"
LOG = ROOT / "python" / "dafka" / "log.py"

#: ``{entry: [(option, group, annotation, doc)]}``, in declaration order.
OPTIONS: dict[str, list[tuple[str, str, str, str]]] = {
    entry: list(rows) for entry, rows in _native._OPTIONS.items()
}
#: The module attribute of an entry whose name is not its own.
ATTR = {"Log": "NativeLog"}
#: Slots whose runtime doc CPython writes: the stub keeps its own.
CPYTHON_DOCS = {"__iter__", "__next__", "__new__", "__init__"}


def ruff_format(text: str, path: Path) -> str:
    """``text`` as ``ruff format`` writes ``path``."""
    # The venv's ruff when this runs without the venv on PATH (as pytest may).
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    out = subprocess.run(
        [ruff, "format", "--stdin-filename", str(path), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return out.stdout


def docstring(text: str, indent: int) -> str:
    """``text`` as a docstring literal whose lines start at column ``indent``."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = text.split("\n")
    if len(lines) == 1:
        return f'"""{text}"""'
    pad = " " * indent
    body = "\n".join(pad + line if line else "" for line in lines[1:])
    return f'"""{lines[0]}\n{body}\n{pad}"""'


def option_params(entry: str) -> list[str]:
    defaults = _native.DEFAULTS[entry]
    return [f"{name}: {ann} = {defaults[name]!r}" for name, _, ann, _ in OPTIONS[entry]]


def arg_text(a: ast.arg, default: ast.expr | None) -> str:
    text = a.arg
    if a.annotation is not None:
        text += f": {ast.unparse(a.annotation)}"
    if default is not None:
        text += f" = {ast.unparse(default)}"
    return text


def header(fn: ast.FunctionDef, entry: str) -> str:
    """``def NAME(PARAMS) -> RET`` with the stub's own parameters and ``entry``'s
    options as keyword-only parameters after them."""
    a = fn.args
    ours = {name for name, *_ in OPTIONS[entry]}
    positional = a.posonlyargs + a.args
    pad: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    # A positional parameter that is now an option (written by hand before it was
    # declared) goes: the option takes its place among the keyword-only ones.
    params = [
        arg_text(p, d)
        for p, d in zip(positional, pad + list(a.defaults), strict=True)
        if p.arg not in ours
    ]
    if a.posonlyargs:
        params.insert(len([p for p in a.posonlyargs if p.arg not in ours]), "/")
    params.append(f"*{a.vararg.arg}" if a.vararg else "*")
    params += [
        arg_text(p, d)
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
        if p.arg not in ours
    ]
    params += option_params(entry)
    if a.kwarg:
        params.append(f"**{arg_text(a.kwarg, None)}")
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    return f"def {fn.name}({', '.join(params)}){returns}"


def runtime_doc(obj: Any) -> str | None:
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else None


Edit = tuple[int, int, int, int, str]  # (line, col, end line, end col, text): 1-based lines


def stub_edits(tree: ast.Module) -> list[Edit]:
    edits: list[Edit] = []

    def set_doc(node: ast.FunctionDef | ast.ClassDef, doc: str | None) -> None:
        if doc is None:
            return
        first = node.body[0]
        indent = node.col_offset + 4
        text = docstring(doc, indent)
        has_doc = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        if has_doc:
            assert first.end_lineno is not None and first.end_col_offset is not None
            edits.append(
                (first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, text)
            )
        elif isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            # `def f(...) -> R: ...`: the docstring replaces the ellipsis.
            assert first.end_lineno is not None and first.end_col_offset is not None
            edits.append(
                (
                    first.lineno,
                    first.col_offset,
                    first.end_lineno,
                    first.end_col_offset,
                    f"\n{' ' * indent}{text}",
                )
            )
        else:
            edits.append(
                (first.lineno, first.col_offset, first.lineno, first.col_offset, text + "\n")
            )

    def set_header(fn: ast.FunctionDef, entry: str) -> None:
        assert fn.returns is not None and fn.returns.end_lineno is not None
        assert fn.returns.end_col_offset is not None
        end = (fn.returns.end_lineno, fn.returns.end_col_offset)
        edits.append((fn.lineno, fn.col_offset, *end, header(fn, entry)))

    entries = {ATTR.get(e, e): e for e in OPTIONS}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and hasattr(_native, node.name):
            if node.name in entries:
                set_header(node, entries[node.name])
            set_doc(node, runtime_doc(getattr(_native, node.name)))
        elif isinstance(node, ast.ClassDef) and hasattr(_native, node.name):
            cls = getattr(_native, node.name)
            set_doc(node, runtime_doc(cls))
            for item in node.body:
                if not isinstance(item, ast.FunctionDef):
                    continue
                if item.name == "__new__" and node.name in entries:
                    set_header(item, entries[node.name])
                if item.name in CPYTHON_DOCS or item.name not in cls.__dict__:
                    continue
                set_doc(item, runtime_doc(cls.__dict__[item.name]))
    return edits


def apply(text: str, edits: list[Edit]) -> str:
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def pos(line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets.
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        text = text[: pos(line, col)] + new + text[pos(end_line, end_col) :]
    return text


def stub() -> str:
    text = STUB.read_text()
    return ruff_format(apply(text, stub_edits(ast.parse(text))), STUB)


def first_sentence(doc: str) -> str:
    """The first sentence of a doc paragraph, as a Markdown table cell."""
    flat = " ".join(doc.split()).replace("``", "`")
    m = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", flat)
    cell = flat[: m.start()] if m else flat
    return cell.replace("|", "\\|")


def docs() -> str:
    text = DOCS.read_text()
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for entry, options in OPTIONS.items():
        for name, group, _, doc in options:
            got = rows.setdefault(group, [])
            if all(r[0] != name for r in got):
                got.append((name, repr(_native.DEFAULTS[entry][name]), first_sentence(doc)))

    def table(m: re.Match[str]) -> str:
        groups = m.group(1).split()
        lines = ["| option | default | meaning |", "|---|---|---|"]
        for g in groups:
            if g not in rows:
                raise SystemExit(f"docs/python.md: no options are declared in {g}")
            lines += [f"| `{n}` | `{d}` | {s} |" for n, d, s in rows[g]]
        return f"<!-- options: {m.group(1)} -->\n" + "\n".join(lines) + "\n<!-- /options -->"

    return re.sub(r"<!-- options: ([^>]*?) -->\n.*?<!-- /options -->", table, text, flags=re.S)


def log_py() -> str:
    text = LOG.read_text()
    params = "".join(f"        {p},\n" for p in option_params("Log"))
    passed = "".join(f"            {n}={n},\n" for n, *_ in OPTIONS["Log"])

    def block(m: re.Match[str], inner: str) -> str:
        return f"\n{m.group(1)}# <options>\n{inner}{m.group(1)}# </options>"

    def sub(pattern: str, inner: str, text: str) -> str:
        new, n = re.subn(pattern, lambda m: block(m, inner), text, flags=re.S)
        if n != 1:
            raise SystemExit(f"{LOG}: expected one {pattern!r} block, found {n}")
        return new

    text = sub(r"\n( {8})# <options>\n.*?\1# </options>", params, text)
    text = sub(r"\n( {12})# <options>\n.*?\1# </options>", passed, text)
    return ruff_format(text, LOG)


TARGETS: list[tuple[Path, Callable[[], str]]] = [(STUB, stub), (DOCS, docs), (LOG, log_py)]


def main() -> int:
    check = sys.argv[1:] == ["--check"]
    stale = []
    for path, make in TARGETS:
        want, have = make(), path.read_text()
        if want == have:
            continue
        stale.append(path)
        if check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    have.splitlines(keepends=True),
                    want.splitlines(keepends=True),
                    f"{path.relative_to(ROOT)} (as it is)",
                    f"{path.relative_to(ROOT)} (as generated)",
                )
            )
        else:
            path.write_text(want)
            print(f"wrote {path.relative_to(ROOT)}")
    if check and stale:
        print(
            f"\n{len(stale)} file(s) out of date: run `python scripts/gen_api.py` "
            "(after `maturin develop`) and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
