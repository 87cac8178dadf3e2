"""What every scoring and generation engine sets up alike: the model, its length limit and
batch sizing, the persistent compilation cache, and the weights placed on a mesh planned for
the KV cache the engine will hold (placement/sharding.py: place_model)."""
from __future__ import annotations

from ..placement.sharding import kv_bytes_per_token, place_model
from .compile_cache import default_compilation_cache


class PlacedEngine:
    def __init__(self, model, max_length: int | None, token_budget: int, batch_size: int | None, mesh,
                 cache_tokens: int):
        """max_length: the model's own limit by default (never more); cache_tokens: KV cache
        slots the engine holds at once (an auto mesh plans for them beside the weights)."""
        self.model = model
        self.max_length = min(max_length or model.config.max_positions, model.config.max_positions)
        self.token_budget = token_budget
        self.batch_size = batch_size
        default_compilation_cache()
        kv_bytes = kv_bytes_per_token(model.config, model.dtype) * cache_tokens
        self.mesh, self.params, self.placement = place_model(model, mesh, kv_bytes)
