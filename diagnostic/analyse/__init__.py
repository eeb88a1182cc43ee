"""Bundle → Analysis: the statistics behind every verdict (see shared/STATISTICS.md)."""

from diagnostic.analyse.compare import DEFAULT_LOOKS
from diagnostic.analyse.core import analyse

__all__ = ["DEFAULT_LOOKS", "analyse"]
