import sys
from pathlib import Path

# tests/support is imported as a package by the integration tests
sys.path.insert(0, str(Path(__file__).resolve().parent))
