"""deploy/refresh-instances.py: a registry checkout, or a folder of instance documents copied from it one at a
time, becomes the farm's instance snapshot; with --merge the copied documents update the shipped snapshot and
every instance they do not hold is kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "refresh-instances.py"
COMMIT = "a908edb82734a1745dd67abe889be68936dda53c"


def _document(key: str, repository: str, precision: str, revision: str | None = None) -> dict[str, Any]:
    """An instance document as the registry stores it (the fields the farm does not keep included)."""
    return {
        "id": key,
        "kind": "quant",
        "model_id": "m",
        "repository": repository,
        "revision": revision,
        "served_name": repository.split("/")[-1],
        "schema_version": "local-ai-registry/v1",
        "weights": {"format": precision, "precision": precision, "size_gb": 1.5},
    }


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False)


def _shipped(tmp_path: Path) -> Path:
    output = tmp_path / "instances.json"
    snapshot = {
        "schema": "farm-registry-instances/v1",
        "source": {"repository": "0xSero/local-ai-registry", "path": "data/registry/model-instance/", "commits": []},
        "note": "shipped",
        "instances": {
            "org-kept--fp8": {
                "repository": "org/Kept-FP8",
                "revision": None,
                "served_name": "Kept-FP8",
                "format": "safetensors",
                "precision": "FP8",
            },
            "org-changed-gguf--q4-k-m": {
                "repository": "org/Old-GGUF",
                "revision": None,
                "served_name": "Old-GGUF",
                "format": "Q4_K_M",
                "precision": "Q4_K_M",
            },
        },
    }
    output.write_text(json.dumps(snapshot), encoding="utf-8")
    return output


def _copied(tmp_path: Path, *documents: dict[str, Any]) -> Path:
    folder = tmp_path / "copied"
    folder.mkdir()
    for document in documents:
        (folder / f"{document['id']}.json").write_text(json.dumps(document), encoding="utf-8")
    (folder / "COMMITS").write_text(f"{COMMIT}\n", encoding="utf-8")
    return folder


def test_copied_documents_merge_over_the_shipped_snapshot(tmp_path: Path) -> None:
    output = _shipped(tmp_path)
    folder = _copied(
        tmp_path,
        _document("org-changed-gguf--q4-k-m", "org/Changed-GGUF", "Q4_K_M", "b" * 40),
        _document("org-new-gguf--q8-0", "org/New-GGUF", "Q8_0"),
    )
    done = _run(folder, "--merge", "--output", output)
    assert done.returncode == 0, done.stderr
    assert "(1 new, 1 changed)" in done.stdout
    snapshot = json.loads(output.read_text())
    rows = snapshot["instances"]
    assert list(rows) == ["org-changed-gguf--q4-k-m", "org-kept--fp8", "org-new-gguf--q8-0"]
    assert rows["org-kept--fp8"]["repository"] == "org/Kept-FP8", "an instance the copy lacks is kept"
    assert rows["org-changed-gguf--q4-k-m"] == {
        "repository": "org/Changed-GGUF",
        "revision": "b" * 40,
        "served_name": "Changed-GGUF",
        "format": "Q4_K_M",
        "precision": "Q4_K_M",
    }, "the registry's copy replaces a shipped entry that differs"
    assert snapshot["source"]["commits"] == [COMMIT]
    checked = _run(folder, "--merge", "--check", "--output", output)
    assert checked.returncode == 0
    assert "up to date: 3 instances" in checked.stdout


def test_without_merge_a_partial_copy_is_reported_out_of_date(tmp_path: Path) -> None:
    output = _shipped(tmp_path)
    folder = _copied(tmp_path, _document("org-new-gguf--q8-0", "org/New-GGUF", "Q8_0"))
    checked = _run(folder, "--check", "--output", output)
    assert checked.returncode == 1
    assert "out of date: 1 new, 2 gone, 0 changed" in checked.stdout


def test_a_checkout_layout_is_read_too(tmp_path: Path) -> None:
    folder = tmp_path / "registry" / "data" / "registry" / "model-instance"
    folder.mkdir(parents=True)
    (folder / "org-a--bf16.json").write_text(json.dumps(_document("org-a--bf16", "org/A", "BF16")), encoding="utf-8")
    output = tmp_path / "out.json"
    done = _run(tmp_path / "registry", "--output", output)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(output.read_text())
    assert list(snapshot["instances"]) == ["org-a--bf16"]
    assert snapshot["source"]["commits"] == [None], "not a git checkout and no COMMITS file: the commit is unknown"


def test_one_id_in_two_documents_stops_the_refresh(tmp_path: Path) -> None:
    output = _shipped(tmp_path)
    folder = _copied(tmp_path, _document("org-new-gguf--q8-0", "org/New-GGUF", "Q8_0"))
    twin = _document("org-new-gguf--q8-0", "org/Other-GGUF", "Q8_0")
    (folder / "org-new-gguf--q8-0-copy.json").write_text(json.dumps(twin), encoding="utf-8")
    done = _run(folder, "--merge", "--output", output)
    assert done.returncode != 0
    assert "held by two documents" in done.stderr
    assert json.loads(output.read_text())["note"] == "shipped", "nothing written"


def test_a_document_without_weights_is_named(tmp_path: Path) -> None:
    output = _shipped(tmp_path)
    document = _document("org-bad--q4-k-m", "org/Bad", "Q4_K_M")
    del document["weights"]
    folder = _copied(tmp_path, document)
    done = _run(folder, "--merge", "--output", output)
    assert done.returncode != 0
    assert "org-bad--q4-k-m.json: missing weights" in done.stderr
