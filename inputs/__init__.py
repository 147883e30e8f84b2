"""Limits on what a request may carry, shared by every app's API and form: JSON shape (depth, keys),
known fields only, and no NUL where PostgreSQL cannot store it. Depends on Django and DRF only, so
any app can use it (config/middleware.py refuses control characters in paths and queries)."""
