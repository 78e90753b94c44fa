"""Run configurations: the TOML schema, its validation and layering."""
