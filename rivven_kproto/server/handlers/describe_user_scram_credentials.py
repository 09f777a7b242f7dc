"""DescribeUserScramCredentials (SCRAM admin API, KIP-554): see ``scram_users.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest

from ..routes import LOCAL
from .scram_users import describe as handle

API_KEY = DescribeUserScramCredentialsRequest.API_KEY
ROUTE = LOCAL
__all__ = ["API_KEY", "handle"]
