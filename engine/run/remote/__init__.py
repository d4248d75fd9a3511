"""Attempts on a Dask cluster (`loopproof run|resume --dask tcp://HOST:8786`): the engine stays
the one process that admits attempts, holds the budget and writes the ledger; each attempt's
worker command and gate run on a Dask worker, in the same sandbox and limits, with what they
need sent content-addressed.

Modules: `parcel` (trees and blobs as they travel), `relay` (model calls from a worker host to
the engine's proxy), `far` (what runs on the worker host), `checks` (what the engine asks of a
host before using it), `adapters` (the node's worker and gate as remote ones, and `adopt`,
which makes a spec's nodes remote), `cluster` (the only module that imports Dask: connecting,
slots, calls, losses, reaping). docs/scale.md says how to
run a graph on a cluster; docs/threat-model.md what a worker host is trusted with.
"""
