"""`diagnose verify`: a bundle against its seals and schedule, and a deliverable against it."""

from diagnostic.verify.outcome import EXIT_CODES, Check, VerifyReport
from diagnostic.verify.stage import verify_bundle

__all__ = ["EXIT_CODES", "Check", "VerifyReport", "verify_bundle"]
