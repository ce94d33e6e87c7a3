#!/usr/bin/env python3
"""Checks the include edges of cubert's floor plan (docs/maintainer/architecture.md).

- include/cubert/ (the user API) includes only public headers, never the backend contract's
  server; the memory manager's headers alone may name the storage contract.
- include/cubert/backend/ (the contract) includes only public headers.
- A backend (src/backends/<b>) includes its own headers and, from the core, only the internal
  SDK: the headers listed by the `cubert_backend_sdk` target (src/core/CMakeLists.txt), passed
  here with --sdk. The registry (src/runtime) likewise.
- The kernel library (src/ops) includes only its own headers and the public API.
- The tools library (src/tools) includes its own headers and the internal SDK.
- The CLI (tools/cubert) includes its own headers, the tools library and the public API.
- Benchmarks include their own headers, the tests' support helpers, the tools library, a
  backend's headers (to time a backend against its raw driver) or the kernel library's, and
  never the core's.

Prints each edge that breaks a rule and exits 1 if there is one.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--sdk", required=True, help="core headers a backend may use, comma-separated")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    sdk = {s for s in args.sdk.replace(";", ",").split(",") if s}
    core = root / "src/core"
    public = root / "include"
    tools_lib = root / "src/tools"
    problems = []

    def resolve(path: pathlib.Path, name: str, roots):
        for base in [path.parent, *roots]:
            if (base / name).is_file():
                return (base / name).resolve()
        return None

    def check_file(path: pathlib.Path, own_roots, *, sdk_ok=False, private_ok=(),
                   angle_rule=None):
        rel = path.relative_to(root)
        for kind, name in INCLUDE.findall(path.read_text(errors="replace")):
            if kind == "<":
                if angle_rule and name.startswith("cubert/"):
                    why = angle_rule(rel, name)
                    if why:
                        problems.append(f"{rel}: <{name}>: {why}")
                continue
            if resolve(path, name, own_roots):
                continue
            if sdk_ok and name in sdk and (core / name).is_file():
                continue
            found = resolve(root / "src" / "x", name, [])  # "ops/...", "backends/..." from src/
            if found and any(found.is_relative_to(r.resolve()) for r in private_ok):
                continue
            if any(resolve(path, name, [r]) for r in private_ok):
                continue
            if (core / name).is_file():
                problems.append(f"{rel}: includes the core's private \"{name}\"")
            else:
                problems.append(f"{rel}: includes \"{name}\", outside what its area may include")

    def user_api_rule(rel, name):
        if not (public / name).is_file() and name != "cubert/build_config.hpp":
            return "no such public header"
        if name.startswith("cubert/backend/"):
            in_contract = str(rel).startswith("include/cubert/backend/")
            if in_contract:
                return None
            if name == "cubert/backend/storage.hpp" and str(rel).startswith("include/cubert/memory/"):
                return None
            return "the user API does not include the backend contract"
        return None

    def no_contract_rule(rel, name):
        if name.startswith("cubert/backend/"):
            return "only a backend, the core and the tests use the backend contract"
        return None

    sources = lambda d: sorted(p for p in (root / d).rglob("*") if p.suffix in {".hpp", ".cpp", ".h"})
    for p in sources("include/cubert"):
        check_file(p, [], angle_rule=user_api_rule)
    for b in sorted((root / "src/backends").iterdir()):
        if b.is_dir():
            for p in sources(b.relative_to(root)):
                check_file(p, [b], sdk_ok=True)
    for p in sources("src/runtime"):
        check_file(p, [root / "src/runtime"], sdk_ok=True)
    for p in sources("src/ops"):
        check_file(p, [root / "src/ops"], angle_rule=no_contract_rule)
    for p in sources("src/tools"):
        check_file(p, [tools_lib], sdk_ok=True)
    for p in sources("tools/cubert"):
        check_file(p, [root / "tools/cubert", tools_lib], angle_rule=no_contract_rule)
    backends = [b for b in (root / "src/backends").iterdir() if b.is_dir()]
    for p in sources("benchmarks"):
        check_file(p, [root / "benchmarks", root / "tests/support", tools_lib],
                   private_ok=[*backends, *[d for d in (root / "src/ops").rglob("*") if d.is_dir()],
                               root / "src/ops"])

    for line in problems:
        print(line)
    if problems:
        print(f"check-includes: {len(problems)} edge(s) break the floor plan")
        return 1
    print("check-includes: every include edge follows the floor plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
