"""placeholder while the module is written"""
from tracescorer.conventions.base import Convention
CONVENTION = Convention(name="openllmetry_langchain", label="genai")
