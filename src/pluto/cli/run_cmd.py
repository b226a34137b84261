"""``pluto run``, ``pluto start`` and ``pluto stop``: one module in the foreground, modules as daemons."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.progress import say
from pluto.errors import LaunchError, PlutoError

__all__ = ["add_module_options", "module_options", "register", "run", "start", "stop"]

PARAM_HELP = 'set a parameter, NAME=VALUE (TOML value: 2, true, "text"); repeatable'

STARTING_LIMIT = 600.0
"""s: :data:`pluto.runtime.launcher.STARTING_LIMIT`, for the help texts, so that building the parser does not import
the launcher and the bus (a test checks that the two agree)."""


def register(subparsers: Subparsers) -> None:
    """Register the ``run``, ``start`` and ``stop`` subcommands.

    ``run`` and ``start`` also take a module's parameters as options of their own (``--name value``): their
    namespace's ``take_extra`` turns the arguments the parser did not know into parameters.
    """
    p = add_parser(
        subparsers,
        "run",
        run,
        "run one module in the foreground (Ctrl-C stops it)",
        "Runs a module in this terminal, logging to it. MODULE is an installed module (`pluto modules`),\n"
        "package.module:Class (the current directory is searched too) or path/to/file.py:Class. Its\n"
        "parameters can also be given as options, --name value.\n\n"
        "example: pluto run heartbeat -p rate_hz=5\n"
        "example: pluto run mypkg/counter.py:Counter --limit 20\n"
        "example: pluto run base --driver p2os --port socket://127.0.0.1:8101 --model p3dx",
    )
    p.add_argument("module", metavar="MODULE")
    p.add_argument("--name", help="name on the bus (default: the module's own)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help=PARAM_HELP)
    p.set_defaults(take_extra=add_module_options, base_verbosity=1)  # a module in the foreground logs its start

    p = add_parser(
        subparsers,
        "start",
        start,
        "start modules as daemons (in the background)",
        "Starts each module in the background and returns once it publishes. Its log and pid file are in\n"
        "the runtime directory (PLUTO_RUNTIME_DIR). `pluto stop MODULE` ends it.\n\n"
        "example: pluto start heartbeat",
    )
    p.add_argument("module", metavar="MODULE", nargs="+")
    p.add_argument("--name", help="name on the bus (one module only)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help=PARAM_HELP)
    p.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        help="seconds to wait for it to publish, or to say it is starting (default 15); one that says it is "
        f"starting is waited for up to {STARTING_LIMIT:g} s",
    )
    p.set_defaults(take_extra=add_module_options)

    p = add_parser(
        subparsers,
        "stop",
        stop,
        "stop daemons by name",
        "Stops modules started with `pluto start` (SIGTERM, then "
        "SIGKILL after --timeout).\n\nexample: pluto stop heartbeat",
    )
    p.add_argument("module", metavar="MODULE", nargs="+")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait before killing (default 5)")


def module_options(extra: Sequence[str]) -> list[str]:
    """``--name value`` / ``--name=value`` options after ``pluto run MODULE`` as ``name=value`` parameters.

    Raises:
        PlutoError: an argument that is not such an option, or an option without a value.
    """
    params, i = [], 0
    while i < len(extra):
        option = extra[i]
        if not option.startswith("--") or len(option) < 3:
            raise PlutoError(f"unexpected argument {option!r} (module parameters are --name value or -p name=value)")
        key, sep, value = option[2:].partition("=")
        if not sep:
            if i + 1 >= len(extra) or extra[i + 1].startswith("--"):
                raise PlutoError(f"option {option} needs a value")
            value, i = extra[i + 1], i + 1
        params.append(f"{key.replace('-', '_')}={value}")
        i += 1
    return params


def add_module_options(args: argparse.Namespace, extra: Sequence[str]) -> None:
    """Put the module options the parser did not know (:func:`module_options`) before the ``-p`` parameters.

    Raises:
        PlutoError: as :func:`module_options`.
    """
    args.param = module_options(extra) + list(args.param)


def _params(pairs: Sequence[str]) -> dict[str, Any]:
    from pluto.runtime.config import parse_override

    return dict(parse_override(pair) for pair in pairs)


def run(args: argparse.Namespace) -> int:
    """Run one module in this process until Ctrl-C or SIGTERM.

    Returns:
        0 after a clean stop.

    Raises:
        PlutoError: an unknown module, bad parameters or a bad configuration.
    """
    from pluto.cli.common import config_from_args
    from pluto.runtime.registry import available_modules, load_module_class
    from pluto.runtime.runner import ModuleSpec, run_in_process, stop_on_signals

    config = config_from_args(args)
    params = _params(args.param)
    if ":" in args.module or args.module not in available_modules():
        load_module_class(args.module, params)  # fail early, before opening the bus
    # (an installed module is imported once the bus is open and it says it is starting: see run_in_process)
    spec = ModuleSpec(args.module, args.name, params)
    with stop_on_signals() as stop:
        run_in_process([spec], config, stop)
    return 0


def start(args: argparse.Namespace) -> int:
    """Start modules as daemons, each once the previous one publishes.

    Returns:
        0 when every module publishes.

    Raises:
        PlutoError: bad parameters (before anything starts), or a module that failed to start.
    """
    from pluto.bus import Bus
    from pluto.cli.common import config_from_args
    from pluto.runtime import launcher
    from pluto.runtime.config import build_params
    from pluto.runtime.registry import load_module_class, module_name_of, without_driver

    if args.param and len(args.module) > 1:
        raise LaunchError("-p applies to one module; start modules with parameters one at a time")
    config = config_from_args(args)
    for module in args.module:  # bad parameters fail here, in one line, rather than in the daemon's log
        name = args.name or module_name_of(module)
        merged = {**config.module_table(name), **_params(args.param)}
        cls = load_module_class(module, merged)
        build_params(cls.Params, without_driver(merged), where=f"parameters of {name}")
    with Bus(config.bus) as bus:
        for module in args.module:
            pid = launcher.start_daemon(
                bus,
                module,
                name=args.name,
                params=_params(args.param),
                config=str(config.path) if config.path else None,
                timeout=args.timeout,
                notice=say,
            )
            name = args.name or module_name_of(module)
            print(f"started {name} (pid {pid}); log: {launcher.runtime_dir(bus.robot) / (name + '.log')}")
    return 0


def stop(args: argparse.Namespace) -> int:
    """Stop daemons by name.

    Returns:
        0 when every one has stopped.

    Raises:
        LaunchError: one of them is not running.
    """
    from pluto.cli.common import config_from_args
    from pluto.runtime import launcher

    robot = config_from_args(args).bus.robot
    for name in args.module:
        pid = launcher.stop_daemon(robot, name, timeout=args.timeout)
        print(f"stopped {name} (pid {pid})")
    return 0
