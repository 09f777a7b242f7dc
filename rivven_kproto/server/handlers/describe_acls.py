"""DescribeAcls (ACL admin API): see ``acls.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.describe_acls import DescribeAclsRequest

from ..routes import LOCAL
from .acls import describe as handle

API_KEY = DescribeAclsRequest.API_KEY
ROUTE = LOCAL
__all__ = ["API_KEY", "handle"]
