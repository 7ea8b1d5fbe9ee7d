"""receiver stage."""
