"""A validation worker's own device lives with its runs: it is never a public chip that every plan ranks
(issue 12 item 6, issue 14 item 2)."""

from __future__ import annotations

import datetime as dt

from hwcatalog.services import chip_create_measured

PROBED = {
    "slug": "cpu-amd-epyc-7b13", "vendor": "AMD", "name": "AMD EPYC 7B13", "kind": "cpu", "memory_capacity_bytes": 32 * 2**30,
    "memory_bandwidth_bytes_per_s": 40e9, "peak_fp32_flops_per_s": 1.2e12, "peak_bf16_flops_per_s": 1.2e12,
    "as_of": dt.date(2026, 12, 1).isoformat(), "sources": ["measured by a STREAM-like probe and a matmul probe on the worker"],
    "notes": "measured",
}  # fmt: skip


def test_a_measured_device_is_kept_out_of_the_public_chip_list_and_listed_apart(catalog, anonymous_client):
    device = chip_create_measured(values=PROBED)
    assert device.measured
    public = anonymous_client.get("/api/v1/chips/?page_size=500").json()["results"]
    assert device.slug not in {c["slug"] for c in public} and public
    measured = anonymous_client.get("/api/v1/chips/?measured=true").json()["results"]
    assert [c["slug"] for c in measured] == [device.slug]
    # The runs that name it still read it.
    assert anonymous_client.get(f"/api/v1/chips/{device.slug}/").json()["measured"] is True


def test_a_plan_never_ranks_a_measured_device(catalog, token_client):
    device = chip_create_measured(values=PROBED)
    body = {
        "model": "llama-3.1-8b",
        "workload": {"prompt_tokens": 512, "output_tokens": 128, "concurrency": 4, "ttft_slo_s": 60, "tpot_slo_s": 5},
        "hardware": {"kinds": ["cpu"], "max_chips": 2},
    }
    plan = token_client.post("/api/v1/plans/", body, format="json").json()
    searched = {c["slug"] for c in plan["catalog_snapshot"]["chips"]}
    assert searched and device.slug not in searched
    assert all(row["chip_slug"] != device.slug for row in plan["results"]["ranked"])


def test_the_catalog_pages_do_not_list_a_measured_device(catalog, client):
    device = chip_create_measured(values=PROBED)
    page = client.get("/catalog/")
    assert page.status_code == 200 and device.slug.encode() not in page.content


def test_a_later_probe_raises_a_measured_device_to_its_best_and_never_lowers_it(db):
    from hwcatalog.services import measured_device_record

    first = measured_device_record(values={**PROBED, "peak_bf16_flops_per_s": 0.07e12})  # probed while the machine was busy
    assert first.measured and first.peak_bf16_flops_per_s == 0.07e12
    later = measured_device_record(values={**PROBED, "peak_bf16_flops_per_s": 0.75e12, "memory_bandwidth_bytes_per_s": 30e9,
                                           "sources": ["a later probe"]})  # fmt: skip
    assert later.pk == first.pk and later.peak_bf16_flops_per_s == 0.75e12
    assert later.memory_bandwidth_bytes_per_s == 40e9  # lower this time: kept
    assert later.sources[0] == PROBED["sources"][0] and "peak_bf16_flops_per_s" in later.sources[1] and "a later probe" in later.sources[1]
    busy = measured_device_record(values={**PROBED, "peak_bf16_flops_per_s": 0.03e12})
    assert busy.peak_bf16_flops_per_s == 0.75e12


def test_a_probe_never_overwrites_a_sourced_catalog_chip(catalog):
    from hwcatalog.models import Chip
    from hwcatalog.services import measured_device_record

    chip = Chip.objects.get(slug="amd-epyc-9654")
    kept = measured_device_record(values={**PROBED, "slug": chip.slug, "peak_fp32_flops_per_s": 99e12})
    assert kept.pk == chip.pk and kept.peak_fp32_flops_per_s == chip.peak_fp32_flops_per_s and not kept.measured
