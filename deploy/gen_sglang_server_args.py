"""Dump every option `sglang serve` / `python -m sglang.launch_server` accepts, from SGLang's own argument parser
(`ServerArgs.add_cli_args`), as JSON in deploy/gen_vllm_serve_args.py's format, for farm.engines.reparse.

SGLang's parser needs its package but not its runtime: the released wheel, unpacked, with msgspec (its config
structs) is enough; every other third-party module it imports (torch, transformers, ...) is replaced by an inert
stand-in while the parser is built, since declaring options touches none of them. Run it with a python that has
msgspec, pointing at the unpacked wheel:

    pip download --no-deps sglang==0.5.23 -d /tmp/sg && unzip -q /tmp/sg/sglang-*.whl -d /tmp/sg/pkg
    PYTHONPATH=/tmp/sg/pkg python deploy/gen_sglang_server_args.py farm/engines/sglang/sglang_server_args.json

For each option: its option strings, dest, nargs, const, choices, the parser's type name and the action's class
(argparse's `_StoreAction`, `_StoreTrueAction`, `BooleanOptionalAction`, SGLang's `LoRAPathAction`...). It imports
only SGLang, msgspec and the standard library, never the farm.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import types
from pathlib import Path
from typing import Any

_PROBED = frozenset(
    {
        "__wrapped__", "__signature__", "__origin__", "__args__", "__parameters__", "__qualname__", "__name__",
        "__module__", "__dict__", "__annotations__", "__dataclass_fields__", "__func__", "__self__", "__code__",
        "__text_signature__", "__isabstractmethod__", "__supertype__", "__typing_subst__",
        "__pydantic_core_schema__", "__get_pydantic_core_schema__", "__get_pydantic_json_schema__",
    }
)  # fmt: skip
"""Attributes Python's own machinery probes for (inspect, typing, dataclasses): a stand-in has none of them."""

_ABSENT_DEVICES = frozenset({"npu", "musa", "hpu", "mlu", "mps"})
"""Device modules SGLang detects with `hasattr(torch, ...)`: absent, so no accelerator is assumed."""


class _StandInBase:
    """What a class deriving from a stand-in derives from instead."""

    def __init_subclass__(cls, **_kwargs: Any) -> None:
        pass

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __class_getitem__(cls, _key: Any) -> Any:
        return cls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _StandIn(name)


class _StandIn:
    """Any attribute, call, subscript or arithmetic on a missing module's names: another stand-in."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return _StandIn(self._name + "()")

    def __getattr__(self, name: str) -> Any:
        if name in _PROBED:
            raise AttributeError(name)
        return _StandIn(f"{self._name}.{name}")

    def __mro_entries__(self, _bases: Any) -> tuple[type, ...]:
        return (_StandInBase,)

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __getitem__(self, _key: Any) -> Any:
        return self

    def __or__(self, _other: Any) -> Any:
        return self

    __ror__ = __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = __or__

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __eq__(self, _other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)

    def __lt__(self, _other: Any) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __str__(self) -> str:
        return self._name

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_exc: Any) -> bool:
        return False


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name == "__version__":
            return "99.0.0"
        if name in _ABSENT_DEVICES or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return _StandIn(f"{self.__name__}.{name}")


class _MissingModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stand-ins for third-party packages that are not installed; SGLang, the standard library and installed
    packages import as they are."""

    def __init__(self) -> None:
        self.missing: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = name.split(".")[0]
        if top == "sglang" or top in sys.stdlib_module_names:
            return None
        if top not in self.missing:
            for finder in sys.meta_path:
                if finder is self:
                    continue
                try:
                    if finder.find_spec(top, None, None) is not None:
                        return None
                except (ImportError, ValueError, AttributeError):
                    continue
            self.missing.add(top)
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _nargs(action: argparse.Action) -> str | int | None:
    if isinstance(action, argparse._HelpAction | argparse._VersionAction):
        return 0
    nargs = action.nargs
    return nargs if isinstance(nargs, int | str) else None


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def dump() -> dict[str, Any]:
    finder = _MissingModules()
    sys.meta_path.append(finder)
    server_args = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    options: list[dict[str, Any]] = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        type_name = getattr(action.type, "__name__", None) if action.type is not None else None
        options.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "nargs": _nargs(action),
                "const": _plain(action.const),
                "choices": sorted(str(c) for c in action.choices) if action.choices else None,
                "type": type_name,
                "action": type(action).__name__,
            }
        )
    options.sort(key=lambda o: o["option_strings"][0])
    from importlib import metadata

    try:
        version = metadata.version("sglang")
    except metadata.PackageNotFoundError:
        version = str(getattr(importlib.import_module("sglang.version"), "__version__", "unknown"))
    return {
        "engine": "sglang",
        "version": version,
        "python": sys.version.split()[0],
        "generated_by": "deploy/gen_sglang_server_args.py",
        "stood_in_for": sorted(finder.missing),
        "options": options,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_JSON", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(json.dumps(dump(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
