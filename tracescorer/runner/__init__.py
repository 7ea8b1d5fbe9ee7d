"""The scoring stage, which runs the scorers on what assembly built: bound scorers
(:mod:`.bindings`), decisions (filter, sample, budget, rate: :mod:`.decider`, :mod:`.limits`,
:mod:`.caps`), targets, worker pools, the online runner (:mod:`.stage`), restart recovery, healing
of judge outages, :mod:`.backfill`, and the score and decision rows (:mod:`.writer`).

It is named for what it does with scorers, apart from the scorer library it runs
(``create_scorer``, judges, prebuilt scorers: :mod:`tracescorer.scorers`); its settings are the
``scoring:`` section.
"""
