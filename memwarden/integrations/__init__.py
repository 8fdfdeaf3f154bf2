"""Drop-in adapters for agent frameworks, each in its own module and installed as an extra.

Why a package of its own: an adapter imports its framework, and the core must never depend on one.
Nothing in memwarden's core, the API's routes, the worker, workflows or activities imports this
package (import-linter contracts in pyproject.toml); the API mounts `/mcp` only when the `mcp` extra
is installed, importing it then. Every adapter keeps the service's guarantees by going through the
same doors as any other caller: the gate decides writes, the read filter authorizes before ranking,
and forgetting is the Forget workflow with its receipt.

This module imports nothing, so `import memwarden.integrations` never pulls in a framework.
"""
