"""Drop-in adapters that put agent frameworks' memory interfaces on memwarden, one module per framework.

Each adapter (`memwarden.integrations.langgraph`, `.adk`, and the MCP server) speaks memwarden's HTTP
API under the caller's token, so every guarantee of the service holds through it unchanged: the gate
decides every write, authorization happens before ranking, and a delete is a verified forget. Where a
framework's interface has no place for one of them (a LangGraph `put` returns nothing, so it cannot
carry a confirmation window), the adapter says so with a typed outcome (`outcomes`) instead of
dropping the decision, and docs/integrations.md lists each such gap.

Each framework is an extra (`pip install 'memwarden[langgraph]'`, `[mcp]`, `[adk]`); this package
imports no framework, and the core never imports this package (an import-linter contract).
"""
