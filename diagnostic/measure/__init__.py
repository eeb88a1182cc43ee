"""Measuring a live server: everything that talks to one.

A request goes `client` (one streamed request → a RequestRecord) → `collect` (one arm, one
restart: workloads, warm-up, /metrics snapshots, records appended to the bundle) → `sweep`
(restarts the server per arm from a `plan` with `launch`, in the order `schedule` draws).
"""
