"""The pydantic models of every file the stages exchange; no I/O, no imports from the package.

- `bundle`: what collect and sweep write (manifest.json, run.json, requests.jsonl records).
- `analysis`: what the analysis concludes (analysis.json).
- `logfacts`: what `diagnose check` reads from a log and concludes (findings.json).
"""
