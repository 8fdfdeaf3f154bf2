"""Operations' logic that knows nothing of Temporal: what an API route or an importer calls before a workflow."""
