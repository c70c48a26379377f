"""Tuning for a goal (seed 004): the settings each goal wants, and a check of a user's
settings against them. `rules` is the data, `check` the judgement, `sources` the I/O."""

from odradek.advice.check import Finding, Settings, check
from odradek.advice.rules import CONFLICTS, RULES, Goal, Rule, Scope, rules_for

__all__ = ["CONFLICTS", "RULES", "Finding", "Goal", "Rule", "Scope", "Settings", "check",
           "rules_for"]
