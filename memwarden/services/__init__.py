"""The operations' logic, Temporal-free: each service is bound to `deps.Deps` (stores, embedder, clock,
id factory) and takes the workflow run it belongs to as a plain `run.Run`; `activities/` adapts them.
Some (conversations) are what an API route or an importer calls before a workflow starts."""
