"""Pure decisions over typed records: no I/O, safe inside Temporal workflows."""
