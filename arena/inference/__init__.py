"""Inference: model loading and generation engines shared by LLM agents and LLM trainers.

* :mod:`arena.inference.models`  the tiny char-level Llama, SmolLM2 from its package, local HF folders.
* :mod:`arena.inference.engine`  `HFEngine` (transformers), `VLLMEngine` (vLLM, GPU), `BatchingEngine`.

torch / transformers / vllm are imported lazily: importing this package needs none of them.
"""
