import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# tests/support is imported as a package by the integration tests, here and in the store
# processes the daemons under test start (tests/support/store_ops.py runs there)
sys.path.insert(0, str(TESTS))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH")]))
