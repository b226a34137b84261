"""What each enrolled machine may do on a secure bus: the router's access control, built from the machines' roles.

Strategy: ``pluto router --secure`` admits only machines with a certificate of the robot's CA (mutual TLS, see
:mod:`pluto.bus.certs`) and then filters every message it routes by Zenoh's access control: default *deny*, and
rules that allow by the common name of the certificate of the link a message comes from (ingress) or goes to
(egress). The names and roles come from the CA's ``machines.toml``, so the router's rules follow the CA's list of
machines; a certificate whose name is not on it (issued after the router started, or by another CA with the same
name) or revoked (``pluto certs revoke``) is let through TLS only to be allowed nothing.

The rules, per role:

- every enrolled machine (robot or viewer) is *sent* everything on Pluto's keys: values, replies, the declarations
  of writers, services and module tokens (egress);
- a ``robot`` machine may do anything on Pluto's keys (put, query, reply, declare subscribers, queryables and
  liveliness tokens): it runs the robot's modules;
- a ``viewer`` may subscribe to any interface (commands included: watching is not commanding), ask for the newest
  value of any interface, watch and list modules (liveliness subscribers and queries), and call the services that
  only read (:data:`VIEWER_SERVICES`). It may not put (no command, no state: a forged pose steers a robot as well
  as a command does), declare a queryable (it could answer a late reader's query with a value of its own or pose
  as a service), declare a liveliness token (pose as a module) or call any other service;
- a ``router`` certificate is the router's own: as a client it is allowed nothing.

Zenoh's key expressions keep *verbatim* chunks (those starting with ``@``) out of wildcards: ``pluto/**`` includes
``pluto/r/Base/Sonar`` but not ``pluto/r/@srv/mom/base``. So the keys Pluto's bus uses under an ``@`` chunk are
listed one by one (:data:`ROBOT_KEYS`); a key added to the bus under a new ``@`` chunk must be added here, or a
secure router drops it (a test checks the bus's own keys against this list).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pluto.bus.certs import Machine

__all__ = ["ROBOT_KEYS", "VIEWER_SERVICES", "access_control", "viewer_may_call"]

ALL_MESSAGES = (
    "put",
    "delete",
    "declare_subscriber",
    "query",
    "reply",
    "declare_queryable",
    "liveliness_token",
    "liveliness_query",
    "declare_liveliness_subscriber",
)
"""Every kind of message Zenoh's access control tells apart."""

ROBOT_KEYS = (
    "pluto/**",  # interfaces, commands included: pluto/<robot>/<interface>
    "pluto/*/@srv/**",  # services
    "pluto/*/@module/**",  # module tokens
    "pluto/*/@writer/**",  # the tokens naming a command line's writers
    "pluto/*/@starting/**",  # a module that is starting
    "pluto/*/@lockstep/**",  # the simulation's lock-step
    "pluto/@session/**",  # every bus session's token
    "pluto/@roster",  # the local rendezvous's list of sessions
)
"""Every key of Pluto's bus (each robot's and the shared ones)."""

WATCH_KEYS = (
    "pluto/*/@module/**",
    "pluto/*/@writer/**",
    "pluto/*/@starting/**",
    "pluto/*/@lockstep/member/**",
    "pluto/@session/**",
)
"""The liveliness tokens a viewer may watch and list: who runs, who writes, who takes part in a simulation."""

VIEWER_SERVICES = (
    "mom/*",  # a module's MOM entry
    "*/list_parameters",
    "*/get_parameters",
    "*/geometry",  # the base's shape
    "*/map",  # where SLAM's map is and how big
    "*/world",  # the simulated world's settings
    "*/lockstep",  # the simulation's lock-step state
    "*/model",  # the arm's model file
    "*/clients",  # the XML gateway's clients
)
"""The services a viewer may call: those that only read (as patterns of service names, ``*`` one part). Every other
service (start_activity, set_parameters, motor_power, place, pause, ...) changes what the robot does."""


def viewer_may_call(service: str) -> bool:
    """True if a viewer may call ``service`` (a name such as ``mom/base``; see :data:`VIEWER_SERVICES`)."""
    parts = service.split("/")
    for pattern in VIEWER_SERVICES:
        chunks = pattern.split("/")
        if len(chunks) == len(parts) and all(c in ("*", p) for c, p in zip(chunks, parts, strict=True)):
            return True
    return False


def access_control(machines: Iterable[Machine]) -> dict[str, Any]:
    """Zenoh's ``access_control`` section for a router that admits ``machines`` by their roles (see the module
    docstring).

    Returns:
        the section as JSON-able values; revoked machines are left out; with no robot and no viewer among
        ``machines``, rules that allow nothing (default deny).
    """
    by_role: dict[str, list[str]] = {}
    for machine in machines:
        if machine.revoked is None:
            by_role.setdefault(machine.role, []).append(machine.name)
    rules: list[dict[str, Any]] = [
        _rule("sent to enrolled machines", "egress", ALL_MESSAGES, ROBOT_KEYS),
        _rule("robot", "ingress", ALL_MESSAGES, ROBOT_KEYS),
        _rule("viewer reads", "ingress", ("declare_subscriber", "query"), ("pluto/**",)),
        _rule("viewer watches", "ingress", ("declare_liveliness_subscriber", "liveliness_query"), WATCH_KEYS),
        _rule("viewer calls", "ingress", ("query",), tuple(f"pluto/*/@srv/{s}" for s in VIEWER_SERVICES)),
    ]
    subjects: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    grants = {
        "robot": ["sent to enrolled machines", "robot"],
        "viewer": ["sent to enrolled machines", "viewer reads", "viewer watches", "viewer calls"],
    }
    for role, rule_ids in grants.items():
        if by_role.get(role):
            subjects.append({"id": f"{role}s", "cert_common_names": sorted(by_role[role])})
            policies.append({"id": f"{role}s", "rules": rule_ids, "subjects": [f"{role}s"]})
    if not policies:
        # Zenoh wants every list non-empty: a subject nobody's certificate can carry (names have no spaces).
        subjects.append({"id": "nobody", "cert_common_names": ["no machine enrolled"]})
        policies.append({"id": "nobody", "rules": ["robot"], "subjects": ["nobody"]})
    return {
        "enabled": True,
        "default_permission": "deny",
        "rules": rules,
        "subjects": subjects,
        "policies": policies,
    }


def _rule(rule_id: str, flow: str, messages: Iterable[str], keys: Iterable[str]) -> dict[str, Any]:
    return {
        "id": rule_id,
        "permission": "allow",
        "flows": [flow],
        "messages": list(messages),
        "key_exprs": list(keys),
    }
