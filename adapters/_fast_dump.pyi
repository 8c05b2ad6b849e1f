# Types of the optional C reader built from _fast_dump.c (see agentlog.adapters._recording).
from typing import Any

def dump_set_fields(model: Any, vetted: set[type], /) -> dict[str, Any] | type | None: ...
