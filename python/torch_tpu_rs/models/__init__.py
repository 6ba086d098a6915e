"""Reference models used by the examples, tests and benchmarks."""
from .llama import Llama, LlamaConfig
from .mlp import MLP

__all__ = ["Llama", "LlamaConfig", "MLP"]
