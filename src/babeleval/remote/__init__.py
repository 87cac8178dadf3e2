"""Models behind an HTTP API (OpenAI-compatible servers: OpenAI, vLLM, llama.cpp, TGI ...):
generation tasks and multiple choice by generation, without JAX."""
