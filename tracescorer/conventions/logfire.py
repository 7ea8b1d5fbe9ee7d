"""placeholder while the module is written"""
from tracescorer.conventions.base import Convention
CONVENTION = Convention(name="logfire", label="genai")
