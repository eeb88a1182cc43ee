"""`python -m diagnostic` runs the `diagnose` command line."""

from diagnostic.cli import main

main()
