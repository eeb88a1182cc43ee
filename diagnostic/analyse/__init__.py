"""Bundle → Analysis: the statistics behind every verdict (see docs/statistics.md).

`requests` reads the records into samples, `arms` summarises restarts, `compare` makes the
verdicts, `ksweep` and `theory` the draft-length sweep, `acceptance`, `engine_timing` and
`equivalence` the other checks, `stats` the pure numerics; `core.analyse` puts them together.
Importing a module here loads only what it needs (scipy loads slowly).
"""
