"""Designs of paired interventions: factors × levels × replicate seeds → arms.

A ``Design`` crosses a selection factor and a stopping factor ([SSC] eq. 3: π_a × σ_b).
Each level is the agent's own policy (``"agent"`` for selection, ``"adaptive"`` for
stopping: no steer) or a ``Steer`` (``Uniform()``, ``FixedHorizon(4)``, …). ``arms()``
gives the 2×2 (or larger) grid; every arm of a replicate runs with the same run seed, so
the arms of a paired block share their random numbers (common random numbers,
[SSC] Appendix D). Replicate 0 is the recorded run seed itself; replicate r > 0 a seed
derived from it (``replicate_seed``).

An arm's name is ``"selection=uniform,stopping=fixed:4"`` and its hash a SHA-256 over
each factor's level label and its steer's identity (class ``module:qualname`` and
creation parameters): the provenance every output run carries.

Examples:
    >>> from agentlog.replay import Design
    >>> d = Design(selection=["agent"], stopping=["adaptive"], seeds=range(2))
    >>> [a.name for a in d.arms()], d.replicates
    (['selection=agent,stopping=adaptive'], (0, 1))
    >>> d.arms()[0].steer is None
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentlog.records import encode_artifact
from agentlog.reentry import Steer

__all__ = [
    "FACTORS",
    "OWN_LEVELS",
    "Arm",
    "Design",
    "alteration_arm",
    "level_label",
    "parse_design",
    "replicate_seed",
    "steer_identity",
]

FACTORS = ("selection", "stopping")
OWN_LEVELS = {"selection": "agent", "stopping": "adaptive"}  # the agent's own: no steer



Level = str | Steer


def _plain(value: Any) -> Any:
    """A steer's parameter as plain canonical data (numpy scalars and arrays as lists)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def steer_identity(steer: Steer) -> dict[str, Any]:
    """What identifies a steer in an arm's hash.

    An intervention of ``agentlog.replay.interventions`` (every subclass of its ``Steer``
    is registered) is identified by ``interventions.identity``: its registered hash
    (``module:qualname`` and source digest) with its constructor parameters. Any other
    core ``Steer`` by its class's ``module:qualname`` and public attributes.
    """
    from . import interventions

    if isinstance(steer, interventions.Steer):
        return interventions.identity(steer)
    cls = type(steer)
    params = {k: _plain(v) for k, v in sorted(vars(steer).items()) if not k.startswith("_")}
    return {"name": steer.name, "id": f"{cls.__module__}:{cls.__qualname__}",
            "params": params}


def level_label(factor: str, level: Level) -> str:
    """The short name of a level, as the command line writes it: ``"agent"``,
    ``"uniform"``, ``"fixed:4"``, ``"temperature:0.5"``.

    The interventions of ``agentlog.replay.interventions`` get their command-line token;
    another steer its ``label`` attribute when it has one, else its ``name``.
    """
    if isinstance(level, str):
        return level
    label = getattr(level, "label", None)
    if label:
        return str(label)
    for token, (_factor, cls_name, kind) in _TOKENS.items():
        if type(level).__name__ != cls_name or type(level).__module__ != _INTERVENTIONS:
            continue
        if kind is None:
            return token
        value = level.n if kind is int else level.t  # type: ignore[attr-defined]
        return f"{token}:{value:g}" if kind is float else f"{token}:{value}"
    return str(level.name)


class _ArmSteer(Steer):
    """One selection steer and one stopping steer acting together: ``select`` is the
    selection level's, ``proceed`` the stopping level's (the factors stay separate)."""

    def __init__(self, name: str, selection: Steer | None, stopping: Steer | None) -> None:
        self.name = name
        self.selection = selection
        self.stopping = stopping

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | int | None:
        return None if self.selection is None else self.selection.select(stream, step, probs,
                                                                          ids)

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        return None if self.stopping is None else self.stopping.proceed(stream, step, p)


@dataclass(frozen=True)
class Arm:
    """One cell of a design: a level per factor.

    Attributes:
        name: ``"selection=uniform,stopping=fixed:4"``.
        factors: ``{"selection": "uniform", "stopping": "fixed:4"}`` (level labels).
        hash: hex SHA-256 of the factors' labels and their steers' identities.
        steer: the steer to apply (None for the agent's own policy on both factors).
    """

    name: str
    factors: Mapping[str, str]
    hash: str
    steer: Steer | None = field(compare=False, default=None)


def alteration_arm(decisions: Iterable[str]) -> Arm:
    """The arm that changes exactly ``decisions`` (``interventions.Alter``) and nothing else.

    ``alteration_arm([])`` is the agent's own arm, the baseline every alteration is paired
    with. Its one factor, ``"alter"``, is the sorted decision tokens joined by ``+`` (``""``
    for the baseline): what ``agentlog.estimators.attribution`` reads back from each output
    run's provenance. The hash covers the ``Alter`` steer's identity, as a design's arms.

    Examples:
        >>> from agentlog.replay import alteration_arm
        >>> arm = alteration_arm(["stop@0", "doc@1=uniform"])
        >>> arm.name, arm.factors
        ('alter=doc@1=uniform+stop@0', {'alter': 'doc@1=uniform+stop@0'})
        >>> alteration_arm([]).steer is None
        True
    """
    from .interventions import ALTER_FACTOR, Alter

    tokens = list(decisions)
    steer = Alter(tokens) if tokens else None
    label = "+".join(steer.decisions) if steer is not None else ""
    name = f"{ALTER_FACTOR}={label}"
    identity = [[ALTER_FACTOR, label, None if steer is None else steer_identity(steer)]]
    digest = hashlib.sha256(encode_artifact(identity, what=f"arm {name}")).hexdigest()
    # As a design's arm: the selection and the stopping level are the same Alter, which
    # acts on the decisions it names only (a Ray worker rebuilds it from either).
    arm_steer = None if steer is None else _ArmSteer(name, steer, steer)
    return Arm(name=name, factors={ALTER_FACTOR: label}, hash=digest, steer=arm_steer)


def replicate_seed(seed: int, replicate: int) -> int:
    """The run seed of replicate ``replicate`` of a run recorded with ``seed``.

    Replicate 0 is the recorded seed (a replay of the recorded draws); replicate r > 0 is
    a stable 63-bit seed derived from (seed, r). Every arm of a replicate uses the same
    seed: common random numbers.
    """
    if replicate < 0:
        raise ValueError(f"a replicate must be >= 0; found {replicate}")
    if replicate == 0:
        return seed
    digest = hashlib.blake2b(f"agentlog.replicate:{seed}:{replicate}".encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _check_levels(factor: str, levels: Any) -> tuple[Level, ...]:
    if isinstance(levels, str | Steer) or not isinstance(levels, Iterable):
        raise TypeError(f"`{factor}` must be a list of levels (e.g. [{OWN_LEVELS[factor]!r}, "
                        f"a Steer]); found {levels!r}")
    out = tuple(levels)
    if not out:
        raise ValueError(f"`{factor}` needs at least one level; found none")
    for level in out:
        if isinstance(level, str):
            if level != OWN_LEVELS[factor]:
                raise ValueError(
                    f"`{factor}` level {level!r}: the only string level is the agent's own "
                    f"policy {OWN_LEVELS[factor]!r}; give an intervention as a Steer (e.g. "
                    "Uniform(), FixedHorizon(4)), or parse the command-line form with "
                    "parse_design"
                )
        elif not isinstance(level, Steer):
            raise TypeError(f"`{factor}` level {level!r} is neither {OWN_LEVELS[factor]!r} nor "
                            "a Steer")
    labels = [level_label(factor, v) for v in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"`{factor}` has levels with the same label {dup}: arms must be "
                         "told apart by name; give each steer its own label")
    return out


@dataclass(frozen=True, init=False)
class Design:
    """Selection levels × stopping levels × replicate seeds (paired: common random numbers).

    Args:
        selection: levels of the selection factor: ``"agent"`` (the agent's own) and/or
            steers (``Uniform()``, ``Reverse()``, ``Temperature(t)``, …).
        stopping: levels of the stopping factor: ``"adaptive"`` and/or steers
            (``FixedHorizon(n)``, ``NeverStop()``, …).
        seeds: replicate indices (``range(3)``): each one a run seed shared by every arm,
            replicate 0 being the recorded seed (``replicate_seed``).
    """

    selection: tuple[Level, ...]
    stopping: tuple[Level, ...]
    replicates: tuple[int, ...]

    def __init__(self, selection: Sequence[Level] = ("agent",),
                 stopping: Sequence[Level] = ("adaptive",),
                 seeds: Iterable[int] = (0,)) -> None:
        reps = tuple(seeds)
        if not reps:
            raise ValueError("`seeds` needs at least one replicate (e.g. range(3))")
        for r in reps:
            if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 0:
                raise ValueError(f"`seeds` are replicate indices >= 0; found {r!r}")
        if len(set(reps)) != len(reps):
            raise ValueError(f"`seeds` repeats a replicate: {list(reps)}")
        object.__setattr__(self, "selection", _check_levels("selection", selection))
        object.__setattr__(self, "stopping", _check_levels("stopping", stopping))
        object.__setattr__(self, "replicates", tuple(int(r) for r in reps))

    def arms(self) -> list[Arm]:
        """Every (selection level, stopping level) cell, selection-major, in level order."""
        out = []
        for sel in self.selection:
            for stop in self.stopping:
                labels = {"selection": level_label("selection", sel),
                          "stopping": level_label("stopping", stop)}
                name = ",".join(f"{f}={labels[f]}" for f in FACTORS)
                identity = [[f, labels[f], None if isinstance(v, str) else steer_identity(v)]
                            for f, v in (("selection", sel), ("stopping", stop))]
                digest = hashlib.sha256(encode_artifact(identity, what=f"arm {name}"))
                s = None if isinstance(sel, str) else sel
                t = None if isinstance(stop, str) else stop
                steer = None if s is None and t is None else _ArmSteer(name, s, t)
                out.append(Arm(name=name, factors=labels, hash=digest.hexdigest(),
                               steer=steer))
        return out

    def __len__(self) -> int:
        return len(self.selection) * len(self.stopping) * len(self.replicates)


LevelParser = Callable[[str, str], Level]


def parse_design(options: Sequence[str], *, seeds: int = 1,
                 level: LevelParser | None = None) -> Design:
    """The ``Design`` of the command-line form ``--design selection=agent,uniform --design
    stopping=adaptive,fixed:4 --seeds 3``.

    Args:
        options: the ``--design`` values, one ``FACTOR=LEVEL,LEVEL`` each.
        seeds: the number of replicate seeds (``range(seeds)``).
        level: turns ``(factor, token)`` into a level; the default knows the agent's own
            (``agent``, ``adaptive``) and the interventions of
            ``agentlog.replay.interventions`` by name (``uniform``, ``reverse``,
            ``temperature:T``, ``fixed:N``, ``stop_at:N``, ``never_stop``, …).

    Raises:
        ValueError: a malformed option, an unknown factor, a factor given twice, an
            unknown level; each message shows the expected form.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"--seeds must be a positive number of replicate seeds; found {seeds!r}")
    parse = level or default_level
    given: dict[str, list[Level]] = {}
    for text in options:
        factor, sep, rest = text.partition("=")
        factor = factor.strip()
        if not sep or not rest.strip():
            raise ValueError(f"--design {text!r}: expected FACTOR=LEVEL,LEVEL, e.g. "
                             "selection=agent,uniform or stopping=adaptive,fixed:4")
        if factor not in FACTORS:
            raise ValueError(f"--design {text!r}: unknown factor {factor!r}; the factors are "
                             f"{', '.join(FACTORS)}")
        if factor in given:
            raise ValueError(f"--design {text!r}: factor {factor!r} is given twice; list all "
                             f"its levels in one option ({factor}=a,b)")
        tokens = [t.strip() for t in rest.split(",")]
        if any(not t for t in tokens):
            raise ValueError(f"--design {text!r}: an empty level; separate levels with single "
                             "commas")
        given[factor] = [parse(factor, t) for t in tokens]
    return Design(selection=given.get("selection", [OWN_LEVELS["selection"]]),
                  stopping=given.get("stopping", [OWN_LEVELS["stopping"]]),
                  seeds=range(seeds))


_INTERVENTIONS = "agentlog.replay.interventions"
# token name -> (factor, class name in agentlog.replay.interventions, argument type)
_TOKENS: dict[str, tuple[str, str, type | None]] = {
    "uniform": ("selection", "Uniform", None),
    "reverse": ("selection", "Reverse", None),
    "temperature": ("selection", "Temperature", float),
    "fixed": ("stopping", "FixedHorizon", int),
    "stop_at": ("stopping", "StopAt", int),
    "never_stop": ("stopping", "NeverStop", None),
}


def default_level(factor: str, token: str) -> Level:
    """A level from its command-line token (see ``parse_design``)."""
    if token == OWN_LEVELS[factor]:
        return token
    name, _, arg = token.partition(":")
    known = [OWN_LEVELS[factor]] + [
        k + (":N" if t is int else ":T" if t is float else "")
        for k, (f, _c, t) in _TOKENS.items() if f == factor]
    spec = _TOKENS.get(name)
    if spec is None or spec[0] != factor:
        raise ValueError(f"unknown {factor} level {token!r}; the {factor} levels are "
                         f"{', '.join(known)}")
    _, cls_name, kind = spec
    import importlib

    cls = getattr(importlib.import_module(_INTERVENTIONS), cls_name)
    if kind is None:
        if arg:
            raise ValueError(f"{factor} level {token!r}: {name} takes no argument")
        level: Steer = cls()
        return level
    try:
        value = kind(arg)
    except ValueError:
        raise ValueError(f"{factor} level {token!r}: expected {name}:{'N' if kind is int else 'T'}"
                         f" with a {'whole number' if kind is int else 'number'} after the "
                         f"colon, e.g. {name}:4") from None
    level = cls(value)
    return level
