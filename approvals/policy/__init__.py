"""Declarative policies: AGENT-HOOKS-0.1 interceptors written as YAML, conditions in CEL.

``load_policy(path)`` reads and checks a policy file (every mistake is a :class:`PolicyError`
``FILE:LINE: reason``); the :class:`Policy` it returns is an interceptor to register with the
emitter at ``policy.points``. ``load_cases`` and ``run_cases`` run a table of cases against a
policy, as ``approvals policy test`` does. ``check_tool_names`` refuses a rule that names no tool
of the graph the policy governs. See docs/policies.md.
"""

from approvals.policy.case_runs import context_for, run_case, run_cases
from approvals.policy.cases import (
    Case,
    CaseResult,
    CasesFile,
    Expectation,
    load_cases,
    parse_cases,
)
from approvals.policy.evaluation import (
    DEFAULT_RULE,
    EXTENSION,
    POLICY_ERROR,
    VARIABLES,
    Escalation,
    Policy,
    activation_of,
    approvals_extension,
    escalation_of,
)
from approvals.policy.loading import load_policy, parse_policy
from approvals.policy.rules import Action, Condition, DefaultAction, Mask, Rule, SetArgument
from approvals.policy.source import PolicyError
from approvals.policy.tool_names import (
    check_policies_tool_names,
    check_tool_names,
    policy_for_tool,
)

__all__ = [
    "DEFAULT_RULE",
    "EXTENSION",
    "POLICY_ERROR",
    "VARIABLES",
    "Action",
    "Case",
    "CaseResult",
    "CasesFile",
    "Condition",
    "DefaultAction",
    "Escalation",
    "Expectation",
    "Mask",
    "Policy",
    "PolicyError",
    "Rule",
    "SetArgument",
    "activation_of",
    "approvals_extension",
    "check_policies_tool_names",
    "check_tool_names",
    "context_for",
    "escalation_of",
    "load_cases",
    "load_policy",
    "parse_cases",
    "parse_policy",
    "policy_for_tool",
    "run_case",
    "run_cases",
]
