"""The registry snapshots the farm ships (issue 22, fresh data): the model instances, the TabbyAPI config assets
and the hardware documents are whole, each entry holds what the farm reads of it, no id is held twice, and the
farm's own readers load every entry."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from farm import hardware
from farm.engines.registry import ENGINES
from farm.recipes import assets, instances

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REGISTRY_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
INSTANCE_FIELDS = {"repository", "revision", "served_name", "format", "precision"}
"""What deploy/refresh-instances.py keeps of an instance document, and all that farm.recipes.instances reads."""

SHIPPED_INSTANCES_AT_LEAST = 619
"""The instances issue 22's refresh shipped (308 before it): a later refresh may add, never silently lose them."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    assert not twice, f"keys held twice: {twice}"
    return dict(pairs)


def _snapshot(package: str, name: str) -> dict[str, Any]:
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    return document


def _source_is_the_registry(source: dict[str, Any], path: str) -> None:
    assert source["repository"] == "0xSero/local-ai-registry"
    assert source["path"] == path
    assert source["commits"], "a snapshot names the registry commits it was read at"
    assert all(isinstance(commit, str) and COMMIT.match(commit) for commit in source["commits"])


def test_the_instance_snapshot_is_whole() -> None:
    """Every instance: a registry id, exactly the fields the farm keeps, a repository, a pinned revision or none;
    no id twice (a duplicate key would silently shadow one document); at least as many as were shipped."""
    snapshot = _snapshot("farm.recipes", instances.DATA_FILE)
    assert snapshot["schema"] == "farm-registry-instances/v1"
    _source_is_the_registry(snapshot["source"], "data/registry/model-instance/")
    rows: dict[str, dict[str, Any]] = snapshot["instances"]
    assert len(rows) >= SHIPPED_INSTANCES_AT_LEAST
    wrong = {
        key: sorted(set(row) ^ INSTANCE_FIELDS)
        for key, row in rows.items()
        if not REGISTRY_ID.match(key) or set(row) != INSTANCE_FIELDS
    }
    assert wrong == {}
    for key, row in rows.items():
        assert isinstance(row["repository"], str), key
        assert row["repository"].strip(), key
        assert row["revision"] is None or COMMIT.match(row["revision"]), (key, row["revision"])
        for field in ("served_name", "format", "precision"):
            assert row[field] is None or isinstance(row[field], str), (key, field)
    assert list(rows) == sorted(rows), "sorted by id, as deploy/refresh-instances.py writes it"


def test_every_shipped_instance_is_one_the_farm_reads() -> None:
    """The reader holds each entry as written, and every engine either names a model for it or says why it
    cannot (CannotLoad): no entry breaks the command builder."""
    rows = _snapshot("farm.recipes", instances.DATA_FILE)["instances"]
    assert instances.snapshot_size() == len(rows)
    for key, row in rows.items():
        instance = instances.lookup(key)
        assert instance is not None, key
        assert (instance.repository, instance.revision, instance.served_name) == (
            row["repository"],
            row["revision"],
            row["served_name"],
        )
        assert (instance.format, instance.precision) == (row["format"], row["precision"])
        for engine in ENGINES:
            try:
                model = instances.model_for(engine, key)
            except instances.CannotLoad as exc:
                refusal = str(exc)
                model = None
            else:
                refusal = key
            assert key in refusal, (engine, key, refusal)
            assert model is None or instance.repository in model, (engine, key, model)


def test_the_asset_snapshot_is_whole() -> None:
    """Every TabbyAPI config asset: its file name, the sha256 of the file's bytes, and the parsed document with
    the `model` section the farm reads the command from."""
    snapshot = _snapshot("farm.recipes", assets.DATA_FILE)
    assert snapshot["schema"] == "farm-registry-assets/v1"
    _source_is_the_registry(snapshot["source"], "data/registry/asset/")
    rows: dict[str, dict[str, Any]] = snapshot["assets"]
    assert rows
    for name, row in rows.items():
        assert name.endswith((".yml", ".yaml")), name
        assert "/" not in name, name
        assert set(row) == {"sha256", "document"}, name
        assert re.fullmatch(r"[0-9a-f]{64}", row["sha256"]), name
        assert isinstance(row["document"].get("model"), dict), name
        assert row["document"]["model"].get("model_name"), name
        assert assets.lookup(f"asset/{name}") is not None, name
    digests = [row["sha256"] for row in rows.values()]
    assert len(set(digests)) == len(digests), "two asset names for one file"
    assert assets.snapshot_size() == len(rows)


def test_the_hardware_snapshot_is_whole() -> None:
    """Every registry hardware document: the fields the catalogue reads, no id twice, each one in the catalogue
    with the registry's memory."""
    snapshot = _snapshot("farm.hardware", "registry.json")
    _source_is_the_registry(snapshot["source"], "data/registry/hardware/")
    rows: list[dict[str, Any]] = snapshot["hardware"]
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids), sorted({i for i in ids if ids.count(i) > 1})
    catalogue = hardware.catalogue()
    for row in rows:
        assert REGISTRY_ID.match(row["id"]), row["id"]
        assert {"id", "vendor", "name", "kind", "memory", "accelerator_backend", "aliases"} <= set(row), row["id"]
        assert isinstance(row["memory"]["vram_gb"], int | float), row["id"]
        assert catalogue[row["id"]].memory_gib == int(row["memory"]["vram_gb"]), row["id"]


def _fixture_documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(FIXTURES.glob("registry*/*.json")):
        if path.name in ("canonical.json", "expected.json"):
            continue
        document = json.loads(path.read_text())
        found.append(document.get("data", document))
    return found


@pytest.mark.parametrize(
    "instance_id",
    [
        "lmstudio-community-gemma-4-26b-a4b-it-gguf--q4-k-m",
        "stepfun-ai-step-3-7-flash-gguf--q4-k-s",
        "prism-ml-bonsai-27b-gguf--q1-0",
    ],
)
def test_a_gguf_instance_a_fixture_names_gives_llama_cpp_its_download(instance_id: str) -> None:
    """A GGUF instance the refresh added, named by a real registry recipe: llama.cpp is given the instance's own
    repository and quantization (before, the snapshot lacked it and the host's file stood in)."""
    assert any(document.get("model_instance_id") == instance_id for document in _fixture_documents())
    instance = instances.lookup(instance_id)
    assert instance is not None
    assert instance.quantization is not None
    assert instances.model_for("llama.cpp", instance_id) == f"{instance.repository}:{instance.quantization}"


def test_the_shipped_files_are_whole_json() -> None:
    """The snapshot files are read as UTF-8 JSON the way the farm reads them (package resources, not a checkout
    path), each ending as the refresh scripts write it: a guard against a half-written file."""
    for package, name in (
        ("farm.recipes", instances.DATA_FILE),
        ("farm.recipes", assets.DATA_FILE),
        ("farm.hardware", "registry.json"),
    ):
        data = resources.files(package).joinpath(name).read_bytes()
        assert data.endswith(b"\n"), name
        assert isinstance(json.loads(data.decode("utf-8")), dict), name
