from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.selectors import api_token_list


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "-"


class Command(BaseCommand):
    help = "List API tokens (of USER, or everyone's): prefix, user, name, scope, dates, state. Keys are not stored, so never shown."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?")

    def handle(self, *args, username: str | None, **options):
        user = None
        if username:
            try:
                user = get_user_model().objects.get(username=username)
            except get_user_model().DoesNotExist:
                raise CommandError(f"No user {username!r}.") from None
        now = timezone.now()
        row = "{:<16} {:<16} {:<24} {:<7} {:<16} {:<16} {:<16} {}"
        self.stdout.write(row.format("prefix", "user", "name", "scope", "created", "last used", "expires", "state"))
        for token in api_token_list(user=user):
            state = "revoked" if token.revoked_at else "expired" if token.is_expired(now) else "active"
            self.stdout.write(row.format(
                f"hwp_{token.prefix}", str(token.user)[:16], token.name[:24], token.scope, _when(token.created_at),
                _when(token.last_used_at), _when(token.expires_at), state,
            ))  # fmt: skip
