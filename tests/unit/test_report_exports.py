"""Exports as pure functions: the registry speed sweep and its schema check, LocalMaxxing submissions, CSV, HTML."""

from __future__ import annotations

import copy
import csv
import io
import json
from typing import Any

import pytest
from test_report_aggregate import fig, run

from farm.errors import InputError
from farm.report.aggregate import entries_from_runs
from farm.report.exports import (
    CSV_COLUMNS,
    Results,
    csv_cell,
    csv_text,
    entries_document,
    render,
    stream_json,
    stream_jsonl,
)
from farm.report.filters import ALL
from farm.report.html import ReportData, render_report
from farm.report.localmaxxing import SUBMISSION_FIELDS, engine_commit, submissions, tensor_parallel
from farm.report.paths import safe_file_name
from farm.report.registry import speed_sweeps
from farm.report.registry_schema import check_speed_sweep, speed_sweep_errors
from farm.store.leaderboard import leaderboard_from_runs as leaderboard
from farm.store.records import LeaderboardRow, MeasuredRun, RunMeasurements

REGISTRY_SWEEP_OF_THE_SEED_RUN: dict[str, Any] = {
    "accepted_at": None,
    "id": "deepseek-v4-flash-0731-fp8-rtx-pro-6000-blackwell-96gb-vllm-tp2-sweep",
    "measured_at": "2026-07-31T14:15:41.330Z",
    "metrics": {
        "concurrency": None,
        "inference_engine_version": "0.26.0",
        "latest_point_at": "2026-07-31T14:15:41.330Z",
        "max_context_tokens": 2048,
        "peak_generation_tps": 238.7555429425817,
        "peak_prompt_tps": 8886.529579860453,
        "point_count": 1,
    },
    "recipe_id": "deepseek-v4-flash-0731-fp8-rtx-pro-6000-blackwell-96gb-vllm-tp2",
    "rows": [
        {
            "concurrency": None,
            "context_tokens": 2048,
            "decode_tok_s": 238.7555429425817,
            "decode_tok_s_per_stream": None,
            "output_tokens": 1964,
            "peak_vram_gb": None,
            "prefill_tok_s": 8886.529579860453,
            "samples": 1,
            "status": "observed",
            "ttft_ms_p50": 82.75711799797136,
        }
    ],
    "schema_version": "local-ai-registry/v1",
    "source": {
        "commit": None,
        "kind": "leaderboard",
        "paths": ["/en/runs/cms90yxw2004jpm01uajxi4ho"],
        "repository": "https://www.localmaxxing.com",
        "url": "https://www.localmaxxing.com/en/runs/cms90yxw2004jpm01uajxi4ho",
    },
}
"""A record the registry itself publishes (0xSero/local-ai-registry,
data/registry/speed-sweep/deepseek-v4-flash-0731-fp8-rtx-pro-6000-blackwell-96gb-vllm-tp2-sweep.json)."""

SWEEP_FIGURES = (
    fig("decode/code/decode_tok_s", (270.0, 276.0, 282.0)),
    fig("decode/prose/decode_tok_s", (149.0, 149.8, 150.6)),
    fig("prefill/32768/prefill_tok_s", (11_000.0, 11_100.0, 11_200.0)),
    fig("prefill/32768/ttft_ms", (2_900.0, 2_950.0, 3_000.0), unit="ms"),
    fig("prefill/107016/prefill_tok_s", (10_400.0, 10_450.0, 10_350.0)),
    fig("short_ttft/32/ttft_ms", (62.0, 63.0, 64.0), unit="ms"),
    fig("prefix_cache/8192/ttft_ms", (101.0, 102.0), unit="ms"),
    fig("memory/gpu0/peak_memory_gib", (94.5,), unit="GiB", requested=1),
    fig("memory/gpu1/peak_memory_gib", (94.6,), unit="GiB", requested=1),
    fig("spec_decode/code/acceptance_rate", (0.48, 0.486, 0.492), unit="fraction"),
    fig("spec_decode/code/mean_acceptance_length", (2.41, 2.43, 2.45), unit="tokens"),
    fig("concurrency/8/aggregate_tok_s", (1_500.0, 1_520.0, 1_540.0)),
    fig("concurrency/8/per_stream_tok_s", (187.0, 190.0, 193.0)),
    fig("concurrency/8/ttft_ms_p50", (160.0, 165.0, 170.0), unit="ms"),
)


def results(*runs_: Any) -> Results:
    """Results of hand-made runs, unfiltered."""
    runs = runs_ or (run("j-1", SWEEP_FIGURES),)
    return Results(runs=tuple(runs), entries=tuple(entries_from_runs(runs)), filters=ALL)


def board(runs: tuple[RunMeasurements, ...]) -> list[LeaderboardRow]:
    """The leaderboard of hand-made runs, by the store's own rules."""
    return leaderboard(
        MeasuredRun(
            job_id=r.job_id,
            recipe_id=r.recipe_id,
            recipe_sha256=r.recipe_sha256,
            model_id=r.model_id,
            hardware_class=r.hardware_class,
            engine_name=r.engine_name,
            engine_version=r.engine_version,
            simulated=r.simulated,
            values={f.key: f.values for f in r.figures},
            origin=r.origin,
        )
        for r in runs
    )


def sweep() -> dict[str, Any]:
    """The registry export of the hand-made sweep."""
    (document,) = speed_sweeps(results().entries)
    return document


def test_the_registrys_own_record_passes_the_schema_check() -> None:
    """The validator accepts what the registry publishes (the speed sweep of the seed's run)."""
    assert speed_sweep_errors(REGISTRY_SWEEP_OF_THE_SEED_RUN) == []


def test_registry_export_passes_the_schema_and_carries_the_figures() -> None:
    """One document per group, valid, with decode, concurrency, prefill and TTFT rows and the metrics block."""
    document = sweep()
    check_speed_sweep(document)
    assert document["schema_version"] == "local-ai-registry/v1"
    assert document["recipe_id"] == "seed"
    assert document["accepted_at"] is None
    rows = {row["measurement"]: row for row in document["rows"]}
    code = rows["decode/code/decode_tok_s"]
    assert (code["concurrency"], code["decode_tok_s"], code["samples"], code["status"]) == (1, 276.0, 3, "measured")
    assert code["content_class"] == "code"
    assert code["spec_accept_len"] == pytest.approx(2.43)
    assert code["peak_vram_gb"] == 94.6
    level = rows["concurrency/8/aggregate_tok_s"]
    assert (level["concurrency"], level["decode_tok_s"], level["decode_tok_s_per_stream"]) == (8, 1520.0, 190.0)
    assert level["ttft_ms_p50"] == 165.0
    prefill = rows["prefill/32768/prefill_tok_s"]
    assert (prefill["context_tokens"], prefill["prefill_tok_s"], prefill["ttft_ms_p50"]) == (32768, 11_100.0, 2_950.0)
    assert rows["short_ttft/32/ttft_ms"]["ttft_ms_p50"] == 63.0
    assert rows["prefix_cache/8192/ttft_ms"]["cache"] == "warm"
    metrics = document["metrics"]
    assert metrics["peak_generation_tps"] == 1520.0
    assert metrics["concurrency"] == 8
    assert metrics["peak_prompt_tps"] == 11_100.0
    assert metrics["max_prompt_tokens"] == 107016
    assert metrics["max_context_tokens"] == 262144
    assert metrics["ttft32k_seconds"] == pytest.approx(2.95)
    assert metrics["peak_memory_bytes"] == str(round((94.5 + 94.6) * 2**30))
    assert metrics["point_count"] == len(document["rows"])


def test_simulated_and_incomplete_rows_say_so() -> None:
    """A simulated group gets its own document with `simulated` rows; a short row says incomplete/requested."""
    documents = speed_sweeps(
        results(
            run("j-real", (fig("decode/code/decode_tok_s", (270.0, 280.0)),)),
            run("j-sim", (fig("decode/code/decode_tok_s", (276.0, 276.0, 276.0)),), simulated=True),
        ).entries
    )
    by_status = {doc["rows"][0]["status"]: doc for doc in documents}
    assert set(by_status) == {"measured", "simulated"}
    assert by_status["simulated"]["id"].endswith("-sim-sweep")
    assert "SIMULATOR" in by_status["simulated"]["source"]["methodology"]
    real_row = by_status["measured"]["rows"][0]
    assert (real_row["incomplete"], real_row["requested"], real_row["samples"]) == (True, 3, 2)
    for document in documents:
        check_speed_sweep(document)


def _break(path: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(sweep())
    *parents, last = path.split(".")
    target: Any = document
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is KeyError:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("schema_version", "local-ai-registry/v2", "schema_version"),
        ("recipe_id", KeyError, "recipe_id"),
        ("measured_at", 20260830, "measured_at"),
        ("accepted_at", KeyError, "accepted_at"),
        ("rows", [], "rows"),
        ("rows.0.decode_tok_s", -1.0, "rows[0].decode_tok_s"),
        ("rows.0.decode_tok_s", "fast", "rows[0].decode_tok_s"),
        ("rows.0.samples", 0, "rows[0].samples"),
        ("rows.0.concurrency", 1.5, "rows[0].concurrency"),
        ("rows.0.concurrency", True, "rows[0].concurrency"),
        ("rows.0.status", KeyError, "rows[0].status"),
        ("rows.1.ttft_ms_p50", KeyError, "rows[1].ttft_ms_p50"),
        ("metrics.peak_memory_bytes", "94.5 GiB", "metrics.peak_memory_bytes"),
        ("metrics.tok_s_out", 276.0, "metrics.tok_s_out"),
        ("metrics.point_count", -1, "metrics.point_count"),
        ("metrics", KeyError, "metrics"),
        ("source", "bench farm", "source"),
        ("simulated", True, "simulated"),
        ("provenance", {"captured_at": "2026-08-30T09:10:02Z", "sources": []}, "provenance.sources"),
        ("provenance", {"captured_at": "x", "sources": [{"kind": "farm"}]}, "provenance.sources[0].url"),
    ],
)
def test_broken_exports_fail_naming_the_field(path: str, value: Any, named: str) -> None:
    """Each break of the schema is reported with the path of the field that breaks it."""
    document = _break(path, value)
    errors = speed_sweep_errors(document)
    assert any(error.startswith(named + ":") for error in errors), errors
    with pytest.raises(InputError, match=named.replace("[", r"\[").replace("]", r"\]")):
        check_speed_sweep(document)


def test_localmaxxing_submission_has_every_field_named_as_on_the_seed_page() -> None:
    """tokSOut (code decode), tokSPrefill (longest prompt), TTFT (short prompt), peakVramGb (per card), engine
    flags with the command, tensor parallel, speculative figures, hashes and engine commit: all present."""
    provenance = {
        "engine": {"name": "vllm", "version": "0.11.0+g45c1582", "image_digest": "sha256:" + "0a" * 32},
        "prompt_sha256": {"decode/code": "11" * 32},
        "output_sha256": {"decode/code/long": "22" * 32},
        "method": {"repeats": 3},
    }
    done = run("j-1", SWEEP_FIGURES, engine_version="0.11.0+g45c1582", provenance=provenance)
    (submission,) = submissions(results(done).entries, [done])
    assert tuple(submission) == SUBMISSION_FIELDS
    assert submission["tokSOut"] == 276.0
    assert submission["tokSOutWorkload"] == "code"
    assert submission["tokSOutByWorkload"] == {"code": 276.0, "prose": pytest.approx(149.8)}
    assert (submission["tokSPrefill"], submission["prefillPromptTokens"]) == (10_400.0, 107016)
    assert (submission["TTFT"], submission["ttftPromptTokens"]) == (63.0, 32)
    assert submission["peakVramGb"] == 94.6
    assert submission["engineFlags"] == ["--tensor-parallel-size", "2"]
    assert submission["command"] == "vllm serve m --tensor-parallel-size 2"
    assert submission["tensorParallel"] == 2
    assert submission["specAcceptanceRate"] == pytest.approx(0.486)
    assert submission["specMeanAcceptedLength"] == pytest.approx(2.43)
    assert submission["promptHashes"] == {"decode/code": "11" * 32}
    assert submission["outputHashes"] == {"decode/code/long": "22" * 32}
    assert submission["engineCommit"] == "45c1582"
    assert submission["simulated"] is False


@pytest.mark.parametrize(
    ("argv", "declared", "expected"),
    [
        (("vllm", "serve", "m", "--tensor-parallel-size", "4"), None, 4),
        (("vllm", "serve", "m", "--tensor-parallel-size=8"), 2, 8),
        (("vllm", "serve", "m", "-tp", "2"), None, 2),
        (("vllm", "serve", "m"), 2, 2),
        (("vllm", "serve", "m"), None, None),
        (("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2"), 1, 2),
        (("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "4"), None, 4),
        (("llama-server", "-m", "x.gguf", "-tp", "3"), 1, 1),  # not llama.cpp's option: the declared count
    ],
)
def test_tensor_parallel(argv: tuple[str, ...], declared: int | None, expected: int | None) -> None:
    """From the argv's flag in any of its engine's spellings (SGLang's `--tp-size` too), else the recipe's
    declared value."""
    assert tensor_parallel(argv, declared) == expected


@pytest.mark.parametrize(
    ("version", "engine", "expected"),
    [
        ("0.6.4.dev12+g1234abc", {}, "1234abc"),
        ("0.11.2.dev279+eldritch.enlightenment.v45c1582.b12xf3686b5.cu132.20260704", {}, None),
        ("0.11.0", {"commit": "deadbeef"}, "deadbeef"),
        (None, {}, None),
    ],
)
def test_engine_commit(version: str | None, engine: dict[str, str], expected: str | None) -> None:
    """A commit named in the provenance, or the `+g<hex>` of a setuptools-scm version, else none."""
    assert engine_commit(version, engine) == expected


def test_csv_has_one_line_per_entry_with_spread_and_provenance() -> None:
    """Header of CSV_COLUMNS, one line per entry, values as aggregated."""
    data = results()
    rows = list(csv.DictReader(io.StringIO(csv_text(data.entries))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(data.entries)
    code = next(r for r in rows if r["key"] == "decode/code/decode_tok_s")
    assert float(code["mean"]) == 276.0
    assert float(code["spread"]) == pytest.approx(12.0 / 276.0)
    assert code["hosts"] == "turin"
    assert code["status"] == "measured"


def test_json_export_holds_every_entry_with_definitions() -> None:
    """Every entry with n, requested, incomplete, spread, rank and provenance under a header."""
    data = results()
    document = json.loads(render("json", data))
    assert len(document["entries"]) == len(data.entries)
    assert set(document["definitions"]) >= {"spread", "incomplete", "rank"}
    entry = next(e for e in document["entries"] if e["key"] == "decode/code/decode_tok_s")
    assert (entry["n"], entry["requested"], entry["incomplete"], entry["rank"]) == (3, 3, False, 1)
    assert entry["provenance"][0]["host"] == "turin"
    assert entries_document(data)["filters"] == document["filters"]


def test_unknown_format_names_the_parameter() -> None:
    """render refuses a format it does not know, naming `format`."""
    with pytest.raises(InputError) as caught:
        render("xlsx", results())
    assert caught.value.field == "format"


def test_html_report_marks_numbers_and_simulated_rows() -> None:
    """The page carries each leaderboard number in a data attribute, and marks simulated rows."""
    data = results(
        run("j-real", SWEEP_FIGURES),
        run("j-sim", (fig("decode/code/decode_tok_s", (999.0,)),), simulated=True, engine_name="sim"),
    )
    rows = board(data.runs)
    page = render_report(
        ReportData(
            board=tuple(rows),
            entries=data.entries,
            run_count=len(data.runs),
            filters=ALL,
            groups_total=2,
            groups_shown=2,
        )
    )
    board_by = {(r.workload, r.simulated): r for r in rows}
    real_code = board_by[("code", False)]
    assert real_code.prefill_prompt_tokens == 107016
    assert real_code.peak_memory_gib == 94.6
    assert 'data-decode-mean="276.0"' in page
    assert 'data-simulated="true"' in page
    assert 'id="board-simulated"' in page
    assert "<script" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("vllm", "vllm"),
        (-2.5, -2.5),
        (None, None),
    ],
)
def test_csv_cells_are_escaped_against_formulas(value: object, written: object) -> None:
    """Text a spreadsheet would run as a formula gets a leading quote; numbers and plain text pass."""
    assert csv_cell(value) == written


def test_csv_export_escapes_a_recipe_id_that_is_a_formula() -> None:
    """A recipe id starting with `=` goes out quoted in the CSV, not as a live formula."""
    data = results(run("j-1", SWEEP_FIGURES, recipe_id="=cmd|' /C calc'!A0"))
    rows = list(csv.DictReader(io.StringIO(csv_text(data.entries))))
    assert {r["recipe_id"] for r in rows} == {"'=cmd|' /C calc'!A0"}


@pytest.mark.parametrize("recipe_id", ["a;b", "a,b", 'say "hi"; then go'])
def test_csv_cells_holding_a_separator_are_quoted(recipe_id: str) -> None:
    """A text cell holding `;` or `,` is written quoted, so a spreadsheet splitting on either separator keeps it
    one cell; numbers are written bare."""
    data = results(run("j-1", SWEEP_FIGURES, recipe_id=recipe_id))
    text = csv_text(data.entries)
    line = text.splitlines()[1]
    quoted = '"' + recipe_id.replace('"', '""') + '"'
    assert line.startswith(quoted + ",")
    assert {r["recipe_id"] for r in csv.DictReader(io.StringIO(text))} == {recipe_id}
    by_semicolon = next(csv.reader(io.StringIO(line), delimiter=";"))
    assert recipe_id in by_semicolon[0] or by_semicolon[0].startswith(quoted)
    assert ',2,"vllm"' in line, "a number (the GPU count) is not quoted, text is"


def test_streamed_json_is_the_same_document_entry_by_entry() -> None:
    """The streamed json export parses to the in-memory document; JSON lines hold one entry per line."""
    data = results()
    streamed = json.loads("".join(stream_json(data.entries, ALL)))
    whole = entries_document(data)
    assert streamed["entries"] == whole["entries"]
    assert streamed["definitions"] == whole["definitions"]
    lines = "".join(stream_jsonl(data.entries)).splitlines()
    assert [json.loads(line)["key"] for line in lines] == [e.key for e in data.entries]
    assert json.loads("".join(stream_json((), ALL)))["entries"] == []


@pytest.mark.parametrize(
    "identifier",
    ["../../etc/passwd", "..", ".", "a/b", "/abs", "con", "x\x00y", "ok-id_1.2", "", "é" * 400, "..\\win"],
)
def test_file_names_from_ids_stay_one_plain_component(identifier: str) -> None:
    """Every id maps to one path component without separators or a leading dot; changed ids carry a hash."""
    name = safe_file_name(identifier, ".json")
    stem = name.removesuffix(".json")
    assert not {"/", "\\", "\x00"} & set(name)
    assert not name.startswith(".")
    assert stem not in ("", ".", "..")
    assert len(name) < 200
    if identifier == "ok-id_1.2":
        assert name == "ok-id_1.2.json"
    else:
        assert safe_file_name(identifier + "x") != name


def test_the_shipped_schemas_are_valid_and_the_reconstructed_one_says_so() -> None:
    """Both schema files are valid JSON Schema 2020-12; the one the registry does not publish says it was rebuilt
    from types.ts, and the registry's own names the record it checks."""
    from jsonschema import Draft202012Validator

    from farm.report.registry_schema import SCHEMA_FILES, load_schema

    for name in SCHEMA_FILES:
        Draft202012Validator.check_schema(load_schema(name))
    common = load_schema("common.schema.json")
    assert "RECONSTRUCTED" in common["$comment"]
    assert "types.ts" in common["$comment"]
    assert load_schema("speed-sweep.schema.json")["title"] == "Speed sweep"
