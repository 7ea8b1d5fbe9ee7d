"""export stage."""
