"""Activity and workflow names shared by workflows, the worker and tests.

Workflows call activities by name, so workflow code never imports the I/O modules that
implement them (the sandbox stays clean, and a test can register a stand-in by the same name).
"""

COMMIT_MEMORY = "commit_memory"
"""The pre-gate commit (RememberInput -> stored as is). Kept registered only so RememberWorkflow
histories recorded before the write gate still replay and finish; new runs never schedule it."""
REMEMBER_CANDIDATE = "remember_candidate"
"""Screen, decide and commit/stage/record in one local activity (RememberWorkflow since "remember-one-step")."""
SCREEN_CANDIDATE = "screen_candidate"
COMMIT_GATED = "commit_gated"
STAGE_MEMORY = "stage_memory"
SETTLE_PENDING = "settle_pending"
RECORD_DECISION = "record_decision"
SEARCH_MEMORIES = "search_memories"
INDEX_HEALTH = "index_health"
AUDIT_EVENT = "audit_event"
FORGET_PLAN = "forget_plan"
FORGET_PURGE = "forget_purge"
FORGET_VERIFY = "forget_verify"
FORGET_FINISH = "forget_finish"
SUMMARIZE_OWNER = "summarize_owner"
REPLICATE_MEMORY = "replicate_memory"
RETENTION_PLAN = "retention_plan"
REVALIDATE_MEMORY = "revalidate_memory"
PERIODIC_REVALIDATION_PLAN = "periodic_revalidation_plan"
