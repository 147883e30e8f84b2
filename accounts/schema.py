"""How the OpenAPI schema describes ApiTokenAuthentication (imported by AccountsConfig.ready)."""
from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        definition = build_bearer_security_scheme_object(header_name="Authorization", token_prefix=self.target.keyword)
        definition["description"] = (
            "`Authorization: Token hwp_<prefix>_<secret>`: a key from `manage.py createtoken USER` or POST /api/v1/tokens/. "
            "A read-scoped key reads; a write-scoped key also writes (plans, validations, its user's tokens, runs and plans); "
            "a catalog-scoped key also writes the catalog."
        )
        return definition
