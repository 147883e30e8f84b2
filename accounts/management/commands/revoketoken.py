from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken
from accounts.selectors import api_token_get, api_token_list
from accounts.services import api_token_prefix, api_token_revoke, api_tokens_revoke


class Command(BaseCommand):
    help = "Revoke an API token by its prefix (hwp_<prefix>, or the whole key), or every token of a user with --user U --all."

    def add_arguments(self, parser):
        parser.add_argument("prefix", nargs="?", help="The token's prefix, as listtokens shows it.")
        parser.add_argument("--user", help="With --all: whose tokens.")
        parser.add_argument("--all", action="store_true", dest="revoke_all", help="Revoke every token of --user.")

    def handle(self, *args, prefix: str | None, user: str | None, revoke_all: bool, **options):
        if revoke_all:
            if prefix or not user:
                raise CommandError("Give either PREFIX, or --user U --all.")
            try:
                owner = get_user_model().objects.get(username=user)
            except get_user_model().DoesNotExist:
                raise CommandError(f"No user {user!r}.") from None
            count = api_tokens_revoke(tokens=api_token_list(user=owner))
            self.stdout.write(f"Revoked {count} token(s) of {user}.")
            return
        if not prefix or user:
            raise CommandError("Give either PREFIX, or --user U --all.")
        try:
            token = api_token_get(prefix=api_token_prefix(prefix))
        except ApiToken.DoesNotExist:
            raise CommandError(f"No API token with prefix {prefix!r} (manage.py listtokens shows them).") from None
        already = token.revoked_at is not None
        api_token_revoke(token)
        self.stdout.write(f"{'Already revoked' if already else 'Revoked'}: {token} of {token.user}.")
