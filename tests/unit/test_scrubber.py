"""The one secret scrubber (farm.provenance): every shape of secret it knows, and what it must leave alone."""

from __future__ import annotations

import io
import json

import pytest

from farm.logs import configure, get_logger
from farm.scrubber import REDACTED, mask_url, scrub_environment, scrub_json, scrub_text


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


PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw\n"
    "7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyeh\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a password holding "@" in a URL
        ("postgresql://farm:p@ss@w0rd@db:5432/farm", "p@ss@w0rd"),
        ("fetching https://bob:s3c@ret@hub.example/x.bin", "s3c@ret"),
        # PEM private keys: the whole block, a cut one to the end, one inside JSON
        (f"key file:\n{PEM}\ndone", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
        ('{"key": "-----BEGIN PRIVATE KEY-----\\nMIIBVgIBADANBg\\n-----END PRIVATE KEY-----"}', "MIIBVgIBADANBg"),
        # cookies
        ("Cookie: session=abc123def456; theme=dark", "abc123def456"),
        ("< Set-Cookie: __Host-sid=Zm9vYmFyYmF6; Path=/; Secure", "Zm9vYmFyYmF6"),
        # signed-URL parameters
        (
            "GET https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20261201"
            "&X-Amz-Signature=9f8e7d6c5b4a39281706f5e4d3c2b1a0",
            "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        ),
        ("https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=Qk1WZ3Jd%2BxYz%3D", "Qk1WZ3Jd%2BxYz%3D"),
        ("download https://cdn.example/m.gguf?token=tok_8d7f6e5a4b3c", "tok_8d7f6e5a4b3c"),
        ("https://storage.googleapis.com/b/o?X-Goog-Signature=a1b2c3d4e5f60718", "a1b2c3d4e5f60718"),
        # vendors' token shapes (the farm's own and detect-secrets')
        ("HF hub token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
        ("anthropic sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv"),
        ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"),
        ("temporary ASIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP"),
        ("stripe rk_live_abcdefghijklmnopqrstuvwx in config", "rk_live_abcdefghijklmnopqrstuvwx"),
        (
            "sendgrid SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
            "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        ),
        ("npm //registry.npmjs.org/:_authToken=npm_abcdefghij0123456789", "npm_abcdefghij0123456789"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJzdWIiOiIxIn0"),
        # YAML key: value pairs
        ("auth:\n  password: correct horse battery staple\n  user: me", "correct horse battery staple"),
        ("- api-key: 'quoted-yaml-key'", "quoted-yaml-key"),
        ("clientSecret: abcXYZ987", "abcXYZ987"),
        # JSON key names
        ('{"api_key": "k-123-abc"}', "k-123-abc"),
        ('{"password": "pw-in-json", "user": "u"}', "pw-in-json"),
        ('{"hfToken":"camel-case-token"}', "camel-case-token"),
        ('{"access_token": 12345678}', "12345678"),
    ],
)
def test_every_class_of_the_audit_is_removed(text: str, secret: str) -> None:
    """Each class the audit found missing: the secret is gone, the marker is in its place."""
    scrubbed = scrub_text(text)
    assert secret not in scrubbed
    assert REDACTED in scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "INFO 12-01 20:00:00 [engine.py:123] max_num_seqs=256, max_model_len=32768, tokenizer=org/m",
        "Maximum concurrency for 32768 tokens per request: 4.00x",
        "sha256:0a51ea5b4ae2dc5d81890e5173f54203d2a3ae0cfffe51b8fd2afd4391bfd967",
        "user: alice\nmodel: org/m\nmax_tokens: 64",
        "https://huggingface.co/org/m/resolve/main/config.json?download=true",
        "prefix_cache_hit_rate=0.93 num_tokens=4096 token_budget=8192",
        "10.0.0.5:8000 up; GPU KV cache size: 1,234,567 tokens",
    ],
)
def test_engine_log_lines_are_left_alone(text: str) -> None:
    """What engine logs and results are made of (counts, digests, plain URLs, token counts, addresses) stays."""
    assert scrub_text(text) == text


def test_json_keys_are_judged_by_their_words() -> None:
    """scrub_json redacts secret-named keys (api_key, hfToken, clientSecret) and keeps max_tokens and tokenizer."""
    document = {"api_key": "a", "hfToken": "b", "clientSecret": "c", "max_tokens": 64, "tokenizer": "org/m"}
    assert scrub_json(document) == {
        "api_key": REDACTED,
        "hfToken": REDACTED,
        "clientSecret": REDACTED,
        "max_tokens": 64,
        "tokenizer": "org/m",
    }
