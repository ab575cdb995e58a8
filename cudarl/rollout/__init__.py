"""Generation engines behind one small typed interface (``engine``): Hugging Face transformers'
continuous batching (``hf``, always available) and vLLM (``vllm``, imported only when chosen).
Token ids and log-probs come from the engine and are never re-derived from text; every
generation carries the weights version it was sampled with; every weight update is verified."""
