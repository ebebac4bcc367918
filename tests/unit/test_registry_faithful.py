"""What ran beats what was generated (issue 22): a recipe's recorded command, and the settings its metadata records,
win over the draft launch the registry synthesized from the instance and its own defaults. Each rule is held to a
real registry document in tests/fixtures/registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.errors import RecipeError
from farm.recipes import instances
from farm.recipes.parse import load_recipe

REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "registry"


def test_recorded_llama_bench_beats_the_synthesized_draft() -> None:
    """The run recorded `llama-bench -m ...IQ4_XS.gguf -ngl 999 -fa on -ctk f16 -ctv f16 -fitt 1024`; the registry's
    draft (`-hf ...:IQ4_XS --n-gpu-layers 999 -c 1024`) dropped the cache types and flash attention and invented a
    context. The recording is the command, and the note says the draft was not used."""
    recipe = load_recipe(REGISTRY / "nemotron-cascade-2-30b-a3b-iq4-xs-rtx-3090-24gb-llama-cpp-tp1.json")
    assert recipe.provenance.command_source == "metadata.localmaxxing.tokenized.arguments"
    argv = list(recipe.argv)
    assert argv[argv.index("--cache-type-k") + 1] == "f16"
    assert "--flash-attn" in argv
    assert "--ctx-size" not in argv
    notes = " ".join(recipe.provenance.command_notes)
    assert "synthesized draft" in notes
    assert "is not used" in notes


def test_recorded_quantization_is_kept_where_the_recording_cannot_be_served() -> None:
    """The recording names `...GGUF:IQ2_XXS` with an option the farm cannot translate (`-lm`); the draft names
    another file (`:IQ2_XSS`). Falling back to the draft would launch another checkpoint than the one that ran, so
    the recording's refusal stands."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(REGISTRY / "deepseek-v4-flash-0731-iq2-xss-rtx-3090-24gb-llama-cpp-tp1.json")
    assert caught.value.field == "metadata.localmaxxing.tokenized.arguments"
    assert "'-lm'" in caught.value.detail


def test_a_draft_naming_the_base_model_for_a_quantized_instance_is_refused() -> None:
    """The instance is `google-gemma-4-26b-a4b-it--int8`; the registry's draft names `google/gemma-4-26B-A4B-it`,
    the BF16 base: that would benchmark other weights under the recipe's name."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(REGISTRY / "gemma-4-26b-a4b-int8-rtx-5090-32gb-vllm-tp1.json")
    assert caught.value.field == "draft_launch.arguments"
    assert "base model" in caught.value.detail
    assert "int8" in caught.value.detail


def test_engine_flags_win_over_the_synthesized_draft() -> None:
    """metadata.localmaxxing.engine_flags records kvCacheDtype fp8; the draft has no --kv-cache-dtype. The run's
    setting is added, and the note names it."""
    recipe = load_recipe(REGISTRY / "qwen3-6-27b-nvfp4-modelopt-mixed-w4a16-fp8-rtx-5090-32gb-vllm-tp1.json")
    argv = list(recipe.argv)
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    assert any("kvCacheDtype" in note and "added" in note for note in recipe.provenance.command_notes)


def test_mtp_the_notes_record_is_not_dropped() -> None:
    """engine_flags.mtpEnabled is true and the notes say "This is using MTP 8"; the draft has no speculative
    decoding. vLLM's MTP needs only the token count, which the notes state once: it is added."""
    recipe = load_recipe(REGISTRY / "qwen3-6-27b-auto-rtx-5090-32gb-vllm-tp2.json")
    argv = list(recipe.argv)
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":8}'


@pytest.mark.parametrize(
    ("repository", "instance_id", "stated"),
    [
        ("zai-org/GLM-4.5-Air", "zai-org-glm-4-5-air--awq-4bit", "awq-4bit"),
        ("Qwen/Qwen3.6-27B", "qwen-qwen3-6-27b--nvfp4", "nvfp4"),
        ("QuantTrio/GLM-4.7-Flash-AWQ", "quanttrio-glm-4-7-flash-awq--int4", None),  # named by its quantization
        ("nvidia/Qwen3.6-27B-NVFP4", "nvidia-qwen3-6-27b-nvfp4--nvfp4", None),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai-deepseek-v4-flash--fp8", None),  # FP8 is its own weights
        ("0xSero/GLM-5.2-504B-Nvidia", "0xsero-glm-5-2-504b-nvidia--nvfp4", None),  # not a base publisher
    ],
)
def test_base_for_quantized(repository: str, instance_id: str, stated: str | None) -> None:
    """A base publisher's plain repository named for a quantized instance is the base model, not the checkpoint."""
    instance = instances.Instance(instance_id, repository, None, None, None, None)
    assert instances.base_for_quantized(instance) == stated


def test_a_vllm_command_naming_a_gguf_repository_without_its_file_is_refused() -> None:
    """The registry's draft gives vLLM `--model unsloth/Qwen3.6-35B-A3B-GGUF`: a repository of many quantizations,
    none named. vLLM loads one GGUF file; the command would not load the weights that ran."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(REGISTRY / "qwen3-6-35b-a3b-ud-q4-k-m-rtx-4070-12gb-vllm-tp1-xmn9blhn.json")
    assert caught.value.field == "draft_launch.arguments"
    assert "GGUF repository" in caught.value.detail


def test_a_llama_cpp_draft_naming_a_gguf_repository_without_its_quantization_is_not_the_model(
    tmp_path: Path,
) -> None:
    """The registry's draft gives llama-server `-hf unsloth/gemma-4-26B-A4B-it-GGUF`, no quantization: llama.cpp
    would download the repository's default file (Q4_K_M), not the instance's UD-Q8_K_XL. The fixture's recording
    wins over the draft as it is, so the recording is replaced here by the prose note two other fixtures carry
    (`llama.cpp GGUF five-prompt plus vision benchmark`), which falls back to the draft: its model becomes the
    instance's own repository in the instance's quantization (the farm's snapshot holds the instance), and the note
    says why."""
    name = "gemma-4-26b-a4b-it-ud-q8-k-xl-dgx-spark-gb10-128gb-llama-cpp-tp1.json"
    data = json.loads((REGISTRY / name).read_text())
    prose = "llama.cpp GGUF five-prompt plus vision benchmark"
    data["metadata"]["localmaxxing"]["observed_command"] = prose
    data["metadata"]["localmaxxing"]["tokenized"] = {"arguments": prose.split(), "fidelity": "faithful"}
    (tmp_path / name).write_text(json.dumps(data))
    recipe = load_recipe(tmp_path / name)
    assert recipe.provenance.command_source == "draft_launch.arguments"
    assert "-hf" not in recipe.argv
    assert recipe.argv[recipe.argv.index("--hf-repo") + 1] == "unsloth/gemma-4-26B-A4B-it-GGUF:UD-Q8_K_XL"
    assert "unsloth/gemma-4-26B-A4B-it-GGUF" not in recipe.argv, "never the bare repository (its default file)"
    assert recipe.argv[recipe.argv.index("-c") + 1] == "262144"
    assert any("without a quantization" in note for note in recipe.provenance.command_notes)


def test_a_generated_command_carries_the_context_the_notes_state() -> None:
    """No command is recorded (engine + instance); the notes say "ctx=4096". llama-server's own default would be
    another context, so the stated one is carried, with a note."""
    recipe = load_recipe(REGISTRY / "gemma-4-12b-it-q4-k-m-ryzen-ai-max-plus-395-128gb-llama-cpp-tp1-i4vez1gw.json")
    assert recipe.provenance.command_source == "engine+model+engine_flags"
    assert recipe.argv[recipe.argv.index("--ctx-size") + 1] == "4096"
    assert any("context of 4096 tokens" in note for note in recipe.provenance.command_notes)


def test_a_generated_vllm_command_carries_the_fp8_kv_cache_the_notes_state() -> None:
    """The vLLM command is built from the engine and instance; the notes say "KV cache FP8": --kv-cache-dtype fp8."""
    recipe = load_recipe(
        REGISTRY / "gemma-4-26b-a4b-it-nvfp4-modelopt-fp4-w4a4-rtx-pro-6000-blackwell-96gb-vllm-tp1.json"
    )
    assert recipe.argv[recipe.argv.index("--kv-cache-dtype") + 1] == "fp8"


def _with_notes(tmp_path: Path, name: str, notes: str) -> Path:
    data = json.loads((REGISTRY / name).read_text())
    data["metadata"]["localmaxxing"]["notes"] = notes
    (tmp_path / name).write_text(json.dumps(data))
    return tmp_path / name


@pytest.mark.parametrize(
    ("notes", "why"),
    [
        ("BigBeast single RTX 3090, Q4_1 KV.", "q4_1/q4_1 KV cache, which a vllm command"),
        ("tested with q8_0/q8_0 KV and then KV q4_0", "more than one of KV cache types"),
        ("ctx=4096 first, then c=8192", "more than one of context sizes"),
        ("b128 @ 8K ctx = 1383 t/s, b64 @ 256K ctx = 1247 t/s", "more than one of context sizes"),
    ],
)
def test_a_generated_command_that_cannot_carry_what_the_notes_state_is_refused(
    tmp_path: Path, notes: str, why: str
) -> None:
    """The same generated vLLM command, with notes stating a llama.cpp cache type (which vLLM has no value for) or
    two readings: launching it would run another option set than the one the notes record, so it is refused."""
    name = "gemma-4-26b-a4b-it-nvfp4-modelopt-fp4-w4a4-rtx-pro-6000-blackwell-96gb-vllm-tp1.json"
    with pytest.raises(RecipeError, match=why):
        load_recipe(_with_notes(tmp_path, name, notes))


def test_a_recording_beats_what_the_notes_state(tmp_path: Path) -> None:
    """A recorded command is what ran: notes saying "KV q4_0" beside a recording with q8_0 change nothing."""
    name = "gemma-4-31b-it-ud-q6-k-xl-rtx-3090-24gb-llama-cpp-tp2.json"
    recipe = load_recipe(_with_notes(tmp_path, name, "KV q4_0, c=4096"))
    assert recipe.provenance.command_source == "metadata.localmaxxing.tokenized.arguments"
    assert recipe.argv[recipe.argv.index("-ctk") + 1] == "q8_0"
    assert recipe.argv[recipe.argv.index("-c") + 1] == "32768"
    assert "--cache-type-k" not in recipe.argv


def test_a_rate_after_ctx_is_not_a_context_and_k_sizes_count(tmp_path: Path) -> None:
    """`8K ctx = 1383 t/s` states an 8K context (8192) and a throughput, never a context of 1383; a single `128K
    context` is 131072 tokens, carried into the generated llama.cpp command."""
    name = "gemma-4-12b-it-q4-k-m-ryzen-ai-max-plus-395-128gb-llama-cpp-tp1-i4vez1gw.json"
    recipe = load_recipe(_with_notes(tmp_path, name, "b128 @ 8K ctx = 1383 t/s aggregate"))
    assert recipe.argv[recipe.argv.index("--ctx-size") + 1] == "8192"
    recipe = load_recipe(_with_notes(tmp_path, name, "full 128K context, served ctx=131072."))
    assert recipe.argv[recipe.argv.index("--ctx-size") + 1] == "131072"


def test_a_server_command_in_metadata_observed_command_is_never_replaced_by_engine_and_instance() -> None:
    """Sample F's Kimi-K2.6 (issue 22): `metadata.observed_command`, a discord message, records `export ...` then
    `vllm serve ~/data/moonshotai/Kimi-K2.6 ... --kv-cache-dtype fp8_e4m3 --decode-context-parallel-size 8 ...`.
    The farm does not read that field as a command; building `vllm serve moonshotai/Kimi-K2.6
    --tensor-parallel-size 8` from engine + instance (what it did) would launch another option set, so the recipe is
    refused, naming the field and the command it holds."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(
            REGISTRY / "discord-serve-lil-moonshotai-kimi-k2-6-b5aabbfb2022-rtx-pro-6000-blackwell-96gb-tp8-189263.json"
        )
    assert caught.value.field == "metadata.observed_command"
    assert "vllm serve ~/data/moonshotai/Kimi-K2.6" in caught.value.detail
    assert "another option set" in caught.value.detail


def test_a_note_in_metadata_observed_command_still_falls_back_to_engine_and_instance() -> None:
    """The rule above holds only for a field that records a server command: a message naming no server (`vllm
    instructions ...` is prose, not `vllm serve`) is not taken for one."""
    from farm.recipes.registry import _unread_command

    assert _unread_command({"metadata": {"observed_command": "the vllm instructions work with 4 cards"}}, "t") is None
    refusal = _unread_command({"metadata": {"observed_command": "run: vllm serve org/model --tp 2"}}, "t")
    assert refusal is not None
    assert refusal.field == "metadata.observed_command"


def test_a_recorded_llama_server_command_beats_the_llama_bench_conversion() -> None:
    """Sample F's granite-4.2-8b Q4_K_M: `llama-bench -m granite-4.2-8b-Q4_K_M.gguf ... -o json; server check:
    llama-server -c 106496 -ngl 99 -fa on -ctk q4_0 -ctv q4_0`. The server command is what served, with its
    context; it names no model, so the same recording's benchmark file is the model. Before, the llama-bench half
    was converted and the recorded context dropped."""
    recipe = load_recipe(REGISTRY / "granite-4-2-8b-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    argv = list(recipe.argv)
    assert argv[0] == "llama-server"
    assert argv[argv.index("-c") + 1] == "106496"
    assert argv[argv.index("-ctk") + 1] == "q4_0"
    assert argv[argv.index("-ctv") + 1] == "q4_0"
    assert argv[argv.index("--model") + 1] == "granite-4.2-8b-Q4_K_M.gguf"
    assert "-p" not in argv, "llama-bench's own options are not the server's"
    assert "-o" not in argv
    notes = " ".join(recipe.provenance.command_notes)
    assert "the server command is what served" in notes
    assert "the benchmark's model file 'granite-4.2-8b-Q4_K_M.gguf'" in notes


def test_a_recording_that_makes_its_own_checkpoint_is_refused_not_replaced_by_the_draft() -> None:
    """Sample F's granite-4.2-8b Q5_K_M: `llama-quantize --imatrix ... bf16.gguf out.gguf Q4_K_S; bench:
    llama-bench ...` ran on a self-made mixed quant. The registry's draft (`-hf ...GGUF:Q5_K_M`, the published
    file) is another checkpoint; the recipe is refused, naming the quantize step."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(REGISTRY / "granite-4-2-8b-q5-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    assert caught.value.field == "metadata.localmaxxing.tokenized.arguments"
    assert "makes its own checkpoint with llama-quantize" in caught.value.detail


@pytest.mark.parametrize(
    ("tokens", "maker"),
    [
        (["llama-quantize", "in.gguf", "out.gguf", "Q4_K_M"], "llama-quantize"),
        (["python3", "convert_hf_to_gguf.py", "./model", "--outtype", "f16"], "convert_hf_to_gguf.py"),
        (["./convert-hf-to-gguf.py", "./model"], "convert-hf-to-gguf.py"),
        (["llama-server", "-m", "x.gguf"], None),
        (["python", "-m", "vllm.entrypoints.openai.api_server"], None),
    ],
)
def test_checkpoint_makers_are_named(tokens: list[str], maker: str | None) -> None:
    from farm.recipes.registry import _checkpoint_maker

    assert _checkpoint_maker(tokens) == maker
