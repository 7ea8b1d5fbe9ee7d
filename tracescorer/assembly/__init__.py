"""assembly stage."""
