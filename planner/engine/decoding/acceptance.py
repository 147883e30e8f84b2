"""Tokens per verification step of speculative decoding (Leviathan, Kalman, Matias, ICML 2023),
shared by draft-model and draft-head speculation."""

from __future__ import annotations


def expected_tokens_per_step(acceptance_rate: float, draft_tokens: int) -> float:
    """Eq. 1: E[tokens per target step] = (1 - a^(k+1)) / (1 - a)."""
    a, k = acceptance_rate, draft_tokens
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def speculative_speedup(acceptance_rate: float, draft_tokens: int, cost_ratio: float) -> float:
    """Theorem 3.8: (1 - a^(k+1)) / ((1 - a)(k*c + 1)), verification = one step."""
    return expected_tokens_per_step(acceptance_rate, draft_tokens) / (draft_tokens * cost_ratio + 1.0)


def acceptance_rate_from_mean_accepted(mean_accepted_tokens: float, draft_tokens: int) -> float:
    """Invert eq. 1 by bisection: tau(a) rises monotonically from 1 (a=0) to k+1 (a=1)."""
    if not 1.0 <= mean_accepted_tokens <= draft_tokens + 1:
        raise ValueError("mean accepted tokens must lie in [1, draft_tokens + 1]")
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if expected_tokens_per_step(mid, draft_tokens) < mean_accepted_tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def resolve_acceptance(
    *, acceptance_rate: float | None, mean_accepted_tokens: float | None, draft_tokens: int, default: float, why_default: str
) -> tuple[float, str | None]:
    """(acceptance rate, the assumption in words when neither figure was given)."""
    if acceptance_rate is not None:
        return acceptance_rate, None
    if mean_accepted_tokens is not None:
        return acceptance_rate_from_mean_accepted(mean_accepted_tokens, draft_tokens), None
    return default, f"acceptance rate not given; assumed {default} ({why_default})"


def check_draft_tokens(draft_tokens: int, mean_accepted_tokens: float | None) -> None:
    if draft_tokens < 1:
        raise ValueError("draft_tokens must be >= 1")
    if mean_accepted_tokens is not None and not 1.0 <= mean_accepted_tokens <= draft_tokens + 1:
        raise ValueError("mean_accepted_tokens must lie in [1, draft_tokens + 1]")
