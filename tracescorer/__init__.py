"""tracescorer: score AI agents in production from their OpenTelemetry traces."""

__version__ = "0.1.0"
