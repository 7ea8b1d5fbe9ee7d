"""conventions stage."""
