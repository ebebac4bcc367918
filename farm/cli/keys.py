"""`farm keys show|trust|list`, `farm verify` and `farm import`: host keys, checking signed runs, bundles in."""

from __future__ import annotations

from pathlib import Path

import typer

from farm.cli.common import farm_errors, open_store, print_json, settings

app = typer.Typer(help="This host's signing key and the farm's trusted keys.")


@app.command("show")
def show(
    public: bool = typer.Option(False, "--public", help="print the public key line (for `farm keys trust FILE`)"),
) -> None:
    """This host's key fingerprint (the key is made in the data directory on first use, 0600)."""
    s = settings()
    with farm_errors():
        from farm.signing.keys import HostKey

        key = HostKey.load_or_create(s.data_dir)
    if public:
        import socket

        print(key.public.line(socket.gethostname()))
    else:
        print(key.key_id)


@app.command("trust")
def trust(
    what: str = typer.Argument(..., metavar="FINGERPRINT|FILE", help="a key's fingerprint, or a file holding it"),
) -> None:
    """Trust a key: the runs it signed that match their signatures become verified."""
    s = settings()
    with farm_errors():
        from farm.errors import InputError
        from farm.signing.keys import is_fingerprint

        text = what
        if not is_fingerprint(what):
            path = Path(what)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"not a fingerprint (ed25519:<32 hex>) nor a readable key file: {exc}") from exc
        key_id, checks = open_store(s).trust_key(text)
    verified = sum(1 for c in checks if c.verdict == "verified")
    print(f"trusted {key_id}: {verified} of {len(checks)} runs it signed verified")
    for c in checks:
        if c.verdict.failed:
            print(f"  {c.job_id} attempt {c.attempt}: {c.verdict.value}: {c.reason}")


@app.command("list")
def list_keys(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every key this farm knows: fingerprint, trusted or not, who holds it, where it came from."""
    s = settings()
    with farm_errors():
        keys = open_store(s).keys()
    if as_json:
        print_json(
            [
                {
                    "key_id": k.key_id,
                    "public_key": k.public_key,
                    "trusted": k.trusted,
                    "label": k.label,
                    "source": k.source,
                    "first_seen_at": k.first_seen_at.isoformat(),
                    "trusted_at": k.trusted_at.isoformat() if k.trusted_at else None,
                }
                for k in keys
            ]
        )
        return
    for k in keys:
        print(f"{k.key_id}  {'trusted  ' if k.trusted else 'untrusted'}  {k.source:<7} {k.label or ''}")


def verify(
    job_ids: list[str] | None = typer.Argument(None, metavar="[JOB ...]", help="only these jobs' runs"),
    as_json: bool = typer.Option(False, "--json", help="every run's verdict as JSON"),
    workers: int | None = typer.Option(None, "--workers", min=1, help="processes that check (default: one per CPU)"),
    repair_pooled: bool = typer.Option(
        False,
        "--repair-pooled",
        help="rebuild the pooled table (what the leaderboard reads) from the stored runs, once every run verifies",
    ),
) -> None:
    """Check every run (or those of the jobs named) against its signature. Exits 1 naming each run whose
    figures, samples or provenance no longer match, or whose key is unknown; runs signed by an untrusted key
    and unsigned runs are counted, not failures. Over the whole store (no JOB named) the pooled table the
    leaderboard reads (`group_stats`) is derived again from the runs and compared: each group that differs is
    named (`pooled changed`, `pooled missing`, `pooled extra`) and exits 1 too; `--repair-pooled` rebuilds it."""
    import time

    s = settings()
    started = time.monotonic()
    if repair_pooled and job_ids:
        with farm_errors():
            from farm.errors import InputError

            raise InputError("--repair-pooled rebuilds the whole pooled table: name no JOB with it")
    with farm_errors():
        store = open_store(s)
        checks = list(store.verify(job_ids or None, workers=workers))
        pooled_started = time.monotonic()
        groups = [] if job_ids else store.check_pooled()
        pooled_s = time.monotonic() - pooled_started
    elapsed = time.monotonic() - started
    failed = [c for c in checks if c.verdict.failed]
    repaired: int | None = None
    if repair_pooled and groups and not failed:
        with farm_errors():
            repaired = store.rebuild_pooled()
            groups = store.check_pooled()  # checked again: what is left (nothing, unless written at once) is named
    if as_json:
        print_json(
            [
                {
                    "job_id": c.job_id,
                    "attempt": c.attempt,
                    "worker_id": c.worker_id,
                    "key_id": c.key_id,
                    "verdict": c.verdict.value,
                    "validated": c.validated,
                    "reason": c.reason,
                }
                for c in checks
            ]
            + [{"pooled": g.group, "verdict": g.kind, "reason": g.reason} for g in groups]
        )
    else:
        for c in failed:
            print(f"{c.job_id} attempt {c.attempt} ({c.worker_id}): {c.verdict.value}: {c.reason}")
        for g in groups:
            print(f"pooled {g.kind}: {g.group}: {g.reason}")
        counts: dict[str, int] = {}
        for c in checks:
            counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
        summary = ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "no runs"
        print(f"{len(checks)} runs checked in {elapsed:.2f} s: {summary}")
        if not job_ids:
            print(f"pooled table checked in {pooled_s:.2f} s: {len(groups)} groups differ from their runs")
        if repaired is not None:
            print(f"pooled table rebuilt from the stored runs: {repaired} rows")
        elif groups and failed and repair_pooled:
            print("pooled table not rebuilt: runs above do not verify (a rebuild would pool their changed figures)")
        elif groups:
            print("rebuild it from the stored runs (once every run verifies): farm verify --repair-pooled")
    if failed or groups:
        raise typer.Exit(1)


def import_command(
    path: Path = typer.Argument(..., metavar="FILE", help="a bundle (.jsonl or .jsonl.gz) from `farm export bundle`"),
) -> None:
    """Import a signed results bundle: every run's signature is checked first; a bundle with any run that does not
    verify is refused, naming it, and nothing is stored. Importing the same bundle again changes nothing."""
    s = settings()
    with farm_errors():
        from farm.bundles import import_bundle

        report = import_bundle(open_store(s), path)
    print(
        f"imported {report.imported} runs from {report.origin_farm or 'an unnamed farm'}"
        f" ({report.already} already here, {report.verified} verified by a trusted key)"
    )
