"""Config strings are checked: a typo is an error naming the value and the choices, never a
silent LayerNorm, a missing position encoding or a plain MLP."""
import dataclasses

import pytest

from babeleval.errors import BabelevalError
from babeleval.models.config import DecoderConfig, EncoderConfig, from_json, to_json

BASE = DecoderConfig(arch="llama", vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1,
                     head_dim=8, intermediate_size=32, max_positions=64)


@pytest.mark.parametrize("field, value, choices", [("norm", "layernorm", "rms, layer"), ("mlp", "swiglu", "gated, plain"),
                                                   ("position", "rotary", "rope, learned, alibi"),
                                                   ("activation", "gelu_new", "silu, gelu_tanh, gelu")])
def test_decoder_kinds_are_checked(field, value, choices):
    with pytest.raises(BabelevalError, match=f"llama: {field}='{value}' is not one of {choices}"):
        dataclasses.replace(BASE, **{field: value})


def test_encoder_pooling_layer_types_and_saved_configs_are_checked():
    with pytest.raises(BabelevalError, match="pooling='max' is not one of cls, mean, pooler"):
        EncoderConfig(arch="bert", vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                      max_positions=64, pooling="max")
    with pytest.raises(BabelevalError, match="layer type 'local' is not one of full, sliding"):
        dataclasses.replace(BASE, layer_types=("local",))
    with pytest.raises(BabelevalError, match="norm='RMS'"):
        from_json(to_json(BASE).replace('"rms"', '"RMS"'))
    assert from_json(to_json(BASE)) == BASE
