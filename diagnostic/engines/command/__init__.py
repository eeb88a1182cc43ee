"""The server command line, in one place: every other module asks here.

- `parse`: a launch command found in a log, a message or a bundle's run.json (a shell line,
  a JSON array of arguments, `docker run`, a bare list of flags), its flags read.
- `speculation`: which flags turn speculation on, and a command without them.
- `shell`: variables a pasted script assigns and its command uses, put in their place.
- `edit`: a command edited flag by flag (a remedy's settings), compared with another and
  written back as one shell line.
"""

from diagnostic.engines.command.edit import (
    EditError,
    changed_flags,
    edit_command,
    flag_value,
    same_launch,
    shell_line,
)
from diagnostic.engines.command.parse import (
    COMMAND_ANCHORS,
    Command,
    find_command,
    flag_spans,
    from_argv,
    words,
)
from diagnostic.engines.command.shell import ASSIGNMENT_ANCHORS, ShellVariables
from diagnostic.engines.command.speculation import (
    SPEC_FLAG,
    infer_speculative,
    speculates,
    without_speculation,
)

__all__ = [
    "ASSIGNMENT_ANCHORS",
    "COMMAND_ANCHORS",
    "SPEC_FLAG",
    "Command",
    "EditError",
    "ShellVariables",
    "changed_flags",
    "edit_command",
    "find_command",
    "flag_spans",
    "flag_value",
    "from_argv",
    "infer_speculative",
    "same_launch",
    "shell_line",
    "speculates",
    "without_speculation",
    "words",
]
