"""A user module whose import fails (for the import error test)."""

raise ImportError("missing optional dependency 'numpy'")
