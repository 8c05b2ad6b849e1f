"""A Parquet dataset at an ``s3://`` URI, against a real S3-compatible server on loopback.

``moto`` runs in server mode (``python -m moto.server``, its own process) and every read
and write goes over HTTP through pyarrow's ``S3FileSystem``, configured as a user would:
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` and ``AWS_ENDPOINT_URL`` in
the environment. The demo's traces are exported to the bucket and to a local folder; every
reader (``agentlog.dataset``), every estimator's ``from_dataset`` and every command that
takes a dataset gives the same result from both. A missing bucket or prefix, and
credentials the server refuses, are agentlog errors that say what to check (exit 2 on the
command line). Skipped without ``moto[server]`` (the ``dev`` extra has it)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyarrow.fs")
pytest.importorskip("moto.server", reason="pip install 'moto[server]' (in the dev extra)")
pytest.importorskip("flask", reason="moto's server mode needs flask: pip install 'moto[server]'")
boto3 = pytest.importorskip("boto3")

from agentlog.dataset import (  # noqa: E402
    TABLES,
    check_version,
    is_dataset,
    is_uri,
    iter_runs,
    partitioned_by,
    read_table,
    to_parquet,
)
from agentlog.estimators import asv, certify, cess, reliability  # noqa: E402
from tests.cli._cli import invoke  # noqa: E402
from tests.conftest import DemoRun  # noqa: E402

BUCKET = "agentlog-test"


@dataclass(frozen=True)
class S3Server:
    """A moto server on loopback, and the environment that points pyarrow and boto3 at it."""

    endpoint: str

    def refuse_every_request(self, refuse: bool) -> None:
        """Turn moto's authentication on (every key is unknown to it: every request is
        refused, as AWS refuses bad credentials) or off again."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0" if refuse else b"inf",
            method="POST", headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(request, timeout=10):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """``moto_server`` on a free loopback port with the bucket ``BUCKET``; the AWS variables
    of this process name it (and nothing of the user's AWS setup is read)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        with pytest.MonkeyPatch.context() as env:
            for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
                env.delenv(name, raising=False)
            nowhere = str(log.parent / "no-aws-config")
            env.setenv("AWS_CONFIG_FILE", nowhere)
            env.setenv("AWS_SHARED_CREDENTIALS_FILE", nowhere)
            env.setenv("AWS_EC2_METADATA_DISABLED", "true")
            env.setenv("AWS_ACCESS_KEY_ID", "agentlog-test-key")
            env.setenv("AWS_SECRET_ACCESS_KEY", "agentlog-test-secret")
            env.setenv("AWS_REGION", "us-east-1")
            env.setenv("AWS_DEFAULT_REGION", "us-east-1")  # boto3's name of it
            env.setenv("AWS_ENDPOINT_URL", endpoint)
            boto3.client("s3").create_bucket(Bucket=BUCKET)
            yield S3Server(endpoint)
    finally:
        server.terminate()
        server.wait(timeout=30)


@dataclass(frozen=True)
class Pair:
    """One set of traces exported twice: into a local folder and to an ``s3://`` URI."""

    traces: list[Path]
    local: Path
    uri: str


@pytest.fixture(scope="module")
def exported(s3: S3Server, demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, Pair]:
    """The demo's traces, each set exported locally and to the bucket with one layout:
    ``top`` (its main traces, partitioned by system and task, the default), ``asv`` (those
    and the channel replay's output) and ``variants`` (the certification variants), both
    partitioned by system."""
    root = tmp_path_factory.mktemp("s3-local")
    top = sorted(demo_run.out.glob("*.zst"))
    sets = {"top": (top, None), "asv": ([*top, demo_run.out / "replay" / "asv.zst"], ("system",)),
            "variants": (sorted((demo_run.out / "variants").glob("*.zst")), ("system",))}
    out = {}
    for name, (traces, layout) in sets.items():
        pair = Pair(traces, root / name, f"s3://{BUCKET}/datasets/{name}")
        local = to_parquet(traces, pair.local, partition_by=layout)
        remote = to_parquet(traces, pair.uri, partition_by=layout)
        assert remote.out == pair.uri and local.out == pair.local
        assert (remote.runs_added, remote.rows, remote.files) == (
            local.runs_added, local.rows, local.files)
        assert remote.runs_added > 0
        out[name] = pair
    return out


def _sorted(table: Any) -> Any:
    keys = [k for k in ("run_id", "seq", "pool", "system", "task") if k in table.column_names]
    return table.sort_by([(k, "ascending") for k in keys])


# ------------------------------------------------------------------------ agentlog.dataset


def test_uris_are_told_from_local_paths() -> None:
    assert is_uri("s3://bucket/prefix") and is_uri("file:///tmp/ds") and is_uri("gs://b/p")
    assert not is_uri("agentlog-parquet") and not is_uri("/data/s3:/x")
    assert not is_uri(Path("s3://bucket/prefix"))  # a Path is a local path (it folds //)


def test_the_bucket_holds_the_local_folders_tables(exported: dict[str, Pair]) -> None:
    for pair in exported.values():
        assert is_dataset(pair.uri) and is_dataset(pair.uri + "/")
        assert partitioned_by(pair.uri) == partitioned_by(pair.local)
        check_version(pair.uri)
        for table in TABLES:
            remote, local = read_table(pair.uri, table), read_table(pair.local, table)
            assert remote.schema == local.schema, table
            assert _sorted(remote).equals(_sorted(local)), table
        columns = ["run_id", "system", "source"]
        assert _sorted(read_table(pair.uri, "runs", columns)).equals(
            _sorted(read_table(pair.local, "runs", columns)))


def test_runs_are_rebuilt_from_the_bucket_as_from_the_folder(exported: dict[str, Pair]
                                                             ) -> None:
    pair = exported["top"]
    tables = ("windows", "selections", "continuations", "scores")
    remote = [(t.path, r.run, r.records, r.end) for t, r in iter_runs(pair.uri, tables)]
    local = [(t.path, r.run, r.records, r.end) for t, r in iter_runs(pair.local, tables)]
    assert remote == local and len(remote) == len(pair.traces)


def test_exporting_again_into_the_bucket_adds_nothing(exported: dict[str, Pair]) -> None:
    pair = exported["top"]
    again = to_parquet(pair.traces, pair.uri)
    assert (again.runs_added, again.runs_present) == (0, len(pair.traces))


def test_a_file_uri_reads_as_its_local_path(exported: dict[str, Pair]) -> None:
    pair = exported["top"]
    uri = pair.local.resolve().as_uri()
    assert is_dataset(uri) and partitioned_by(uri) == ("system", "task")
    assert read_table(uri, "scores").equals(read_table(pair.local, "scores"))


# ------------------------------------------------------------------------ the estimators


def test_reliability_from_the_bucket_is_reliability_from_the_folder(
        exported: dict[str, Pair]) -> None:
    for name in ("top", "variants"):
        pair = exported[name]
        runs = reliability.from_dataset(pair.local)
        assert reliability.from_dataset(pair.uri) == runs and len(runs) == len(pair.traces)
        a, b = reliability.terminal_table(pair.uri), reliability.terminal_table(pair.local)
        assert a.runs.equals(b.runs) and a.scores.equals(b.scores)


def test_certify_from_the_bucket_gives_the_folders_data_and_board(
        demo_run: DemoRun, exported: dict[str, Pair]) -> None:
    pair = exported["variants"]
    plan = certify.Plan.from_toml(demo_run.out / "plan.toml")
    entries = certify.EntryTable.from_traces(pair.traces, window=plan.window,
                                             select=plan.select)
    local = certify.from_dataset(pair.local, plan=plan, entries=entries)
    remote = certify.from_dataset(pair.uri, plan=plan, entries=entries)
    assert (remote.systems, remote.tasks, remote.clusters, remote.readouts, remote.n_runs,
            remote.n_failed_runs, remote.input_hashes) == (
        local.systems, local.tasks, local.clusters, local.readouts, local.n_runs,
        local.n_failed_runs, local.input_hashes)
    for s in local.systems:
        np.testing.assert_array_equal(remote.scores[s], local.scores[s])
        np.testing.assert_array_equal(remote.present[s], local.present[s])
        np.testing.assert_array_equal(remote.failed[s], local.failed[s])
    assert (certify.certify(remote, plan=plan).to_dict()
            == certify.certify(local, plan=plan).to_dict())


def test_cess_from_the_bucket_is_cess_from_the_folder(demo_run: DemoRun,
                                                      exported: dict[str, Pair]) -> None:
    pair = exported["top"]
    tables = {"outcomes": demo_run.out / "outcomes.csv",
              "predictions": demo_run.out / "predictions.csv"}
    a = cess.from_dataset(pair.uri, budget=5, **tables)
    b = cess.from_dataset(pair.local, budget=5, **tables)
    for name in ("y", "p", "s", "m_chosen", "m_bar", "n_pool", "rho", "theta_star",
                 "in_support"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    for name in ("run_id", "path", "task", "system", "seed", "cluster"):
        assert getattr(a, name) == getattr(b, name), name
    assert np.array_equal(a.estimate(lam=1.0).dr_raw, b.estimate(lam=1.0).dr_raw)
    assert len(a) == len(pair.traces)


def test_asv_from_the_bucket_is_asv_from_the_folder(exported: dict[str, Pair]) -> None:
    pair = exported["asv"]
    assert asv.channel_scores(pair.uri) == asv.channel_scores(pair.local)
    a = asv.from_dataset(pair.uri, channels=("direct", "quote"))
    b = asv.from_dataset(pair.local, channels=("direct", "quote"))
    assert a.transitions == b.transitions and len(a.transitions) > 10
    assert np.array_equal(a.trajectory, b.trajectory) and np.array_equal(a.target, b.target)
    for wave, corners in a.corners.items():
        assert np.array_equal(corners, b.corners[wave], equal_nan=True)
    assert np.array_equal(a.face().interaction, b.face().interaction)


# ------------------------------------------------------------------------ the commands


def _json(result: Any, *drop: tuple[str, str]) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    for section, key in drop:
        out[section].pop(key)
    return out


def test_the_commands_read_the_bucket_as_the_folder(demo_run: DemoRun,
                                                    exported: dict[str, Pair]) -> None:
    """``agentlog export --out s3://…``, then each command that takes a dataset prints the
    same JSON from the URI as from the local folder, but for the location it names."""
    top = exported["top"]
    uri = f"s3://{BUCKET}/cli/top"
    done = invoke("export", *top.traces, "--format", "parquet", "--out", uri)
    assert done.exit_code == 0, done.output
    assert f"{len(top.traces)} runs added to {uri}" in done.stdout
    assert read_table(uri, "runs").num_rows == len(top.traces)
    tables = ["--outcomes", demo_run.out / "outcomes.csv",
              "--predictions", demo_run.out / "predictions.csv"]
    a = invoke("estimate", "cess", uri, *tables, "--json")
    b = invoke("estimate", "cess", top.local, *tables, "--json")
    assert _json(a, ("settings", "traces")) == _json(b, ("settings", "traces"))
    assert json.loads(a.stdout)["settings"]["traces"] == [uri]
    for pair in (top, exported["variants"]):
        args = ["--by", "system", "--score", "abs_error", "--lower-is-better", "--json"]
        a = invoke("estimate", "reliability", pair.uri, *args)
        b = invoke("estimate", "reliability", pair.local, *args)
        assert _json(a, ("settings", "traces")) == _json(b, ("settings", "traces"))
    pair = exported["asv"]
    args = ["--channels", "direct,quote", "--resamples", "300", "--json"]
    a = invoke("estimate", "asv", pair.uri, *args)
    b = invoke("estimate", "asv", pair.local, *args)
    assert _json(a, ("settings", "traces")) == _json(b, ("settings", "traces"))
    pair = exported["variants"]
    plan = demo_run.out / "plan.toml"
    a = invoke("certify", pair.uri, "--plan", plan, "--json")
    b = invoke("certify", pair.local, "--plan", plan, "--json")
    assert _json(a, ("inputs", "dataset")) == _json(b, ("inputs", "dataset"))
    assert json.loads(a.stdout)["inputs"]["dataset"] == pair.uri


# ------------------------------------------------------------------------ what goes wrong


def _refused(result: Any, *wanted: str) -> str:
    """The command's error: exit 2, the message on stderr (no traceback)."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    text = " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    for part in wanted:
        assert part in text, (part, text)
    return text


def test_a_missing_bucket_or_prefix_is_named_with_what_to_check(
        demo_run: DemoRun, exported: dict[str, Pair]) -> None:
    nothing = f"s3://{BUCKET}/no/such/prefix"
    no_bucket = "s3://no-such-bucket/datasets/top"
    assert not is_dataset(nothing) and not is_dataset(no_bucket)
    with pytest.raises(ValueError, match=r"not an agentlog Parquet dataset \(no runs/ folder "
                                         r"in it\); check the URI"):
        read_table(nothing, "runs")
    with pytest.raises(ValueError, match="there is no bucket 'no-such-bucket'"):
        reliability.from_dataset(no_bucket)
    with pytest.raises(ValueError, match="there is no bucket 'no-such-bucket'"):
        next(iter_runs(no_bucket))
    with pytest.raises(ValueError, match=r"not an agentlog Parquet dataset .*check the URI"):
        asv.from_dataset(nothing, channels=("direct", "quote"))
    top = exported["top"]
    with pytest.raises(ValueError, match=r"there is no bucket 'no-such-bucket'.*create"):
        to_parquet(top.traces, no_bucket)
    plan = demo_run.out / "plan.toml"
    for uri in (nothing, no_bucket):
        for args in (("estimate", "reliability", uri), ("certify", uri, "--plan", plan),
                     ("estimate", "asv", uri, "--channels", "direct,quote")):
            _refused(invoke(*args), f"{uri}: not an agentlog Parquet dataset",
                     "bucket or prefix is missing or empty", "--out " + uri)
    _refused(invoke("export", top.traces[0], "--format", "parquet", "--out", no_bucket),
             "there is no bucket 'no-such-bucket'", "create the bucket first")
    _refused(invoke("estimate", "reliability", top.uri, top.traces[0]),
             "a URI names a Parquet dataset, which is read alone")
    _refused(invoke("estimate", "reliability", "nosuchfs://bucket/prefix"),
             "pyarrow cannot open this location")


@contextlib.contextmanager
def _bad_credentials(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    s3.refuse_every_request(True)
    try:
        yield
    finally:
        s3.refuse_every_request(False)


def test_refused_credentials_say_what_to_check(s3: S3Server, exported: dict[str, Pair],
                                               demo_run: DemoRun,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    top = exported["top"]
    check = ("Check the credentials pyarrow finds (AWS_ACCESS_KEY_ID and "
             "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), the region (AWS_REGION) and, for an "
             "S3-compatible server, its endpoint (AWS_ENDPOINT_URL)")
    with _bad_credentials(s3, monkeypatch):
        for call in (lambda: is_dataset(top.uri), lambda: read_table(top.uri, "runs"),
                     lambda: reliability.from_dataset(top.uri),
                     lambda: to_parquet(top.traces, f"s3://{BUCKET}/other")):
            with pytest.raises(OSError) as refused:
                call()
            assert str(refused.value).startswith(f"s3://{BUCKET}/")
            assert "ACCESS_DENIED" in str(refused.value) and check in str(refused.value)
        plan = demo_run.out / "plan.toml"
        for args in (("estimate", "reliability", top.uri), ("certify", top.uri, "--plan", plan),
                     ("estimate", "cess", top.uri, "--outcomes", demo_run.out / "outcomes.csv",
                      "--predictions", demo_run.out / "predictions.csv")):
            _refused(invoke(*args), f"{top.uri}: cannot be read", "ACCESS_DENIED", check)
        _refused(invoke("export", top.traces[0], "--format", "parquet", "--out",
                        f"s3://{BUCKET}/other"), "cannot be read", check)
    assert is_dataset(top.uri)  # the same URI, once the server accepts the requests again


def test_an_unreachable_endpoint_says_what_to_check(exported: dict[str, Pair],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    _refused(invoke("estimate", "reliability", exported["top"].uri),
             "cannot be read", "NETWORK_CONNECTION", "its endpoint (AWS_ENDPOINT_URL)")


# ------------------------------------------------------------------------ Ray


def _known_key(s3: S3Server) -> tuple[str, str]:
    """A key of a user of moto's IAM allowed everything: a key it accepts once it refuses
    unknown ones (``refuse_every_request``)."""
    iam = boto3.client("iam")
    iam.create_user(UserName="agentlog")
    iam.put_user_policy(UserName="agentlog", PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="agentlog")["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


_CHILD = """
import json, sys
from agentlog.estimators import reliability
runs = reliability.from_dataset(sys.argv[1], executor="ray")
print(json.dumps([[r.run_id, r.values] for r in runs]))
"""


@pytest.mark.slow
def test_ray_reads_the_bucket_as_the_local_executor(ray_cluster: None, s3: S3Server,
                                                    demo_run: DemoRun,
                                                    exported: dict[str, Pair],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``executor="ray"`` on the URI gives the local results, bit for bit. Ray Data's
    workers read the bucket with the filesystem this process resolved: its endpoint
    travels with it (the session's Ray runtime started before this module set
    ``AWS_ENDPOINT_URL``), its credentials do not: each node finds its own, e.g. in the
    environment its Ray node was started with. Once the server accepts only a key made
    here, the session's workers (which never had it) are refused, with an error that says
    so, and a Ray runtime started with the key in its environment reads the bucket."""
    pair = exported["variants"]
    local = reliability.from_dataset(pair.local)
    assert reliability.from_dataset(pair.uri, executor="ray") == local
    plan = certify.Plan.from_toml(demo_run.out / "plan.toml")
    entries = certify.EntryTable.from_traces(pair.traces, window=plan.window,
                                             select=plan.select)
    a = certify.from_dataset(pair.local, plan=plan, entries=entries)
    b = certify.from_dataset(pair.uri, plan=plan, entries=entries, executor="ray")
    assert (a.systems, a.tasks, a.n_runs) == (b.systems, b.tasks, b.n_runs)
    for s in a.systems:
        np.testing.assert_array_equal(a.scores[s], b.scores[s])
    top = exported["asv"]
    x = asv.from_dataset(top.local, channels=("direct", "quote"))
    y = asv.from_dataset(top.uri, channels=("direct", "quote"), executor="ray")
    assert x.transitions == y.transitions
    assert np.array_equal(x.face().interaction, y.face().interaction)

    key, secret = _known_key(s3)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # the child starts its own runtime
    s3.refuse_every_request(True)
    try:
        assert reliability.from_dataset(pair.uri) == local  # this process has the key
        with pytest.raises(OSError, match=r"Ray's workers cannot read it .*own credentials"):
            reliability.from_dataset(pair.uri, executor="ray")
        done = invoke("estimate", "reliability", pair.uri, "--score", "abs_error",
                      "--executor", "ray")
        _refused(done, f"{pair.uri}: Ray's workers cannot read it", "give every node both")
        child = subprocess.run([sys.executable, "-c", _CHILD, pair.uri], capture_output=True,
                               text=True, timeout=600, env=dict(os.environ))
        assert child.returncode == 0, child.stderr[-3000:]
        assert json.loads(child.stdout) == [[r.run_id, r.values] for r in local]
    finally:
        s3.refuse_every_request(False)
