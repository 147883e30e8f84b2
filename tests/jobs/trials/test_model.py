from __future__ import annotations

import json
import struct

import pytest
import torch

from jobs.trials.costs import param_counts
from jobs.trials.memory import plan_layers
from jobs.trials.model import ModelConfig, build_model
from jobs.trials.weights import load_weights, read_safetensors, rename

from .conftest import KINDS


def test_forward_gives_logits_of_every_kind(tiny_config):
    model = build_model(tiny_config)
    idx = torch.randint(0, 97, (3, 11))
    assert model(idx).shape == (3, 11, 97)


def test_built_parameters_match_the_count_the_costs_use(tiny_config):
    model = build_model(tiny_config)
    assert sum(p.numel() for p in model.parameters()) == param_counts(tiny_config).total


def test_static_cache_decode_equals_the_full_sequence_forward(tiny_config):
    model = build_model(tiny_config, seed=3)
    idx = torch.randint(0, 97, (2, 14))
    full = model(idx)  # cache-free causal forward
    model.setup_caches(2, 32)  # a longer cache than needed: stale, masked positions must not leak in
    with torch.inference_mode():
        steps = [model(idx[:, :9], torch.arange(9))]
        steps += [model(idx[:, t : t + 1], torch.tensor([t])) for t in range(9, 14)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-4, rtol=1e-4)


def test_block_mode_is_bidirectional_inside_the_block_and_causal_to_the_prefix():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    model = build_model(cfg)
    model.setup_caches(1, 16)
    prompt, block = torch.randint(0, 97, (1, 6)), torch.randint(0, 97, (1, 4))
    with torch.inference_mode():
        model(prompt, torch.arange(6))
        a = model(block, torch.arange(6, 10), mode="block")
        changed = block.clone()
        changed[0, 3] = (changed[0, 3] + 1) % 97
        b = model(changed, torch.arange(6, 10), mode="block")
        # Changing the block's last token changes the block's first position: it is seen bidirectionally.
        assert not torch.allclose(a[0, 0], b[0, 0])
        # Causal mode would not let position 6 see position 9.
        c = model(block, torch.arange(6, 10), mode="causal")
        d = model(changed, torch.arange(6, 10), mode="causal")
        torch.testing.assert_close(c[0, 0], d[0, 0])


def test_mla_is_built_as_mqa_with_the_same_kv_elements_and_says_so():
    cfg = ModelConfig.from_dict(KINDS["mla"])
    assert cfg.attn_kv_heads == 1 and 2 * cfg.attn_head_dim == cfg.kv_lora_rank + cfg.qk_rope_head_dim
    assert "MLA approximated as MQA" in cfg.approximations[0]


def test_the_scaled_copy_keeps_layer_shapes_and_the_moe_share():
    cfg = ModelConfig.from_dict(dict(KINDS["moe"], num_layers=8, moe_layer_count=6))
    small = cfg.with_layers(4)
    assert small.num_layers == 4 and small.moe_layers == 3 and small.hidden_size == cfg.hidden_size


def test_plan_layers_scales_down_when_the_budget_is_small():
    cfg = ModelConfig.from_dict(dict(KINDS["dense_gqa"], num_layers=16))
    plan = plan_layers(cfg, batch=1, max_seq=64, bytes_per_el=4, budget_bytes=600_000)
    assert 1 <= plan["layers_run"] < 16 and plan["scale_factor"] == 16 / plan["layers_run"]
    with pytest.raises(ValueError, match="lower the batch"):
        plan_layers(cfg, batch=1, max_seq=64, bytes_per_el=4, budget_bytes=1_000)


def _write_safetensors(path, tensors: dict[str, torch.Tensor]) -> None:
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def test_hugging_face_llama_names_load_from_a_local_safetensors_file(tmp_path):
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    source = build_model(cfg, seed=1)
    top = {"tok_embeddings.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
    per_layer = {"attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj", "attention.wv": "self_attn.v_proj",
                 "attention.wo": "self_attn.o_proj", "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj",
                 "feed_forward.w2": "mlp.down_proj", "attention_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    hf = {}
    for name, p in source.state_dict().items():
        if name in top:
            hf[top[name]] = p
        else:
            _, i, rest = name.split(".", 2)
            module = rest.removesuffix(".weight")
            hf[f"model.layers.{i}.{per_layer[module]}.weight"] = p
    assert all(rename(k) in source.state_dict() for k in hf)
    _write_safetensors(tmp_path / "model.safetensors", hf)
    assert set(read_safetensors(tmp_path / "model.safetensors")) == set(hf)

    target = build_model(cfg, seed=2)
    report = load_weights(target, tmp_path)
    assert report["missing"] == [] and report["unexpected"] == []
    idx = torch.randint(0, 97, (1, 8))
    torch.testing.assert_close(target(idx), source(idx))


def test_a_cache_free_forward_longer_than_the_cache_leaves_the_cache_usable():
    model = build_model(ModelConfig.from_dict(KINDS["dense_gqa"]))
    model.setup_caches(1, 8)
    idx = torch.randint(0, 97, (1, 12))
    with torch.inference_mode():
        assert model(idx).shape == (1, 12, 97)
        assert model(idx[:, :8], torch.arange(8)).shape == (1, 8, 97)
