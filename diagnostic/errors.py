"""The one exception root of the package; the CLI turns it into `Error: <message>`.

Hierarchy::

    DiagnosticError            every failure a user can act on (bad input, unreachable server)
    ├── BundleError            a bundle that is missing, corrupt, newer, or would be overwritten
    └── NotImplementedYet      a command whose stage is not built yet
"""


class DiagnosticError(Exception):
    """A failure the user can act on; the message names the file or URL and what to do."""

    exit_code = 2


class BundleError(DiagnosticError):
    """A bundle is missing, corrupt, written by a newer version, or would be overwritten."""


class NotImplementedYet(DiagnosticError):
    """A command exists in the CLI but its stage is not built yet."""

    exit_code = 3
