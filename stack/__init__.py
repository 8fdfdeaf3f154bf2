"""The composition root: the `memwarden` command and the embedded stack, the only place `api` and `worker` meet."""
