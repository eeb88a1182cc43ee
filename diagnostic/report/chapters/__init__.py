"""The report's chapters, one module each, in the order the report prints them: capture and
configuration evidence (`capture.py`), before and after (`verdicts.py`, `before_after.py`), the
draft-length sweep (`sweep.py`, when the bundle has one), variance across restarts
(`variance.py`), GPU and host telemetry (`telemetry.py`, when recorded), output equivalence and
data quality (`equivalence.py`), recommendations (`recommendations.py`), methodology
(`methodology.py`) and the environment appendix (`environment.py`)."""
