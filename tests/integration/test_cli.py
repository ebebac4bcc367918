"""The `farm` command as a user types it (Typer's runner, in-process, on a real SQLite store)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from farm.cli.app import app
from farm.settings import Settings
from farm.store import Store

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [
    ROOT / "tests" / "fixtures" / "001_5d0dc33ac7ff8823.txt",
    ROOT / "tests" / "fixtures" / "000_fb943dab8cb08842.txt",
]
BAD = ROOT / "tests" / "fixtures" / "bad"

runner = CliRunner()


def farm(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_recipe_show_json_gives_the_same_recipe_for_both_seeds() -> None:
    """`farm recipe show --json` on the registry JSON and on the LocalMaxxing page: same model, hardware,
    engine and argv."""
    shown = []
    for seed in SEEDS:
        code, out, err = farm("recipe", "show", str(seed), "--json")
        assert code == 0, err
        shown.append(json.loads(out))
    registry, page = shown
    for field in ("id", "model_id", "hardware_id", "hardware_count", "argv"):
        assert registry[field] == page[field], field
    assert registry["engine"]["name"] == page["engine"]["name"] == "vllm"
    assert registry["hardware_id"] == "rtx-pro-6000-blackwell-96gb"
    assert registry["hardware_count"] == 2
    assert registry["argv"][:3] == ["vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash-0731"]


def test_recipe_check_reports_every_bad_file_and_exits_non_zero() -> None:
    """`farm recipe check` goes through all files, names each bad one, and exits 2."""
    bad = sorted(BAD.iterdir())[:3]
    code, out, err = farm("recipe", "check", str(SEEDS[0]), *map(str, bad))
    assert code == 2
    assert "ok" in out
    assert SEEDS[0].name in out
    for path in bad:
        assert path.name in err


def test_submit_status_cancel_results_round_trip(tmp_path: Path) -> None:
    """submit prints ids; status lists them queued; cancel cancels; results of an unknown job is an error."""
    code, out, err = farm("submit", str(ROOT / "jobs" / "demo.toml"), "--simulate", "--count", "2", "--json")
    assert code == 0, err
    job_ids = json.loads(out)["jobs"]
    assert len(job_ids) == 2
    assert json.loads(out)["judged_against"] == "vllm 0.33.0"  # the spec of the vLLM the farm's GPU workers run

    code, out, _ = farm("status", "--json")
    listed = json.loads(out)
    assert {j["id"] for j in listed["jobs"]} == set(job_ids)
    assert all(j["state"] == "queued" for j in listed["jobs"])
    assert listed["queue_depth"] == {"sim:rtx-pro-6000-blackwell-96gb x 2": 2}

    code, out, _ = farm("cancel", job_ids[0])
    assert code == 0
    assert "cancelled" in out
    code, _, err = farm("cancel", job_ids[0])
    assert code == 1
    assert job_ids[0] in err

    code, _, err = farm("results", "j-doesnotexist")
    assert code == 1
    assert "j-doesnotexist" in err


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("repeats = 3", "repeats = 0"), "plan.repeats"),
        (
            lambda t: t.replace("long_output_tokens = 512", "long_output_tokens = 8"),
            "plan.decode.long_output_tokens",
        ),
        (lambda t: t.replace("[plan]", "[plan]\nbogus = 1"), "plan.bogus"),
        (lambda t: t.replace("registry.json", "missing.json"), "recipe"),
    ],
)
def test_a_bad_spec_queues_nothing(tmp_path: Path, edit: object, field: str) -> None:
    """A bad sweep spec gets an error naming the file and the field, exit 2, and no job is stored."""
    spec = tmp_path / "bad.toml"
    text = (
        (ROOT / "jobs" / "demo.toml")
        .read_text()
        .replace(
            "../examples/deepseek-v4-flash-0731-registry.json",
            str(ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"),
        )
    )
    spec.write_text(edit(text))  # type: ignore[operator]
    code, _out, err = farm("submit", str(spec))
    assert code == 2
    assert "bad.toml" in err
    assert field in err
    store = Store.open(Settings().resolved_database_url, auto_upgrade=True)
    assert store.list_jobs() == []


def test_worker_profile_errors_name_the_field(tmp_path: Path) -> None:
    """A worker profile with an unknown hardware id is refused before anything starts."""
    profile = tmp_path / "w.toml"
    profile.write_text('name = "x"\n[hardware]\nhardware_id = "tpu-v9"\ncount = 1\n')
    code, _, err = farm("worker", "--profile", str(profile))
    assert code == 2
    assert "w.toml" in err
    assert "hardware.hardware_id" in err
    assert "tpu-v9" in err


@pytest.mark.parametrize(
    "injected",
    ["--max-model-len=1024;reboot", "$(touch /tmp/pwned)", "`id`", "--dtype\nfloat32", "x --trust-remote-code"],
)
def test_submit_refuses_injected_arguments_and_stores_nothing(tmp_path: Path, injected: str) -> None:
    """A recipe argv carrying shell syntax, a newline or a smuggled flag is refused at submit, naming the token."""
    recipe = {
        "schema_version": "local-ai-registry/v1",
        "id": "injected",
        "model_id": "farm/tiny-llama",
        "hardware_id": "cpu",
        "hardware_count": 1,
        "engine": {"name": "vllm"},
        "argv": ["vllm", "serve", "farm/tiny-llama", "--served-model-name", injected],
    }
    (tmp_path / "recipe.json").write_text(json.dumps(recipe))
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "inj"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, _, err = farm("submit", str(spec))
    assert code == 2, err
    assert repr(injected)[1:-1][:12] in err or injected[:12] in err
    store = Store.open(Settings().resolved_database_url, auto_upgrade=True)
    assert store.list_jobs() == []


@pytest.mark.slow
@pytest.mark.postgres
def test_demo_prints_the_database_url_masked(tmp_path: Path) -> None:
    """`farm demo` on PostgreSQL whose URL carries a password (trust auth ignores it), run as a user runs it:
    the demo succeeds and its output shows the URL with the password masked, never the password."""
    from farm_harness import POSTGRES_URL, admin, postgres_unreachable
    from sqlalchemy.engine import make_url

    if reason := postgres_unreachable():
        pytest.skip(reason)
    schema = f"farm_demo_{secrets.token_hex(6)}"
    admin(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(POSTGRES_URL).set(password="s3cret-demo-pw")
        url = url.update_query_dict({"options": f"-csearch_path={schema}"})
        env = {
            **os.environ,
            "FARM_DATABASE_URL": url.render_as_string(hide_password=False),
            "FARM_DATA_DIR": str(tmp_path / "data"),
        }
        spec = tmp_path / "tiny.toml"
        recipe = ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"
        spec.write_text(
            f'name = "masked-demo"\nrecipe = "{recipe}"\n'
            "[plan]\nrepeats = 1\nwarmup_requests = 1\n[plan.short_ttft]\nprompt_tokens = 64\n"
        )
        output = ""
        for args in (["db", "upgrade"], ["demo", "--spec", str(spec)]):
            done = subprocess.run(
                [sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True, timeout=240, check=False
            )
            output += done.stdout + done.stderr
            assert done.returncode == 0, output[-3000:]
        assert "s3cret-demo-pw" not in output
        assert ":***@" in output
    finally:
        admin(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("FARM_LEASE_S", "abc", "FARM_LEASE_S='abc': not a number (setting lease_s)"),
        ("FARM_LOG_LEVEL", "loud", "FARM_LOG_LEVEL='loud': expected one of debug, info"),
    ],
)
def test_a_bad_farm_variable_is_a_clean_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, expected: str
) -> None:
    """A FARM_* variable that cannot be used stops the command with exit status 2 and one line naming it."""
    monkeypatch.setenv("FARM_DATABASE_URL", f"sqlite:///{tmp_path / 'farm.db'}")
    monkeypatch.setenv(variable, raw)
    code, out, err = farm("status", "--json")
    assert code == 2
    assert out == ""
    assert expected in err
    assert "Traceback" not in err


HEAVY_FOR_READERS = (
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "structlog",
    "pydantic",
    "pydantic_settings",
    "celery",
    "aiohttp",
    "farm.sim",
    "farm.bench",
    "rich",
)
"""Modules a reading command must not import: each cost a CLI command's start a twentieth to a fifth of a second
(the ORM, structlog, pydantic and pydantic-settings (typer 0.20+ imports pydantic for every command, hence typer<0.20),
rich for JSON output, PostgreSQL's dialect on a SQLite store) or belongs to another command."""


@pytest.mark.parametrize("command", [["status", "--json"], ["leaderboard", "--json"]])
def test_reading_commands_import_nothing_heavy(tmp_path: Path, command: list[str]) -> None:
    """`farm status` and `farm leaderboard` run, in a fresh interpreter, without importing the modules above."""
    script = (
        "import sys\n"
        "from farm.cli.app import main\n"
        f"sys.argv = ['farm', *{command!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    Store.open(url, auto_upgrade=True).close()
    env = {**os.environ, "FARM_DATABASE_URL": url}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stderr.split())
    assert "farm.store.store" in loaded  # the command did read the store
    heavy = sorted(name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY_FOR_READERS))
    assert heavy == []
