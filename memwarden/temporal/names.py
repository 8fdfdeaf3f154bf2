"""Activity and workflow names shared by workflows, the worker and tests.

Workflows call activities by name, so workflow code never imports the I/O modules that
implement them (the sandbox stays clean, and a test can register a stand-in by the same name).
"""

REMEMBER_CANDIDATE = "remember_candidate"
"""The write gate in one local activity: screen, decide, then commit, stage or record the decision.
The only activity that stores a proposed candidate: no ungated commit is registered."""
SETTLE_PENDING = "settle_pending"
SEARCH_MEMORIES = "search_memories"
INDEX_HEALTH = "index_health"
FORGET_PLAN = "forget_plan"
FORGET_PURGE = "forget_purge"
FORGET_VERIFY = "forget_verify"
FORGET_FINISH = "forget_finish"
SUMMARIZE_OWNER = "summarize_owner"
REPLICATE_MEMORY = "replicate_memory"
RETENTION_PLAN = "retention_plan"
REVALIDATE_MEMORY = "revalidate_memory"
PERIODIC_REVALIDATION_PLAN = "periodic_revalidation_plan"
IMPORT_BATCH = "import_batch"
"""One batch of a bulk import through the same write gate as `remember_candidate`: screened, embedded
in one call, decided by the pure gate and committed in one transaction with each line's outcome."""
IMPORT_CONVERSATION_LINE = "import_conversation_line"
"""A conversation line's outcome, recorded once its ConversationWorkflow child ended (the parked line dropped
in the same transaction)."""
REVERT_MEMORY = "revert_memory"
"""Undo one supersession, or release one quarantined write (RevertWorkflow's one activity)."""
ROLLBACK_RESTORE = "rollback_restore"
ROLLBACK_APPLY = "rollback_apply"
ROLLBACK_VERIFY = "rollback_verify"
ROLLBACK_FINISH = "rollback_finish"
EXTRACT_CONVERSATION = "extract_conversation"
"""Reads a parked conversation, runs the extractor, parks each candidate: returns sealed RememberInputs."""
CONSOLIDATE_SESSION = "consolidate_session"
RELEASE_CONVERSATION = "release_conversation"


# Workflows a workflow starts as children, by name: the parent's module then need not import the child's,
# and the sandbox, which re-imports a workflow's modules for every run, pays for the parent's module alone.
REVALIDATE_WORKFLOW = "RevalidateWorkflow"
PENDING_WRITE_WORKFLOW = "PendingWriteWorkflow"
CONVERSATION_WORKFLOW = "ConversationWorkflow"


def revalidate_workflow_id(memory_id: str) -> str:
    """One background revalidation per memory at a time: concurrent reads that all missed the deadline share it."""
    return f"revalidate-{memory_id}"


def pending_workflow_id(memory_id: str) -> str:
    """Where confirm and decline are sent for one staged memory."""
    return f"pending-{memory_id}"
