"""deploy/gen_llama_arg_decls.py reads llama.cpp's option declarations from common/arg.cpp as its parser uses them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = r"""
    add_opt(common_arg(
        {"-t", "--threads"}, "N",
        string_format("number of threads (default: %d)", params.cpuparams.n_threads),
        [](common_params & params, int value) {
            params.cpuparams.n_threads = value;
        }
    ).set_env("LLAMA_ARG_THREADS"));
    add_opt(common_arg(
        // a comment with "quotes" and {braces}
        {"--mmap"},
        {"--no-mmap"},
        "whether to memory-map the model (default: enabled)",
        [](common_params & params, bool value) {
            params.use_mmap = value;
        }
    ));
    add_opt(common_arg(
        {"--control-vector-layer-range"}, "START", "END",
        "layer range to apply the control vector(s) to, start and end inclusive",
        [](common_params & params, const std::string & start, const std::string & end) {
            params.control_vector_layer_start = std::stoi(start);
        }
    ));
    add_opt(common_arg(
        {"--log-file"}, "FNAME",
        "Log to file",
        [](common_params &, const std::string & value) {
            common_log_set_file(common_log_main(), value.c_str());
        }
    ));
    add_opt(common_arg(
        {"-p", "--prompt"}, "PROMPT",
        "prompt to start generation with",
        [](common_params & params, const std::string & value) {
            params.prompt = value;
        }
    ).set_excludes({LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"--draft"}, "N",
        "removed",
        [](common_params & /*params*/, int /*value*/) {
            arg_removed("use --spec-draft-n-max");
        }
    ).set_examples({LLAMA_EXAMPLE_SPECULATIVE, LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"--embd-out"}, "FMT",
        "embedding output",
        [](common_params & params, const std::string & value) { params.embd_out = value; }
    ).set_examples({LLAMA_EXAMPLE_EMBEDDING}));
"""


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_llama_arg_decls", ROOT / "deploy" / "gen_llama_arg_decls.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_handlers_negatives_and_the_servers_options_are_read() -> None:
    """Each handler's parameters say how many tokens it reads (an int or a string one, a bool or none zero, two
    strings two); `--no-` spellings are the negatives; options excluded from or not in llama-server are left out."""
    decls = _generator().declarations(SNIPPET)
    by_name = {d["spellings"][-1]: d for d in decls}
    assert sorted(by_name) == ["--control-vector-layer-range", "--draft", "--log-file", "--mmap", "--threads"]
    assert by_name["--threads"] == {"spellings": ["-t", "--threads"], "negatives": [], "handler": "int", "values": 1}
    assert by_name["--mmap"]["negatives"] == ["--no-mmap"]
    assert by_name["--mmap"]["values"] == 0
    assert by_name["--control-vector-layer-range"]["values"] == 2
    assert by_name["--draft"]["handler"] == "int"
    assert by_name["--log-file"]["handler"] == "string"


@pytest.mark.parametrize("release", ["0.3.16", "0.3.36"])
def test_the_shipped_declarations_cover_the_shipped_specs_options(release: str) -> None:
    """Each shipped file (a llama-cpp-python release's arg.cpp) declares llama-server's switches and value options
    with the counts that release's shipped spec (its --help) has for every option both know."""
    from farm.engines.llamacpp.adapter import shipped_llamacpp_spec

    data = json.loads((ROOT / "farm" / "engines" / "llamacpp" / f"llama_server_decls_{release}.json").read_text())
    counts = {s: d["values"] for d in data["options"] for s in (*d["spellings"], *d["negatives"])}
    spec = shipped_llamacpp_spec(release)
    both = [o for o in spec.options if o.name in counts]
    assert len(both) > 150
    for option in both:
        expected = 0 if not option.takes_value else (1 if option.nargs is None else option.nargs)
        assert counts[option.name] == expected, option.name
