"""``tracescorer report``: score history per scorer as one self-contained HTML page
(:mod:`~tracescorer.report.data` collects it, :mod:`~tracescorer.report.html` renders it).

Nothing is imported here: ``tracescorer scores`` uses :mod:`~tracescorer.report.reasons` alone and
must not load the page and its charts."""
