"""Model-client adapters (openai, anthropic, vLLM) with an exact-input cache.

Not implemented yet (see the project's issues). Every adapter will record its calls
through ``agentlog._recorder.log_llm_call``, the one place every model call passes.
"""

__all__: list[str] = []
