"""Reference models used by the examples, tests and benchmarks."""
from .llama import KVCache, Llama, LlamaConfig
from .mlp import MLP

__all__ = ["KVCache", "Llama", "LlamaConfig", "MLP"]
