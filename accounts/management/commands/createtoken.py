from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken
from accounts.selectors import api_token_list
from accounts.services import api_token_create, api_tokens_revoke


class Command(BaseCommand):
    help = (
        "Create an API token of USER (creating the user if needed) and print its key on stdout, the only "
        "time it is shown. Details go to stderr, so TOKEN=$(manage.py createtoken USER) works."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.WRITE,
            help="read, write (default) or catalog (write, plus catalog writes: chips, models, offerings, imports).",
        )
        parser.add_argument("--name", default="createtoken", help="What the token is for (default: createtoken).")
        parser.add_argument("--expires-days", type=int, metavar="D", help="Expire after D days (default: never).")
        parser.add_argument("--staff", action="store_true", help="Make the user staff (admin site access).")
        parser.add_argument("--rotate", action="store_true", help="Revoke the user's other tokens.")

    def handle(self, *args, username: str, scope: str, name: str, expires_days: int | None, staff: bool, rotate: bool, **options):
        if expires_days is not None and expires_days < 1:
            raise CommandError("--expires-days must be at least 1")
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            if created:
                user.set_unusable_password()
            if staff:
                user.is_staff = True
            user.save()
            revoked = api_tokens_revoke(tokens=api_token_list(user=user)) if rotate else 0
            expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
            try:
                token, key = api_token_create(user, name, scope, expires_at)
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from None
        expiry = f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else ""
        rotated = f"; revoked {revoked} other token(s)" if rotate else ""
        made_user = f"Created user {username}; " if created else ""
        self.stderr.write(f"{made_user}{scope} token hwp_{token.prefix} ({token.name!r}) of {username}{expiry}{rotated}.")
        self.stderr.write("Its key, on stdout, is shown this once: store it now.")
        self.stdout.write(key)
