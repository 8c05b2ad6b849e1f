# Types of the optional C kernel built from _native.c (see agentlog._noise).
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

def uniform_rows(keys: NDArray[np.uint64], bases: Sequence[int],
                 out: NDArray[np.float64]) -> None: ...
def joined_keys(body: bytes, n: int, tag: int, out: NDArray[np.uint64]) -> int: ...
