"""The moto S3 server fixture: a real process on a local port that stores objects, path-style."""

from __future__ import annotations

import pytest

from tests.conftest import S3Warehouse

pytestmark = pytest.mark.s3


def test_the_s3_server_stores_objects_in_the_tests_bucket(s3_warehouse: S3Warehouse) -> None:
    client = s3_warehouse.server.client()
    client.put_object(Bucket=s3_warehouse.bucket, Key="warehouse/probe.txt", Body=b"ok")
    assert s3_warehouse.server.keys(s3_warehouse.bucket) == ["warehouse/probe.txt"]
    got = client.get_object(Bucket=s3_warehouse.bucket, Key="warehouse/probe.txt")
    assert got["Body"].read() == b"ok"
    # Path-style: the bucket is the first path segment on the endpoint's own host (no bucket.host DNS name).
    url = client.generate_presigned_url("get_object", Params={"Bucket": s3_warehouse.bucket, "Key": "k"})
    assert url.startswith(f"{s3_warehouse.server.endpoint}/{s3_warehouse.bucket}/k?")
    assert s3_warehouse.env["ICEBERG_WAREHOUSE"] == f"s3://{s3_warehouse.bucket}/warehouse"
