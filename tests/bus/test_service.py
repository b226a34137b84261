"""Request/reply (services) and liveliness (modules)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from pluto.bus import Bus, BusTimeout, RemoteError
from pluto.errors import DecodeError
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]


class AddRequest(msgspec.Struct):
    values: list[float]


class Sum(msgspec.Struct):
    total: float
    count: int


# -- services ------------------------------------------------------------------------------------------------------


def test_call_returns_the_handlers_reply(bus: Bus, make_bus: MakeBus) -> None:
    service = bus.create_service("math/add", lambda values: sum(values))
    caller = make_bus()
    assert caller.call("math/add", [1, 2, 3.5]) == 6.5
    assert caller.call("math/add", []) == 0
    assert service.served == 2
    assert service.failed == 0


def test_call_in_the_same_bus(bus: Bus) -> None:
    bus.create_service("echo", lambda request: request)
    assert bus.call("echo", {"a": [1, "two"]}) == {"a": [1, "two"]}


def test_typed_request_and_reply(bus: Bus, make_bus: MakeBus) -> None:
    def add(request: AddRequest) -> Sum:
        assert isinstance(request, AddRequest)
        return Sum(total=sum(request.values), count=len(request.values))

    bus.create_service("math/sum", add, request_type=AddRequest)
    reply = make_bus().call("math/sum", AddRequest(values=[1.0, 2.0]), reply_type=Sum)
    assert reply == Sum(total=3.0, count=2)


def test_request_none_reaches_the_handler_as_none(bus: Bus) -> None:
    seen: list[Any] = []

    def handler(request: Any) -> str:
        seen.append(request)
        return "ok"

    bus.create_service("ping", handler)
    assert bus.call("ping") == "ok"
    assert seen == [None]


def test_handler_exception_is_a_remote_error_with_the_message(bus: Bus, make_bus: MakeBus) -> None:
    def broken(request: Any) -> None:
        raise ValueError(f"cannot handle {request!r}")

    service = bus.create_service("broken", broken)
    with pytest.raises(RemoteError) as info:
        make_bus().call("broken", 42)
    text = str(info.value)
    assert "broken" in text
    assert "ValueError" in text
    assert "cannot handle 42" in text
    assert service.failed == 1


def test_service_keeps_serving_after_a_failure(bus: Bus, make_bus: MakeBus) -> None:
    def picky(request: int) -> int:
        if request < 0:
            raise ValueError("negative")
        return request * 2

    bus.create_service("picky", picky)
    caller = make_bus()
    with pytest.raises(RemoteError):
        caller.call("picky", -1)
    assert caller.call("picky", 21) == 42


def test_bad_request_type_is_a_remote_error(bus: Bus, make_bus: MakeBus) -> None:
    calls: list[AddRequest] = []
    service = bus.create_service("math/sum", lambda r: calls.append(r) or sum(r.values), request_type=AddRequest)
    caller = make_bus()
    with pytest.raises(RemoteError) as info:
        caller.call("math/sum", {"garbage": 1})
    assert "bad request" in str(info.value)
    assert "math/sum" in str(info.value)
    with pytest.raises(RemoteError, match="bad request"):
        caller.call("math/sum", {"values": "not a list"})
    assert calls == []  # the handler never saw them
    assert service.failed == 2
    assert caller.call("math/sum", {"values": [1, 2]}) == 3


def test_reply_of_the_wrong_type_is_a_decode_error(bus: Bus) -> None:
    bus.create_service("text", lambda request: "not a number")
    with pytest.raises(DecodeError) as info:
        bus.call("text", reply_type=int)
    assert "text" in str(info.value)


def test_unencodable_reply_is_a_remote_error(bus: Bus) -> None:
    bus.create_service("weird", lambda request: object())
    with pytest.raises(RemoteError):
        bus.call("weird")


def test_slow_handler_times_out(bus: Bus, make_bus: MakeBus) -> None:
    release = threading.Event()

    def slow(request: Any) -> str:
        release.wait(5.0)
        return "late"

    service = bus.create_service("slow", slow)
    caller = make_bus()
    try:
        with pytest.raises(BusTimeout) as info:
            caller.call("slow", timeout=0.3)
        assert service.served == 0  # the call gave up while the handler still held its reply
    finally:
        release.set()
    assert "slow" in str(info.value)
    assert isinstance(info.value, TimeoutError)
    wait_until(lambda: service.served == 1, timeout=2.0)  # the handler finished; the late reply went nowhere
    assert caller.call("slow", timeout=2.0) == "late"


def test_calling_a_service_nobody_serves_times_out(bus: Bus) -> None:
    # (how long it takes, the whole timeout and not more, is measured by bench/bus.py --timeouts)
    with pytest.raises(BusTimeout) as info:
        bus.call("nobody/here", timeout=0.5)
    assert "nobody/here" in str(info.value)
    assert bus.robot in str(info.value)


def test_call_reaches_a_service_that_starts_during_the_call(bus: Bus, make_bus: MakeBus) -> None:
    server = make_bus()
    timer = threading.Timer(0.1, server.create_service, ("late/start", lambda request: "up"))
    timer.start()
    try:
        assert bus.call("late/start", timeout=2.0) == "up"
    finally:
        timer.cancel()


def test_closed_service_no_longer_answers(bus: Bus, make_bus: MakeBus) -> None:
    service = bus.create_service("short/lived", lambda request: 1)
    caller = make_bus()
    assert caller.call("short/lived") == 1
    service.close()
    service.close()
    with pytest.raises(BusTimeout):
        caller.call("short/lived", timeout=0.3)


def test_bad_service_name(bus: Bus) -> None:
    with pytest.raises(ValueError):
        bus.create_service("a/*", print)
    with pytest.raises(ValueError):
        bus.call("a/$x")


# -- liveliness ----------------------------------------------------------------------------------------------------


def test_declared_module_is_live_in_another_bus(bus: Bus, make_bus: MakeBus) -> None:
    watcher = bus
    module_bus = make_bus()
    module_bus.declare_module("base")
    watcher.wait_for_module("base", timeout=10.0)
    assert "base" in watcher.live_modules()
    module_bus.wait_for_module("base", timeout=10.0)  # its own module too


def test_module_disappears_when_its_bus_closes(bus: Bus, make_bus: MakeBus) -> None:
    module_bus = make_bus()
    module_bus.declare_module("base")
    module_bus.declare_module("sick")
    wait_until(lambda: {"base", "sick"} <= set(bus.live_modules()), timeout=2.0)
    module_bus.close()
    wait_until(
        lambda: not {"base", "sick"} & set(bus.live_modules(timeout=0.5)),
        timeout=2.0,
        message="modules still live 2 s after their bus closed",
    )


def test_module_disappears_when_the_rendezvous_owner_closes(make_bus: MakeBus) -> None:
    owner = make_bus()
    watcher = make_bus()
    owner.declare_module("router-module")
    watcher.wait_for_module("router-module", timeout=10.0)
    owner.close()
    watcher.wait_for_module("router-module", timeout=2.0, alive=False)
    assert "router-module" not in watcher.live_modules()


def test_undeclared_token_disappears(bus: Bus, make_bus: MakeBus) -> None:
    watcher = make_bus()
    token = bus.declare_module("temp")
    watcher.wait_for_module("temp", timeout=10.0)
    token.undeclare()
    watcher.wait_for_module("temp", timeout=2.0, alive=False)
    assert "temp" not in watcher.live_modules()


def test_watch_modules_reports_appear_and_disappear(bus: Bus, make_bus: MakeBus) -> None:
    events: queue.Queue[tuple[str, bool]] = queue.Queue()
    module_bus = make_bus()
    module_bus.declare_module("early")
    wait_until(lambda: "early" in bus.live_modules(), timeout=2.0)
    bus.watch_modules(lambda name, alive: events.put((name, alive)))
    assert events.get(timeout=2.0) == ("early", True)  # already alive: reported first

    token = module_bus.declare_module("late")
    assert events.get(timeout=2.0) == ("late", True)
    token.undeclare()
    assert events.get(timeout=2.0) == ("late", False)
    module_bus.close()
    assert events.get(timeout=2.0) == ("early", False)


def test_wait_for_module_waits_for_it(bus: Bus, make_bus: MakeBus) -> None:
    module_bus = make_bus()
    timer = threading.Timer(0.1, module_bus.declare_module, ("slow-starter",))
    timer.start()
    try:
        bus.wait_for_module("slow-starter", timeout=10.0)
        assert "slow-starter" in bus.live_modules()  # it returned for the module, not before it came
    finally:
        timer.cancel()
        timer.join()  # the module's bus closes after this: not while the timer's call is still in it


def test_wait_for_module_times_out(bus: Bus) -> None:
    with pytest.raises(BusTimeout) as info:
        bus.wait_for_module("never", timeout=0.2)
    assert "never" in str(info.value)
    bus.declare_module("forever")
    with pytest.raises(BusTimeout, match="gone"):
        bus.wait_for_module("forever", timeout=0.2, alive=False)


def test_wait_for_a_module_that_is_already_gone_returns_at_once(bus: Bus) -> None:
    # a wait that waited would end in BusTimeout; the test's time limit ends it long before this one would
    bus.wait_for_module("never-was", timeout=3600.0, alive=False)


def test_modules_of_other_robots_are_not_listed(bus: Bus, make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch) -> None:
    bus.declare_module("mine")
    monkeypatch.setenv("PLUTO_ROBOT", f"{bus.robot}-other")
    other = make_bus()
    other.declare_module("theirs")
    other.wait_for_module("theirs", timeout=10.0)
    bus.wait_for_module("mine", timeout=10.0)
    assert "theirs" not in bus.live_modules()
    assert "mine" not in other.live_modules()
    with pytest.raises(BusTimeout):
        bus.wait_for_module("theirs", timeout=0.2)
