"""Real, minimal test doubles (local servers), reused by unit and end-to-end tests."""

from .fake_openai import FakeOpenAI, RecordedRequest, Reply, fake_openai

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "fake_openai"]
