"""CrewAI through ``openinference-instrumentation-crewai``: an extension of OpenInference.

Built from the instrumentation's source (``_wrappers.py``, 1.1.x): each task a crew runs is an AGENT
span from ``Task._execute_core``, named ``<role>.<task name>._execute_core`` (``<role>._execute_core``
for a task without a name, ``Task._execute_core`` without an agent) with no ``agent.name``; the
agent's role is also ``graph.node.id`` where the agent was passed positionally, and the task's name
``task_name``. A standalone ``Agent.kickoff`` is an AGENT span ``<role>.kickoff`` (``graph.node.id``
= role). The crew is a CHAIN span ``<crew>.kickoff`` above the tasks. Each task's AGENT span is a
run named after its agent's role, never after the instrumented method.
"""

from __future__ import annotations

from tracescorer.conventions import openinference
from tracescorer.conventions.base import AgentInfo, Convention, NotOne, TraceFacts, TraceView
from tracescorer.conventions.common import first_str
from tracescorer.model import Span

NAME = "crewai"
SCOPE = "openinference.instrumentation.crewai"
_METHODS = ("._execute_core", ".kickoff")
#: the span names of a task without an agent and an agent without a role: no name
_CLASSES = frozenset({"Task", "Agent"})


def agent_name(span: Span) -> str | None:
    """The agent's role: ``agent.name`` or ``graph.node.id`` where set, else from the span name
    (``Weather Researcher.forecast._execute_core`` with ``task_name`` = ``forecast`` ->
    ``Weather Researcher``)."""
    attrs = span.attributes
    named = first_str(attrs, "agent.name", "graph.node.id")
    if named is not None:
        return named
    name = span.name
    for method in _METHODS:
        if name.endswith(method):
            name = name[: -len(method)]
            task = first_str(attrs, "task_name")
            if method == "._execute_core" and task and name.endswith("." + task):
                name = name[: -len(task) - 1]
            return None if not name.strip() or name in _CLASSES else name.strip()
    return None


def read_agent(span: Span, trace: TraceView) -> AgentInfo | NotOne | None:
    info = openinference.scoped_agent(span, trace, SCOPE)
    if not isinstance(info, AgentInfo):
        return info
    info.name = agent_name(span)
    info.wrapper = info.name is None
    return info


def detect(facts: TraceFacts) -> float:
    return 0.83 if SCOPE in facts.scopes else 0.0


CONVENTION = Convention(name=NAME, label=openinference.NAME, detect=detect, agent=read_agent, markers=(SCOPE.encode(),))
