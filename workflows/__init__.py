"""Temporal workflows: deterministic orchestration only (records, policy and activity names; no I/O).

Empty on purpose: the sandbox loads a workflow's module, and so this package, afresh for every run,
so importing one workflow must not load them all. The registered list is `workflows.registry`.
"""
