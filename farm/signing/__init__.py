"""Verified runs: a host key per worker, every run signed where it was measured, checked everywhere.

- `keys`: the host's Ed25519 key pair (made at the worker's first start, private half 0600 in its data
  directory, never anywhere else) and public keys with their fingerprints (the key ids signatures name).
- `canonical`: the canonical statement of a run and its digest (specified for other programs in docs/signing.md).
- `runs`: signing a RunResult in the worker, and checking a run's content against its signature.

The store keeps signatures, the farm's keys and each run's verdict (farm.store.signatures); `farm verify`,
`farm keys` and bundles (farm.bundles) are built on these.
"""
