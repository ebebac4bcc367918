"""Verified runs end to end: a real worker on the simulator signs its run, then the `farm keys`, `farm verify`,
`farm export bundle`, `farm import` and `farm serve` commands as a user runs them; the private key appears in
none of their outputs, nor in the worker's log."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from test_signing import private_forms
from test_worker import submit, write_profile, write_spec

from farm.signing.keys import KEY_DIR, PRIVATE_KEY_FILE, HostKey
from farm.store import Store
from farm.store.models import MeasurementRow
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

pytestmark = pytest.mark.slow


def farm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a loopback URL the test built
        return json.loads(response.read())


def test_a_worker_signs_its_run_and_every_command_checks_it(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The worker makes its key (0600) and registers it; its run arrives signed; `farm keys trust` makes it
    verified, `farm verify` passes, then fails naming the job once a figure is changed in the database; a bundle
    exported before the change imports into another farm; `farm serve` serves the key and the signature. No form
    of the private key is in any output or the worker's log lines."""
    data_dir = tmp_path / "data"
    db = tmp_path / "farm.db"
    url = f"sqlite:///{db}"
    store = Store.open(url, auto_upgrade=True)
    job_id = submit(store, write_spec(tmp_path))
    worker = Worker(store, load_profile(write_profile(tmp_path)), data_dir=data_dir)
    assert worker.run(max_jobs=1, idle_exit_s=5) == 1
    worker_log = capfd.readouterr()
    key_file = data_dir / KEY_DIR / PRIVATE_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = HostKey.load(key_file)
    assert worker.host_key.key_id == key.key_id
    [known] = store.keys()
    assert (known.key_id, known.trusted) == (key.key_id, False)
    store.close()

    env = {**os.environ, "FARM_DATABASE_URL": url, "FARM_DATA_DIR": str(data_dir)}
    outputs = [worker_log.out, worker_log.err]
    shown = farm(env, "keys", "show")
    assert shown.stdout.strip() == key.key_id
    public = farm(env, "keys", "show", "--public")
    assert public.stdout.startswith(f"ed25519 {key.public.text}")
    untrusted = farm(env, "verify")
    assert untrusted.returncode == 0, untrusted.stdout + untrusted.stderr
    assert "1 untrusted" in untrusted.stdout
    trusted = farm(env, "keys", "trust", key.key_id)
    assert trusted.returncode == 0, trusted.stderr
    assert "1 of 1 runs it signed verified" in trusted.stdout
    listed = farm(env, "keys", "list", "--json")
    assert json.loads(listed.stdout)[0]["trusted"] is True
    board = farm(env, "leaderboard", "--verified", "--json")
    assert [row["verified"] for row in json.loads(board.stdout)] == [True]
    bundle = tmp_path / "out.jsonl.gz"
    exported = farm(env, "export", "bundle", "-o", str(bundle))
    assert exported.returncode == 0, exported.stderr
    other = {**env, "FARM_DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    assert farm(other, "db", "upgrade").returncode == 0
    imported = farm(other, "import", str(bundle))
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 runs" in imported.stdout
    assert farm(other, "verify").returncode == 0

    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "farm", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(base + "/healthz")
                break
            except OSError:
                if serve.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("farm serve did not start")
                time.sleep(0.2)
        keys = _get(base + "/v1/keys")
        assert [(k["key_id"], k["trusted"]) for k in keys["keys"]] == [(key.key_id, True)]
        signature = _get(base + f"/v1/runs/{job_id}/signature")["signature"]
        assert (signature["key_id"], signature["status"]) == (key.key_id, "verified")
        outputs += [json.dumps(keys), json.dumps(signature)]
    finally:
        serve.terminate()
        serve.wait(timeout=10)

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.update(MeasurementRow).where(MeasurementRow.key == "decode/code/decode_tok_s").values(values=[1.0, 2.0])
        )
    engine.dispose()
    changed = farm(env, "verify")
    assert changed.returncode == 1
    assert f"{job_id} attempt 1" in changed.stdout
    assert "its figures changed" in changed.stdout

    import gzip

    from cryptography.hazmat.primitives import serialization

    outputs += [r.stdout + r.stderr for r in (shown, public, untrusted, trusted, listed, exported, imported, changed)]
    outputs.append(gzip.decompress(bundle.read_bytes()).decode())
    text = "\n".join(outputs)
    assert key.key_id in text
    for form in private_forms(key._private, serialization):
        assert form not in text
