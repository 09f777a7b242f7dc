"""DeleteAcls (ACL admin API): see ``acls.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.delete_acls import DeleteAclsRequest

from ..routes import CONTROLLER
from .acls import delete as handle

API_KEY = DeleteAclsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer
__all__ = ["API_KEY", "handle"]
