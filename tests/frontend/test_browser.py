"""The pages in a real browser: Debian's Chromium, headless, driven by Playwright against
pytest-django's live_server. Screenshots go to artifacts/screenshots/ (git-ignored)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from hwcatalog.services import catalog_load
from tests.frontend.conftest import CHAT, DANA_PASSWORD, make_plan

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"

pytestmark = pytest.mark.django_db(transaction=True)

# A canvas's pixels as a data URL, and a blank canvas of the same size: different = something was drawn.
CANVAS_DRAWN = """id => {
  const c = document.getElementById(id);
  const blank = document.createElement('canvas'); blank.width = c.width; blank.height = c.height;
  return c.width > 0 && c.toDataURL() !== blank.toDataURL();
}"""
CHART_READY = "id => typeof Chart !== 'undefined' && !!Chart.getChart(document.getElementById(id))"
CHART_POINTS = "id => { const ch = Chart.getChart(document.getElementById(id)); return ch ? ch.data.datasets.map(d => d.data.length) : null; }"


@pytest.fixture(scope="module")
def browser(django_db_setup):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing; CI must run the browser tests (apt-get install chromium).")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); browser tests skipped on this machine.")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the tests' own ORM
    # calls (and pytest-django's flushes) are still plain synchronous code, so Django's
    # async-safety check is lifted while the browser is open.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server):
    catalog_load()
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # What the Content-Security-Policy refused (Chromium reports each on the console).
    page.on("console", lambda message: "Content Security Policy" in message.text and errors.append(message.text))
    page.base = live_server.url
    yield page
    context.close()
    assert not errors, f"JavaScript errors or Content-Security-Policy violations: {errors}"


def sign_in(page, username: str, password: str) -> None:
    """Through the real sign-in page, as a person would."""
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")


@pytest.fixture
def signed_in_page(page):
    """The browser with Dana signed in (any active account may plan and validate)."""
    get_user_model().objects.create_user("dana", password=DANA_PASSWORD)
    page.goto(page.base + "/accounts/login/")
    sign_in(page, "dana", DANA_PASSWORD)
    page.wait_for_selector("#sign-out")
    return page


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_plan_form_to_results_with_charts_and_row_selection(signed_in_page):
    page = signed_in_page
    page.goto(page.base + "/")
    assert page.evaluate("typeof Chart") == "undefined"  # the form page does not load the chart library
    page.fill("#model-filter", "llama 3.1 70")
    assert page.locator("#id_model option:not([hidden])").count() >= 1
    page.select_option("#id_model", "llama-3.1-70b")
    page.click("button[data-preset=code]")  # presets fill the fields
    assert page.input_value("#id_output_tokens") == "64"
    page.click("button[data-preset=chat]")
    assert page.input_value("#id_prompt_tokens") == "1000" and page.input_value("#id_concurrency") == "64"
    assert page.get_attribute("button[data-preset=chat]", "aria-pressed") == "true"
    shot(page, "plan-form")
    page.click("#plan-submit")
    page.wait_for_url(re.compile(r"/plans/[0-9a-f-]{36}/$"))

    assert page.evaluate("typeof Chart") == "function"  # the vendored library loaded from /static/
    assert page.locator("#ranked-table tbody tr").count() > 10
    page.wait_for_function("() => window.hwCharts && window.hwCharts.roofline && window.hwCharts.memory")
    scatter = page.evaluate(CHART_POINTS, "scatter-chart")
    assert scatter[2] > 10 and scatter[1] >= 1  # feasible points and the Pareto front
    # Each feasible point carries its 80% ranges of cost and latency, drawn as error bars.
    bars = page.evaluate("Chart.getChart(document.getElementById('scatter-chart')).data.datasets[2].data"
                         ".filter(p => 0 < p.yLow && p.yLow < p.yHigh && 0 < p.xLow && p.xLow < p.xHigh).length")
    assert bars == scatter[2]
    roofline = page.evaluate(CHART_POINTS, "roofline-chart")
    assert len(roofline) >= 4 and roofline[-1] == 1  # roofs + ridges + the operating points
    assert page.evaluate("Chart.getChart(document.getElementById('roofline-chart')).options.scales.x.type") == "logarithmic"
    for canvas in ("scatter-chart", "roofline-chart", "memory-chart"):
        assert page.evaluate(CANVAS_DRAWN, canvas), f"{canvas} is blank"
    assert "#1 " in page.text_content("#selected-label")
    assert "cheapest feasible configuration" in page.text_content("#explanation")
    shot(page, "plan-results")
    # At 1,280 px the page does not scroll sideways and the ranking fits its box, its Validate column in view.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    widths = page.evaluate("(() => { const w = document.querySelector('#ranked-table').closest('.table-wrap'); return [w.scrollWidth, w.clientWidth, Array.from(document.querySelectorAll('#ranked-table thead th')).map(th => th.offsetWidth)]; })()")
    assert widths[0] <= widths[1], str(widths)

    # The ranking shows the cheapest configuration of each chip; a chip's others open in place, or all of them by a link.
    total = page.locator("#ranked-table tbody tr").count()
    best = page.locator("#ranked-table tbody tr:visible").count()
    assert 1 <= best < total
    chip = page.get_attribute("#ranked-table a[data-expand-chip] >> nth=0", "data-expand-chip")
    page.click("#ranked-table a[data-expand-chip] >> nth=0")
    assert page.locator(f"#ranked-table tbody tr[data-chip='{chip}']:visible").count() == page.locator(f"#ranked-table tbody tr[data-chip='{chip}']").count() > 1
    page.click("#view-all")
    page.wait_for_url(re.compile(r"view=all"))
    page.wait_for_function("() => window.hwCharts && window.hwCharts.roofline && window.hwCharts.memory")
    shown = page.locator("#ranked-table tbody tr:visible").count()
    assert shown == page.locator("#ranked-table tbody tr").count() <= 25  # all of a page's rows shown, 25 to a page

    before = page.evaluate("hwCharts.roofline.data.datasets.map(d => d.label).join('|')")
    page.click("#ranked-table tbody tr[data-rank='3'] td:nth-child(2)")
    assert "#3 " in page.text_content("#selected-label")
    assert page.get_attribute("#ranked-table tbody tr[data-rank='3']", "aria-selected") == "true"
    after = page.evaluate("hwCharts.roofline.data.datasets.map(d => d.label).join('|')")
    assert after != before and "Decode (#3" in after
    assert page.text_content("#memory-table [data-mem=weights_bytes]").endswith("GB")
    page.focus("#ranked-table tbody tr[data-rank='2']")
    page.keyboard.press("Enter")
    assert "#2 " in page.text_content("#selected-label")

    page.click("#ranked-table thead th:nth-child(5) button")  # sort by TTFT
    ttfts = page.eval_on_selector_all("#ranked-table tbody tr td:nth-child(5)", "tds => tds.map(td => parseFloat(td.dataset.value))")
    assert ttfts == sorted(ttfts)

    # Phone width: the page does not scroll sideways, the table does.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_function("() => window.hwCharts && window.hwCharts.memory")
    assert page.evaluate("document.documentElement.scrollWidth") <= 391
    assert page.evaluate("(() => { const w = document.querySelector('.table-wrap'); return w.scrollWidth > w.clientWidth; })()")
    shot(page, "plan-results-phone")


def test_invalid_input_shows_field_errors_in_the_page(signed_in_page):
    page = signed_in_page
    page.goto(page.base + "/")
    page.fill("#id_prompt_tokens", "200000")
    page.fill("#id_output_tokens", "0")
    page.select_option("#id_decoding_method", "speculative")
    page.check("input[name=kinds][value=gpu]")
    page.click("#plan-submit")
    page.wait_for_selector("#form-errors")
    assert "greater than or equal to 1" in page.text_content("#err-output_tokens")
    assert page.is_visible("#err-output_tokens")
    assert page.get_attribute("#id_output_tokens", "aria-invalid") == "true"
    assert page.evaluate("document.activeElement.id") == "id_output_tokens"  # focus goes to the first error
    assert page.input_value("#id_prompt_tokens") == "200000" and page.input_value("#id_decoding_method") == "speculative"
    assert page.is_visible("#id_draft_model")  # the chosen method's settings stay open
    # Fix the field: the server's next objections are the missing draft model, then the context length.
    page.fill("#id_output_tokens", "300")
    page.click("#plan-submit")
    page.wait_for_selector("#err-draft_model")
    assert "needs a draft model" in page.text_content("#err-draft_model")
    page.select_option("#id_draft_model", "llama-3.2-1b")
    page.click("#plan-submit")
    page.wait_for_selector("#err-prompt_tokens")
    assert "exceeds llama-3.1-70b's context" in page.text_content("#err-prompt_tokens")
    assert page.is_checked("input[name=kinds][value=gpu]")  # choices survive the round trip
    shot(page, "plan-form-errors")


def test_an_anonymous_visitor_is_sent_to_sign_in_and_back_to_the_form(page):
    get_user_model().objects.create_user("dana", password=DANA_PASSWORD)
    page.goto(page.base + "/?model=qwen2.5-7b")
    assert page.locator("#plan-submit").count() == 0
    assert "Sign in to run a plan" in page.text_content("#sign-in-to-plan")
    shot(page, "plan-form-anonymous")
    page.click("#sign-in-to-plan a")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/%3Fmodel%3Dqwen2\.5-7b$"))
    shot(page, "sign-in")
    sign_in(page, "dana", "not-her-password")
    page.wait_for_selector("#login-errors")
    assert page.input_value("#id_username") == "dana"  # kept; the password is not
    sign_in(page, "dana", DANA_PASSWORD)
    page.wait_for_url(re.compile(r"/\?model=qwen2\.5-7b$"))
    assert page.is_visible("#plan-submit") and page.input_value("#id_model") == "qwen2.5-7b"
    assert page.text_content("#sign-out button").strip() == "Sign out (dana)"
    page.click("#sign-out button")
    page.wait_for_selector("#sign-in")
    assert page.locator("#plan-submit").count() == 0


def test_catalog_compare_and_history_pages(page):
    a = make_plan(CHAT)
    b = make_plan({**CHAT, "workload": {**CHAT["workload"], "concurrency": 8}})
    page.goto(page.base + "/catalog/")
    assert page.locator("#chips-table tbody tr").count() > 10
    shot(page, "catalog")
    page.click("a[href='/catalog/chips/nvidia-h100-sxm/']")
    page.wait_for_url("**/catalog/chips/nvidia-h100-sxm/")
    page.wait_for_function(CHART_READY, arg="roofline-chart")
    assert page.evaluate(CANVAS_DRAWN, "roofline-chart")
    shot(page, "chip-detail")
    page.goto(page.base + "/catalog/models/llama-3.1-70b/")
    shot(page, "model-detail")
    page.goto(page.base + "/catalog/compare/?chips=nvidia-h100-sxm,amd-epyc-9654,google-tpu-v5e")
    page.wait_for_function(CHART_READY, arg="roofline-chart")
    assert len(page.evaluate(CHART_POINTS, "roofline-chart")) == 6  # three roofs, three ridges
    assert page.evaluate(CANVAS_DRAWN, "roofline-chart")
    shot(page, "chip-compare")
    page.goto(page.base + "/catalog/compare/?chips=nvidia-h100-sxm,nope")
    assert "Unknown chip slug: nope" in page.text_content("#compare-problems")

    page.goto(page.base + "/plans/")
    assert page.locator("#plans-table tbody tr").count() == 2
    page.check(f"input[name=a][value='{a.id}']")
    page.check(f"input[name=b][value='{b.id}']")
    shot(page, "plans")
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#compare-inputs")
    assert "Concurrent requests" in page.text_content("#compare-inputs tr.diff")
    page.wait_for_function(CHART_READY, arg="compare-chart")
    assert page.evaluate(CHART_POINTS, "compare-chart") == [len(a.results["ranked"]), len(b.results["ranked"])]  # both plans, overlaid
    assert page.evaluate(CANVAS_DRAWN, "compare-chart")
    page.click("button[data-compare-latency=ttft_s]")
    assert page.evaluate("Chart.getChart(document.getElementById('compare-chart')).options.scales.x.title.text") == "TTFT"
    shot(page, "plan-compare")


@pytest.mark.integration
def test_validate_a_configuration_and_watch_it_finish(signed_in_page):
    page = signed_in_page
    from tests.worker import WORKER_LOG, running_worker

    plan = make_plan({"model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
                      "hardware": {"kinds": ["gpu"], "max_chips": 8}})  # fmt: skip
    with running_worker():
        from jobs.routing import live_queues
        from tests.worker import wait_for

        assert wait_for(lambda: "cpu" in live_queues(), timeout_s=90), "the worker never wrote its queues"
        page.goto(f"{page.base}/plans/{plan.id}/")
        page.click("#ranked-table tbody tr[data-rank='1'] a.validate-row")
        # The form offers the trial parameters; no GPU worker is up, so the user chooses the CPU one as a stand-in.
        page.wait_for_selector("#validate form")
        assert page.locator("#validate-queue").input_value() == ""  # nothing chosen for the user
        page.select_option("#validate-queue", "cpu")
        assert "a stand-in for" in page.locator("#validate-queue option:checked").text_content()
        # Selecting another row hides the form (it is for row 1's chip) and says how to validate that one.
        page.locator("#ranked-table tbody tr:visible").nth(1).locator("td:nth-child(2)").click()
        assert page.locator("#validate-fields").is_hidden() and page.locator("#validate-other").is_visible()
        page.click("#ranked-table tbody tr[data-rank='1'] td:nth-child(2)")
        assert page.locator("#validate-fields").is_visible()
        page.select_option("#validate select[name=dtype]", "bf16")
        page.fill("#validate input[name=decode_steps]", "8")
        shot(page, "validation-form")
        page.click("#validate-submit")
        page.wait_for_selector(".validation progress")
        shot(page, "validation-running")
        # The finished run's server-rendered result replaces the progress bar.
        page.wait_for_selector(".validation table.validation-results, .validation .failure", timeout=240_000)
    article = page.locator(".validation").first
    log = WORKER_LOG.read_text()[-3000:] if WORKER_LOG.exists() else ""
    assert article.get_attribute("data-status") == "succeeded", article.text_content() + log
    assert page.locator(".validation table.validation-results tbody tr").count() >= 4  # predicted vs measured
    assert "stand-in for" in article.text_content() and "bf16" in article.locator(".what-ran").text_content()
    shot(page, "validation-finished")


# Every element's box (not only the page's scroll width): a table that overflows its own scrolling box hides columns.
OVERFLOW = """() => {
  const w = document.documentElement.clientWidth, over = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && r.right > w + 1) over.push(`${e.tagName.toLowerCase()}#${e.id}.${e.className} right=${Math.round(r.right)}`);
  }
  return {scroll: document.documentElement.scrollWidth, width: w, over: over.slice(0, 8)};
}"""


def test_every_page_fits_1280_px_with_no_element_wider_than_the_viewport(signed_in_page):
    """Issue 14, item 5: each page at 1,280 px, no sideways scroll and no element past the right edge; a screenshot each."""
    page = signed_in_page
    a = make_plan({**CHAT, "name": "Chat at 64", "tags": ["chat", "q3-procurement"]})
    b = make_plan({**CHAT, "workload": {**CHAT["workload"], "concurrency": 8}})
    eight = ",".join(["nvidia-h100-sxm", "nvidia-h200-sxm", "nvidia-b200", "amd-mi300x", "google-tpu-v5e", "intel-gaudi3",
                      "amd-epyc-9654", "groq-lpu"])  # fmt: skip
    pages = {
        "layout-plan-form": "/", "layout-plan": f"/plans/{a.id}/", "layout-plan-all-rows": f"/plans/{a.id}/?view=all",
        "layout-plans": "/plans/", "layout-plan-compare": f"/plans/compare/?a={a.id}&b={b.id}", "layout-catalog": "/catalog/",
        "layout-chip": "/catalog/chips/nvidia-h100-sxm/", "layout-model": "/catalog/models/llama-3.1-70b/",
        "layout-chip-compare-8": f"/catalog/compare/?chips={eight}", "layout-simulations": "/simulations/",
        "layout-simulation-form": "/simulations/new/", "layout-fleets": "/fleets/",
    }  # fmt: skip
    problems = {}
    for name, path in pages.items():
        page.goto(page.base + path)
        page.wait_for_load_state("load")
        found = page.evaluate(OVERFLOW)
        if found["scroll"] > found["width"] or found["over"]:
            problems[path] = found
        shot(page, name)
    assert not problems, problems


def test_a_trace_is_uploaded_through_the_simulation_form(signed_in_page, tmp_path):
    page = signed_in_page
    page.goto(page.base + "/simulations/new/")
    assert page.is_visible("#id_requests") and not page.is_visible("#id_trace_file")
    page.check("input[name=arrivals][value=trace]")
    # A trace fixes the requests and their lengths: those fields go, the file comes.
    assert page.is_visible("#id_trace_file") and not page.is_visible("#id_requests") and not page.is_visible("#id_prompt_tokens")
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"arrival_s": 0, "prompt_tokens": 400, "output_tokens": 30}\n{"arrival_s": 0.3, "prompt_tokens": 900, "output_tokens": 12}\n')
    page.set_input_files("#id_trace_file", str(trace))
    page.click("#simulation-submit")
    page.wait_for_selector("#permalink")
    assert "a trace of 2 requests" in page.text_content("main")
    page.wait_for_function(CHART_READY, arg="cdf-chart")  # the run's latency CDF, one metric at a time
    assert page.evaluate(CANVAS_DRAWN, "cdf-chart")
    page.click("button[data-cdf-metric=e2e_s]")
    assert page.evaluate("Chart.getChart(document.getElementById('cdf-chart')).options.scales.x.title.text") == "End to end"
    shot(page, "simulation-trace")


def test_a_plans_simulated_candidates_are_drawn_as_latency_cdfs(page):
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 500, "output_tokens": 100, "request_rate_per_s": 2},
                      "hardware": {"chips": ["nvidia-h100-sxm", "nvidia-a100-sxm-80gb"], "max_chips": 1},
                      "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}}, "simulation": {"requests": 100, "top_n": 3}})  # fmt: skip
    page.goto(page.base + f"/plans/{plan.id}/")
    page.wait_for_function(CHART_READY, arg="stage-cdf-chart")
    assert page.evaluate(CANVAS_DRAWN, "stage-cdf-chart")
    labels = page.evaluate("Chart.getChart(document.getElementById('stage-cdf-chart')).data.datasets.map(d => d.label)")
    assert labels[0].startswith("#1 ") and sum(label.startswith("#") for label in labels) == 3 and "SLO p95 ≤ 500 ms" in labels
    # The legend names each candidate by its first words, so twenty fit; no candidate wears the SLO's red.
    legend = page.evaluate("Chart.getChart(document.getElementById('stage-cdf-chart')).legend.legendItems.map(i => i.text)")
    assert legend[0].startswith("#1 ") and not any(" · " in text for text in legend)
    colours = page.evaluate("Chart.getChart(document.getElementById('stage-cdf-chart')).data.datasets.filter(d => d.label.startsWith('#')).map(d => d.borderColor)")
    assert "#b91c1c" not in colours
    page.click("button[data-stage-cdf-metric=tpot_s]")
    assert page.evaluate("Chart.getChart(document.getElementById('stage-cdf-chart')).options.scales.x.title.text") == "TPOT"
    shot(page, "plan-stage-cdf")
