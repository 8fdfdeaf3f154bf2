"""Extraction: a conversation's messages -> candidate memories (proposals) for the write gate.

An extractor only proposes; `RememberWorkflow`'s gate decides each proposal as it decides a single
`POST /v1/memories`. Two extractors share one protocol (`base.Extractor`): the rule-based default that
runs offline (`rules.RuleExtractor`) and one that asks an OpenAI-compatible chat-completions endpoint
(`llm.LlmExtractor`).
"""
