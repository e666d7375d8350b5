"""Docs that cannot drift: every module and file path the docs name in backticks exists.

Scanned: ``README.md`` and the top level of ``docs/`` (``docs/*.md``: the architecture and the
event stream).  Not scanned: ``docs/measurements/``, the dated measurement logs, which describe
the code as it was on their day (a module renamed since is history there, not drift); nor
fenced code blocks, only inline code spans.

Module paths: a span whose leading dotted name (``a.b``, at least one dot; an opening quote is
ignored) starts with one of the project's top-level packages, the top-level folders with an
``__init__.py`` (bench, broker, fuzz, pubsub, supervisor, tests; ``deploy`` is a folder of
scripts, not a package).  What follows the name may be a call, an index or words
(``pubsub.node.app.serve_node(...)``); a span where the name runs on into anything else
(``pubsub.x-y``, ``pubsub.kernel.*``, ``pubsub.x=1``) is not read as a path.  A name resolves
when its longest importable prefix is a module and the rest are attributes of it in turn
(``pubsub.kernel.wire.register_field_type``, ``pubsub.node.app.NodeApp.handle``; a field that a
class only annotates, as a pydantic model or a dataclass without default, counts).  The module
after ``-m`` in a span (``python -m bench scale``) must be importable too.  This check imports
the modules (``importlib.import_module``, not ``find_spec``), nothing more: importing starts no daemon and no event loop, and the analysis
modules (``pubsub.ops.analysis``) import pyspark only inside their functions, so the whole
test takes about a second.

File paths: a span of path characters only (no spaces, ``<placeholders>``, wildcards, ``:``
or ``=``) that contains a ``/`` and either ends in one of `FILE_SUFFIXES` or ``/``, or starts
with a top-level entry of the repository (``tests/kernel``, ``deploy/Dockerfile``), must exist
relative to the repository root.  Skipped: ``../shared/...`` (outside the repository),
absolute paths, names in capitals as the first component (``DIR/...``, ``RUN_DIR/...``: a
placeholder), and the allow-lists below (`HYPOTHETICAL`, `RUN_OUTPUTS`, `BUILD_OUTPUTS`).
Any other path whose first component is not in the repository fails, so a new kind of path
in the docs is either fixed or named in an allow-list here.

Every unresolvable reference is reported at once, with its file, line and span.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The files scanned; docs/measurements/ is left out on purpose (see the module docstring).
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

#: The project's top-level packages: the folders at the root with an ``__init__.py``.
PACKAGES = frozenset(p.parent.name for p in ROOT.glob("*/__init__.py"))

#: The top-level entries of the repository (folders and files) a path may start with.
TOP_LEVEL = frozenset(p.name for p in ROOT.iterdir() if p.name != ".git")

#: Suffixes that make a span with a ``/`` a file path even when its first component is not
#: in the repository (such a span then fails unless an allow-list below names it).
FILE_SUFFIXES = (".py", ".pyx", ".md", ".json", ".html", ".yml")

#: Names of folders in explicitly hypothetical examples: docs/architecture.md's "Adding a
#: mode" walks through a new mode, ``gossip``, in a folder ``gossip/`` (tests in
#: ``tests/gossip/``) that does not exist.  A path is skipped when the first of its
#: components that does not exist is one of these, so only while no such folder exists.
HYPOTHETICAL = frozenset({"gossip"})

#: Directories the tools create at run time, named relative to where they write (a run's
#: directory, a local cluster's work directory, a data directory, ``make bench``'s results),
#: not to the repository root.  Skipped whether or not they exist here.
RUN_OUTPUTS = frozenset({"bench-results", "logs", "run", "workdir", "events", "cluster", "analysis"})

#: Paths inside the repository that only a build makes (``make wheelhouse``).
BUILD_OUTPUTS = frozenset({"deploy/wheelhouse/"})

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_AFTER_DOTTED = re.compile(r"$|[\s(\[,;)]")
_DASH_M = re.compile(r"(?:^|\s)-m\s+([A-Za-z_][\w.]*)")
_PATH_CHARS = re.compile(r"[\w.\-/]+")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
_FENCE = re.compile(r" {0,3}(```|~~~)")
# An inline code span: a run of backticks, its text (not across a blank line), the same run.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)


@dataclass(frozen=True)
class Ref:
    """One reference in the docs: ``kind`` is "module" (a dotted path) or "file"."""

    doc: str
    line: int
    span: str
    kind: str
    target: str


def code_spans(text: str) -> Iterator[tuple[int, str]]:
    """Every inline code span of a Markdown text outside fenced blocks: (line, text)."""
    lines, fence = [], None
    for line in text.split("\n"):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        else:
            lines.append("" if fence is not None else line)
            continue
        lines.append("")
    blanked = "\n".join(lines)
    for m in _SPAN.finditer(blanked):
        yield blanked.count("\n", 0, m.start()) + 1, m.group(2).replace("\n", " ").strip()


def _first_missing(path: str) -> str | None:
    """The first component of a path, from the root down, that does not exist (None if all do)."""
    here = ROOT
    for part in path.strip("/").split("/"):
        here = here / part
        if not here.exists():
            return part
    return None


def references(span: str) -> list[tuple[str, str]]:
    """What one span refers to: (kind, target) pairs, none if it names no project path."""
    text = span.strip("`'\" ")
    found: list[tuple[str, str]] = []
    dotted = _DOTTED.match(text)
    if (dotted and dotted.group(0).split(".")[0] in PACKAGES
            and _AFTER_DOTTED.match(text, dotted.end())):
        found.append(("module", dotted.group(0)))
    for m in _DASH_M.finditer(text):
        if m.group(1).split(".")[0] in PACKAGES:
            found.append(("-m module", m.group(1)))
    path = text.removeprefix("./")
    if "/" in path and _PATH_CHARS.fullmatch(path) and not path.startswith(("/", "../shared/")):
        first = path.split("/")[0]
        if first in TOP_LEVEL or path.endswith((*FILE_SUFFIXES, "/")):
            skipped = (_PLACEHOLDER.fullmatch(first) or first in RUN_OUTPUTS or path in BUILD_OUTPUTS
                       or _first_missing(path) in HYPOTHETICAL)
            if not skipped:
                found.append(("file", path))
    return found


def collect() -> list[Ref]:
    refs = []
    for doc in DOC_FILES:
        for line, span in code_spans(doc.read_text(encoding="utf-8")):
            for kind, target in references(span):
                refs.append(Ref(str(doc.relative_to(ROOT)), line, span, kind, target))
    return refs


def _has_attribute(obj: object, name: str) -> bool:
    if hasattr(obj, name):
        return True
    # a field a class only annotates (pydantic models, dataclasses without a default)
    return any(name in inspect.get_annotations(k) for k in getattr(obj, "__mro__", ()) if k is not object)


def module_problem(path: str) -> str | None:
    """Why a dotted path does not resolve (None if it does)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            obj: object = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
                continue  # this prefix is not a module: try a shorter one
            return f"importing {name} failed: {e!r}"
        except Exception as e:  # noqa: BLE001 - a module that exists but fails to import, for any reason
            return f"importing {name} failed: {e!r}"
        for j in range(i, len(parts)):
            if not _has_attribute(obj, parts[j]):
                return f"{'.'.join(parts[:j])} has no {'submodule or ' if j == i else ''}attribute {parts[j]}"
            obj = getattr(obj, parts[j], None)
        return None
    return "no module of that name"


def problem(ref: Ref) -> str | None:
    if ref.kind == "module":
        return module_problem(ref.target)
    if ref.kind == "-m module":
        return None if importlib.util.find_spec(ref.target) is not None else "no module to run with -m"
    return None if (ROOT / ref.target).exists() else "no such file or directory in the repository"


def test_every_backticked_path_in_the_docs_exists() -> None:
    refs = collect()
    # The scanner still finds the docs' references (a broken pattern would find none).
    assert sum(r.kind == "module" for r in refs) > 50 and sum(r.kind == "file" for r in refs) > 100
    stale = [f"{r.doc}:{r.line}: `{r.span}` ({r.kind} {r.target}): {why}"
             for r in refs if (why := problem(r)) is not None]
    if stale:
        pytest.fail(f"{len(stale)} of {len(refs)} references in the docs do not resolve:\n" + "\n".join(stale),
                    pytrace=False)


@pytest.mark.parametrize(("span", "expected"), [
    ("pubsub.publications.trie", [("module", "pubsub.publications.trie")]),
    ("`broker.cli.COMMANDS`", [("module", "broker.cli.COMMANDS")]),
    ("pubsub.node.app.serve_node(...)", [("module", "pubsub.node.app.serve_node")]),
    ('"pubsub.modes.skipring"', [("module", "pubsub.modes.skipring")]),
    ("pubsub.telemetry.events.EventWriter(DIR, role, source).emit(kind, **fields)",
     [("module", "pubsub.telemetry.events.EventWriter")]),
    ("python -m bench scale", [("-m module", "bench")]),
    ("pubsub status --node 127.0.0.1:7101", []),  # a command, not a path
    ("wire.decode", []),  # not rooted at a project package
    ("since=sub.cursor", []),
    ("pubsub.kernel.*", []),
    ("pubsub/publications/_ctrie.pyx", [("file", "pubsub/publications/_ctrie.pyx")]),
    ("tests/kernel", [("file", "tests/kernel")]),
    ("deploy/Dockerfile", [("file", "deploy/Dockerfile")]),
    ("docs/nowhere.md", [("file", "docs/nowhere.md")]),
    ("nowhere/x.py", [("file", "nowhere/x.py")]),  # not allow-listed: checked, and fails
    ("../shared/ARCHITECTURE.md", []),
    ("gossip/cores/messages.py", []),
    ("tests/gossip/", []),
    ("tests/gossip", []),
    ('"gossip.mode",  # what it is (paper NNN)', []),
    ("<data>/keys/", []),
    ("RUN_DIR/events/*.jsonl", []),
    ("DIR/prometheus-targets.json", []),
    ("bench-results/topics.json", []),
    ("deploy/wheelhouse/", []),
    ("/var/lib/pubsub/identity", []),
    ("PUBSUB_PROMETHEUS_TARGETS_DIR=deploy/targets", []),
    ("localhost/pubsub-base:bookworm", []),
])
def test_the_scanner_reads_spans_as_the_docs_mean_them(span: str, expected: list[tuple[str, str]]) -> None:
    assert references(span) == expected


def test_code_spans_cross_lines_and_skip_fenced_blocks() -> None:
    text = "a `pubsub.kernel\n.wire` b ``x ` y``\n```\n`pubsub.nowhere`\n```\n`c`"
    assert list(code_spans(text)) == [(1, "pubsub.kernel .wire"), (2, "x ` y"), (6, "c")]


def test_an_unresolvable_reference_is_reported() -> None:
    assert module_problem("pubsub.publications.trie") is None
    assert module_problem("pubsub.kernel.wire.register_field_type") is None
    assert module_problem("pubsub.node.app.NodeApp.handle") is None
    assert module_problem("pubsub.kernel.wire.no_such_function") is not None
    assert module_problem("pubsub.no_such_module") is not None
