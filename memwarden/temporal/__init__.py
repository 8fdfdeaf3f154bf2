"""Temporal plumbing the API, the worker and the CLI share: client, payload codec, data converter, sandbox, names.

Kept empty so that importing `memwarden.temporal.names` (which workflows do, inside the sandbox)
pulls in nothing else.
"""
