"""`dashboard` sub-command: serve the operations dashboard (Streamlit) on 127.0.0.1:DASHBOARD_PORT."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from logistics_platform.cli.errors import USAGE, CommandError
from logistics_platform.dashboard import APP, RUNNER_OPTIONS
from logistics_platform.settings import load_settings, subprocess_env

HOST = "127.0.0.1"

HELP = "serve the operations dashboard on 127.0.0.1 (DASHBOARD_PORT)"
DESCRIPTION = (
    "Serve the Streamlit dashboard over the published marts: SLA now, delivery time, revenue, time travel, pipeline "
    "health. Runs until interrupted."
)
ARGS = {"--port": {"type": int, "help": "port to serve on (default: DASHBOARD_PORT, 8501)"}}


def run(args: argparse.Namespace) -> int:
    settings = load_settings()
    port = args.port if args.port is not None else settings.dashboard_port
    if not 0 < port < 65536:
        raise CommandError(f"--port {port}: a TCP port is between 1 and 65535", USAGE)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            raise CommandError(
                f"port {port} on {HOST} is already in use: stop what serves it, or pick another with DASHBOARD_PORT "
                "(or --port)"
            ) from None
    # Local address only, no browser opened, no usage statistics sent.
    options = {
        "server.address": HOST,
        "server.port": port,
        "server.headless": "true",
        "browser.gatherUsageStats": "false",
        "server.fileWatcherType": "none",
        "client.toolbarMode": "viewer",
        **{key: str(value).lower() for key, value in RUNNER_OPTIONS.items()},
    }
    flags = [a for k, v in options.items() for a in (f"--{k}", str(v))]
    command = [sys.executable, "-m", "streamlit", "run", str(APP), *flags]
    print(f"dashboard: http://{HOST}:{port} (Ctrl-C stops it)", flush=True)
    # Replaced, not wrapped: the served process is this one, so a signal to it stops the server.
    os.execve(command[0], command, subprocess_env(settings))
    return 0  # not reached
