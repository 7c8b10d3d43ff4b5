"""The Python client against a real weftd (conftest.py): real jobs on real data."""
import os

import pytest

import weft
from weft.client import _parse_events
from conftest import SMOKE


def test_a_job_goes_from_submit_to_its_models(weftd, tmp_path):
    client = weftd.client()
    job = client.submit(SMOKE, overrides={"training.learning_rate": 0.002, "name": "round-trip"})
    assert job.info["state"] == "QUEUED"
    assert job.info["name"] == "round-trip"
    final = job.wait(timeout=600)
    assert final["state"] == "COMPLETED", final.get("reason")
    points = job.metrics()
    evaluated = [p for p in points if "test_accuracy" in p]
    assert evaluated, points
    assert max(p["test_accuracy"] for p in evaluated) > 0.5
    assert [p["step"] for p in points] == sorted(p["step"] for p in points)
    for which in ("delivered", "final"):
        path = job.download(which, str(tmp_path / (which + ".pt")))
        assert os.path.getsize(path) > 1000
    assert job.logs().strip(), "rank 0's log is not empty"
    try:
        import torch
    except ImportError:
        return
    model = job.load("final", str(tmp_path / "loaded.pt"))
    out = model(torch.zeros(2, 1, 28, 28))
    assert tuple(out.shape) == (2, 10)


def test_a_bad_manifest_raises_naming_its_field(weftd):
    with pytest.raises(weft.BadRequest) as e:
        weftd.client().submit({"name": "bad", "model": {"architecture": "no-such-model"}})
    assert e.value.status == 400
    assert "model.architecture" in e.value.fields


def test_an_override_is_validated_like_the_manifest(weftd):
    client = weftd.client()
    with pytest.raises(weft.BadRequest) as e:
        client.submit(SMOKE, overrides={"training.epochs": -1})
    assert e.value.field == "training.epochs"
    with pytest.raises(ValueError):
        client.submit(SMOKE, overrides={"name.first": "x"})  # name is not a mapping
    yaml_text = "name: y\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n"
    with pytest.raises(weft.BadRequest) as e:
        client.submit(yaml_text, overrides={"training.batch_size": 0})
    assert e.value.field == "training.batch_size"


def test_another_tenants_job_is_not_found(weftd):
    mine = weftd.client().submit(SMOKE, overrides={"name": "mine"})
    admin = weftd.admin()
    admin.create_tenant("python-other")
    other = weftd.client(admin.create_token("python-other"))
    with pytest.raises(weft.NotFound) as e:
        other.job(mine.id)
    assert e.value.status == 404
    with pytest.raises(weft.NotFound):
        weft.Job(other, mine.id).halt()
    assert all(j.id != mine.id for j in other.jobs())
    mine.delete()
    with pytest.raises(weft.NotFound):
        weftd.client().job(mine.id)


def test_events_go_on_after_weftd_is_killed_and_restarted(weftd):
    job = weftd.client().submit(SMOKE, overrides={"name": "through-a-restart"})
    runs, types, restarted = set(), [], False
    for event in job.events(reconnect_for=120):
        runs.add(event.id.split("-")[0])
        types.append(event.type)
        if not restarted and event.data.get("state") == "RUNNING":
            weftd.kill()
            weftd.start()
            restarted = True
    assert restarted, types
    assert len(runs) == 2, runs  # events of the first weftd's run, then the second's
    assert types[-1] in ("state", "job") and job.state == "COMPLETED", types


def test_an_artifact_is_uploaded_listed_and_deleted(weftd, tmp_path):
    client = weftd.client()
    path = tmp_path / "blob.bin"
    path.write_bytes(b"weft" * 1000)
    made = client.upload_artifact("python-blob", str(path))
    assert made["name"] == "python-blob" and made["bytes"] == 4000
    assert "python-blob" in [a["name"] for a in client.artifacts()["artifacts"]]
    client.delete_artifact("python-blob")
    assert "python-blob" not in [a["name"] for a in client.artifacts()["artifacts"]]
    with pytest.raises(weft.BadRequest):
        client.upload_artifact("-not-a-name", str(path))


def test_server_sent_events_are_parsed_as_the_standard_says():
    lines = [": keep-alive", "id: 7-1", "event: state", 'data: {"state":', 'data: "RUNNING"}', "",
             "id: 7-2", "data: 42", "", "event: ignored-without-data", ""]
    events = list(_parse_events(lines))
    assert [(e.id, e.type) for e in events] == [("7-1", "state"), ("7-2", "message")]
    assert events[0].data == {"state": "RUNNING"}
    assert events[1].data == {"value": 42}


def test_overrides_set_dotted_fields_in_a_copy():
    base = {"training": {"epochs": 1}}
    out = weft.apply_overrides(base, {"training.learning_rate": 0.1, "resources.learners": 2})
    assert out == {"training": {"epochs": 1, "learning_rate": 0.1}, "resources": {"learners": 2}}
    assert base == {"training": {"epochs": 1}}
    with pytest.raises(ValueError):
        weft.apply_overrides(base, {"training..x": 1})


def test_a_client_needs_a_token(monkeypatch):
    monkeypatch.delenv("WEFT_TOKEN", raising=False)
    with pytest.raises(weft.WeftError):
        weft.Client("127.0.0.1:1")
    with pytest.raises(ValueError):
        weft.Client("ftp://host:1", "t")
