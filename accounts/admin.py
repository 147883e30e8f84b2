from __future__ import annotations

from django.contrib import admin, messages

from accounts import services
from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are listed and revoked here, never created: a key can be shown once only where it is
    made (manage.py createtoken, POST /api/v1/tokens/), and a message here would pass it through the
    session store. The hash is not shown at all."""

    list_display = ["__str__", "user", "name", "scope", "created_at", "last_used_at", "expires_at", "revoked_at"]
    list_filter = ["scope", ("revoked_at", admin.EmptyFieldListFilter), ("expires_at", admin.EmptyFieldListFilter)]
    list_select_related = ["user"]
    search_fields = ["prefix", "name", "user__username"]
    fields = ["user", "name", "scope", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at", "revoked_by"]
    readonly_fields = fields
    actions = ["revoke_selected"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_revoke_permission(self, request) -> bool:
        return request.user.has_perm("accounts.change_apitoken")

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_selected(self, request, queryset) -> None:
        count = services.api_tokens_revoke(tokens=queryset, by=request.user)
        self.message_user(request, f"Revoked {count} token(s); already revoked ones kept their date.", messages.SUCCESS)
