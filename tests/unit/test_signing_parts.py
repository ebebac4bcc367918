"""The signing parts without a store: the canonical form (a fixed test vector other programs can check against),
normalization, host keys on disk (0600, one key for two starts, refused when others can read it), public key
forms, a run's check against tampered content, and the registry's validated rules."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from farm.domain import Figure, RunResult, summarize
from farm.errors import SigningError
from farm.signing import canonical
from farm.signing.keys import KEY_DIR, PRIVATE_KEY_FILE, HostKey, PublicKey, fingerprint, is_fingerprint
from farm.signing.runs import Verdict, check, content_of, sign_result
from farm.signing.validated import outcomes


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": 1, "a": [1.5, 600.0, -0.0]}, '{"a":[1.5,600.0,-0.0],"b":1}'),
        ({"é": "\u2603"}, '{"\\u00e9":"\\u2603"}'),
        ([1e-07, 1e16, True, None], "[1e-07,1e+16,true,null]"),
    ],
)
def test_canonical_json_is_sorted_compact_ascii(value: object, text: str) -> None:
    """Keys sorted, no whitespace, ASCII escapes, floats in Python's repr form."""
    assert canonical.canonical_json(value) == text.encode()


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        (-0.0, 0.0),
        (1e16, 10**16),
        (2.5e20, 250000000000000000000),
        (600.0, 600.0),
        ("a\x00b", "a\ufffdb"),
        ((1, (2.0,)), [1, [2.0]]),
    ],
)
def test_normalized_keeps_what_every_store_gives_back(value: object, normal: object) -> None:
    """-0.0 and huge integral floats (which PostgreSQL's JSONB does not keep), NUL (which it refuses), tuples."""
    got = canonical.normalized(value)
    assert got == normal
    assert type(got) is type(normal)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "a"}, object()])
def test_values_with_no_canonical_form_are_refused(bad: object) -> None:
    with pytest.raises(canonical.CanonicalError):
        canonical.canonical_json(canonical.normalized(bad))


def test_the_statement_digest_test_vector() -> None:
    """The digest of a fixed statement, without and with an artifacts part (docs/signing.md gives the same)."""
    statement = canonical.statement(
        job_id="j-0123456789",
        attempt=1,
        worker_id="host-w1",
        figures="0" * 64,
        samples="1" * 64,
        provenance="2" * 64,
        failed_requests=0,
        total_requests=12,
    )
    text = canonical.canonical_json(statement)
    assert text == (
        b'{"attempt":1,"failed_requests":0,"figures_sha256":"' + b"0" * 64 + b'","job_id":"j-0123456789",'
        b'"provenance_sha256":"' + b"2" * 64 + b'","samples_sha256":"' + b"1" * 64 + b'","scheme":"farm-run/v1",'
        b'"total_requests":12,"worker_id":"host-w1"}'
    )
    assert canonical.digest(statement) == hashlib.sha256(text).digest()
    with_artifacts = canonical.statement(
        job_id="j-0123456789",
        attempt=1,
        worker_id="host-w1",
        figures="0" * 64,
        samples="1" * 64,
        provenance="2" * 64,
        failed_requests=0,
        total_requests=12,
        artifacts="3" * 64,
    )
    assert canonical.canonical_json(with_artifacts) == b'{"artifacts_sha256":"' + b"3" * 64 + b'",' + text[1:]


@pytest.mark.parametrize(
    ("artifacts", "expected"),
    [
        ((), hashlib.sha256(b"[]").hexdigest()),
        (
            (("engine.log", "text/plain", "a" * 64),),
            hashlib.sha256(
                b'[{"content_sha256":"' + b"a" * 64 + b'","media_type":"text/plain","name":"engine.log"}]'
            ).hexdigest(),
        ),
    ],
    ids=["none", "engine-log"],
)
def test_the_artifacts_part_is_the_sha256_of_their_canonical_list(
    artifacts: tuple[tuple[str, str, str], ...], expected: str
) -> None:
    """`[]` for a run without artifacts; each artifact by name, media type and the sha256 of its text."""
    assert canonical.artifacts_sha256(artifacts) == expected


def test_the_artifacts_part_does_not_depend_on_their_order() -> None:
    """Artifacts are ordered by name (then media type and hash) before hashing: a store that gives them back in
    another order checks the same."""
    log = ("engine.log", "text/plain", "a" * 64)
    note = ("note.txt", "text/plain", "b" * 64)
    assert canonical.artifacts_sha256([note, log]) == canonical.artifacts_sha256([log, note])
    assert canonical.artifacts_sha256([log]) != canonical.artifacts_sha256([log, note])


def test_a_host_key_is_made_once_0600_and_read_back(tmp_path: Path) -> None:
    """The first start makes the key (0600, its directory 0700); a second start reads the same key."""
    first = HostKey.load_or_create(tmp_path)
    path = tmp_path / KEY_DIR / PRIVATE_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert HostKey.load_or_create(tmp_path).key_id == first.key_id
    assert (tmp_path / KEY_DIR / "host_ed25519.pub").read_text().startswith("ed25519 ")
    assert is_fingerprint(first.key_id)
    assert first.key_id == fingerprint(first.public.raw)
    assert "PRIVATE" not in repr(first)


def test_a_host_key_others_can_read_is_refused(tmp_path: Path) -> None:
    HostKey.load_or_create(tmp_path)
    path = tmp_path / KEY_DIR / PRIVATE_KEY_FILE
    os.chmod(path, 0o644)
    with pytest.raises(SigningError, match="readable by others"):
        HostKey.load(path)


def test_public_keys_read_in_every_form() -> None:
    key = HostKey.generate()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    pem = (
        Ed25519PublicKey.from_public_bytes(key.public.raw)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    for text in (key.public.text, key.public.line("a comment"), pem):
        assert PublicKey.from_text(text) == key.public
    for bad in ("ed25519 AAAA", "not a key at all", "-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----"):
        with pytest.raises(SigningError):
            PublicKey.from_text(bad)


def _result() -> RunResult:
    values = (270.0, 276.0)
    figure = Figure("decode", "decode/code/decode_tok_s", "decode_tok_s", "tok/s", values, summarize(values))
    return RunResult(
        figures=(figure,),
        samples={figure.key: [[{"started_ns": 0}]]},
        provenance={"argv": ["vllm", "serve", "m"], "power": -0.0},
    )


def test_a_signed_result_checks_and_any_change_does_not() -> None:
    """The signer normalizes (so -0.0 is stored as 0.0) and signs; a changed value, sample, argv, identity or
    another key's signature is caught; a key not given is unknown, not changed."""
    key = HostKey.generate()
    signed = sign_result("j-1", 1, "w", _result(), key)
    assert signed.provenance["power"] == 0.0
    assert signed.signature is not None
    content = content_of("j-1", 1, "w", signed)
    assert check(content, signed.signature, key.public, trusted=True).verdict is Verdict.VERIFIED
    assert check(content, signed.signature, key.public, trusted=False).verdict is Verdict.UNTRUSTED
    assert check(content, signed.signature, None, trusted=False).verdict is Verdict.UNKNOWN_KEY
    other = HostKey.generate()
    forged = replace(signed.signature, key_id=other.key_id)
    assert check(content, forged, other.public, trusted=True).verdict is Verdict.CHANGED
    changed = [
        replace(content, figures=({**content.figures[0], "values": [270.0, 277.0]},)),
        replace(content, sample_digests={"decode/code/decode_tok_s": ["0" * 64]}),
        replace(content, provenance={**content.provenance, "argv": ["vllm", "serve", "other"]}),
        replace(content, attempt=2),
    ]
    for tampered in changed:
        result = check(tampered, signed.signature, key.public, trusted=True)
        assert result.verdict is Verdict.CHANGED, tampered
        assert result.problems


def test_the_validated_rules_each_read_their_fields() -> None:
    """Each of the registry's rules fails on its own when its field is missing or wrong."""
    good_recipe = {"container": {"image": "vllm/vllm-openai@sha256:" + "a" * 64}}
    good = {"model_revision": "0" * 40, "argv": ["vllm", "serve", "m"]}
    assert all(outcomes(good_recipe, good, True).values())
    assert not outcomes({"container": {"image": "vllm/vllm-openai:latest"}}, good, True)["digest-pinned image"]
    assert not outcomes(good_recipe, {**good, "model_revision": "main"}, True)["full model revision"]
    assert not outcomes(good_recipe, good, False)["acceptance run"]
    eager = {**good, "argv": ["vllm", "serve", "m", "--enforce-eager"]}
    assert not outcomes(good_recipe, eager, True)["no eager mode"]


def test_the_signer_normalizes_figure_values_and_keeps_figures_that_need_none() -> None:
    """A figure's -0.0 becomes 0.0 and an integral 1e16 its integer (what PostgreSQL gives back); a figure whose
    values are already normal is kept as it is (the same object: no new Figure to re-check)."""
    odd = (-0.0, 1e16, 2.5)
    plain = Figure(
        "decode", "decode/a/decode_tok_s", "decode_tok_s", "tok/s", (270.0, 276.0), summarize((270.0, 276.0))
    )
    strange = Figure("decode", "decode/b/decode_tok_s", "decode_tok_s", "tok/s", odd, summarize(odd))
    signed = sign_result("j-1", 1, "w", replace(_result(), figures=(plain, strange)), HostKey.generate())
    kept, normal = signed.figures
    assert kept is plain
    assert [repr(v) for v in normal.values] == ["0.0", "10000000000000000", "2.5"]


V2_DOCUMENT = {
    "key": "decode/code/decode_tok_s",
    "kind": "decode",
    "metric": "decode_tok_s",
    "unit": "tok/s",
    "workload": None,
    "values": [270.0, 1e-07],
    "params_sha256": "0" * 64,
    "requested_repeats": 2,
    "summary": {
        "n": 2,
        "mean": 135.00000005,
        "median": 135.00000005,
        "min": 1e-07,
        "max": 270.0,
        "stdev": 1.5,
        "spread": 2.0,
    },
}


def test_the_v2_figure_line_and_figures_part_test_vector() -> None:
    """A v2 figure line is the fields joined by U+001F and ended by U+001E (no workload: empty), its values the
    canonical JSON text the store keeps; the figures part is sha256(sha256(lines) + sha256(summaries)), the
    summaries each figure's six floats as little-endian binary64 (docs/signing.md)."""
    line = canonical.figure_line(V2_DOCUMENT)
    assert line == (
        "decode/code/decode_tok_s\x1fdecode\x1fdecode_tok_s\x1ftok/s\x1f\x1f[270.0,1e-07]\x1f"
        + "0" * 64
        + "\x1f2\x1f2\x1e"
    )
    import struct

    summaries = struct.pack("<6d", 135.00000005, 135.00000005, 1e-07, 270.0, 1.5, 2.0)
    expected = hashlib.sha256(
        hashlib.sha256(line.encode("utf-8")).digest() + hashlib.sha256(summaries).digest()
    ).hexdigest()
    assert canonical.figures_v2_sha256([V2_DOCUMENT]) == expected
    assert canonical.signed_prefix(canonical.SCHEME_V2) == b"farm-run/v2\n"


@pytest.mark.parametrize(
    "change",
    [
        {"key": "a\x1fb"},
        {"unit": "tok\x1es"},
        {"workload": ""},
        {"summary": {**V2_DOCUMENT["summary"], "stdev": float("nan")}},  # type: ignore[dict-item]
        {"summary": {**V2_DOCUMENT["summary"], "mean": -0.0}},  # type: ignore[dict-item]
    ],
    ids=["field-separator", "line-separator", "empty-workload", "nan-summary", "negative-zero"],
)
def test_figures_with_no_v2_form_are_signed_v1(change: dict[str, object]) -> None:
    """A figure whose text holds a separator, whose workload is '' (read back as none) or whose summary has a
    number a store would not give back has no v2 form: the run is signed farm-run/v1, and still checks."""
    assert canonical.v2_eligible([V2_DOCUMENT])
    assert not canonical.v2_eligible([{**V2_DOCUMENT, **change}])


def test_a_result_is_signed_v2_and_its_summary_is_covered() -> None:
    """sign_result signs farm-run/v2 by default, over the summaries too: a changed stored summary (one the
    values still allow, a median) is a change; a v1 signature of the same result still checks."""
    key = HostKey.generate()
    signed = sign_result("j-1", 1, "w", _result(), key)
    assert signed.signature is not None
    assert signed.signature.scheme == canonical.SCHEME_V2
    content = content_of("j-1", 1, "w", signed)
    assert check(content, signed.signature, key.public, trusted=True).verdict is Verdict.VERIFIED
    figure = content.figures[0]
    median = replace(content, figures=({**figure, "summary": {**figure["summary"], "median": 1.0}},))
    assert check(median, signed.signature, key.public, trusted=True).verdict is Verdict.CHANGED
    old = sign_result("j-1", 1, "w", _result(), key, scheme=canonical.SCHEME_V1)
    assert old.signature is not None
    assert old.signature.scheme == canonical.SCHEME_V1
    assert check(content_of("j-1", 1, "w", old), old.signature, key.public, trusted=True).verdict is Verdict.VERIFIED
