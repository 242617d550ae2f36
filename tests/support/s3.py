"""A real S3-compatible server for the tests: moto's server mode, started as a child process on a free local port.

Buckets are made with boto3 through the server's HTTP API, addressed path-style (``http://host:port/bucket/key``),
the way the platform addresses them; nothing is patched inside the test process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.processes import stop

# moto accepts any key unless authentication is switched on; these are what the tests configure.
ACCESS_KEY_ID = "tst-s3-access-key"
SECRET_ACCESS_KEY = "tst-s3-secret-key-91c3aa"
REGION = "us-east-1"
START_DEADLINE_S = 60  # an upper bound of the wait for the server to answer, not a measurement


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server: its endpoint and the process behind it."""

    endpoint: str
    process: subprocess.Popen[bytes]

    def client(self, access_key_id: str = ACCESS_KEY_ID, secret_access_key: str = SECRET_ACCESS_KEY) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"wh-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` in ``bucket``."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def env(self, bucket: str, prefix: str = "warehouse") -> dict[str, str]:
        """The settings' variables that put the warehouse at ``s3://bucket/prefix`` on this server."""
        return {
            "ICEBERG_WAREHOUSE": f"s3://{bucket}/{prefix}",
            "ICEBERG_S3_ENDPOINT": self.endpoint,
            "ICEBERG_S3_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "ICEBERG_S3_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "ICEBERG_S3_REGION": REGION,
        }


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextmanager
def moto_server(env: Mapping[str, str] | None = None) -> Iterator[S3Server]:
    """Start ``moto_server`` on a free 127.0.0.1 port, wait until it answers, stop it afterwards.

    ``env`` is added to the server's environment (``INITIAL_NO_AUTH_ACTION_COUNT`` switches on its IAM checks).
    """
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # The server's own credentials variables would not matter, but the test's must not be mistaken for them.
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child_env.update(env or {})
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=child_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not _answers(endpoint):
            if process.poll() is not None:
                raise RuntimeError(f"moto server exited with {process.returncode} before answering on {endpoint}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer on {endpoint}")
            time.sleep(0.1)
        yield S3Server(endpoint, process)
    finally:
        stop(process, timeout=10)


@dataclass
class Credentials:
    access_key_id: str
    secret_access_key: str


@contextmanager
def authenticating_moto_server() -> Iterator[tuple[S3Server, Credentials]]:
    """A moto server that checks S3 credentials (its IAM auth), with one IAM user allowed everything.

    moto authenticates requests only after ``INITIAL_NO_AUTH_ACTION_COUNT`` of them: the first three create the
    user, its access key and its policy, unauthenticated; every request after them must be signed by that key.
    """
    import json

    import boto3

    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as server:
        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
        )
        iam.create_user(UserName="lakehouse")
        key = iam.create_access_key(UserName="lakehouse")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="lakehouse", PolicyName="everything", PolicyDocument=json.dumps(policy))
        yield server, Credentials(key["AccessKeyId"], key["SecretAccessKey"])
