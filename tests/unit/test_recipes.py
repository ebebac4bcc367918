"""Recipe parsing: both seeds give one recipe, and every kind of bad input is refused by file and field."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from farm.errors import InputError, RecipeError
from farm.recipes.model import Recipe
from farm.recipes.parse import (
    load_recipe,
    parallel_sizes,
    parse_localmaxxing_page,
    parse_registry,
    split_token_list,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
BAD = FIXTURES / "bad"
SEED_REGISTRY = FIXTURES / "001_5d0dc33ac7ff8823.txt"
SEED_PAGE = FIXTURES / "000_fb943dab8cb08842.txt"

SEED_ID = "deepseek-v4-flash-0731-fp8-e4m3-rtx-pro-6000-blackwell-96gb-vllm-tp2"
SEED_MODEL = "deepseek-ai/DeepSeek-V4-Flash-0731"
SEED_DIGEST = "sha256:0a51ea5b4ae2dc5d81890e5173f54203d2a3ae0cfffe51b8fd2afd4391bfd967"
COMPILATION_CONFIG = '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}'
SPECULATIVE_CONFIG = '{"method":"dspark","num_speculative_tokens":5,"draft_sample_method":"probabilistic"}'
SEED_ARGV = (
    "vllm", "serve", SEED_MODEL,
    "--tensor-parallel-size", "2",
    "--decode-context-parallel-size", "1",
    "--kv-cache-dtype", "fp8",
    "--block-size", "256",
    "--gpu-memory-utilization", "0.93",
    "--max-model-len", "262144",
    "--max-num-seqs", "64",
    "--max-num-batched-tokens", "8192",
    "--max-cudagraph-capture-size", "512",
    "--compilation-config", COMPILATION_CONFIG,
    "--async-scheduling",
    "--enable-chunked-prefill",
    "--enable-flashinfer-autotune",
    "--tokenizer-mode", "deepseek_v4",
    "--speculative-config", SPECULATIVE_CONFIG,
    "--attention-backend", "FLASHINFER_MLA_SPARSE_DSV4",
    "--kernel-config.moe_backend", "flashinfer_cutlass",
    "--enable-prefix-caching",
)  # fmt: skip


def _minimal(**changes: Any) -> dict[str, Any]:
    """A minimal registry recipe: a tiny Llama at a local path on the CPU."""
    recipe: dict[str, Any] = {
        "schema_version": "local-ai-registry/v1",
        "id": "tiny-llama-cpu-vllm",
        "hardware_id": "cpu",
        "hardware_count": 1,
        "engine": {"name": "vllm"},
        "argv": ["vllm", "serve", "/models/tiny-llama", "--dtype", "float32", "--max-model-len", "1024"],
    }
    recipe.update(changes)
    return {key: value for key, value in recipe.items() if value is not None}


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _drop_page_section(text: str, header: str) -> str:
    """The page without one section (its header, the blank line, the value and the blank line after)."""
    lines = text.split("\n")
    start = lines.index(header)
    del lines[start : start + 4]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def registry_recipe() -> Recipe:
    """The seed's registry JSON, parsed."""
    return load_recipe(SEED_REGISTRY)


@pytest.fixture(scope="module")
def page_recipe() -> Recipe:
    """The seed's LocalMaxxing page, parsed."""
    return load_recipe(SEED_PAGE)


# --- the seeds ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED_REGISTRY, SEED_PAGE], ids=["registry", "page"])
def test_seed_parses_to_the_seed_run(seed: Path) -> None:
    """Each seed gives the seed's id, model, hardware, engine and exact argv."""
    recipe = load_recipe(seed)
    assert recipe.id == SEED_ID
    assert recipe.model_id == SEED_MODEL
    assert recipe.hardware_id == "rtx-pro-6000-blackwell-96gb"
    assert recipe.hardware_count == 2
    assert recipe.hardware_class == "rtx-pro-6000-blackwell-96gb x 2"
    assert recipe.engine.name == "vllm"
    assert recipe.argv == SEED_ARGV


def test_both_seeds_agree(registry_recipe: Recipe, page_recipe: Recipe) -> None:
    """The registry JSON and the page describe one run: the fields a job is built from are identical."""
    fields = ("id", "model_id", "hardware_id", "hardware_count", "argv", "hardware_class", "engine_args")
    for name in fields:
        assert getattr(registry_recipe, name) == getattr(page_recipe, name), name
    assert registry_recipe.engine.name == page_recipe.engine.name
    assert registry_recipe.provenance.run_id == page_recipe.provenance.run_id == "cmsb828qn0061qd01l1fsm6pa"
    assert registry_recipe.provenance.captured_at == page_recipe.provenance.captured_at == "2026-08-30T09:10:02Z"


def test_json_values_in_argv_stay_whole(page_recipe: Recipe) -> None:
    """The JSON-valued flags in the page's comma-separated list come out as single tokens."""
    argv = list(page_recipe.argv)
    assert argv[argv.index("--compilation-config") + 1] == COMPILATION_CONFIG
    assert argv[argv.index("--speculative-config") + 1] == SPECULATIVE_CONFIG
    assert json.loads(COMPILATION_CONFIG)["custom_ops"] == ["all"]


def test_registry_keeps_engine_version(registry_recipe: Recipe, page_recipe: Recipe) -> None:
    """The registry's engine version is kept; the page names none."""
    assert registry_recipe.engine.version == (
        "0.11.2.dev279+eldritch.enlightenment.v45c1582.b12xf3686b5.cu132.20260704"
    )
    assert page_recipe.engine.version is None


def test_container_from_draft_launch(registry_recipe: Recipe) -> None:
    """The registry's docker draft_launch becomes the recipe's digest-pinned container launch, running the recipe's
    own command: the draft's arguments are a shorter command the registry synthesized from it."""
    container = registry_recipe.container
    assert container is not None
    assert container.digest == SEED_DIGEST
    assert container.image == f"vllm/vllm-openai@{SEED_DIGEST}"
    assert container.ipc == "host"
    assert container.shm_size == "16g"
    assert (container.container_port, container.host_port) == (8000, 8000)
    assert container.environment == {}
    assert container.accelerator_backend == "nvidia"
    assert [(m.source, m.target, m.read_only) for m in container.mounts] == [
        ("~/.cache/huggingface", "/root/.cache/huggingface", False)
    ]
    assert container.arguments == registry_recipe.argv[2:]
    assert container.arguments[:3] == (SEED_MODEL, "--tensor-parallel-size", "2")
    assert "--speculative-config" in container.arguments


def test_page_has_no_container(page_recipe: Recipe) -> None:
    """The page publishes no image, so its recipe has no container launch."""
    assert page_recipe.container is None


@pytest.mark.parametrize("seed", [SEED_REGISTRY, SEED_PAGE], ids=["registry", "page"])
def test_content_hash_is_of_the_file_bytes(seed: Path) -> None:
    """provenance.content_sha256 is the sha256 of the file as stored."""
    assert load_recipe(seed).provenance.content_sha256 == hashlib.sha256(seed.read_bytes()).hexdigest()


def test_provenance_of_each_format(registry_recipe: Recipe, page_recipe: Recipe) -> None:
    """Each recipe says which format it came from, its run and the argv's fidelity."""
    assert registry_recipe.provenance.source_format == "local-ai-registry/v1"
    assert registry_recipe.provenance.run_url == "https://www.localmaxxing.com/en/runs/cmsb828qn0061qd01l1fsm6pa"
    assert registry_recipe.provenance.sources[0].kind == "normalized-recipe"
    assert page_recipe.provenance.source_format == "localmaxxing-page"
    for recipe in (registry_recipe, page_recipe):
        assert recipe.provenance.argv_fidelity == "faithful"
        assert recipe.notes is not None
        assert recipe.notes.startswith("First DeepSeek-V4-Flash-0731")


def test_serving_limits(registry_recipe: Recipe, page_recipe: Recipe) -> None:
    """The registry's serving block is kept; the page's limits come from the argv."""
    assert registry_recipe.serving.max_concurrency == 1
    for recipe in (registry_recipe, page_recipe):
        assert recipe.serving.tensor_parallel == 2
        assert recipe.serving.max_context_tokens == 262_144


@pytest.mark.parametrize(
    ("copy", "seed"),
    [
        ("examples/deepseek-v4-flash-0731-registry.json", SEED_REGISTRY),
        ("examples/deepseek-v4-flash-0731-localmaxxing.txt", SEED_PAGE),
    ],
)
def test_example_copies_match_the_seeds(copy: str, seed: Path) -> None:
    """The copies in examples/ parse to the same recipe as the seeds in tests/fixtures."""
    assert load_recipe(ROOT / copy) == load_recipe(seed)


def test_recipe_survives_a_json_round_trip(registry_recipe: Recipe) -> None:
    """A recipe stored as JSON (the job row) validates back to an equal recipe."""
    assert Recipe.model_validate(json.loads(registry_recipe.model_dump_json())) == registry_recipe


def test_format_is_detected_by_content_not_name(tmp_path: Path) -> None:
    """A registry recipe saved as .txt and a page saved as .json are still read by their content."""
    as_txt = _write(tmp_path, "recipe.txt", SEED_REGISTRY.read_text(encoding="utf-8"))
    as_json = _write(tmp_path, "page.json", SEED_PAGE.read_text(encoding="utf-8"))
    assert load_recipe(as_txt).provenance.source_format == "local-ai-registry/v1"
    assert load_recipe(as_json).provenance.source_format == "localmaxxing-page"


# --- the page's token list ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "tokens"),
    [
        ("vllm, serve, m", ["vllm", "serve", "m"]),
        ('--x, {"a":1,"b":[1,2]}, --y', ["--x", '{"a":1,"b":[1,2]}', "--y"]),
        ('--x, {"a": 1, "b": [1, 2]}, --y', ["--x", '{"a": 1, "b": [1, 2]}', "--y"]),
        ('--x, {"s": "}, {"}, --y', ["--x", '{"s": "}, {"}', "--y"]),
        ('--x, {"s": "a\\"}, b"}, --y', ["--x", '{"s": "a\\"}, b"}', "--y"]),
        ("--x, [1, [2, 3]], --y", ["--x", "[1, [2, 3]]", "--y"]),
        ("a,b, c", ["a,b", "c"]),
        ("single", ["single"]),
    ],
)
def test_split_token_list(listed: str, tokens: list[str]) -> None:
    """Tokens split on ', ' except inside JSON objects, arrays and strings."""
    assert split_token_list(listed) == tokens


def test_seed_token_list_splits_without_the_observed_command() -> None:
    """The page's token list alone splits into the registry's argv (the observed command is only a check)."""
    text = SEED_PAGE.read_text(encoding="utf-8")
    lines = text.split("\n")
    listed = lines[lines.index("localmaxxing · tokenized · arguments") + 2]
    assert tuple(split_token_list(listed)) == SEED_ARGV


@pytest.mark.parametrize("dropped", ["localmaxxing · observed command", "localmaxxing · tokenized · arguments"])
def test_page_with_one_command_form(tmp_path: Path, dropped: str) -> None:
    """A page with only the token list, or only the observed command, still gives the seed's argv."""
    text = _drop_page_section(SEED_PAGE.read_text(encoding="utf-8"), dropped)
    assert dropped not in text
    assert parse_localmaxxing_page(text, "page.txt").argv == SEED_ARGV


# --- minimal registry recipes ---------------------------------------------------------------------


def test_minimal_cpu_recipe(tmp_path: Path) -> None:
    """A recipe of only the required fields: a tiny Llama at a local path on the CPU."""
    recipe = load_recipe(_write(tmp_path, "tiny.json", json.dumps(_minimal())))
    assert recipe.hardware_class == "cpu x 1"
    assert recipe.model_id == "/models/tiny-llama"
    assert recipe.engine.version is None
    assert recipe.container is None
    assert recipe.engine_args == ("--dtype", "float32", "--max-model-len", "1024")
    assert recipe.serving.max_context_tokens == 1024
    assert recipe.provenance.source_format == "local-ai-registry/v1"


def test_minimal_recipe_with_model_id_and_tokenized_arguments() -> None:
    """An explicit model_id names the model; the argv may come from metadata.localmaxxing.tokenized."""
    argv = ["vllm", "serve", "/models/tiny-llama"]
    document = _minimal(
        argv=None, model_id="farm/tiny-llama", metadata={"localmaxxing": {"tokenized": {"arguments": argv}}}
    )
    recipe = parse_registry(json.dumps(document), "tiny.json")
    assert recipe.model_id == "farm/tiny-llama"
    assert recipe.argv == tuple(argv)


def test_argv_built_from_draft_launch() -> None:
    """Without tokenized arguments, the argv is `vllm serve MODEL` plus the draft launch's other arguments."""
    draft = {
        "kind": "docker",
        "image": "vllm/vllm-openai:latest",
        "arguments": ["--port", "8000", "--model", "m/x"],
    }
    document = _minimal(argv=None, hardware_id="h200-141gb", draft_launch=draft)
    recipe = parse_registry(json.dumps(document), "draft.json")
    assert recipe.argv == ("vllm", "serve", "m/x", "--port", "8000")
    assert recipe.container is not None
    assert recipe.container.digest is None


def test_registry_envelope_is_optional() -> None:
    """The registry API's {"data": ...} envelope and the bare record parse alike."""
    bare = parse_registry(json.dumps(_minimal()), "bare.json")
    wrapped = parse_registry(json.dumps({"data": _minimal(), "meta": {"source": "registry"}}), "wrapped.json")
    assert bare.model_copy(update={"provenance": wrapped.provenance}) == wrapped


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (["vllm", "serve", "m", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"], 4),
        (["vllm", "serve", "m", "-tp", "4"], 4),
        (["vllm", "serve", "m", "--tensor-parallel-size=8"], 8),
        (["vllm", "serve", "m", "--data-parallel-size", "2", "-tp", "2"], 4),
        (["vllm", "serve", "m"], 1),
    ],
)
def test_device_count_from_parallel_flags(argv: list[str], count: int) -> None:
    """hardware_count must equal tensor × pipeline × data parallel sizes of the argv."""
    sizes = parallel_sizes(argv)
    assert sizes["tensor"] * sizes["pipeline"] * sizes["data"] == count
    recipe = parse_registry(json.dumps(_minimal(hardware_id="h100-sxm-80gb", hardware_count=count, argv=argv)), "r")
    assert recipe.hardware_count == count


def test_tokenized_arguments_must_match_observed_command() -> None:
    """A registry recipe whose token list and observed command disagree is refused, naming the token list."""
    metadata = {
        "localmaxxing": {
            "observed_command": "vllm serve m --max-model-len 2048",
            "tokenized": {"arguments": ["vllm", "serve", "m", "--max-model-len", "4096"]},
        }
    }
    with pytest.raises(RecipeError, match="token 4") as caught:
        parse_registry(json.dumps(_minimal(argv=None, hardware_id="h200-141gb", metadata=metadata)), "x.json")
    assert caught.value.field == "metadata.localmaxxing.tokenized.arguments"


# --- bad input ------------------------------------------------------------------------------------

SUBMIT_REFUSED = {"unknown_hardware_id.json"}
"""Bad fixtures that parse (a well-formed hardware id the catalogue lacks) and are refused at submit
(tests/unit/test_registry_acceptance.py)."""

BAD_CASES = [
    ("wrong_schema_version.json", "schema_version", "expected 'local-ai-registry/v1', got 'v2'"),
    ("missing_schema_version.json", "schema_version", "missing"),
    ("no_hardware_id.json", "hardware_id", "missing"),
    ("hardware_count_zero.json", "hardware_count", "positive integer, got 0"),
    ("hardware_count_string.json", "hardware_count", "positive integer, got '2'"),
    ("unknown_engine.json", "engine.name", "unknown engine 'tgi'"),
    ("argv_not_strings.json", "argv", "list of strings"),
    ("empty_argv.json", "argv", "no tokens"),
    ("wrong_executable.json", "argv", "executable 'llama-server' is llama.cpp, not the engine 'vllm'"),
    ("no_launch_command.json", "argv", "no launch command"),
    ("tp_mismatch.json", "hardware_count", "runs on 2 device(s)"),
    ("serving_tp_mismatch.json", "serving.tensor_parallel", "--tensor-parallel-size 2"),
    ("unbalanced_quote.json", "metadata.localmaxxing.observed_command", "No closing quotation"),
    ("page_unbalanced_quote.txt", "localmaxxing.observed_command", "No closing quotation"),
    ("page_without_arguments.txt", "localmaxxing.tokenized.arguments", "neither tokenized arguments"),
    ("page_unknown_hardware.txt", "localmaxxing.hardware_label", "'TPU v5e'"),
    ("page_argv_mismatch.txt", "localmaxxing.tokenized.arguments", "'0.95' here but '0.93' there"),
    ("page_wrong_executable.txt", "localmaxxing.tokenized.arguments", "'tgi' is not a known engine's server"),
    ("truncated.json", None, "truncated JSON: the document ends at line 1, column 3000"),
    ("binary.bin", None, "binary file"),
    ("empty.json", None, "empty file"),
    ("not_a_recipe.txt", None, "not a recipe"),
]


@pytest.mark.parametrize(("name", "field", "phrase"), BAD_CASES, ids=[case[0] for case in BAD_CASES])
def test_bad_recipe_is_refused(name: str, field: str | None, phrase: str) -> None:
    """Each bad fixture raises RecipeError whose message names the file, the field and what is wrong."""
    path = BAD / name
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    error = caught.value
    message = str(error)
    assert isinstance(error, InputError)
    assert message.startswith(f"{path}: ")
    assert error.source == str(path)
    assert error.field == field
    if field is not None:
        assert f"field {field!r}" in message
    assert phrase in message


def test_every_bad_fixture_is_in_the_table() -> None:
    """No fixture in tests/fixtures/bad goes untested."""
    assert {path.name for path in BAD.iterdir()} == {case[0] for case in BAD_CASES} | SUBMIT_REFUSED


def test_wrong_schema_version_message_reads_as_documented() -> None:
    """The message format: '<file>: field '<field>': <what is wrong>'."""
    path = BAD / "wrong_schema_version.json"
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert str(caught.value) == f"{path}: field 'schema_version': expected 'local-ai-registry/v1', got 'v2'"


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b"\xff\xfe{\x00\x00}", "binary file"),
        ('{"schema_version": "local-ai-registry/v1", "id": "caf\xe9"}'.encode("latin-1"), "not UTF-8"),
        (b"   \n\n  ", "empty file"),
        (b'{"schema_version": "local-ai-registry/v1",, "id": 1}', "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
    ],
)
def test_undecodable_documents(tmp_path: Path, content: bytes, phrase: str) -> None:
    """Binary, non-UTF-8, blank, malformed and non-object documents are refused with the file named."""
    path = _write(tmp_path, "recipe.json", content)
    with pytest.raises(RecipeError, match=phrase) as caught:
        load_recipe(path)
    assert str(path) in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    """A recipe path that does not exist is a RecipeError naming it."""
    path = tmp_path / "nowhere.json"
    with pytest.raises(RecipeError, match="cannot read") as caught:
        load_recipe(path)
    assert caught.value.source == str(path)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"id": ""}, "id"),
        ({"id": "has space"}, "id"),
        ({"hardware_count": True}, "hardware_count"),
        ({"engine": None}, "engine"),
        ({"engine": {"name": "vllm", "version": 11}}, "engine.version"),
        ({"argv": ["vllm", "bench", "m"]}, "argv"),
        ({"argv": ["vllm", "serve", "--dtype", "float32"]}, "argv"),
        ({"argv": ["vllm", "serve", "m", "--tensor-parallel-size", "two"]}, "argv"),
        ({"model_id": ""}, "model_id"),
        ({"draft_launch": {"kind": "docker", "arguments": ["--model", "m"]}}, "draft_launch.image"),
        ({"serving": {"max_concurrency": "many"}}, "serving.max_concurrency"),
    ],
)
def test_bad_minimal_fields(changes: dict[str, Any], field: str) -> None:
    """Smaller field checks on a minimal recipe, each naming its field."""
    document = _minimal()
    document.update(changes)
    document = {key: value for key, value in document.items() if value is not None}
    with pytest.raises(RecipeError) as caught:
        parse_registry(json.dumps(document), "minimal.json")
    assert caught.value.field == field
    assert str(caught.value).startswith(f"minimal.json: field {field!r}: ")
