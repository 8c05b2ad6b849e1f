# Types of the optional C walk built from _native_scrub.c (see agentlog._scrub).
from typing import Any, Literal

def unknown_key_names(obj: Any, safe: set[str], depth_left: int, /) -> Literal[True] | set[str]: ...
