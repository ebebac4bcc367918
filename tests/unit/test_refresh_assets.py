"""deploy/refresh-assets.py: the registry's YAML config assets become the farm's parsed snapshot, each with the
sha256 of its bytes, which must agree with the registry's own metadata for the asset."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "refresh-assets.py"
CONFIG = """network:
  host: 0.0.0.0
  api_servers: ["OAI"]

model:
  model_dir: /workspace/models   # the mounted weights
  model_name: M-EXL3
  max_seq_len: 131072
  reasoning_start_token: " thinking"
  vision: yes   # YAML 1.1 read this as true; TabbyAPI's YAML 1.2 reads a string, and so does the farm
  template_vars_default:
    enable_thinking: true

sampling:
  override_preset:
"""


def _checkout(tmp_path: Path, sha256: str | None = None) -> Path:
    folder = tmp_path / "registry" / "data" / "registry" / "asset"
    folder.mkdir(parents=True)
    (folder / "m-tabbyapi-config.yml").write_text(CONFIG, encoding="utf-8")
    digest = sha256 or hashlib.sha256(CONFIG.encode()).hexdigest()
    meta = {"file": "m-tabbyapi-config.yml", "sha256": digest, "media_type": "application/yaml"}
    (folder / "m-tabbyapi-config.json").write_text(json.dumps(meta), encoding="utf-8")
    return tmp_path / "registry"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False)


def test_assets_are_parsed_with_their_digest(tmp_path: Path) -> None:
    output = tmp_path / "assets.json"
    done = _run(_checkout(tmp_path), "--output", output)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(output.read_text())
    asset = snapshot["assets"]["m-tabbyapi-config.yml"]
    assert asset["sha256"] == hashlib.sha256(CONFIG.encode()).hexdigest()
    assert asset["document"]["model"] == {
        "model_dir": "/workspace/models",
        "model_name": "M-EXL3",
        "max_seq_len": 131072,
        "reasoning_start_token": " thinking",
        "vision": "yes",
        "template_vars_default": {"enable_thinking": True},
    }
    assert asset["document"]["sampling"] == {"override_preset": None}
    checked = _run(tmp_path / "registry", "--output", output, "--check")
    assert checked.returncode == 0
    assert "up to date: 1 assets" in checked.stdout


def test_a_digest_that_disagrees_with_the_metadata_stops_the_refresh(tmp_path: Path) -> None:
    output = tmp_path / "assets.json"
    done = _run(_checkout(tmp_path, sha256="0" * 64), "--output", output)
    assert done.returncode != 0
    assert "differs from its metadata's" in done.stderr
    assert not output.exists()


def test_copied_assets_merge_over_the_shipped_snapshot(tmp_path: Path) -> None:
    """A folder of assets copied from the registry (the YAML and its metadata, a COMMITS file) adds to the shipped
    snapshot with --merge; the assets the folder does not hold are kept, and the digest is still checked."""
    folder = tmp_path / "copied"
    folder.mkdir()
    (folder / "m-tabbyapi-config.yml").write_text(CONFIG, encoding="utf-8")
    meta = {"file": "m-tabbyapi-config.yml", "sha256": hashlib.sha256(CONFIG.encode()).hexdigest()}
    (folder / "m-tabbyapi-config.json").write_text(json.dumps(meta), encoding="utf-8")
    (folder / "COMMITS").write_text("a908edb82734a1745dd67abe889be68936dda53c\n", encoding="utf-8")
    output = tmp_path / "assets.json"
    kept = {"sha256": "0" * 64, "document": {"model": {"model_name": "Kept"}}}
    output.write_text(json.dumps({"source": {"commits": []}, "assets": {"kept.yml": kept}}), encoding="utf-8")
    done = _run(folder, "--merge", "--output", output)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(output.read_text())
    assert sorted(snapshot["assets"]) == ["kept.yml", "m-tabbyapi-config.yml"]
    assert snapshot["assets"]["kept.yml"] == kept
    assert snapshot["source"]["commits"] == ["a908edb82734a1745dd67abe889be68936dda53c"]
    meta["sha256"] = "1" * 64
    (folder / "m-tabbyapi-config.json").write_text(json.dumps(meta), encoding="utf-8")
    refused = _run(folder, "--merge", "--output", output)
    assert refused.returncode != 0
    assert "differs from its metadata's" in refused.stderr
