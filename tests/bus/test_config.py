"""Bus settings: the [bus] table, the environment over it, validation, and the Zenoh configuration built."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zenoh

from pluto import msgs
from pluto.bus import Bus, BusConfig, BusError, bus_config
from pluto.bus.config import (
    DEFAULT_RENDEZVOUS,
    register_session,
    registered_sessions,
    rendezvous_free,
    unregister_session,
    zenoh_config_json,
)
from pluto.errors import ConfigError, PlutoError
from tests.helpers import free_tcp_port

# -- bus_config ---------------------------------------------------------------------------------------------------


def test_defaults_without_table_or_environment() -> None:
    cfg = bus_config(env={})
    assert cfg == BusConfig()
    assert cfg.robot == "pluto"
    assert cfg.connect == []
    assert cfg.listen == ["tcp/127.0.0.1:0"]
    assert cfg.rendezvous == DEFAULT_RENDEZVOUS
    assert cfg.mode == "auto"
    assert cfg.zenoh_mode == "peer"
    assert cfg.multicast is False


def test_table_values_are_used() -> None:
    table = {
        "robot": "table-robot",
        "connect": ["tcp/10.0.0.1:7447"],
        "listen": ["tcp/0.0.0.0:7450"],
        "rendezvous": "tcp/127.0.0.1:7000",
        "multicast": True,
        "mode": "client",
        "connect_timeout": 0.5,
    }
    cfg = bus_config(table, env={})
    assert cfg.robot == "table-robot"
    assert cfg.connect == ["tcp/10.0.0.1:7447"]
    assert cfg.listen == ["tcp/0.0.0.0:7450"]
    assert cfg.rendezvous == "tcp/127.0.0.1:7000"
    assert cfg.multicast is True
    assert cfg.mode == "client"
    assert cfg.connect_timeout == 0.5


def test_environment_overrides_the_table() -> None:
    table = {
        "robot": "table-robot",
        "connect": ["tcp/10.0.0.1:7447"],
        "listen": ["tcp/0.0.0.0:7450"],
        "rendezvous": "tcp/127.0.0.1:7000",
        "multicast": True,
    }
    env = {
        "PLUTO_ROBOT": "env-robot",
        "PLUTO_CONNECT": "tcp/10.0.0.2:7447",
        "PLUTO_LISTEN": "tcp/127.0.0.1:0,tcp/127.0.0.1:7451",
        "PLUTO_RENDEZVOUS": "tcp/127.0.0.1:7001",
        "PLUTO_MULTICAST": "0",
    }
    cfg = bus_config(table, env=env)
    assert cfg.robot == "env-robot"
    assert cfg.connect == ["tcp/10.0.0.2:7447"]
    assert cfg.listen == ["tcp/127.0.0.1:0", "tcp/127.0.0.1:7451"]
    assert cfg.rendezvous == "tcp/127.0.0.1:7001"
    assert cfg.multicast is False
    assert table["robot"] == "table-robot"  # the table itself is left alone


def test_empty_environment_values_leave_the_table_alone_but_empty_rendezvous_disables_it() -> None:
    env = {"PLUTO_ROBOT": "", "PLUTO_CONNECT": "", "PLUTO_LISTEN": "", "PLUTO_RENDEZVOUS": ""}
    cfg = bus_config({"robot": "table-robot", "connect": ["tcp/10.0.0.1:7447"]}, env=env)
    assert cfg.robot == "table-robot"
    assert cfg.connect == ["tcp/10.0.0.1:7447"]
    assert cfg.listen == ["tcp/127.0.0.1:0"]
    assert cfg.rendezvous == ""


def test_connect_is_split_on_commas_and_stripped() -> None:
    cfg = bus_config(env={"PLUTO_CONNECT": " tcp/10.0.0.1:7447 ,tcp/10.0.0.2:7447,, "})
    assert cfg.connect == ["tcp/10.0.0.1:7447", "tcp/10.0.0.2:7447"]


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("yes", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]
)
def test_multicast_from_environment(value: str, expected: bool) -> None:
    assert bus_config(env={"PLUTO_MULTICAST": value}).multicast is expected


def test_default_environment_is_the_process_environment(bus_env: dict[str, str]) -> None:
    cfg = bus_config()
    assert cfg.robot == bus_env["PLUTO_ROBOT"]
    assert cfg.rendezvous == bus_env["PLUTO_RENDEZVOUS"]
    assert cfg.connect == []


def test_process_environment_overrides_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLUTO_ROBOT", "from-env")
    monkeypatch.setenv("PLUTO_CONNECT", "tcp/10.1.1.1:7447,tcp/10.1.1.2:7447")
    cfg = bus_config({"robot": "from-table", "connect": ["tcp/10.0.0.1:1"]})
    assert cfg.robot == "from-env"
    assert cfg.connect == ["tcp/10.1.1.1:7447", "tcp/10.1.1.2:7447"]


@pytest.mark.parametrize("robot", ["", "a/b", "a*", "a b", "r@x", "r#1", "r?", "r$"])
def test_bad_robot_name_in_the_table(robot: str) -> None:
    with pytest.raises(ConfigError) as info:
        bus_config({"robot": robot}, env={})
    assert repr(robot) in str(info.value)
    assert isinstance(info.value, PlutoError)


@pytest.mark.parametrize("robot", ["a/b", "*", "my robot", "@r"])
def test_bad_robot_name_in_the_environment(robot: str) -> None:
    with pytest.raises(ConfigError):
        bus_config({"robot": "good"}, env={"PLUTO_ROBOT": robot})


def test_bad_robot_name_in_the_struct() -> None:
    with pytest.raises(ConfigError):
        BusConfig(robot="a/b")


def test_client_mode_needs_connect() -> None:
    with pytest.raises(ConfigError) as info:
        bus_config({"mode": "client"}, env={})
    assert "connect" in str(info.value)
    cfg = bus_config({"mode": "client"}, env={"PLUTO_CONNECT": "tcp/10.0.0.1:7447"})
    assert cfg.mode == "client"


def test_unknown_mode() -> None:
    with pytest.raises(ConfigError) as info:
        bus_config({"mode": "bridge"}, env={})
    assert "bridge" in str(info.value)
    assert "client" in str(info.value)


@pytest.mark.parametrize(
    ("table", "env", "mode"),
    [
        ({}, {}, "peer"),
        ({}, {"PLUTO_CONNECT": "tcp/10.0.0.1:7447"}, "client"),
        ({"connect": ["tcp/10.0.0.1:7447"]}, {}, "client"),
        ({"connect": ["tcp/10.0.0.1:7447"], "mode": "peer"}, {}, "peer"),
        ({"mode": "peer"}, {"PLUTO_CONNECT": "tcp/10.0.0.1:7447", "PLUTO_MODE": "Client"}, "client"),
        ({}, {"PLUTO_CONNECT": "tcp/10.0.0.1:7447", "PLUTO_MODE": "peer"}, "peer"),
        ({}, {"PLUTO_MODE": "router"}, "router"),
    ],
    ids=["nothing", "connect-env", "connect-table", "peer-asked", "env-over-table", "peer-env", "router"],
)
def test_mode_is_client_with_connect_unless_asked(table: dict[str, Any], env: dict[str, str], mode: str) -> None:
    assert bus_config(table, env=env).zenoh_mode == mode


def test_bad_mode_in_the_environment() -> None:
    with pytest.raises(ConfigError) as info:
        bus_config(env={"PLUTO_MODE": "server"})
    assert "server" in str(info.value)


def test_every_variable_read_is_documented() -> None:
    import inspect
    import re

    from pluto.bus import config

    read = set(re.findall(r"env(?:\.get\(|\[)\"(PLUTO_[A-Z_]+)\"", inspect.getsource(config.bus_config)))
    assert "PLUTO_MODE" in read
    assert read == set(config.ENVIRONMENT)


def test_unknown_key_in_the_table() -> None:
    with pytest.raises(ConfigError) as info:
        bus_config({"robt": "typo"}, env={})
    assert "robt" in str(info.value)


@pytest.mark.parametrize(
    ("table", "where"),
    [
        ({"connect": "tcp/10.0.0.1:7447"}, "connect"),
        ({"listen": [7447]}, "listen"),
        ({"connect_timeout": "soon"}, "connect_timeout"),
        ({"multicast": "maybe"}, "multicast"),
    ],
)
def test_wrong_type_in_the_table(table: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        bus_config(table, env={})
    assert where in str(info.value)
    assert str(info.value).startswith("[bus]")


# -- zenoh_config_json ---------------------------------------------------------------------------------------------

RENDEZVOUS = "tcp/127.0.0.1:7999"


def test_owner_runs_a_router_listening_on_the_rendezvous() -> None:
    cfg = BusConfig(robot="r", rendezvous=RENDEZVOUS)
    entries = zenoh_config_json(cfg, owner=True)
    assert entries["mode"] == "router"
    assert entries["listen/endpoints"][0] == RENDEZVOUS
    assert "tcp/127.0.0.1:0" in entries["listen/endpoints"]
    assert entries["listen/exit_on_failure"] is True  # another process took it: fail and join instead
    assert "connect/endpoints" not in entries
    assert entries["scouting/multicast/enabled"] is False


def test_non_owner_is_a_peer_that_connects_to_the_rendezvous() -> None:
    cfg = BusConfig(robot="r", rendezvous=RENDEZVOUS)
    entries = zenoh_config_json(cfg, owner=False)
    assert entries["mode"] == "peer"
    assert entries["connect/endpoints"] == [RENDEZVOUS]
    assert entries["connect/exit_on_failure"] is False
    assert entries["connect/timeout_ms"] == 2000
    assert entries["listen/exit_on_failure"] is False
    assert "tcp/127.0.0.1:0" in entries["listen/endpoints"]


@pytest.mark.parametrize("owner", [False, True])
def test_connect_endpoints_replace_the_rendezvous(owner: bool) -> None:
    cfg = BusConfig(
        robot="r", rendezvous=RENDEZVOUS, connect=["tcp/10.0.0.1:7447", "tcp/10.0.0.2:7447"], connect_timeout=0.5
    )
    entries = zenoh_config_json(cfg, owner=owner)
    assert entries["mode"] == "client"
    assert entries["connect/endpoints"] == ["tcp/10.0.0.1:7447", "tcp/10.0.0.2:7447"]
    assert entries["connect/exit_on_failure"] is True
    assert entries["connect/timeout_ms"] == 500
    assert entries["listen/endpoints"] == []


def test_peer_asked_with_connect_listens_too() -> None:
    cfg = BusConfig(robot="r", rendezvous=RENDEZVOUS, connect=["tcp/10.0.0.1:7447"], mode="peer")
    entries = zenoh_config_json(cfg)
    assert entries["mode"] == "peer"
    assert entries["connect/endpoints"] == ["tcp/10.0.0.1:7447"]
    assert RENDEZVOUS not in entries["listen/endpoints"]
    assert entries["listen/endpoints"] == ["tcp/127.0.0.1:0"]


@pytest.mark.parametrize("owner", [False, True])
def test_router_mode_listens_where_told_and_skips_the_rendezvous(owner: bool) -> None:
    cfg = BusConfig(robot="r", rendezvous=RENDEZVOUS, listen=["tcp/127.0.0.1:7600"], mode="router")
    entries = zenoh_config_json(cfg, owner=owner)
    assert entries["mode"] == "router"
    assert entries["listen/endpoints"] == ["tcp/127.0.0.1:7600"]
    assert "connect/endpoints" not in entries
    assert not rendezvous_free(cfg)


def test_client_mode_listens_on_nothing() -> None:
    cfg = BusConfig(robot="r", mode="client", connect=["tcp/10.0.0.1:7447"])
    entries = zenoh_config_json(cfg)
    assert entries["mode"] == "client"
    assert entries["listen/endpoints"] == []
    assert entries["connect/endpoints"] == ["tcp/10.0.0.1:7447"]


@pytest.mark.parametrize("owner", [False, True])
def test_empty_rendezvous_is_a_plain_peer(owner: bool) -> None:
    cfg = BusConfig(robot="r", rendezvous="", multicast=True)
    entries = zenoh_config_json(cfg, owner=owner)
    assert entries["mode"] == "peer"
    assert entries["listen/endpoints"] == ["tcp/127.0.0.1:0"]
    assert "connect/endpoints" not in entries
    assert entries["scouting/multicast/enabled"] is True


@pytest.mark.parametrize(
    ("cfg", "owner"),
    [
        (BusConfig(rendezvous=RENDEZVOUS), True),
        (BusConfig(rendezvous=RENDEZVOUS), False),
        (BusConfig(connect=["tcp/10.0.0.1:7447"]), False),
        (BusConfig(mode="client", connect=["tcp/10.0.0.1:7447"]), False),
        (BusConfig(mode="peer", connect=["tcp/10.0.0.1:7447"]), False),
        (BusConfig(mode="router", listen=["tcp/127.0.0.1:7600"]), False),
        (BusConfig(rendezvous=""), False),
    ],
    ids=["owner", "newcomer", "connect", "client", "peer-connect", "router", "no-rendezvous"],
)
def test_zenoh_accepts_every_entry(cfg: BusConfig, owner: bool) -> None:
    conf = zenoh.Config()
    for path, value in zenoh_config_json(cfg, owner).items():
        conf.insert_json5(path, msgspec.json.encode(value).decode())
        assert msgspec.json.decode(conf.get_json(path)) == value, path


# -- rendezvous_free and opening -------------------------------------------------------------------------------------


def test_rendezvous_free_only_while_nobody_listens() -> None:
    port = free_tcp_port()
    cfg = BusConfig(rendezvous=f"tcp/127.0.0.1:{port}")
    assert rendezvous_free(cfg)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not rendezvous_free(cfg)
    assert not rendezvous_free(BusConfig(rendezvous=""))
    assert not rendezvous_free(BusConfig(rendezvous=f"tcp/127.0.0.1:{free_tcp_port()}", connect=["tcp/x:1"]))
    assert not rendezvous_free(BusConfig(rendezvous="tcp/not-an-endpoint"))


def test_first_bus_owns_the_rendezvous(make_bus: Any) -> None:
    first = make_bus()
    assert not rendezvous_free(first.config)  # it listens there now
    second = make_bus()
    assert second.robot == first.robot


def test_client_through_the_rendezvous_router(make_bus: Any, bus_env: dict[str, str]) -> None:
    owner = make_bus()
    writer = owner.create_publisher("Base/Drive/State")
    writer.write(msgs.Odometry(x=3.0))
    client = make_bus(BusConfig(robot=bus_env["PLUTO_ROBOT"], mode="client", connect=[bus_env["PLUTO_RENDEZVOUS"]]))
    reader = client.create_reader("Base/Drive/State")
    assert reader.read() == msgs.Odometry(x=3.0)
    writer.write(msgs.Odometry(x=4.0))
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=4.0)


def test_unreachable_router_is_a_bus_error_with_a_hint() -> None:
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    with pytest.raises(BusError) as info:
        Bus(BusConfig(robot="r", connect=[endpoint], connect_timeout=0.3))
    assert endpoint in str(info.value)
    assert "pluto router" in str(info.value)


def test_an_unreachable_router_is_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: a failed open used to be retried as a newcomer even with `connect` set (twice the timeout).
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    opened: list[zenoh.Config] = []
    real_open = zenoh.open

    def counted_open(conf: zenoh.Config) -> zenoh.Session:
        opened.append(conf)
        return real_open(conf)

    monkeypatch.setattr(zenoh, "open", counted_open)
    with pytest.raises(BusError):
        Bus(BusConfig(robot="r", connect=[endpoint], connect_timeout=0.5))
    assert len(opened) == 1


def test_a_bus_in_router_mode_serves_clients(make_bus: Any, bus_env: dict[str, str]) -> None:
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    robot = bus_env["PLUTO_ROBOT"]
    router = make_bus(bus_config({"mode": "router", "listen": [endpoint]}, env={"PLUTO_ROBOT": robot}))
    assert not router.owner  # it does not take the local rendezvous
    writer = router.create_publisher("Base/Drive/State")
    writer.write(msgs.Odometry(x=5.0))
    client = make_bus(bus_config(env={"PLUTO_ROBOT": robot, "PLUTO_CONNECT": endpoint}))
    assert client.config.zenoh_mode == "client"
    reader = client.create_reader("Base/Drive/State")
    assert reader.read() == msgs.Odometry(x=5.0)
    writer.write(msgs.Odometry(x=6.0))
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=6.0)


def test_sessions_at_the_rendezvous_are_listed_while_their_processes_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cfg = BusConfig(robot="r", rendezvous="tcp/127.0.0.1:7999")
    path = register_session(cfg, "aa")
    assert path is not None and path.read_text() == str(os.getpid())
    assert registered_sessions(cfg) == {"aa"}
    ended = subprocess.Popen(["true"])  # a process that has ended: its entry is stale
    ended.wait()
    stale = path.parent / "bb"
    stale.write_text(str(ended.pid))
    assert registered_sessions(cfg) == {"aa"}
    assert not stale.exists()
    unregister_session(path)
    assert registered_sessions(cfg) == set()
    assert not path.parent.exists()
    assert register_session(BusConfig(robot="r", connect=["tcp/127.0.0.1:7447"]), "cc") is None  # a client


# -- a machine's certificate, for a secure router -------------------------------------------------------------------


def test_tls_is_a_folder_or_three_paths_and_the_environment_overrides_each(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    connect = {"connect": ["tls/10.0.0.1:7447"]}
    from_folder = bus_config({**connect, "tls": str(folder)}, env={}).tls
    assert from_folder is not None
    assert (from_folder.ca, from_folder.cert, from_folder.key) == tuple(
        str(folder / name) for name in ("ca.pem", "cert.pem", "key.pem")
    )
    table = {"ca": "/etc/ca.pem", "cert": "/etc/me.pem", "key": "/etc/me.key"}
    assert bus_config({**connect, "tls": table}, env={}).tls == from_folder.__class__(**table)
    env = {"PLUTO_CONNECT": "tls/10.0.0.1:7447", "PLUTO_TLS": str(folder), "PLUTO_TLS_KEY": "/elsewhere/key.pem"}
    over = bus_config({"tls": table}, env=env).tls
    assert over is not None
    assert (over.ca, over.key) == (str(folder / "ca.pem"), "/elsewhere/key.pem")
    relative = bus_config({}, env={"PLUTO_TLS_CA": "ca.pem", "PLUTO_TLS_CERT": "c.pem", "PLUTO_TLS_KEY": "k.pem"}).tls
    assert relative is not None and Path(relative.ca).is_absolute()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"tls": {"ca": "/ca.pem"}}, "bus.tls needs ca, cert and key: cert, key missing"),
        ({"tls": 3}, "expected a folder"),
        ({"tls": "/x", "connect": ["tcp/10.0.0.1:7447"]}, "use tls/10.0.0.1:7447"),
        ({"connect": ["tls/10.0.0.1:7447"]}, "a tls/ endpoint needs this machine's certificate"),
    ],
    ids=["partial", "not-a-folder", "tcp-with-tls", "tls-without"],
)
def test_tls_settings_that_cannot_work_are_refused(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        bus_config(table, env={})


def test_the_zenoh_configuration_of_a_machine_with_a_certificate() -> None:
    cfg = bus_config({"connect": ["tls/10.0.0.1:7447"], "tls": "/m"}, env={})
    entries = zenoh_config_json(cfg)
    assert entries["transport/link/tls/root_ca_certificate"] == "/m/ca.pem"
    assert entries["transport/link/tls/connect_certificate"] == "/m/cert.pem"
    assert entries["transport/link/tls/connect_private_key"] == "/m/key.pem"
    assert entries["transport/link/tls/enable_mtls"] is True
    assert "transport/link/tls/root_ca_certificate" not in zenoh_config_json(BusConfig())


def test_a_module_started_by_a_machine_with_a_certificate_gets_it() -> None:
    from pluto.runtime import launcher

    cfg = bus_config({"connect": ["tls/10.0.0.1:7447"], "tls": "/m"}, env={})
    assert bus_config({}, launcher.bus_environment(cfg)).tls == cfg.tls
    assert bus_config({}, launcher.bus_environment(BusConfig())).tls is None
