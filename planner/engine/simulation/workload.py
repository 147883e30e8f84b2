"""Workloads as users bring them: an arrival process and two length distributions, or a trace.

Every sample is drawn from one NumPy Generator seeded by the workload, in a fixed order (prompts,
outputs, arrivals, prefix hits), so the same seed always gives the same requests.
Errors are WorkloadError (a ValueError) carrying the dotted name of the field at fault, e.g.
"prompt.std_tokens" or "trace.output_tokens[12]", for an API to turn into a 400.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LENGTH_KINDS = ("fixed", "normal", "lognormal", "histogram")
ARRIVAL_KINDS = ("poisson", "gamma", "closed_loop")


class WorkloadError(ValueError):
    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def _positive(name: str, value, *, allow_zero: bool = False) -> None:
    if value is None:
        raise WorkloadError(name, "This field is required for this kind.")
    if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise WorkloadError(name, f"must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise WorkloadError(name, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Token counts of prompts or outputs. fixed: `tokens`; normal and lognormal: `mean_tokens` and
    `std_tokens` (the log-normal's own mean and standard deviation, not its log's); histogram:
    `bin_edges_tokens` (n + 1 increasing edges) and `bin_weights` (n, any positive scale), drawn
    uniformly inside a bin. Every draw is rounded and clipped to [min_tokens, max_tokens]."""

    kind: str = "fixed"
    tokens: int | None = None
    mean_tokens: float | None = None
    std_tokens: float | None = None
    bin_edges_tokens: tuple[float, ...] = ()
    bin_weights: tuple[float, ...] = ()
    min_tokens: int = 1
    max_tokens: int | None = None

    @classmethod
    def fixed(cls, tokens: int) -> Lengths:
        return cls(kind="fixed", tokens=tokens)

    @classmethod
    def normal(cls, mean_tokens: float, std_tokens: float, **limits) -> Lengths:
        return cls(kind="normal", mean_tokens=mean_tokens, std_tokens=std_tokens, **limits)

    @classmethod
    def lognormal(cls, mean_tokens: float, std_tokens: float, **limits) -> Lengths:
        return cls(kind="lognormal", mean_tokens=mean_tokens, std_tokens=std_tokens, **limits)

    @classmethod
    def histogram(cls, bin_edges_tokens, bin_weights, **limits) -> Lengths:
        return cls(kind="histogram", bin_edges_tokens=tuple(bin_edges_tokens), bin_weights=tuple(bin_weights), **limits)

    def validate(self, name: str) -> None:
        if self.kind not in LENGTH_KINDS:
            raise WorkloadError(f"{name}.kind", f"must be one of {', '.join(LENGTH_KINDS)}, got {self.kind!r}")
        _positive(f"{name}.min_tokens", self.min_tokens)
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise WorkloadError(f"{name}.max_tokens", f"must be >= min_tokens ({self.min_tokens}), got {self.max_tokens}")
        if self.kind == "fixed":
            _positive(f"{name}.tokens", self.tokens)
            if self.tokens != int(self.tokens):
                raise WorkloadError(f"{name}.tokens", f"must be a whole number, got {self.tokens}")
        elif self.kind in ("normal", "lognormal"):
            _positive(f"{name}.mean_tokens", self.mean_tokens)
            _positive(f"{name}.std_tokens", self.std_tokens, allow_zero=True)
        else:
            edges, weights = np.asarray(self.bin_edges_tokens, dtype=float), np.asarray(self.bin_weights, dtype=float)
            if len(edges) < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0) or edges[0] < 0:
                raise WorkloadError(f"{name}.bin_edges_tokens", "must be at least two finite, increasing, non-negative edges")
            if len(weights) != len(edges) - 1:
                raise WorkloadError(f"{name}.bin_weights", f"needs one weight per bin ({len(edges) - 1}), got {len(weights)}")
            if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
                raise WorkloadError(f"{name}.bin_weights", "must be finite, non-negative and not all zero")

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self.kind == "fixed":
            draws = np.full(count, float(self.tokens))
        elif self.kind == "normal":
            draws = rng.normal(self.mean_tokens, self.std_tokens, count)
        elif self.kind == "lognormal":
            # A log-normal with mean m and standard deviation s: sigma^2 = ln(1 + s^2/m^2), mu = ln m - sigma^2/2.
            sigma2 = math.log1p((self.std_tokens / self.mean_tokens) ** 2)
            draws = rng.lognormal(math.log(self.mean_tokens) - sigma2 / 2.0, math.sqrt(sigma2), count)
        else:
            edges, weights = np.asarray(self.bin_edges_tokens, dtype=float), np.asarray(self.bin_weights, dtype=float)
            bins = rng.choice(len(weights), size=count, p=weights / weights.sum())
            draws = rng.uniform(edges[bins], edges[bins + 1])
        high = self.max_tokens if self.max_tokens is not None else np.inf
        return np.clip(np.rint(draws), self.min_tokens, high).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class Arrivals:
    """poisson: `rate_per_s`; gamma: `rate_per_s` and `cv`, the coefficient of variation of the gaps
    (cv = 1 is Poisson, larger is burstier); closed_loop: `concurrency` clients, each sending its next
    request `think_time_s` after its last one finished (all start at time 0, as a benchmark's do)."""

    kind: str = "poisson"
    rate_per_s: float | None = None
    cv: float = 1.0
    concurrency: int | None = None
    think_time_s: float = 0.0

    @classmethod
    def poisson(cls, rate_per_s: float) -> Arrivals:
        return cls(kind="poisson", rate_per_s=rate_per_s)

    @classmethod
    def gamma(cls, rate_per_s: float, cv: float) -> Arrivals:
        return cls(kind="gamma", rate_per_s=rate_per_s, cv=cv)

    @classmethod
    def closed_loop(cls, concurrency: int, think_time_s: float = 0.0) -> Arrivals:
        return cls(kind="closed_loop", concurrency=concurrency, think_time_s=think_time_s)

    def validate(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise WorkloadError("arrivals.kind", f"must be one of {', '.join(ARRIVAL_KINDS)}, got {self.kind!r}")
        if self.kind == "closed_loop":
            _positive("arrivals.concurrency", self.concurrency)
            if self.concurrency != int(self.concurrency):
                raise WorkloadError("arrivals.concurrency", f"must be a whole number, got {self.concurrency}")
            _positive("arrivals.think_time_s", self.think_time_s, allow_zero=True)
            return
        _positive("arrivals.rate_per_s", self.rate_per_s)
        if self.kind == "gamma":
            _positive("arrivals.cv", self.cv)

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Arrival times in seconds from 0 (NaN for a closed loop: they follow from the run)."""
        if self.kind == "closed_loop":
            return np.full(count, np.nan)
        if self.kind == "poisson":
            gaps = rng.exponential(1.0 / self.rate_per_s, count)
        else:  # gamma gaps of mean 1/rate and shape 1/cv^2
            shape = 1.0 / (self.cv * self.cv)
            gaps = rng.gamma(shape, 1.0 / (self.rate_per_s * shape), count)
        return np.cumsum(gaps)


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Recorded requests: arrival seconds (any origin), prompt and output tokens, one row each."""

    arrival_s: tuple[float, ...] | np.ndarray
    prompt_tokens: tuple[int, ...] | np.ndarray
    output_tokens: tuple[int, ...] | np.ndarray

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns checked and sorted by arrival (stable), arrivals shifted to start at 0."""
        columns = {}
        for name in ("arrival_s", "prompt_tokens", "output_tokens"):
            try:
                columns[name] = np.asarray(getattr(self, name), dtype=float).reshape(-1)
            except (TypeError, ValueError):
                raise WorkloadError(f"trace.{name}", "must be a sequence of numbers") from None
        lengths = {name: len(values) for name, values in columns.items()}
        if len(set(lengths.values())) != 1:
            raise WorkloadError("trace", f"columns differ in length: {lengths}")
        if lengths["arrival_s"] == 0:
            raise WorkloadError("trace", "has no rows")
        for name, values in columns.items():
            whole = name != "arrival_s"
            bad = ~np.isfinite(values) | (values < (1 if whole else 0))
            if whole:
                bad |= values != np.round(values)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                rule = "a whole number >= 1" if whole else "a finite number >= 0"
                raise WorkloadError(f"trace.{name}[{i}]", f"must be {rule}, got {values[i]!r}")
        order = np.argsort(columns["arrival_s"], kind="stable")
        arrival = columns["arrival_s"][order]
        return arrival - arrival[0], columns["prompt_tokens"][order].astype(np.int64), columns["output_tokens"][order].astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class Requests:
    """What the scheduler runs: one row per request (arrival NaN until a closed loop sends it)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_tokens: np.ndarray  # of the prompt, the shared system prompt (0: none)
    closed_loop_concurrency: int | None = None
    think_time_s: float = 0.0
    # Of the prompt, the tokens whose KV arrives with the request (a disaggregated decode pool receives
    # it from a prefill worker): held by the request itself, never computed unless it is preempted.
    kv_transferred_tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.prompt_tokens)


@dataclass(frozen=True, kw_only=True)
class SimulationWorkload:
    """`requests` drawn from `arrivals`, `prompt` and `output`, or a `trace` (which fixes all three).

    shared_prefix_tokens / shared_prefix_fraction: that share of the requests begin with the same
    system prompt of that many tokens (counted in their prompt; a prompt shorter than it is all prefix),
    which prefix caching serves from the cache."""

    requests: int = 1000
    arrivals: Arrivals | None = None
    prompt: Lengths | None = None
    output: Lengths | None = None
    trace: Trace | None = None
    shared_prefix_tokens: int = 0
    shared_prefix_fraction: float = 0.0
    seed: int = 0

    def validate(self) -> None:
        if self.trace is None:
            for name in ("arrivals", "prompt", "output"):
                if getattr(self, name) is None:
                    raise WorkloadError(name, "is required unless a trace is given")
            _positive("requests", self.requests)
            if self.requests != int(self.requests):
                raise WorkloadError("requests", f"must be a whole number, got {self.requests}")
            self.arrivals.validate()
            self.prompt.validate("prompt")
            self.output.validate("output")
        elif self.arrivals is not None or self.prompt is not None or self.output is not None:
            raise WorkloadError("trace", "fixes arrivals, prompt and output lengths: give a trace or those three, not both")
        _positive("shared_prefix_tokens", self.shared_prefix_tokens, allow_zero=True)
        if not 0.0 <= self.shared_prefix_fraction <= 1.0:
            raise WorkloadError("shared_prefix_fraction", f"must lie in [0, 1], got {self.shared_prefix_fraction}")
        if not isinstance(self.seed, (int, np.integer)):
            raise WorkloadError("seed", f"must be an integer, got {self.seed!r}")

    def sample(self) -> Requests:
        self.validate()
        rng = np.random.default_rng(self.seed)
        closed, think = None, 0.0
        if self.trace is not None:
            arrival, prompt, output = self.trace.arrays()
        else:
            n = int(self.requests)
            prompt, output = self.prompt.sample(rng, n), self.output.sample(rng, n)
            arrival = self.arrivals.sample(rng, n)
            if self.arrivals.kind == "closed_loop":
                closed, think = int(self.arrivals.concurrency), float(self.arrivals.think_time_s)
        if self.shared_prefix_fraction > 0 and len(prompt) and self.shared_prefix_tokens > int(np.max(prompt)):
            # A prompt shorter than the prefix is cut to its own length; one prefix longer than every prompt is a mistake.
            raise WorkloadError("shared_prefix_tokens", f"{int(self.shared_prefix_tokens):,} tokens, longer than every prompt (the longest "
                                f"has {int(np.max(prompt)):,}); the shared prefix is the start of a prompt")  # fmt: skip
        hit = rng.random(len(prompt)) < self.shared_prefix_fraction
        prefix = np.where(hit, np.minimum(int(self.shared_prefix_tokens), prompt), 0).astype(np.int64)
        return Requests(arrival_s=arrival, prompt_tokens=prompt, output_tokens=output, prefix_tokens=prefix,
                        closed_loop_concurrency=closed, think_time_s=think)  # fmt: skip
