#!/usr/bin/env python3
"""Fails when a file of a layer includes a header of a layer that is not below it.

The layers and what each may use are DESIGN.md's table ("The pieces, bottom to top"), as
CMakeLists.txt declares them (stepscope_layer(<layer> DEPS ...)); CMake passes them in as
`layer=dep,dep` arguments. "Below" is transitive: hooks may include core because hooks uses train,
train uses runtime, ... down to core. Separate static libraries catch an upward call at link time,
but not an upward include of an inline function or a template; this check catches both.

Test code (*_test.cc, *test_util.h) may include any layer: a test builds whatever it needs.

Usage: check_layers.py <src dir> layer=deps... (deps comma-separated, empty for none)
"""
import pathlib
import re
import sys

# Files allowed an upward include until their move lands, with the reason: meant to shrink to empty.
KNOWN_EXCEPTIONS: dict[str, set[str]] = {}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include\s+"stepscope/([a-z_]+)/', re.MULTILINE)


def is_test_code(path: pathlib.Path) -> bool:
    return path.name.endswith(("_test.cc", "test_util.h"))


def main() -> int:
    src = pathlib.Path(sys.argv[1])
    direct = {}
    for arg in sys.argv[2:]:
        layer, _, deps = arg.partition("=")
        direct[layer] = [d for d in deps.split(",") if d]

    below = {}

    def closure(layer, seen=()):
        if layer in seen:
            raise SystemExit(f"check_layers: the layers depend on each other in a cycle: {seen + (layer,)}")
        if layer not in below:
            result = set()
            for dep in direct.get(layer, []):
                result |= {dep} | closure(dep, seen + (layer,))
            below[layer] = result
        return below[layer]

    problems = []
    for layer in direct:
        allowed = closure(layer) | {layer}
        for path in sorted((src / "stepscope" / layer).rglob("*")):
            if path.suffix not in (".h", ".cc") or is_test_code(path):
                continue
            rel = path.relative_to(src / "stepscope").as_posix()
            for match in INCLUDE.finditer(path.read_text(encoding="utf-8")):
                target = match.group(1)
                if target in allowed or target in KNOWN_EXCEPTIONS.get(rel, ()):
                    continue
                line = path.read_text(encoding="utf-8").count("\n", 0, match.start()) + 1
                problems.append(f"src/stepscope/{rel}:{line}: layer '{layer}' includes a header of layer "
                                f"'{target}', which is not below it (it may use: {', '.join(sorted(allowed))})")
    known = {layer for layer in direct}
    for path in sorted((src / "stepscope").iterdir()):
        if path.is_dir() and path.name not in known:
            problems.append(f"src/stepscope/{path.name}: a folder that is no layer of CMakeLists.txt")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering violation(s); see DESIGN.md, 'The pieces, bottom to top'")
        return 1
    print(f"layers ok: {', '.join(direct)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
