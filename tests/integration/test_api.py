"""The read-only HTTP API over real HTTP: `farm serve` in a subprocess on a free port, on a filled store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from results_store import NEW_RECIPE, ResultsStore, build_results_store

from farm.report.registry_schema import speed_sweep_errors

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> ResultsStore:
    """The shared store (about 10 s to build)."""
    return build_results_store(tmp_path_factory.mktemp("api"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def base_url(filled: ResultsStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`farm serve` on the filled store; stopped (by its own pid) after the module."""
    port = _free_port()
    env = {**os.environ, "FARM_DATABASE_URL": filled.url, "FARM_DATA_DIR": str(tmp_path_factory.mktemp("data"))}
    log = tmp_path_factory.mktemp("log") / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "farm", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2):  # noqa: S310 - an http URL the test built
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"farm serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def request(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, method=method)  # noqa: S310 - an http URL the test built
    try:
        with urllib.request.urlopen(req, timeout=10) as response:  # noqa: S310 - an http URL the test built
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def get_json(url: str) -> Any:
    status, _headers, body = request(url)
    assert status == 200, body[:500]
    return json.loads(body)


def test_healthz(base_url: str) -> None:
    """Liveness with the store's schema revision."""
    health = get_json(base_url + "/healthz")
    assert health["status"] == "ok"
    assert health["schema_revision"]


def test_every_path_in_openapi_answers(base_url: str, filled: ResultsStore) -> None:
    """The description is OpenAPI 3.1 and each of its paths answers 200 with the content type it declares."""
    document = get_json(base_url + "/openapi.json")
    assert document["openapi"].startswith("3.1")
    fill = {"{job_id}": filled.simulated_job, "{format}": "json"}
    assert set(document["paths"]) == {
        "/healthz",
        "/openapi.json",
        "/v1/leaderboard",
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/runs/{job_id}/results",
        "/v1/runs/{job_id}/signature",
        "/v1/keys",
        "/v1/export/{format}",
    }
    for path, item in document["paths"].items():
        concrete = path
        for placeholder, value in fill.items():
            concrete = concrete.replace(placeholder, value)
        status, headers, _body = request(base_url + concrete)
        assert status == 200, path
        declared = item["get"]["responses"]["200"]["content"]
        assert headers["Content-Type"].split(";")[0] in declared, path


def test_leaderboard_matches_the_cli(base_url: str, filled: ResultsStore) -> None:
    """GET /v1/leaderboard gives the rows `farm leaderboard --json` gives, and filters them."""
    cli = subprocess.run(
        [sys.executable, "-m", "farm", "leaderboard", "--json"],
        env={**os.environ, "FARM_DATABASE_URL": filled.url},
        capture_output=True,
        text=True,
        check=True,
    )
    assert get_json(base_url + "/v1/leaderboard")["rows"] == json.loads(cli.stdout)
    real = get_json(base_url + "/v1/leaderboard?real_only=true")["rows"]
    assert real
    assert not any(row["simulated"] for row in real)
    newer = get_json(base_url + "/v1/leaderboard?engine=vllm@0.12.0")["rows"]
    assert [(row["engine_version"], row["job_ids"]) for row in newer] == [("0.12.0", [filled.newer_engine_job])]


def test_jobs_job_and_results(base_url: str, filled: ResultsStore) -> None:
    """Jobs by state, one job with its runs, and a job's figures."""
    jobs = get_json(base_url + "/v1/jobs?state=failed&state=cancelled")["jobs"]
    assert {job["id"] for job in jobs} == {filled.failed_job, filled.cancelled_job}
    job = get_json(base_url + f"/v1/jobs/{filled.simulated_job}")
    assert job["job"]["state"] == "succeeded"
    assert job["runs"][0]["provenance"]["simulated"] is True
    results = get_json(base_url + f"/v1/runs/{filled.simulated_job}/results")
    assert any(f["key"] == "decode/code/decode_tok_s" for f in results["figures"])
    assert get_json(base_url + f"/v1/runs/{filled.failed_job}/results")["figures"] == []


def test_exports(base_url: str) -> None:
    """Registry (valid speed sweeps), localmaxxing, csv and json, filtered by query parameters."""
    sweeps = get_json(base_url + "/v1/export/registry")
    assert len(sweeps) == 4
    assert all(speed_sweep_errors(document) == [] for document in sweeps)
    (submission,) = get_json(base_url + f"/v1/export/localmaxxing?model={NEW_RECIPE}&engine=0.11.0")
    assert submission["tokSOut"] == pytest.approx((268 + 276 + 284 + 275 + 279) / 5)
    status, headers, body = request(base_url + "/v1/export/csv?status=simulated")
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    lines = body.decode().splitlines()
    assert len(lines) > 1
    assert all(',"simulated",' in line for line in lines[1:])  # text cells are quoted
    entries = get_json(base_url + "/v1/export/json?status=incomplete&real_only=true")["entries"]
    assert {e["key"] for e in entries} == {"decode/code/decode_tok_s"}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_405(base_url: str, method: str) -> None:
    """The API is read-only: 405 with Allow, as JSON."""
    status, headers, body = request(base_url + "/v1/jobs", method)
    assert status == 405
    assert "GET" in headers["Allow"]
    assert json.loads(body)["status"] == 405


@pytest.mark.parametrize(
    "path", ["/v1/jobs/j-0000000000", "/v1/runs/j-0000000000/results", "/v1/export/xlsx", "/v2/nothing"]
)
def test_unknown_ids_are_404_json(base_url: str, path: str) -> None:
    """Unknown job ids, formats and paths: 404 with a JSON error."""
    status, headers, body = request(base_url + path)
    assert status == 404
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("/v1/leaderboard?since=yesterday", "since"),
        ("/v1/leaderboard?until=2026-99-01", "until"),
        ("/v1/leaderboard?status=finished", "status"),
        ("/v1/leaderboard?real_only=maybe", "real_only"),
        ("/v1/leaderboard?colour=blue", "colour"),
        ("/v1/jobs?limit=0", "limit"),
        ("/v1/jobs?state=sleeping", "state"),
        ("/v1/export/json?since=2026-09-01&until=2026-08-01", "since"),
    ],
)
def test_bad_filters_are_400_naming_the_parameter(base_url: str, query: str, parameter: str) -> None:
    """Each bad query parameter is a 400 whose JSON names it."""
    status, _headers, body = request(base_url + query)
    assert status == 400
    error = json.loads(body)
    assert error["parameter"] == parameter, error


def _validator(document: dict[str, Any], name: str) -> Any:
    """A jsonschema validator for one component of the OpenAPI document (its $refs resolved within it)."""
    import jsonschema

    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


def test_every_json_route_answers_what_its_schema_says(base_url: str, filled: ResultsStore) -> None:
    """Each route's real answer (200 and an error) validates against the schema the OpenAPI document gives it."""
    document = get_json(base_url + "/openapi.json")
    fill = {"{job_id}": filled.new_jobs[0], "{format}": "json"}
    checked = 0
    for path, item in document["paths"].items():
        schema = item["get"]["responses"]["200"]["content"].get("application/json", {}).get("schema", {})
        ref = schema.get("$ref")
        if ref is None:
            continue
        concrete = path
        for placeholder, value in fill.items():
            concrete = concrete.replace(placeholder, value)
        answer = get_json(base_url + concrete)
        errors = list(_validator(document, ref.rsplit("/", 1)[-1]).iter_errors(answer))
        assert not errors, (path, [e.message for e in errors[:3]])
        checked += 1
    assert checked == 7
    _status, _headers, body = request(base_url + "/v1/jobs/no-such-job")
    assert not list(_validator(document, "Error").iter_errors(json.loads(body)))


def test_jobs_and_leaderboard_are_paged_with_a_cursor(base_url: str) -> None:
    """Pages of one item walk every job once, newest first; the leaderboard pages the same way."""
    everything = [job["id"] for job in get_json(base_url + "/v1/jobs?limit=1000")["jobs"]]
    walked: list[str] = []
    url = base_url + "/v1/jobs?limit=2"
    while True:
        page = get_json(url)
        walked += [job["id"] for job in page["jobs"]]
        if page["next_cursor"] is None:
            break
        url = base_url + f"/v1/jobs?limit=2&cursor={page['next_cursor']}"
    assert walked == everything
    assert len(everything) >= 5
    board = get_json(base_url + "/v1/leaderboard")
    first = get_json(base_url + "/v1/leaderboard?limit=1")
    assert first["total"] == len(board["rows"])
    assert first["rows"] == board["rows"][:1]
    second = get_json(base_url + f"/v1/leaderboard?limit=1&cursor={first['next_cursor']}")
    assert second["rows"] == board["rows"][1:2]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("/v1/leaderboard?until=9999-12-31", "until"),
        ("/v1/leaderboard?since=0001-01-01", "since"),
        ("/v1/export/csv?until=9999-12-31T23:59:59", "until"),
        ("/v1/jobs?cursor=%%%", "cursor"),
        ("/v1/leaderboard?since=2026-01-01&since=2026-02-01", "since"),
    ],
)
def test_out_of_range_dates_and_bad_cursors_are_400(base_url: str, query: str, parameter: str) -> None:
    """Dates a run cannot have, a cursor the API did not give and a repeated single filter are 400s, named."""
    status, _headers, body = request(base_url + query)
    assert status == 400, body[:300]
    assert json.loads(body)["parameter"] == parameter


def test_csv_export_streams_with_its_media_type(base_url: str) -> None:
    """The CSV export answers text/csv, chunked, with a header line and one line per entry."""
    status, headers, body = request(base_url + "/v1/export/csv")
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    assert headers.get("Transfer-Encoding") == "chunked"
    lines = body.decode().splitlines()
    assert lines[0].startswith("recipe_id,")
    assert len(lines) > 10


def test_a_token_guards_every_path_but_health(filled: ResultsStore, tmp_path_factory: pytest.TempPathFactory) -> None:
    """With FARM_API_TOKEN set, requests without the bearer token get 401 (echoing nothing), with it 200."""
    token = "s3cret-token-value"
    port = _free_port()
    env = {
        **os.environ,
        "FARM_DATABASE_URL": filled.url,
        "FARM_DATA_DIR": str(tmp_path_factory.mktemp("data-token")),
        "FARM_API_TOKEN": token,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "farm", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while request_or_none(url + "/healthz") is None:
            assert process.poll() is None, "farm serve exited"
            assert time.monotonic() < deadline, "farm serve did not start"
            time.sleep(0.2)
        status, headers, body = request(url + "/v1/leaderboard")
        assert status == 401
        assert "Bearer" in headers["WWW-Authenticate"]
        assert token.encode() not in body
        assert authorized_status(url + "/v1/leaderboard", "Bearer wrong") == 401
        assert authorized_status(url + "/v1/leaderboard", f"Bearer {token}") == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


def request_or_none(url: str) -> int | None:
    """The status of a GET, or None while nothing listens."""
    try:
        return request(url)[0]
    except OSError:
        return None


def authorized_status(url: str, authorization: str) -> int:
    """The status of a GET carrying this Authorization header."""
    req = urllib.request.Request(url, headers={"Authorization": authorization})  # noqa: S310 - a URL the test built
    try:
        with urllib.request.urlopen(req, timeout=10) as response:  # noqa: S310 - an http URL the test built
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


_QUERY_NAMES = ("model", "hardware", "engine", "since", "until", "status", "job", "real_only", "limit", "cursor", "x")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/v1/leaderboard", "/v1/jobs", "/v1/export/csv", "/v1/export/json"]),
    pairs=st.lists(st.tuples(st.sampled_from(_QUERY_NAMES), st.text(max_size=24)), max_size=5),
)
def test_any_query_string_is_an_answer_or_a_400_naming_a_parameter(
    base_url: str, path: str, pairs: list[tuple[str, str]]
) -> None:
    """Hypothesis writes query strings (any text, repeated and unknown parameters): the API answers 200 or a
    400 whose JSON names the parameter, never a 500 and never a dropped connection."""
    status, _, body = request(base_url + path + "?" + urllib.parse.urlencode(pairs))
    assert status in (200, 400), (status, body[:300])
    if status == 400:
        error = json.loads(body)
        assert error["parameter"], error
