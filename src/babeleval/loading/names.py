"""Map Hugging Face state-dict keys onto babeleval's parameter tree.

Each family is a short table of (HF module regex, our module path, kind). The kind
says how the tensor is laid out in the file: torch Linear ([out, in]), GPT-2's
Conv1D ([in, out]), a norm, an embedding, or a fused qkv projection to split.
Unmatched keys, unfilled parameters and wrong shapes are all reported at once.
"""
from __future__ import annotations

import logging
import re

import jax
import numpy as np

from ..errors import BabelevalError
from ..models.config import DecoderConfig, EncoderConfig, Seq2SeqConfig
from ..models.stack import slots
from ..quant import QArray
from .stacking import Stacks, stacked

LOGGER = logging.getLogger("babeleval")

LAYER = r"(?:model\.|model\.language_model\.|language_model\.model\.)layers\.(\d+)\."


def llama_rules(cfg: DecoderConfig):
    post_attn = "post_attn_norm" if cfg.sandwich_norm else "mlp_norm"
    return [
        (r"(?:model\.|model\.language_model\.|language_model\.model\.)(?:embed_tokens|word_embeddings)", "embed", "embed"),
        (r"(?:model\.|model\.language_model\.|language_model\.model\.)norm", "final_norm", "norm"),
        (r"(?:language_model\.)?lm_head", "lm_head", "linear"),
        (LAYER + r"self_attn\.([qkvo])_proj", r"layers_\1/attn/\2", "linear"),
        (LAYER + r"self_attn\.([qk])_norm", r"layers_\1/attn/\2_norm", "norm"),
        (LAYER + r"(?:self_attn\.qkv_proj|attention\.query_key_value)", r"layers_\1/attn", "fused_qkv"),  # Phi-3, Sarvam: rows q, k, v
        (LAYER + r"attention\.dense", r"layers_\1/attn/o", "linear"),  # Sarvam-MoE's names
        (LAYER + r"attention\.(q|k)(?:uery|ey)_layernorm", r"layers_\1/attn/\2_norm", "norm"),
        (LAYER + r"mlp\.gate_up_proj", r"layers_\1/mlp", "gate_up"),  # Phi-3: rows gate, up
        (LAYER + r"mlp\.(gate|up|down)_proj", r"layers_\1/mlp/\2", "linear"),
        (LAYER + r"input_layernorm", r"layers_\1/attn_norm", "norm"),
        (LAYER + r"post_attention_layernorm", r"layers_\1/" + post_attn, "norm"),
        (LAYER + r"pre_feedforward_layernorm", r"layers_\1/mlp_norm", "norm"),
        (LAYER + r"post_feedforward_layernorm", r"layers_\1/post_mlp_norm", "norm"),
        *EXPERT_RULES,
    ]


# Mixtures of experts: one file tensor per expert, stacked into [experts, in, out] (models/moe.py);
# "#N" marks expert N's slice.
EXPERT_RULES = [
    (LAYER + r"(?:block_sparse_moe|mlp)\.gate", r"layers_\1/mlp/router", "linear"),
    (LAYER + r"block_sparse_moe\.experts\.(\d+)\.w1", r"layers_\1/mlp/experts_gate#\2", "expert"),
    (LAYER + r"block_sparse_moe\.experts\.(\d+)\.w3", r"layers_\1/mlp/experts_up#\2", "expert"),
    (LAYER + r"block_sparse_moe\.experts\.(\d+)\.w2", r"layers_\1/mlp/experts_down#\2", "expert"),
    (LAYER + r"mlp\.experts\.(\d+)\.(gate|up|down)_proj", r"layers_\1/mlp/experts_\3#\2", "expert"),
    (LAYER + r"mlp\.experts\.(gate|up|down)_proj", r"layers_\1/mlp/experts_\2", "experts"),  # stacked (GGUF)
    (LAYER + r"mlp\.shared_experts?\.(gate|up|down)_proj", r"layers_\1/mlp/shared/\2", "linear"),
    (LAYER + r"mlp\.gate\.router_correction", r"layers_\1/mlp", "router_bias"),  # see CORRECTION_BIAS
    (LAYER + r"mlp\.shared_expert_gate", r"layers_\1/mlp/shared_gate", "linear"),
]


GPT2_RULES = [
    (r"(?:transformer\.)?wte", "embed", "embed"),
    (r"(?:transformer\.)?wpe", "pos_embed", "embed"),
    (r"(?:transformer\.)?ln_f", "final_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.ln_1", r"layers_\1/attn_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.ln_2", r"layers_\1/mlp_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.attn\.c_attn", r"layers_\1/attn", "gpt2_qkv"),
    (r"(?:transformer\.)?h\.(\d+)\.attn\.c_proj", r"layers_\1/attn/o", "conv1d"),
    (r"(?:transformer\.)?h\.(\d+)\.mlp\.c_fc", r"layers_\1/mlp/up", "conv1d"),
    (r"(?:transformer\.)?h\.(\d+)\.mlp\.c_proj", r"layers_\1/mlp/down", "conv1d"),
]
BLOOM_RULES = [
    (r"(?:transformer\.)?word_embeddings", "embed", "embed"),
    (r"(?:transformer\.)?word_embeddings_layernorm", "embed_norm", "norm"),
    (r"(?:transformer\.)?ln_f", "final_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.input_layernorm", r"layers_\1/attn_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.post_attention_layernorm", r"layers_\1/mlp_norm", "norm"),
    (r"(?:transformer\.)?h\.(\d+)\.self_attention\.query_key_value", r"layers_\1/attn", "bloom_qkv"),
    (r"(?:transformer\.)?h\.(\d+)\.self_attention\.dense", r"layers_\1/attn/o", "linear"),
    (r"(?:transformer\.)?h\.(\d+)\.mlp\.dense_h_to_4h", r"layers_\1/mlp/up", "linear"),
    (r"(?:transformer\.)?h\.(\d+)\.mlp\.dense_4h_to_h", r"layers_\1/mlp/down", "linear"),
]
NEOX = r"(?:gpt_neox\.)?"
GPT_NEOX_RULES = [
    (NEOX + r"embed_in", "embed", "embed"),
    (NEOX + r"final_layer_norm", "final_norm", "norm"),
    (r"embed_out", "lm_head", "linear"),
    (NEOX + r"layers\.(\d+)\.input_layernorm", r"layers_\1/attn_norm", "norm"),
    (NEOX + r"layers\.(\d+)\.post_attention_layernorm", r"layers_\1/mlp_norm", "norm"),
    (NEOX + r"layers\.(\d+)\.attention\.query_key_value", r"layers_\1/attn", "bloom_qkv"),
    (NEOX + r"layers\.(\d+)\.attention\.qkv_proj", r"layers_\1/attn", "fused_qkv"),  # GGUF: rows q, k, v
    (NEOX + r"layers\.(\d+)\.attention\.dense", r"layers_\1/attn/o", "linear"),
    (NEOX + r"layers\.(\d+)\.mlp\.dense_h_to_4h", r"layers_\1/mlp/up", "linear"),
    (NEOX + r"layers\.(\d+)\.mlp\.dense_4h_to_h", r"layers_\1/mlp/down", "linear"),
]
XGLM_LAYER = r"model\.layers\.(\d+)\."
XGLM_RULES = [
    (r"model\.embed_tokens", "embed", "embed"),
    (r"model\.layer_norm", "final_norm", "norm"),
    (r"lm_head", "lm_head", "linear"),
    (XGLM_LAYER + r"self_attn\.([qkv])_proj", r"layers_\1/attn/\2", "linear"),
    (XGLM_LAYER + r"self_attn\.out_proj", r"layers_\1/attn/o", "linear"),
    (XGLM_LAYER + r"self_attn_layer_norm", r"layers_\1/attn_norm", "norm"),
    (XGLM_LAYER + r"final_layer_norm", r"layers_\1/mlp_norm", "norm"),
    (XGLM_LAYER + r"fc1", r"layers_\1/mlp/up", "linear"),
    (XGLM_LAYER + r"fc2", r"layers_\1/mlp/down", "linear"),
]
T5_ENC = r"encoder\.block\.(\d+)\.layer\."
T5_DEC = r"decoder\.block\.(\d+)\.layer\."
T5_MLP = r"DenseReluDense\.(wi_0|wi_1|wi|wo)"
T5_MLP_NAMES = {"wi_0": "gate", "wi_1": "up", "wi": "up", "wo": "down"}
T5_RULES = [
    (r"shared", "embed", "embed"),
    (r"(?:encoder|decoder)\.embed_tokens", "", "skip"),  # copies of shared some files still hold
    (r"lm_head", "lm_head", "linear"),
    (r"encoder\.final_layer_norm", "encoder_norm", "norm"),
    (r"decoder\.final_layer_norm", "decoder_norm", "norm"),
    (T5_ENC + r"0\.SelfAttention\.([qkvo])", r"encoder_\1/attn/\2", "linear"),
    (T5_ENC + r"0\.SelfAttention\.relative_attention_bias", r"encoder_\1/relative_bias", "embed"),
    (T5_ENC + r"0\.layer_norm", r"encoder_\1/attn_norm", "norm"),
    (T5_ENC + r"1\." + T5_MLP, r"encoder_\1/mlp/\2", "t5_mlp"),
    (T5_ENC + r"1\.layer_norm", r"encoder_\1/mlp_norm", "norm"),
    (T5_DEC + r"0\.SelfAttention\.([qkvo])", r"decoder_\1/self_attn/\2", "linear"),
    (T5_DEC + r"0\.SelfAttention\.relative_attention_bias", r"decoder_\1/relative_bias", "embed"),
    (T5_DEC + r"0\.layer_norm", r"decoder_\1/self_norm", "norm"),
    (T5_DEC + r"1\.EncDecAttention\.([qkvo])", r"decoder_\1/cross_attn/\2", "linear"),
    (T5_DEC + r"1\.layer_norm", r"decoder_\1/cross_norm", "norm"),
    (T5_DEC + r"2\." + T5_MLP, r"decoder_\1/mlp/\2", "t5_mlp"),
    (T5_DEC + r"2\.layer_norm", r"decoder_\1/mlp_norm", "norm"),
]
M2M_RULES = [
    (r"model\.shared", "embed", "embed"),
    (r"model\.(?:encoder|decoder)\.embed_tokens", "", "skip"),
    (r"lm_head", "lm_head", "linear"),
    (r"model\.encoder\.layer_norm", "encoder_norm", "norm"),
    (r"model\.decoder\.layer_norm", "decoder_norm", "norm"),
    (r"model\.encoder\.layers\.(\d+)\.self_attn\.([qkv])_proj", r"encoder_\1/attn/\2", "linear"),
    (r"model\.encoder\.layers\.(\d+)\.self_attn\.out_proj", r"encoder_\1/attn/o", "linear"),
    (r"model\.encoder\.layers\.(\d+)\.self_attn_layer_norm", r"encoder_\1/attn_norm", "norm"),
    (r"model\.decoder\.layers\.(\d+)\.self_attn\.([qkv])_proj", r"decoder_\1/self_attn/\2", "linear"),
    (r"model\.decoder\.layers\.(\d+)\.self_attn\.out_proj", r"decoder_\1/self_attn/o", "linear"),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn\.([qkv])_proj", r"decoder_\1/cross_attn/\2", "linear"),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn\.out_proj", r"decoder_\1/cross_attn/o", "linear"),
    (r"model\.decoder\.layers\.(\d+)\.self_attn_layer_norm", r"decoder_\1/self_norm", "norm"),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn_layer_norm", r"decoder_\1/cross_norm", "norm"),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.final_layer_norm", r"\1_\2/mlp_norm", "norm"),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.fc1", r"\1_\2/mlp/up", "linear"),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.fc2", r"\1_\2/mlp/down", "linear"),
]
ENC = r"(?:bert\.|roberta\.)?"
ENCODER_RULES = [
    (ENC + r"embeddings\.word_embeddings", "embed", "embed"),
    (ENC + r"embeddings\.position_embeddings", "pos_embed", "embed"),
    (ENC + r"embeddings\.token_type_embeddings", "type_embed", "embed"),
    (ENC + r"embeddings\.LayerNorm", "embed_norm", "norm"),
    (ENC + r"encoder\.layer\.(\d+)\.attention\.self\.query", r"layers_\1/attn/q", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.attention\.self\.key", r"layers_\1/attn/k", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.attention\.self\.value", r"layers_\1/attn/v", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.attention\.output\.dense", r"layers_\1/attn/o", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm", r"layers_\1/attn_norm", "norm"),
    (ENC + r"encoder\.layer\.(\d+)\.intermediate\.dense", r"layers_\1/mlp/up", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.output\.dense", r"layers_\1/mlp/down", "linear"),
    (ENC + r"encoder\.layer\.(\d+)\.output\.LayerNorm", r"layers_\1/mlp_norm", "norm"),
    (ENC + r"pooler\.dense", "pooler", "linear"),
    (r"dense\.(\d+)", r"dense_\1", "linear"),  # sentence-transformers Dense modules (loading/sentence_transformers.py)
]
# The sigmoid router's correction bias (GLM-4-MoE's e_score_correction_bias, Sarvam's expert_bias)
# under a name the rule table's "<module>.(weight|bias)" form can match.
CORRECTION_BIAS = re.compile(r"\.(?:e_score_correction_bias|expert_bias)$")
# Buffers and heads that carry no parameter of ours.
IGNORED = re.compile(
    r"(rotary_emb\.inv_freq|\.attn\.(masked_)?bias$|\.attention\.(masked_)?bias$|position_ids|^cls\.|^lm_head\.|"
    r"vision_tower|multi_modal_projector|^model\.vision|embed_positions\.weights|EncDecAttention\.relative_attention_bias)"
)
# Parameters a checkpoint may legitimately lack: encoders saved without a pooler.
OPTIONAL = {"pooler"}


def rules_for(cfg) -> list:
    if isinstance(cfg, EncoderConfig):
        return ENCODER_RULES
    if isinstance(cfg, Seq2SeqConfig):
        return M2M_RULES if cfg.arch == "m2m_100" else T5_RULES
    return {"gpt2": GPT2_RULES, "bloom": BLOOM_RULES, "gpt_neox": GPT_NEOX_RULES, "xglm": XGLM_RULES}.get(cfg.arch) or llama_rules(cfg)


def _leaves(kind: str, leaf: str, path: str, array: np.ndarray, cfg) -> dict[str, np.ndarray]:
    """One file tensor -> {our/param/path: array} (several for fused qkv)."""
    if kind == "skip":
        return {}
    if kind == "embed":
        return {f"{path}/embedding": array}
    if kind == "t5_mlp":  # wi_0 (gated: the activation's input), wi_1 or wi (up), wo (down)
        parent, name = path.rsplit("/", 1)
        return {f"{parent}/{T5_MLP_NAMES[name]}/kernel": array.T}
    if kind == "norm":
        return {f"{path}/{'scale' if leaf == 'weight' else 'bias'}": array}
    if kind == "router_bias":
        return {f"{path}/router_bias": array}
    if kind == "expert":  # torch Linear [out, in] -> one expert's [in, out]
        return {path: array.T}
    if kind == "experts":  # every expert's [out, in] stacked -> [experts, in, out]
        return {path: array.transpose(0, 2, 1)}
    if kind in ("linear", "conv1d"):
        if leaf == "bias":
            return {f"{path}/bias": array}
        return {f"{path}/kernel": array.T if kind == "linear" else array}
    if kind == "gate_up":
        gate, up = _split_rows(array, 2)
        return {f"{path}/gate/kernel": gate.T, f"{path}/up/kernel": up.T}
    if kind == "gpt2_qkv":  # Conv1D [in, 3*D] or bias [3*D], order q, k, v
        parts = np.split(array, 3, axis=-1)
    elif kind == "fused_qkv":  # torch Linear rows: all query heads, then the key and value heads
        q_rows, kv_rows = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        parts = _split_rows(array, [q_rows, q_rows + kv_rows])
        parts = [p if leaf == "bias" else p.T for p in parts]
    else:  # bloom, gpt_neox: rows are [heads, (q, k, v), head_dim]
        h, d = cfg.num_heads, cfg.head_dim
        fused = array.reshape(h, 3, d, *array.shape[1:])
        parts = [fused[:, j].reshape(h * d, *array.shape[1:]) for j in range(3)]
        parts = [p if leaf == "bias" else p.T for p in parts]
    name = "bias" if leaf == "bias" else "kernel"
    return {f"{path}/{p}/{name}": part for p, part in zip("qkv", parts)}


def to_param_tree(tensors, cfg, expected, source: str, dtype, place=None) -> dict:
    """Rename file tensors (a dict, or (name, array) pairs read lazily) into our tree and check
    them against `expected` (an eval_shape tree). place(path, array in dtype) puts each
    parameter where it goes as soon as it is read (its device shards: loading/__init__.py),
    so the host holds one tensor at a time; by default parameters stay numpy arrays."""
    compiled = [(re.compile(rf"^{pat}\.(weight|bias)$"), target, kind) for pat, target, kind in rules_for(cfg)]
    want = {"/".join(str(k.key) for k in path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(expected)[0]}
    place = place or (lambda key, array: array)
    flat, unexpected, experts, notes = {}, [], {}, []
    stacks, table = Stacks(want, dtype, notes.append), layer_slots(cfg)

    for key, array in (tensors.items() if isinstance(tensors, dict) else tensors):
        key = CORRECTION_BIAS.sub(".router_correction.bias", key)
        for regex, target, kind in compiled:
            match = regex.match(key)
            if match:
                leaf = match.groups()[-1]
                if kind == "linear" and target == "lm_head" and getattr(cfg, "tie_embeddings", False):
                    break  # a tied head some exporters still write out
                array = array if isinstance(array, QArray) else np.asarray(array)
                for layer_name, part in _leaves(kind, leaf, match.expand(target), array, cfg).items():
                    name, slot = _slotted(layer_name, table)
                    if kind == "expert":
                        name, part = _stack_expert(name, slot, part, experts, want)
                        if part is None:
                            continue
                    _check_shape(source, name, part, want, slot is not None, layer_name.split("#")[0], key)
                    if name in want:  # a quantized weight is placed as it is stored
                        part = part if isinstance(part, QArray) else np.asarray(part).astype(dtype, copy=False)
                        if slot is not None:
                            part = stacks.add(name, slot, part)
                            if part is None:  # the stack's other layers are still to come
                                continue
                        part = place(name, part)
                    flat[name] = part
                break
        else:
            if not IGNORED.search(key):
                unexpected.append(key)
    missing = [k for k in want if k not in flat and k.split("/")[0] not in OPTIONAL]
    extra = [k for k in flat if k not in want]
    if notes:
        LOGGER.warning(f"{source}: {len(notes)} stacked weights dequantized at load ({notes[0]})")
    if unexpected or missing or extra:
        lines = [f"{source}: parameters do not match a {cfg.arch} model"]
        if missing:
            lacking = stacks.lacking()
            named = [n for k in missing for n in _per_layer_names(k, lacking.get(k), table)]
            lines.append(f"missing keys: {', '.join(sorted(named))}")
        if unexpected or extra:
            lines.append(f"unexpected keys: {', '.join(sorted(unexpected + extra))}")
        raise BabelevalError("; ".join(lines))
    tree: dict = {}
    for key, spec in want.items():
        array = flat.get(key)
        if array is None:  # optional and absent
            array = place(key, np.zeros(spec.shape, dtype))
        node = tree
        *parents, last = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = array
    return tree


def _split_rows(array, sections) -> list:
    """np.split along axis 0, a quantized tensor's rows included."""
    return array.split_rows(sections) if isinstance(array, QArray) else np.split(array, sections, axis=0)


def _stack_expert(name: str, layer_slot, part, pending: dict, want: dict):
    """Collect expert slices "path#N" of one layer's stacked parameter; (path, stacked array) once
    all of its experts are read (the host holds one parameter's experts at a time), else (path,
    None). An expert beyond the expected count stacks at once, so the shape check names it."""
    path, index = name.split("#")
    slots = pending.setdefault((path, layer_slot), {})
    slots[int(index)] = part
    count = want[path].shape[0 if layer_slot is None else 1] if path in want else 0
    if len(slots) < count and int(index) < count:
        return path, None
    del pending[(path, layer_slot)]
    return path, stacked([slots[i] for i in sorted(slots)])


def _check_shape(source: str, key: str, array, want: dict, stacked: bool, layer_name: str, tensor: str) -> None:
    """key: the parameter's path (a stack's, when stacked: one layer of it is expected);
    layer_name: the layer's own path; tensor: the file's name for it."""
    expected = tuple(want[key].shape)[1 if stacked else 0:] if key in want else None
    if expected is not None and tuple(array.shape) != expected:
        raise BabelevalError(f"{source}: shape mismatch for {layer_name}: expected {expected}, found "
                             f"{tuple(array.shape)} (file tensor {tensor})")


LAYER_PATH = re.compile(r"^(layers|encoder|decoder)_(\d+)/")


def layer_slots(cfg) -> dict:
    """{'layers' (a decoder's), 'encoder', 'decoder': {layer: (stacked path, slot or None)}}."""
    from ..models.decoder import decoder_groups

    if isinstance(cfg, DecoderConfig):
        return {"layers": slots(decoder_groups(cfg))}
    if isinstance(cfg, Seq2SeqConfig):
        from ..models.seq2seq import stack_groups

        return {side: slots(stack_groups(cfg, side), f"{side}_") for side in ("encoder", "decoder")}
    return {}


def _per_layer_names(name: str, lacking, table: dict):
    """A missing stacked parameter as the per-layer names the file lacks (layers_1/mlp/up/kernel):
    its `lacking` slots, or all of them."""
    for side, layers in table.items():
        for i, (path, slot) in layers.items():
            if slot is not None and name.startswith(path + "/") and (slot in lacking if lacking else True):
                yield f"{side}_{i}/{name[len(path) + 1:]}"
    if not any(name.startswith(path + "/") for layers in table.values() for path, slot in layers.values()
               if slot is not None):
        yield name


def _slotted(name: str, table: dict) -> tuple[str, int | None]:
    """A per-layer path (layers_3/attn/q/kernel) -> (its parameter's path, its slot on the stacked
    axis, or None for a layer that is not stacked)."""
    match = LAYER_PATH.match(name)
    if not match or match.group(1) not in table:
        return name, None
    path, slot = table[match.group(1)][int(match.group(2))]
    return f"{path}/{name[match.end():]}", slot
