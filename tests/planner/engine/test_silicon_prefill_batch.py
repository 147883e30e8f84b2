"""A disaggregated silicon row's prefill workers serve their published batch of prompts in one prefill of all of them."""

from __future__ import annotations

import io

import pytest

from planner.engine.silicon import read_silicon, silicon_estimates

from .factories import h100_sxm, llama_3_1_8b

HEADER = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
          "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,"
          "prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,"
          "decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms")  # fmt: skip


def _row(prefill_batch: int):
    line = (f"r{prefill_batch},silicon_concurrency=64,vllm,0.12,meta-llama/Llama-3.1-8B,h100_sxm,,disagg,4096,128,,,,,,,,,"
            f"{prefill_batch},1,1,1,1,1,1,64,1,1,1,1,1,1,100,10")
    return read_silicon(io.StringIO(HEADER + "\n" + line + "\n"))[0]


def test_a_prefill_worker_of_four_prompts_a_batch_serves_four_prefills_in_one_not_four_times_the_rate():
    """64 clients of 4,096-token prompts and 128-token answers on one prefill worker: the worker is the bottleneck. A
    batch of four prompts takes their prefill together, about four prompts' compute, so the pool serves about as many
    prompts a second as with one a batch (it had served four times as many: a batch at one prompt's time)."""
    one, four = (silicon_estimates(_row(k), llama_3_1_8b(), h100_sxm())["ttft_s"] for k in (1, 4))
    assert four.ttft_s == pytest.approx(one.ttft_s, rel=0.35)
    assert four.ttft_s > 0.5 * one.ttft_s
