"""The daemon's scoring stage: bound scorers (:mod:`.bindings`), run filters (:mod:`.filters`),
limits, targets, the online :mod:`.runner` and :mod:`.backfill`.

The scorer library these run (``create_scorer``, judges, prebuilt scorers) is
:mod:`tracescorer.scorers`.
"""
