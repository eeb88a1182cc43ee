"""The `check` stage: server logs → facts per run (parsed by `diagnostic.engines`) → findings
from the YAML rules in checklists/rules/ (`rules`)."""
