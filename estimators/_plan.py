"""The certification plan: everything a certified leaderboard declares before a score is read.

A plan ([LBC] §3.4, Def. 1 and Def. 7; §6.1 "All analysis constants are recorded with
input hashes") fixes the readouts and their tolerances ``ε_fair,n``, the confidence levels
``δ`` (nuisance radius) and ``δ′`` (sampling radius), the family of pairs over which
Bonferroni is taken, the minimum number of common tasks, the failure policy, the length
convention, the constants of eq. 3 and the qualitative conditions (Assumption 1, the role of
the backbone, shared entries). It is written in TOML, validated by pydantic, and hashed: the
SHA-256 of its canonical encoding (``agentlog.records.encode_artifact`` of ``model_dump(mode=
"json")``, sorted keys) is stored with every result computed under it.

Examples:
    >>> from agentlog.estimators import certify
    >>> plan = certify.Plan.from_toml('''
    ... estimand = "controlled contrast of the whole agent, shared task input (eq. 2)"
    ... [readouts.f1]
    ... tolerance = 0.05
    ... ''')
    >>> plan.readout_names, plan.delta_prime, plan.min_common_tasks, len(plan.hash())
    (('f1',), 0.05, 10, 64)
    >>> certify.Plan.from_toml('''
    ... estimand = "x"
    ... [readouts.f1]
    ... axis = "quality"
    ... ''')
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Plan
    ...
"""

from __future__ import annotations

import hashlib
import math
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentlog.records import encode_artifact as encode

__all__ = [
    "COMPOSITE",
    "Calibration",
    "Conditions",
    "Constants",
    "FailurePolicy",
    "Plan",
    "Readout",
    "SystemConstants",
    "WindowConstants",
]

#: The name of the composite target (equal weight over axes, [LBC] §4 "Scoring").
COMPOSITE = "composite"

_MODEL = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
#: A constant that may be declared infinite (no finite amplification: no finite radius).
Amplifier = Annotated[float, Field(ge=0.0)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]


class Readout(BaseModel):
    """One readout ``n`` of the leaderboard.

    Attributes:
        tolerance: ``ε_fair,n`` (Def. 1), fixed before any ranking is observed. Required.
        better: ``"higher"`` or ``"lower"``: which direction of the score is better. Paired
            differences are oriented so that a positive ``Δ̂`` favours the first system.
        axis: the capability axis the readout belongs to; the composite weighs axes equally
            and readouts equally within an axis. Default: the readout is its own axis.
        L_s: the score's Lipschitz constant ``L_{s_n}`` (eq. 3).
        eps_protocol: the protocol imbalance ``ε_protocol,n`` on the score scale (eq. 3).
        channel: take only ``Score`` records of this channel (``None``: any channel).
        failure_value: the declared ⊥ score of this readout under ``failure.policy =
            "score"`` (default ``failure.value``).
    """

    model_config = _MODEL

    tolerance: Positive | None = None
    better: Literal["higher", "lower"] = "higher"
    axis: str | None = None
    L_s: Amplifier = 1.0
    eps_protocol: NonNegative = 0.0
    channel: str | None = None
    failure_value: float | None = Field(default=None, allow_inf_nan=False)


class SystemConstants(BaseModel):
    """Declared constants of one system's window in eq. 3; ``None`` inherits.

    Attributes:
        L_M: the window's amplification factor ``L_{M_X}``.
        xi: the slack ``ξ_{M_X}``, charged only when the system's entry law differs from
            the common one.
        eps_cont: the channel mismatch ``ε_cont,X``.
        eps_in: a declared entry mismatch ``ε_in,X``, used only when no entries are given
            to ``admissibility`` (a declaration, with no estimation radius).
    """

    model_config = _MODEL

    L_M: Amplifier | None = None
    xi: Amplifier | None = None
    eps_cont: Amplifier | None = None
    eps_in: NonNegative | None = None


_SYSTEM_DEFAULTS = {"L_M": 1.0, "xi": 0.0, "eps_cont": 0.0, "eps_in": None}


class WindowConstants(BaseModel):
    """Constants declared for one comparison window (they override the plan-wide ones)."""

    model_config = _MODEL

    L_C: Amplifier | None = None
    default: SystemConstants = SystemConstants()
    systems: dict[str, SystemConstants] = {}


class Constants(BaseModel):
    """The declared constants of eq. 3 and of the entry-distance radius.

    Attributes:
        L_C: the common channel's Lipschitz constant ``L_{C_n}``.
        distance_bound: ``D``, an upper bound of the declared entry distance; the one-sided
            radius of a measured mean entry mismatch over ``N`` tasks is Hoeffding's
            ``D·sqrt(log(m/δ)/(2N))`` (Bonferroni over the ``m`` pairs of the family).
        default: per-system constants that apply unless overridden.
        systems: per-system overrides.
        windows: per-window overrides (``windows.<name>.systems.<system>`` wins over
            ``systems.<system>``, which wins over ``windows.<name>.default``, then
            ``default``).
    """

    model_config = _MODEL

    L_C: Amplifier = 1.0
    distance_bound: Positive = 1.0
    default: SystemConstants = SystemConstants()
    systems: dict[str, SystemConstants] = {}
    windows: dict[str, WindowConstants] = {}

    def for_system(self, system: str, window: str | None) -> dict[str, float | None]:
        """The resolved ``L_M``, ``xi``, ``eps_cont`` and ``eps_in`` of ``system``."""
        win = self.windows.get(window) if window is not None else None
        chain = [win.systems.get(system) if win else None, self.systems.get(system),
                 win.default if win else None, self.default]
        out: dict[str, float | None] = {}
        for key, fallback in _SYSTEM_DEFAULTS.items():
            value = fallback
            for layer in chain:
                if layer is not None and getattr(layer, key) is not None:
                    value = getattr(layer, key)
                    break
            out[key] = value
        return out

    def channel_constant(self, window: str | None) -> float:
        """``L_C`` at ``window``."""
        win = self.windows.get(window) if window is not None else None
        return win.L_C if win is not None and win.L_C is not None else self.L_C


class FailurePolicy(BaseModel):
    """What a failed task (declared failure exit ⊥) does to a pair ([LBC] §6.1).

    Attributes:
        policy: ``"drop"`` removes a task either system failed from that pair;
            ``"score"`` scores ⊥ with the declared ``value`` (or a readout's
            ``failure_value``).
        value: the declared ⊥ score.
    """

    model_config = _MODEL

    policy: Literal["drop", "score"] = "drop"
    value: float | None = Field(default=None, allow_inf_nan=False)


class Conditions(BaseModel):
    """The declared qualitative conditions of Def. 1.

    Attributes:
        assumption_1: every effect of the entry on the score passes through the window and
            differences outside it have bounded effects ([LBC] Assumption 1). False
            refuses every pair.
        backbone: ``"part-of-system"`` (a system window: the backbone belongs to the system
            and may differ) or ``"fixed"`` (a scaffold window: a pair whose runs record a
            different ``meta["backbone"]`` has no finite radius and is refused).
        shared_entry: the design gives every system the same entry. With entries, it is
            re-derived from the hashes (a pair whose hashes differ is refused); without,
            it makes every pair a declared exact cell.
        entry_key: a dotted path into the decoded entry artifact (``"pool"``) naming the
            part of the sealed entry that is the window's input; entries are then equal when
            the canonical bytes of that part are (re-derived from the artifact), and the rest
            (a system's own configuration passed as an argument) belongs to the system.
            ``None``: the whole entry, compared by its recorded hash.
        entry_feature: a dotted path into the decoded entry artifact (``"pool.relevance"``)
            whose numbers form the entry's empirical distribution; the per-task entry
            distance is the 1-Wasserstein distance between two systems' distributions
            (``distance.wasserstein``). ``None``: differing entries cannot be measured.
        common_entry: the common entry law ``μ`` of eq. 3: ``"min"`` takes the smaller
            radius of ``μ = μ_A`` and ``μ = μ_B`` (Theorem 1 holds for every ``μ``); a
            system name fixes ``μ`` to that system's entry law when it is in the pair.
    """

    model_config = _MODEL

    assumption_1: bool = True
    backbone: Literal["fixed", "part-of-system"] = "part-of-system"
    shared_entry: bool = False
    entry_key: str | None = None
    entry_feature: str | None = None
    common_entry: str = "min"


class Calibration(BaseModel):
    """Appendix F.5 settings: sign-flip draws, their seed, leave-one-cluster-out."""

    model_config = _MODEL

    n_resamples: int = Field(default=2000, ge=0)
    seed: int = Field(default=0, ge=0)
    leave_one_cluster_out: bool = True


class Plan(BaseModel):
    """A certification plan ([LBC] Def. 1, Def. 7, §6.1), loaded from TOML.

    Attributes:
        estimand: the declared controlled estimand (eq. 2); Def. 1 requires it.
        readouts: the readouts by name, in declaration order.
        target: what the leaderboard certifies: ``"composite"`` or a readout name. Every
            readout is also certified on its own (the capability cells of Appendix E).
        composite_tolerance: ``ε_fair`` of the composite; default the composite-weighted
            mean of the readouts' tolerances.
        delta: ``δ`` of the nuisance radius ``r(δ)`` (Def. 7).
        delta_prime: ``δ′`` of the sampling radius, family-wise over the family.
        sampling: the sampling radius: ``"cr2-bm-cf"`` (default; the bias-reduced CR2
            variance with Bell–McCaffrey degrees of freedom, its t quantile widened by the
            Cornish–Fisher skewness terms: valid with unequal cluster sizes and with skewed
            differences such as rare 0/1 successes against a continuous scorer),
            ``"cr2-bm"`` (the same without the skewness terms, which under-covers skewed
            differences) or ``"cr1"`` (CR1 with ``t(G−1)``, [LBC] §6.1 as published, which
            also under-covers when one cluster is much larger than the others).
        family: ``"all"`` (every pair of systems) or a list of ``[system, system]`` pairs.
        min_common_tasks: a pair with fewer common tasks is not decided.
        failure: the failure policy.
        length_convention: the declared length convention (e.g. ``"matched"``); recorded
            and hashed, [LBC] §6.2 ("the convention must be declared").
        window: the comparison window whose sealed entries decide admissibility.
        select: keep only runs whose ``meta`` holds these values (one entry condition,
            e.g. ``{ranking = "agent"}``); conditions are never compared with each other.
        conditions: the qualitative conditions.
        constants: the constants of eq. 3.
        calibration: the Appendix F.5 settings.
    """

    model_config = _MODEL

    version: Literal[1] = 1
    name: str = ""
    estimand: str
    readouts: dict[str, Readout]
    target: str = COMPOSITE
    composite_tolerance: Positive | None = None
    delta: Probability = 0.05
    delta_prime: Probability = 0.05
    sampling: Literal["cr2-bm-cf", "cr2-bm", "cr1"] = "cr2-bm-cf"
    family: Literal["all"] | list[tuple[str, str]] = "all"
    min_common_tasks: int = Field(default=10, ge=2)
    failure: FailurePolicy = FailurePolicy()
    length_convention: str = "none"
    window: str | None = None
    select: dict[str, str | int | float | bool] = {}
    conditions: Conditions = Conditions()
    constants: Constants = Constants()
    calibration: Calibration = Calibration()

    @field_validator("estimand")
    @classmethod
    def _estimand_declared(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("`estimand` is empty; declare the controlled estimand ([LBC] "
                             "eq. 2, Def. 1) before any score is read")
        return v

    @model_validator(mode="after")
    def _complete(self) -> Plan:
        if not self.readouts:
            raise ValueError("`readouts` is empty; name at least one readout with its "
                             "tolerance, e.g. [readouts.f1] tolerance = 0.05")
        if COMPOSITE in self.readouts:
            raise ValueError(f"`readouts` may not contain a readout named {COMPOSITE!r}; the "
                             "name is reserved for the composite")
        missing = [n for n, r in self.readouts.items() if r.tolerance is None]
        if missing:
            raise ValueError(
                "the plan names readout(s) " + ", ".join(f"`{n}`" for n in missing)
                + " without a `tolerance` (ε_fair, [LBC] Def. 1); add e.g. "
                f"[readouts.{missing[0]}] tolerance = 0.05 before any score is read"
            )
        if self.target != COMPOSITE and self.target not in self.readouts:
            raise ValueError(f"`target` must be {COMPOSITE!r} or a readout of the plan "
                             f"({', '.join(self.readouts)}); found {self.target!r}")
        if self.failure.policy == "score":
            lacking = [n for n, r in self.readouts.items()
                       if r.failure_value is None and self.failure.value is None]
            if lacking:
                raise ValueError(
                    "`failure.policy` is 'score' but no ⊥ value is declared for "
                    + ", ".join(f"`{n}`" for n in lacking)
                    + "; set `failure.value` (or `failure_value` per readout)")
        if self.family != "all":
            seen: set[frozenset[str]] = set()
            for a, b in self.family:
                if a == b:
                    raise ValueError(f"`family` pairs a system with itself: [{a!r}, {b!r}]")
                key = frozenset((a, b))
                if key in seen:
                    raise ValueError(f"`family` lists the pair [{a!r}, {b!r}] twice")
                seen.add(key)
        return self

    # -- loading and hashing

    @classmethod
    def from_toml(cls, source: str | os.PathLike[str] | bytes) -> Plan:
        """A plan from a TOML file path or TOML text.

        A ``str`` holding a newline or an ``=`` is TOML text; any other ``str`` or a path
        is a file name. Raises ``ValueError`` (pydantic's ``ValidationError``) naming what is
        missing or malformed, and ``FileNotFoundError`` for a missing file.
        """
        if isinstance(source, bytes):
            text = source.decode("utf-8")
            where = "<text>"
        elif isinstance(source, str) and ("\n" in source or "=" in source):
            text, where = source, "<text>"
        else:
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"plan file {str(path)!r} does not exist; pass a TOML "
                                        "file or TOML text")
            text, where = path.read_text(encoding="utf-8"), str(path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{where}: the plan is not valid TOML: {exc}") from None
        return cls.model_validate(data)

    def canonical(self) -> bytes:
        """The canonical encoding that ``hash()`` digests."""
        return encode(self.model_dump(mode="json"))

    def hash(self) -> str:
        """SHA-256 (hex) of the canonical encoding of the plan."""
        return hashlib.sha256(self.canonical()).hexdigest()

    # -- derived quantities

    @property
    def readout_names(self) -> tuple[str, ...]:
        return tuple(self.readouts)

    @property
    def targets(self) -> tuple[str, ...]:
        """``("composite", *readouts)``: every target certified."""
        return (COMPOSITE, *self.readouts)

    def composite_weights(self) -> dict[str, float]:
        """Weight of each readout in the composite: axes equal, readouts equal within one."""
        axes: dict[str, list[str]] = {}
        for name, r in self.readouts.items():
            axes.setdefault(r.axis if r.axis is not None else f"\0{name}", []).append(name)
        return {name: 1.0 / (len(axes) * len(members))
                for members in axes.values() for name in members}

    def tolerance(self, target: str) -> float:
        """``ε_fair`` of a target (a readout, or the composite)."""
        if target == COMPOSITE:
            if self.composite_tolerance is not None:
                return float(self.composite_tolerance)
            w = self.composite_weights()
            return math.fsum(w[n] * float(self.readouts[n].tolerance or 0.0) for n in w)
        tol = self.readouts[target].tolerance
        assert tol is not None  # guaranteed by the validator
        return float(tol)

    def failure_value(self, readout: str) -> float:
        """The declared ⊥ score of ``readout`` under ``failure.policy = "score"``."""
        v = self.readouts[readout].failure_value
        if v is None:
            v = self.failure.value
        if v is None:
            raise ValueError(f"no ⊥ value is declared for readout `{readout}`; set "
                             "`failure.value` in the plan")
        return float(v)

    def orientation(self) -> dict[str, float]:
        """+1 for a higher-is-better readout, −1 for a lower-is-better one."""
        return {n: (1.0 if r.better == "higher" else -1.0) for n, r in self.readouts.items()}

    def family_pairs(self, systems: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
        """The family of pairs over ``systems`` (in the given order for ``"all"``)."""
        if self.family == "all":
            return [(systems[i], systems[j]) for i in range(len(systems))
                    for j in range(i + 1, len(systems))]
        known = set(systems)
        for a, b in self.family:
            for s in (a, b):
                if s not in known:
                    raise ValueError(f"`family` names system {s!r}, which has no scores; "
                                     f"systems: {', '.join(systems)}")
        return [(a, b) for a, b in self.family]

    def matches(self, meta: dict[str, Any]) -> bool:
        """True when a run's ``meta`` holds every value of ``select``."""
        return all(k in meta and meta[k] == v for k, v in self.select.items())
