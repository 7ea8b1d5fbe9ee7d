"""The PostgreSQL result store (``store.backend: postgres``): several daemons, one score history.

Importing this package loads nothing heavy; psycopg is imported when a store opens.
"""
