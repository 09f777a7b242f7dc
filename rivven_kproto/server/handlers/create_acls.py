"""CreateAcls (ACL admin API): see ``acls.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.create_acls import CreateAclsRequest

from ..routes import CONTROLLER
from .acls import create as handle

API_KEY = CreateAclsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer
__all__ = ["API_KEY", "handle"]
