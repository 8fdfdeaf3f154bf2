"""Activity and workflow names shared by workflows, the worker and tests.

Workflows call activities by name, so workflow code never imports the I/O modules that
implement them (the sandbox stays clean, and a test can register a stand-in by the same name).
"""

COMMIT_MEMORY = "commit_memory"
SEARCH_MEMORIES = "search_memories"
INDEX_HEALTH = "index_health"
AUDIT_EVENT = "audit_event"
