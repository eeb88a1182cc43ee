"""Every exception of the package; the CLI turns a DiagnosticError into `Error: <message>`.

Hierarchy::

    DiagnosticError        a failure the user can act on; the message names the file or URL
    │                      and what to do (exit 2)
    ├── BundleError        a bundle that is missing, corrupt, newer, or would be overwritten
    ├── PlanError          a plan file that cannot be read, parsed or validated
    ├── LaunchError        a server that could not start, exited in start-up or never got healthy
    ├── RuleError          a log-check rule file that is missing, malformed or names no check
    ├── ChecklistError     a checklist file that is missing or malformed, or an unknown id
    ├── NothingMeasured    report written, but no measured request can be used (exit 3)
    ├── ServerGone         the server stopped answering mid-run (collect stops the run there)
    ├── WorkerFailed       a load worker process of collect died or raised (continue with --resume)
    └── TelemetryError     a telemetry file or rule file that cannot be read (named)

    ValueError
    ├── TemplateError      a plan template with an unknown placeholder or a lone brace
    │                      (the plan loader reports it as a PlanError naming the arm)
    ├── RefusedURL         the PDF renderer asked for a resource outside the templates folder
    │                      (refused and logged; the report renders without it)
    └── NotFinite          NaN or Infinity in a bundle's JSON (the gate reports a BundleError)
"""


class DiagnosticError(Exception):
    """A failure the user can act on; the message names the file or URL and what to do."""

    exit_code = 2


class BundleError(DiagnosticError):
    """A bundle is missing, corrupt, written by a newer version, or would be overwritten."""


class PlanError(DiagnosticError):
    """A plan file that cannot be read, parsed or validated."""


class LaunchError(DiagnosticError):
    """A server that could not be started, exited during start-up or never became healthy."""

    def __init__(self, message: str, *, tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.tail = tail or []


class RuleError(DiagnosticError):
    """A rule file that is missing, malformed or names an unknown check."""


class ChecklistError(DiagnosticError):
    """A checklist file that is missing or malformed, or an unknown list or item id."""


class NothingMeasured(DiagnosticError):
    """A report was written, but no measured request of its bundle can be used (all failed)."""

    exit_code = 3


class ServerGone(DiagnosticError):
    """A request found nothing listening: the server died or was stopped mid-run."""


class WorkerFailed(DiagnosticError):
    """A worker process generating part of collect's load died or raised mid-run."""


class TelemetryError(DiagnosticError):
    """A telemetry CSV (nvidia-smi, DCGM) or the telemetry rule file that cannot be read."""


class TemplateError(ValueError):
    """A template with an unknown placeholder or a lone brace."""


class RefusedURL(ValueError):
    """A resource outside the report's templates folder was requested and refused."""


class NotFinite(ValueError):
    """NaN or Infinity in JSON (not JSON, though Python writes and reads it)."""
