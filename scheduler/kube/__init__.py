"""The only importer of ``kubernetes``: raw-JSON API calls (bind, delete, patch status,
events, leases, lists) and the translation of client exceptions into our own errors."""
