"""A bundled, offline deep-research agent: the backbone of ``agentlog demo`` and the tests.

Examples:
    >>> from agentlog.examples.deep_research import make_pool
    >>> pool = make_pool("q3", seed=0)
    >>> pool.ids[7], -1.0 <= pool.theta_star <= 1.0
    ('q3-d07', True)

See ``agent.py`` for the model, ``channels.py`` for the evaluation channels that channel
replay uses (importing this package registers them: ``--app agentlog.examples.deep_research``)
and README.md for a tour.
"""

from . import channels
from .agent import (
    DEFAULT_EVALUATOR,
    DEFAULT_POLICY,
    OPTIONS,
    RANKINGS,
    Conclusion,
    Episode,
    EvalChannel,
    Evaluator,
    Grade,
    Policy,
    Pool,
    Retrieval,
    grade,
    make_pool,
    retrieval_outcome,
    retrieve,
    run_agent,
    run_study,
    study_seed,
    synthesize,
    task_ids,
)

__all__ = [
    "DEFAULT_EVALUATOR",
    "DEFAULT_POLICY",
    "OPTIONS",
    "RANKINGS",
    "Conclusion",
    "Episode",
    "EvalChannel",
    "Evaluator",
    "Grade",
    "Policy",
    "Pool",
    "Retrieval",
    "channels",
    "grade",
    "make_pool",
    "retrieval_outcome",
    "retrieve",
    "run_agent",
    "run_study",
    "study_seed",
    "synthesize",
    "task_ids",
]
