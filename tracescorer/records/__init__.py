"""Rows the pipeline's stages hand each other through the store, declared once.

``scores``: score, decision and assembly records; ``deliveries``: export delivery state;
``monitors``: monitor state, events and window rebuilds. Nothing here imports a stage or the store.
"""
