"""Each piece the engine, the catalog and the trials share has one definition."""

from __future__ import annotations

import dataclasses

from hwcatalog import architecture
from planner.engine import ModelSpec, experts_touched, tensor_parallel_options, units
from planner.engine.accuracy import choose_layout


def test_dtype_sizes_are_the_catalogs_table():
    assert units.DTYPE_BYTES is architecture.DTYPE_BYTES
    assert units.DTYPES == tuple(architecture.DTYPE_BYTES)


def test_experts_touched_is_the_catalogs_function():
    assert experts_touched is architecture.experts_touched


def test_a_model_spec_holds_the_catalogs_shape_and_reads_its_fields_from_it():
    assert dataclasses.fields(ModelSpec)[1].type in ("ArchShape", architecture.ArchShape)
    for name in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "num_experts", "experts_per_token"):
        assert isinstance(getattr(ModelSpec, name), property), name


def test_the_trials_take_a_dict_of_the_shapes_fields():
    from jobs.runner import ARCH_FIELDS

    assert set(architecture.ArchShape.__dataclass_fields__) <= set(ARCH_FIELDS)


def test_the_accuracy_layout_takes_the_widest_tp_the_api_would_try():
    from planner.engine import MeasuredRow

    from tests.planner.engine.factories import h100_sxm, llama_2_70b

    row = MeasuredRow(id="x", model="m", chip="c", chip_count=8, tensor_parallel=None, weight_dtype="bf16", kv_dtype=None, batch=1,
                      prompt_tokens=1, output_tokens=1, decoding="ar", engine="TensorRT-LLM")  # fmt: skip
    assert choose_layout(row, llama_2_70b(), h100_sxm()) == (tensor_parallel_options(llama_2_70b(), h100_sxm(), 8)[-1], 1)
