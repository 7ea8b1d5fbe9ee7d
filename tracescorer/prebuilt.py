"""Prebuilt scorers (``from tracescorer.prebuilt import create_multi_turn_judge_scorer``).

A re-export of :mod:`tracescorer.scorers.prebuilt`; see ``docs/scorers.md`` for the list.
"""

from tracescorer.scorers.prebuilt import *  # noqa: F403
from tracescorer.scorers.prebuilt import __all__ as __all__
