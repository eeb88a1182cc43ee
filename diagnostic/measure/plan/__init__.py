"""The sweep plan: `spec` (the TOML file, validation, sweep expansion), `templates` ({name}
placeholders), `presets` (a plan from --engine/--method/--k) and `serialise` (TOML output)."""
