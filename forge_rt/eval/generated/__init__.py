"""A seeded generator of multi-step tool workflows, as eval scenarios.

:func:`generate_suite` returns :class:`~forge_rt.eval._scenario.Scenario` objects like the
hand-written suite's, so the eval runner runs them unchanged, on the simulated backend (each
has an oracle: a perfect model completes every case) and on real models. Each case draws a
domain (a clinic, a marina, a brewery, ...), its records and a tool set of 3-12 tools from its
own seeded RNG; ``tags[0]`` is its shape: ``chain``, ``fanout``, ``recovery``, ``decline``,
``followup`` or ``stateful`` (see ``_shapes.py`` for how each is judged).
"""

from forge_rt.eval.generated._build import generate_suite as generate_suite

__all__ = ["generate_suite"]
