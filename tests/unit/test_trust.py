"""Trust is (repository, revision): the trust list's format, and what pins each repository an engine loads."""

from __future__ import annotations

import json

import pytest

from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.trust import parse_entry, parse_trust_list
from farm.errors import ArgumentPolicyError

C = "0123456789abcdef0123456789abcdef01234567"
D = "fedcba9876543210fedcba9876543210fedcba98"
HOST = EnginePolicy(allow_trust_remote_code_models=parse_trust_list([f"org/m@{C}", f"org/draft@{D}", "org/t@v1.2"]))
VLLM = ["vllm", "serve", "org/m", "--trust-remote-code"]
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "org/m", "--trust-remote-code"]


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("org/m", "name the revision"),
        ("org/m@refs/pr/3", "pull-request"),
        ("org/m@main~1", "expected a full 40-hex commit"),
        ("/models/m@" + C, "repository id"),
    ],
)
def test_a_bad_trust_list_entry_is_refused_with_the_reason(entry: str, why: str) -> None:
    """A bare repository (it would trust any commit, a pull request's included), a pull-request ref, a revision
    that is no commit or name, a path: each refused naming what is wrong."""
    with pytest.raises(ValueError, match=why):
        parse_entry(entry)


@pytest.mark.parametrize(
    "argv",
    [
        [*VLLM, "--revision", C],
        [*VLLM, "--revision", C, "--code-revision", C],
        ["vllm", "serve", "org/t", "--trust-remote-code", "--revision", "v1.2"],
        [*VLLM, "--revision", C, "--speculative-config", json.dumps({"model": "org/draft", "revision": D})],
        [*SGLANG, "--revision", C],
        [
            *SGLANG,
            "--revision",
            C,
            "--speculative-draft-model-path",
            "org/draft",
            *("--speculative-draft-model-revision", D),
        ],
    ],
)
def test_repositories_pinned_to_listed_revisions_pass(argv: list[str]) -> None:
    """Every repository loaded pinned to a revision the list names for it: remote code runs."""
    canonical_command(argv, argv[0] if argv[0] == "vllm" else "sglang", HOST)


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (VLLM, "pin the repository with --revision"),
        ([*VLLM, "--revision", "main"], r"org/m@main \(--revision\)"),
        ([*VLLM, "--revision", D], "trusts only"),
        ([*VLLM, "--revision", C, "--code-revision", "main"], r"--code-revision"),
        ([*VLLM, "--revision", C, "--tokenizer", "org/m"], "pin the repository with --tokenizer-revision"),
        ([*VLLM, "--revision", C, "--tokenizer", "org/m", "--tokenizer-revision", "main"], "trusts only"),
        ([*VLLM, "--revision", C, "--speculative-config", '{"model":"org/draft"}'], "pin the repository with revision"),
        (
            [*VLLM, "--revision", C, "--speculative-config", json.dumps({"model": "org/draft", "revision": C})],
            "org/draft@",
        ),
        ([*SGLANG, "--revision", C, "--speculative-draft-model-path", "org/draft"], "draft-model-revision"),
        ([*VLLM, "--revision", C, "--hf-config-path", "evil/cfg"], "evil/cfg@"),
    ],
)
def test_unpinned_or_unlisted_revisions_are_refused_under_remote_code(argv: list[str], why: str) -> None:
    """With remote code trusted, a repository with no revision, a branch, a commit the list does not name, or a
    second revision option that differs is refused, naming the repository and the option."""
    with pytest.raises(ArgumentPolicyError, match=why):
        canonical_command(argv, argv[0] if argv[0] == "vllm" else "sglang", HOST)


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", "org/m", "--revision", "refs/pr/7"],
        ["vllm", "serve", "org/m", "--tokenizer-revision", "refs/pr/7"],
        ["vllm", "serve", "org/m", "--speculative-config", '{"model":"org/d","revision":"refs/pr/1"}'],
        ["python", "-m", "sglang.launch_server", "--model-path", "org/m", "--revision", "refs/pr/2"],
    ],
)
def test_pull_request_refs_are_refused_even_without_remote_code(argv: list[str]) -> None:
    """A pull-request ref holds whatever its opener pushed last: refused in every revision, trusted or not."""
    with pytest.raises(ArgumentPolicyError, match="pull-request"):
        canonical_command(argv, argv[0] if argv[0] == "vllm" else "sglang")


def test_without_remote_code_a_branch_still_loads_weights() -> None:
    """Without remote code no code is run from the repository: a branch revision is the recipe's business."""
    canonical_command(["vllm", "serve", "org/m", "--revision", "main"], "vllm")
