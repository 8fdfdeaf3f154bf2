"""memwarden: a governed memory service for AI agents."""
