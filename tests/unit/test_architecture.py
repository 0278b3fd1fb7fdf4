"""The architecture as tests: imports go one way without cycles, the gateway names no protocol."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

import omnivox
from omnivox.protocol.registry import PROTOCOLS

SRC = Path(omnivox.__file__).parent


def test_the_import_graph_has_no_cycle() -> None:
    graph = grimp.build_graph("omnivox")
    modules = sorted(graph.modules)
    # a cycle exists iff some module reaches itself through its imports
    cycles = []
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.find_shortest_chain(importer=imported, imported=module):
                cycles.append((module, imported))
    assert cycles == []


def test_the_gateway_app_factory_names_no_protocol() -> None:
    for path in [SRC / "gateway" / "app.py", SRC / "gateway" / "edges" / "mount.py"]:
        source = path.read_text()
        tree = ast.parse(source)
        imported = {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module is not None
        }
        for protocol in PROTOCOLS:
            assert f"omnivox.protocol.{protocol.name}" not in imported, path
            assert protocol.path not in source, path
        for word in ("streaming", "realtime", "duplex"):
            assert word not in source.lower(), (path, word)


def test_every_registered_protocol_has_a_distinct_name_path_and_worker_paths() -> None:
    assert len({p.name for p in PROTOCOLS}) == len(PROTOCOLS)
    assert len({p.path for p in PROTOCOLS}) == len(PROTOCOLS)
    assert all(p.worker_paths and "{session_id}" in p.worker_paths[-1] for p in PROTOCOLS)


GOD_OBJECT_LINES = 800


def test_no_module_grows_into_a_god_object() -> None:
    """Modules are cut by concept, not by length; this only stops one from swallowing everything
    around it (a class or module past 800 lines does several jobs; split it by what they are)."""
    too_long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > GOD_OBJECT_LINES
    }
    assert too_long == {}


def test_recording_names_no_protocol() -> None:
    """What a protocol's frames carry is the protocol's to say (``timeline_reader``): the recorder
    imports no protocol module and no registry."""
    allowed = {"omnivox.protocol.timelines.reader"}
    for path in (SRC / "recording").rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        protocol_modules = {m for m in imported if m.startswith("omnivox.protocol")}
        assert protocol_modules <= allowed, (path, protocol_modules - allowed)
