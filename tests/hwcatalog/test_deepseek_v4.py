"""DeepSeek-V4's compressed attention (window + CSA + HCA layers, shared key-value MQA, grouped low-rank output),
Kimi K3's gated MLA + KDA hybrid with a latent MoE, and Kimi K2.7 Code, as the catalog rows hold them.

Every expected number is worked out here by hand from the configs (AIConfigurator's copies @095f58a5:
deepseek-ai--DeepSeek-V4-Flash_config.json, deepseek-ai--DeepSeek-V4-Pro_config.json, moonshotai--Kimi-K3_config.json)
and the published figures, independently of hwcatalog.architecture's formulas. The rows are read straight from
the YAML files (no database)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from hwcatalog import architecture
from hwcatalog.validation import validate_arch
from planner.catalog_specs import scaled_shape
from planner.engine import Hybrid, ModelSpec, SlidingWindow, SparseTopK
from planner.engine.attention import CompressedKV, attention_for

MODELS = Path(__file__).resolve().parents[2] / "hwcatalog" / "data" / "models"
GIB = 2**30


def _rows() -> dict[str, dict]:
    rows = {}
    for path in sorted(MODELS.glob("*.yaml")):
        for row in yaml.safe_load(path.read_text()) or []:
            rows[row["slug"]] = row
    return rows


ROWS = _rows()


def shape(slug: str) -> architecture.ArchShape:
    row = ROWS[slug]
    return architecture.ArchShape(**{k: row[k] for k in architecture.ArchShape.__dataclass_fields__ if k in row})


def spec(slug: str) -> ModelSpec:
    s = shape(slug)
    return ModelSpec(slug=slug, shape=s, total_params=float(architecture.parameter_count(s)),
                     active_params=float(architecture.active_parameter_count(s)), max_context_tokens=ROWS[slug]["max_context_tokens"])  # fmt: skip


# Hand-derived from the configs. Flash: d 4096, 43 layers, 64 heads, head_dim 512, q_lora 1024, o_lora 1024 x 8 groups,
# index 64 heads x 128, compress_ratios over the 43 layers: 2 x 0, 21 x 4, 20 x 128 (the 44th entry is the MTP layer's).
FLASH_ATTENTION = 4096 * 1024 + 1024 * 64 * 512 + 4096 * 512 + 64 * 512 * 1024 + 8 * 1024 * 4096  # 106,954,752
FLASH_CSA_EXTRA = 2 * 4096 * 2 * 512 + (1024 * 64 * 128 + 4096 * 64 + 2 * 4096 * 2 * 128)  # compressor + indexer
FLASH_HCA_EXTRA = 2 * 4096 * 512
FLASH_EXPERT = 3 * 4096 * 2048
FLASH_EMBEDDINGS = 2 * 129280 * 4096


def test_flash_row_maps_the_config():
    s = shape("deepseek-v4-flash")
    assert (s.num_layers, s.hidden_size, s.num_attention_heads, s.num_kv_heads, s.head_dim, s.attention_kind) == (43, 4096, 64, 1, 512, "mqa")
    assert (s.q_lora_rank, s.o_lora_rank, s.o_groups, s.sliding_window, s.sliding_window_layers) == (1024, 1024, 8, 128, None)
    assert (s.csa_layers, s.csa_compress_ratio, s.hca_layers, s.hca_compress_ratio) == (21, 4, 20, 128)
    assert (s.sparse_attention_topk, s.indexer_num_heads, s.indexer_head_dim) == (512, 64, 128)
    assert (s.num_experts, s.experts_per_token, s.num_shared_experts, s.moe_layer_count, s.moe_intermediate_size) == (256, 6, 1, 43, 2048)
    pro = shape("deepseek-v4-pro")
    assert (pro.csa_layers, pro.hca_layers, pro.o_groups, pro.sparse_attention_topk, pro.q_lora_rank) == (30, 31, 16, 1024, 1536)
    for slug in ("deepseek-v4-flash", "deepseek-v4-pro", "kimi-k3", "kimi-k2.7-code"):
        assert validate_arch(ROWS[slug]) == {}, slug


def test_flash_weights_per_layer_and_in_all():
    s = shape("deepseek-v4-flash")
    assert architecture.attention_params_per_layer(s) == FLASH_ATTENTION == 106_954_752
    assert architecture.compressed_attention_params(s) == 21 * FLASH_CSA_EXTRA + 20 * FLASH_HCA_EXTRA
    assert FLASH_CSA_EXTRA == 19_136_512 and architecture.indexer_params_per_layer(s) == 0  # V4's indexers are in the CSA extra
    mixers = 43 * FLASH_ATTENTION + 21 * FLASH_CSA_EXTRA + 20 * FLASH_HCA_EXTRA
    per_moe_layer = FLASH_EXPERT + 4096 * 256  # the shared expert and the router
    total = mixers + 43 * (256 * FLASH_EXPERT + per_moe_layer) + FLASH_EMBEDDINGS
    active = mixers + 43 * (6 * FLASH_EXPERT + per_moe_layer) + FLASH_EMBEDDINGS
    assert architecture.parameter_count(s) == total and architecture.active_parameter_count(s) == active
    # published: 284B total; 13B active without the input embedding (DeepSeek's convention), 13.53B with it
    assert total == pytest.approx(284e9, rel=0.005)
    assert active - FLASH_EMBEDDINGS / 2 == pytest.approx(13e9, rel=0.02)
    assert total == pytest.approx(ROWS["deepseek-v4-flash"]["total_params"], rel=0.02)
    assert active == pytest.approx(ROWS["deepseek-v4-flash"]["active_params"], rel=0.02)


def test_pro_counts_are_within_two_percent_of_the_published_ones():
    s = shape("deepseek-v4-pro")
    attention = 7168 * 1536 + 1536 * 128 * 512 + 7168 * 512 + 128 * 512 * 1024 + 16 * 1024 * 7168
    csa = 2 * 7168 * 2 * 512 + 1536 * 64 * 128 + 7168 * 64 + 2 * 7168 * 2 * 128
    mixers = 61 * attention + 30 * csa + 31 * 2 * 7168 * 512
    expert, per_layer, embeddings = 3 * 7168 * 3072, 3 * 7168 * 3072 + 7168 * 384, 2 * 129280 * 7168
    assert architecture.parameter_count(s) == mixers + 61 * (384 * expert + per_layer) + embeddings
    assert architecture.active_parameter_count(s) == mixers + 61 * (6 * expert + per_layer) + embeddings
    assert architecture.parameter_count(s) == pytest.approx(1.6e12, rel=0.02)
    assert architecture.active_parameter_count(s) - embeddings / 2 == pytest.approx(49e9, rel=0.02)
    assert architecture.active_parameter_count(s) == pytest.approx(ROWS["deepseek-v4-pro"]["active_params"], rel=0.02)


def test_kv_cache_per_token_and_the_published_one_million_token_figure():
    flash, pro = shape("deepseek-v4-flash"), shape("deepseek-v4-pro")
    # past the window: a 512 entry + a 128 indexer key per 4 tokens on a CSA layer, a 512 entry per 128 on an HCA layer
    assert architecture.kv_cache_elements_per_token(flash) == 21 * (512 + 128) / 4 + 20 * 512 / 128 == 3440
    assert architecture.kv_cache_bytes_per_token(flash, "bf16") == 6880
    assert architecture.kv_cache_elements_per_token(pro) == 30 * 640 / 4 + 31 * 4 == 4924
    assert architecture.compressed_window_elements(flash) == 43 * 128 * 512
    # AINews 2026-04-25: V4-Pro's 1M-token cache is 9.62 GiB a sequence in bf16, 8.7x less than DeepSeek-V3.2's
    v4_pro = architecture.kv_cache_bytes_per_token(pro, "bf16") * 2**20 + architecture.compressed_window_elements(pro) * 2
    assert v4_pro / GIB == pytest.approx(9.62, abs=0.01)
    v32 = architecture.kv_cache_bytes_per_token(shape("deepseek-v3.2"), "bf16") * 2**20
    assert v32 / v4_pro == pytest.approx(8.7, abs=0.05)


def test_the_engine_holds_reads_and_attends_what_the_layers_do():
    att = attention_for(shape("deepseek-v4-flash"))
    assert isinstance(att, Hybrid)
    window, csa, hca = att.parts
    assert window == SlidingWindow(inner=CompressedKV(num_layers=43, num_heads=64, head_dim=512), window_tokens=128)
    # Each compressor keeps FP32 key-value and score buffers of the group it pools (2 x ratio x coff x width x 4 bytes,
    # coff 2 on the overlapping CSA windows; AIConfigurator deepseek_v4.py): a CSA layer's, 512 wide, and its
    # indexer's, 128 wide, 40,960 bytes; an HCA layer's 524,288.
    assert isinstance(csa, SparseTopK) and csa.inner == CompressedKV(num_layers=21, num_heads=64, head_dim=512, compress_ratio=4,
                                                                     state_bytes_per_layer=2 * 4 * 2 * (512 + 128) * 4)  # fmt: skip
    assert csa.top_k == 2048  # 512 entries of 4 tokens
    assert hca == CompressedKV(num_layers=20, num_heads=64, head_dim=512, compress_ratio=128, state_bytes_per_layer=2 * 128 * 512 * 4)
    assert att.kv_elements_per_token == 43 * 512 + 3440
    c = np.array([64.0, 1_000.0, 100_000.0, 1_048_576.0])
    held = att.kv_held_tokens(c) * att.kv_elements_per_token
    assert held == pytest.approx(43 * 512 * np.minimum(c, 128) + 3440 * c, rel=1e-12)
    read = att.kv_read_tokens(c) * att.kv_elements_per_token
    expected_read = 43 * 512 * np.minimum(c, 128) + 21 * 512 * np.minimum(c / 4, 512) + 21 * 128 * c / 4 + 20 * 512 * c / 128
    assert read == pytest.approx(expected_read, rel=1e-12)
    # QK^T + AV over each entry read: 4 x 64 heads x 512; the indexer scores every pooled key: 2 x 64 x 128
    flops = att.attended_positions(c) * att.decode_flops_per_position
    expected_flops = (4 * 64 * 512 * (43 * np.minimum(c, 128) + 21 * np.minimum(c / 4, 512) + 20 * c / 128)
                      + 21 * 2 * 64 * 128 * c / 4)  # fmt: skip
    assert flops == pytest.approx(expected_flops, rel=1e-12)
    assert np.all(att.kv_share_per_chip(np.array([1.0, 8.0])) == 1.0)  # one key-value head: every TP rank holds it


def test_pro_holds_its_compressors_buffers_once_a_sequence_on_every_rank():
    """AIConfigurator (deepseek_v4.py, get_kvcache_bytes_per_sequence) counts 17.5 MB of FP32 compressor state a
    V4-Pro sequence: 30 CSA layers of 40,960 bytes and 31 HCA layers of 524,288, whatever the KV dtype and length,
    whole on every TP rank like the one key-value head. At 1,000 tokens in FP8 that is more than the cache itself."""
    from planner.engine import ChipSpec, Deployment, Workload, estimate

    model = spec("deepseek-v4-pro")
    state = 30 * 40_960 + 31 * 524_288
    assert state == 17_481_728
    assert model.attention.fixed_bytes_per_sequence(np.array([1.0, 8.0])) == pytest.approx([state, state])
    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=4e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15, "fp8": 4.5e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=1000)  # fmt: skip
    per_sequence = {}
    for prompt in (999, 9_999):
        e = estimate(model, Deployment(chip=chip, chip_count=8, tensor_parallel=8, weight_dtype="fp8", kv_dtype="fp8"),
                     Workload(prompt_tokens=prompt, output_tokens=1), batch=1)  # fmt: skip
        per_sequence[prompt + 1] = float(np.asarray(e.memory.kv_bytes_per_sequence_per_chip).ravel()[0])
    cache = {t: (61 * 512 * 128 + 4924 * t) * 1.0 for t in per_sequence}  # window + pooled entries, FP8, whole on a rank
    logits = per_sequence[1_000] - cache[1_000] - state  # the logits row and paging, the same at both lengths
    assert per_sequence[10_000] - per_sequence[1_000] == pytest.approx(cache[10_000] - cache[1_000], rel=0.01)
    assert 0 <= logits < 0.2 * state and state > cache[1_000]


def test_a_disaggregated_transfer_moves_the_compressors_buffers_once_from_every_rank():
    from planner.engine import ChipSpec, Deployment
    from planner.engine.simulation import kv_transfer_for

    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=4e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=1000)  # fmt: skip
    transfer = kv_transfer_for(spec("deepseek-v4-pro"), Deployment(chip=chip, chip_count=2, tensor_parallel=2))
    assert transfer.bytes_per_request == 2 * 17_481_728  # each rank holds (and sends) its own copy
    one, two = (float(transfer.seconds(np.array([t]))[0]) for t in (1_000, 2_000))
    assert one - transfer.latency_s > 2 * 17_481_728 / transfer.bytes_per_s  # the buffers ride with the first token
    assert two - one < one - transfer.latency_s  # and do not grow with the prompt


def test_a_causal_prefill_pairs_each_query_with_its_window_top_k_and_pooled_entries_and_scores_every_pooled_key():
    att = attention_for(shape("deepseek-v4-flash"))
    p = 10_000.0
    pairs = float(att.causal_pairs(p)) * att.prefill_flops_per_pair
    window = 128**2 / 2 + (p - 128) * 128  # sum over queries of min(i, 128)
    top_k = 2048**2 / 2 + (p - 2048) * 2048  # of min(i, 4 x 512) tokens' worth = min(i / 4, 512) entries
    indexer = 21 * 2 * 64 * 128 * p**2 / 2 / 4  # the indexer scores every earlier pooled key of every query
    expected = 4 * 64 * 512 * (43 * window + 21 * top_k / 4 + 20 * p**2 / 2 / 128) + indexer
    assert pairs == pytest.approx(expected, rel=1e-12)


def test_pro_decode_flops_at_one_million_tokens_are_about_27_percent_of_v32():
    """The card: at 1M tokens V4-Pro needs 27% of DeepSeek-V3.2's single-token inference FLOPs. Weights 2 FLOPs a
    matmul parameter, attention as the engine counts it; DeepSeek's own accounting is not published, so 2 points."""
    def flops(slug: str, context: float) -> float:
        model = spec(slug)
        return 2.0 * model.matmul_params + float(model.attention.attended_positions(context)) * model.attention.decode_flops_per_position

    assert flops("deepseek-v4-pro", 2.0**20) / flops("deepseek-v3.2", 2.0**20) == pytest.approx(0.27, abs=0.02)


def test_weights_in_the_checkpoint_formats():
    s = shape("deepseek-v4-flash")
    total, embeddings = architecture.parameter_count(s), FLASH_EMBEDDINGS
    # mxfp4 (4.25 bits) for all but the 16-bit embeddings and head (the FP8 attention is counted at 4.25 too)
    assert architecture.weight_bytes(s, "fp4", "mxfp4") == pytest.approx((total - embeddings) * 4.25 / 8 + embeddings * 2, rel=1e-12)
    # the compressors and indexers are attention modules (nvidia/DeepSeek-V4-*-NVFP4 exclude *.attn.*)
    assert architecture.sixteen_bit_module_params(s, ["attention"]) == 43 * FLASH_ATTENTION + 21 * FLASH_CSA_EXTRA + 20 * FLASH_HCA_EXTRA
    outputs = 43 * (64 * 512 * 1024 + 8 * 1024 * 4096)
    assert architecture.sixteen_bit_module_params(s, ["attention_inputs"]) == 43 * FLASH_ATTENTION - outputs + 21 * FLASH_CSA_EXTRA + 20 * FLASH_HCA_EXTRA


def test_a_scaled_copy_keeps_both_compressed_kinds_inside_its_layers():
    for slug in ("deepseek-v4-flash", "deepseek-v4-pro"):
        for layers in (2, 4, 10):
            s = scaled_shape(shape(slug), layers)
            assert s.csa_layers >= 1 and s.hca_layers >= 1 and s.csa_layers + s.hca_layers <= layers
            attention_for(s)  # builds
    # a draft head's one-layer copy (decoding/draft_heads.py replaces num_layers only): one CSA layer, no HCA
    one = dataclasses.replace(shape("deepseek-v4-flash"), num_layers=1, moe_layer_count=1)
    assert (architecture.csa_layer_count(one), architecture.hca_layer_count(one)) == (1, 0)
    assert architecture.kv_cache_elements_per_token(one) == (512 + 128) / 4
    assert architecture.attention_mixer_params(one) == FLASH_ATTENTION + FLASH_CSA_EXTRA
    assert [p.name for p in attention_for(one).parts] == ["sliding_window(shared_kv_mqa, W=128)", "sparse_top_k(compressed_kv(r=4), k=2048)"]


@pytest.mark.parametrize(("change", "field"), [
    ({"attention_kind": "gqa", "num_kv_heads": 1}, "attention_kind"),
    ({"sparse_attention_topk": None, "indexer_num_heads": None, "indexer_head_dim": None}, "sparse_attention_topk"),
    ({"o_groups": 7}, "o_groups"),
    ({"o_lora_rank": None}, "o_lora_rank"),
    ({"sliding_window": None}, "sliding_window"),
    ({"csa_compress_ratio": None}, "csa_compress_ratio"),
    ({"csa_layers": 30}, "csa_layers"),
    ({"sliding_window_layers": 2}, "sliding_window_layers"),
])  # fmt: skip
def test_validation_refuses_an_incomplete_compressed_shape(change, field):
    assert field in validate_arch({**ROWS["deepseek-v4-flash"], **change})


def test_the_new_fields_stand_alone_only_where_they_mean_something():
    assert "o_lora_rank" in validate_arch({**ROWS["deepseek-v3.2"], "o_lora_rank": 1024})
    assert "moe_latent_size" in validate_arch({**ROWS["llama-3.1-8b"], "moe_latent_size": 1024})


# Kimi K3 (text_config): d 7168, 93 layers = 24 gated MLA + 69 KDA, layer 0 dense (33792), 92 LatentMoE layers of 896
# experts (top 16) at the 3584 latent with moe_intermediate_size 3072, 2 shared experts at 7168, vocab 163840.
K3_MLA = 7168 * 1536 + 1536 * 96 * 192 + 7168 * (512 + 64) + 512 * 96 * (128 + 128) + 96 * 128 * 7168 + 7168 * 96 * 128  # + gate
K3_KDA = 7168 * (4 * 96 * 128 + 2 * 96) + 3 * 96 * 128 * 4 + 96 * 128 * 7168  # q,k,v,gate; beta + decay; conv; o (Gated DeltaNet)
K3_EXPERT, K3_LATENT = 3 * 3584 * 3072, 2 * 7168 * 3584
K3_PER_MOE = 2 * 3 * 7168 * 3072 + 7168 * 896 + K3_LATENT
K3_DENSE, K3_EMBEDDINGS = 3 * 7168 * 33792, 2 * 163840 * 7168


def test_kimi_k3_counts_the_gated_mla_the_kda_layers_and_the_latent_moe():
    s = shape("kimi-k3")
    assert architecture.attention_params_per_layer(s) == K3_MLA
    assert architecture.linear_params_per_layer(s) == K3_KDA
    assert architecture.params_per_expert(s) == K3_EXPERT and architecture.moe_latent_params_per_layer(s) == K3_LATENT
    layers = 24 * K3_MLA + 69 * K3_KDA + K3_DENSE
    total = layers + 92 * (896 * K3_EXPERT + K3_PER_MOE) + K3_EMBEDDINGS
    active = layers + 92 * (16 * K3_EXPERT + K3_PER_MOE) + K3_EMBEDDINGS
    assert architecture.parameter_count(s) == total and architecture.active_parameter_count(s) == active
    # NVIDIA NeMo AutoModel's Kimi K3 page: 2.8T total / 104B activated
    assert total == pytest.approx(2.8e12, rel=0.02) and active == pytest.approx(104e9, rel=0.02)


def test_kimi_k3_caches_the_mla_latent_and_holds_a_kda_state():
    s = shape("kimi-k3")
    assert architecture.kv_cache_elements_per_token(s) == 24 * (512 + 64)
    assert architecture.linear_state_elements(s) == 69 * (96 * 128 * 128 + 3 * 3 * 96 * 128)
    att = attention_for(s)
    assert isinstance(att, Hybrid) and [p.name for p in att.parts] == ["mla", "linear_state"]


def test_kimi_k3_weights_are_mxfp4_experts_and_bf16_elsewhere():
    s, row = shape("kimi-k3"), ROWS["kimi-k3"]
    experts = 92 * 896 * K3_EXPERT
    expected = experts * 4.25 / 8 + (architecture.parameter_count(s) - experts) * 2
    assert architecture.weight_bytes(s, "fp4", row["checkpoint_format"], row["sixteen_bit_modules"]) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(1.56e12, rel=0.01)  # the released files, 1.56 TB (github.com/JustVugg/colibri docs/kimi_k3.md)


def test_kimi_k2_7_code_is_kimi_k2_6s_architecture():
    assert dataclasses.asdict(shape("kimi-k2.7-code")) == dataclasses.asdict(shape("kimi-k2.6"))
    assert ROWS["kimi-k2.7-code"]["sixteen_bit_modules"] == ROWS["kimi-k2.6"]["sixteen_bit_modules"]


@pytest.mark.parametrize(("hf_id", "slug"), [
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4-flash"), ("nvidia/DeepSeek-V4-Flash-NVFP4", "deepseek-v4-flash"),
    ("sgl-project/DeepSeek-V4-Flash-FP8", "deepseek-v4-flash"), ("deepseek-ai/DeepSeek-V4-Pro", "deepseek-v4-pro"),
    ("nvidia/DeepSeek-V4-Pro-NVFP4", "deepseek-v4-pro"), ("sgl-project/DeepSeek-V4-Pro-FP8", "deepseek-v4-pro"),
    ("moonshotai/Kimi-K3", "kimi-k3"), ("nvidia/Kimi-K2.7-Code-NVFP4", "kimi-k2.7-code"),
])  # fmt: skip
def test_each_aiconfigurator_id_names_one_row(hf_id, slug):
    owners = [r["slug"] for r in ROWS.values() if hf_id == r.get("hf_id") or hf_id in (r.get("hf_aliases") or [])]
    assert owners == [slug]
