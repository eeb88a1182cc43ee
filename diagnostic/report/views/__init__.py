"""The report's view models: every value the templates lay out, already formatted as text."""
