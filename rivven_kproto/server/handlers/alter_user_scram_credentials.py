"""AlterUserScramCredentials (SCRAM admin API, KIP-554): see ``scram_users.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest

from ..routes import CONTROLLER
from .scram_users import alter as handle

API_KEY = AlterUserScramCredentialsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer
__all__ = ["API_KEY", "handle"]
