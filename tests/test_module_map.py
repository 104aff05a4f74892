"""The one map from modules to tests (tests/modules.toml): every module of the package is in it,
every test it names exists, and the mutation runner reads its core from it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _package_modules():
    names = set()
    for path in (ROOT / "aim_tutorial").rglob("*.py"):
        parts = path.relative_to(ROOT / "aim_tutorial").with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.add(".".join(parts) or "aim_tutorial")
    return names


def test_every_module_has_its_tests_and_every_test_exists(load_file):
    mutation = load_file("scripts/mutation.py")
    entries = mutation.module_map()
    assert set(entries) == _package_modules(), set(entries) ^ _package_modules()
    for name, (src, tests, _) in entries.items():
        assert (ROOT / src).is_file(), (name, src)
        assert tests, name
        for t in tests:
            assert (ROOT / t.split("::")[0]).is_file(), (name, t)


def test_the_mutation_runner_reads_its_core_from_the_map(load_file):
    mutation = load_file("scripts/mutation.py")
    core = {n: (src, tests) for n, (src, tests, mutate) in mutation.module_map().items() if mutate}
    assert set(mutation.MODULES) == set(core)
    for name, (src, tests) in core.items():
        assert mutation.MODULES[name][0] == src
        assert mutation.MODULES[name][1][:len(tests)] == tests  # then the pinned signatures


def test_no_module_over_800_lines_and_no_function_over_120():
    """The sizes a newcomer can read (issue 49): a module that grows past them is split along its
    concepts (CONTRIBUTING, "Where each concept lives"), a function into named helpers."""
    import ast

    long_modules, long_functions = [], []
    for path in sorted((ROOT / "aim_tutorial").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 800:
            long_modules.append((path.name, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 120:
                long_functions.append((path.name, node.name, node.end_lineno - node.lineno + 1))
    assert not long_modules and not long_functions, (long_modules, long_functions)
