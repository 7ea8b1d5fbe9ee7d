"""Sub-commands of the ``tracescorer`` CLI that read or feed a daemon (one module each)."""
