from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "API access"

    def ready(self) -> None:
        # Registers the OpenAPI description of the token authentication with drf-spectacular.
        from accounts import schema  # noqa: F401
