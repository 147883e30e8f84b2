from __future__ import annotations

import pytest
import torch

from jobs.trials.model import ModelConfig

# Tiny shapes of each attention/FFN kind the catalog has; vocab 97 so no dimension coincides by accident.
TINY = dict(num_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=97, max_context_tokens=256)
KINDS = {
    "dense_gqa": dict(TINY, num_kv_heads=2, head_dim=16, attention_kind="gqa"),
    "mha_plain_ffn_tied": dict(TINY, num_kv_heads=4, attention_kind="mha", ffn_kind="plain", tie_word_embeddings=True),
    "mqa": dict(TINY, num_kv_heads=1, head_dim=16, attention_kind="mqa"),
    "moe": dict(TINY, num_kv_heads=2, num_experts=8, experts_per_token=2, num_shared_experts=1, moe_layer_count=1,
                moe_intermediate_size=32),
    "mla": dict(TINY, num_kv_heads=4, head_dim=24, attention_kind="mla", q_lora_rank=32, kv_lora_rank=32,
                qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
}


@pytest.fixture(scope="package", autouse=True)
def one_cpu_thread():
    """Tiny models run fastest on one thread; on a shared 2-core machine a spinning second thread makes them ~6x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=sorted(KINDS))
def tiny_config(request) -> ModelConfig:
    return ModelConfig.from_dict(KINDS[request.param], slug=f"tiny-{request.param}")


@pytest.fixture(scope="session")
def tiny_pair():
    from jobs.trials.tiny_pair import train_tiny_pair

    return train_tiny_pair(seed=0)
