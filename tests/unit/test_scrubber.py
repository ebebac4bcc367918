"""The one secret scrubber (farm.provenance): every shape of secret it knows, and what it must leave alone."""

from __future__ import annotations

import io
import json

import pytest

from farm.logs import configure, get_logger
from farm.provenance import REDACTED, mask_url, scrub_environment, scrub_json, scrub_text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("token hf_abcdefghijklmnopqrstuv in the log", "hf_abcdefghijklmnopqrstuv"),
        ("OPENAI key sk-proj-abcdefghijklmnop", "sk-proj-abcdefghijklmnop"),
        ("push with ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("connecting to postgresql://farm:s3cr3t-pw@db:5432/farm", "s3cr3t-pw"),
        ("fetch https://user:pa55word@example.com/x", "pa55word"),
        ("redis://:redispw@localhost:6379/0", "redispw"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "eyJhbGciOiJIUzI1NiJ9.e30.abc"),
        ("HF_TOKEN=plainvalue123 python -m vllm", "plainvalue123"),
        ("export MY_SERVICE_API_KEY='quoted value'", "quoted value"),
        ('{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI"}', "wJalrXUtnFEMI"),
        ("PGPASSWORD=hunter2 psql", "hunter2"),
        ("DB_PASSWORD: hunter3", "hunter3"),
        ("--hf-token tok123 --port 8000", "tok123"),
        ("--api-key=abc987", "abc987"),
    ],
)
def test_every_shape_of_secret_is_removed(text: str, secret: str) -> None:
    """The secret is gone and the marker is in its place; the text around it stays."""
    scrubbed = scrub_text(text)
    assert secret not in scrubbed
    assert REDACTED in scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=64 prompt_tokens: 16 --max-tokens 5",
        "monkey=banana keyboard=us",
        "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash-0731",
        "INFO 11-30 Avg prompt throughput: 0.0 tokens/s",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Token counts, plain URLs and words that merely contain "key" are not secrets."""
    assert scrub_text(text) == text


def test_urls_print_masked_and_json_is_scrubbed_deeply() -> None:
    """mask_url hides the password only; scrub_json redacts secret-named keys, secret-shaped strings, and the
    value after a secret-named flag in an argument list."""
    assert mask_url("postgresql+psycopg://farm:pw@db:5432/farm") == "postgresql+psycopg://farm:***@db:5432/farm"
    assert mask_url("sqlite:////tmp/farm.db") == "sqlite:////tmp/farm.db"
    document = {"env": {"HF_TOKEN": "x", "N": "1"}, "argv": ["vllm", "--api-key", "abc123"], "n": 3}
    assert scrub_json(document) == {
        "env": {"HF_TOKEN": REDACTED, "N": "1"},
        "argv": ["vllm", "--api-key", REDACTED],
        "n": 3,
    }
    assert scrub_environment({"URL": "https://u:p@h/", "HF_HOME": "/cache"}) == {
        "URL": f"https://u:{REDACTED}@h/",
        "HF_HOME": "/cache",
    }


def test_log_lines_are_scrubbed() -> None:
    """A secret in any field of a log line never reaches the log."""
    out = io.StringIO()
    configure("json", "info", file=out)
    try:
        get_logger("test").warning("store.unavailable", error="postgresql://farm:topsecret@db/farm refused")
    finally:
        configure()
    record = json.loads(out.getvalue().splitlines()[-1])
    assert "topsecret" not in record["error"]
    assert REDACTED in record["error"]
