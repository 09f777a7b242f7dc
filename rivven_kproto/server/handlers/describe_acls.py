"""DescribeAcls (ACL admin API): see ``acls.py``."""

from __future__ import annotations

from rivven_kproto.codec.messages.describe_acls import DescribeAclsRequest

from .acls import describe as handle

API_KEY = DescribeAclsRequest.API_KEY
__all__ = ["API_KEY", "handle"]
