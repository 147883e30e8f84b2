"""Decoding methods sit behind one protocol and one registry; draft heads speculate with no draft model."""

from __future__ import annotations

import pytest

from planner.engine import Autoregressive, Deployment, DraftHeads, Workload, decoding_from_params, estimate, method_names
from planner.engine.decoding import DecodingMethod, METHODS, Resolvers
from planner.engine.decoding import decoding_from_params as from_registry

from .factories import h100_sxm, llama_3_1_8b


def test_every_method_is_registered_once_under_the_name_the_api_uses():
    assert sorted(method_names()) == ["ar", "block_diffusion", "diffusion", "draft_heads", "speculative"]
    for name, cls in METHODS.items():
        assert cls.method == name
        assert isinstance(from_registry(name, {"steps": 8, "draft_model": "x"}, Resolvers(resolve_model=lambda _s: llama_3_1_8b())),
                          DecodingMethod)  # fmt: skip


def test_only_the_autoregressive_method_is_the_reference():
    assert [name for name, cls in METHODS.items() if cls.is_reference] == ["ar"]


def test_an_unknown_method_is_an_error_that_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown decoding 'beam'; expected one of .*draft_heads"):
        decoding_from_params("beam", {})


def test_mtp_with_one_head_at_85_percent_acceptance_emits_1_85_tokens_per_cycle():
    # DeepSeek-V3 report sec. 5.4.3: second-token acceptance 85-90%, about 1.8x tokens/s.
    mtp = DraftHeads(head_kind="mtp", draft_tokens=1)
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm(), decoding=mtp),
                 Workload(prompt_tokens=1000, output_tokens=500), batch=1)  # fmt: skip
    assert e.tokens_per_step == pytest.approx(1.85)
    assert 1.3 < e.speedup_vs_ar < 1.85
    assert any("85-90%" in w for w in e.warnings)


def test_draft_heads_cost_less_than_a_draft_model_and_more_than_nothing():
    model, chip, work = llama_3_1_8b(), h100_sxm(), Workload(prompt_tokens=500, output_tokens=200)
    ar = estimate(model, Deployment(chip=chip, decoding=Autoregressive()), work, batch=1)
    for kind in ("mtp", "eagle", "medusa"):
        heads = estimate(model, Deployment(chip=chip, decoding=DraftHeads(head_kind=kind, draft_tokens=3, acceptance_rate=0.7)), work,
                         batch=1)  # fmt: skip
        assert heads.memory.weights_bytes_per_chip > ar.memory.weights_bytes_per_chip, kind
        assert heads.tpot_s < ar.tpot_s, kind


def test_eagle_holds_one_head_and_mtp_one_module_per_draft_token():
    model, chip, work = llama_3_1_8b(), h100_sxm(), Workload(prompt_tokens=500, output_tokens=200)

    def weights(kind: str) -> float:
        e = estimate(model, Deployment(chip=chip, decoding=DraftHeads(head_kind=kind, draft_tokens=3, acceptance_rate=0.7)), work)
        return e.memory.weights_bytes_per_chip

    base = estimate(model, Deployment(chip=chip), work).memory.weights_bytes_per_chip
    assert weights("mtp") - base == pytest.approx(3 * (weights("eagle") - base))


def test_draft_heads_refuse_an_unknown_kind():
    with pytest.raises(ValueError, match="head_kind must be one of mtp, eagle, medusa"):
        DraftHeads(head_kind="lookahead", draft_tokens=2)
