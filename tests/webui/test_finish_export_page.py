"""The Export tab's "Finish export" (issue 30): a run of the app whose ready/ could not be written (a file size
limit in the training process, as a full disk) is listed, finished from the page's API without training, and then
exported."""

from __future__ import annotations

import time

import pytest

from tests.helpers import write_dataset
from tests.training.test_finish_export import train_steps, train_with_a_file_size_limit
from tests.webui.app_server import running_app
from utils.training.checkpointing.finish_export import ready_complete
from utils.training.recording.run_record import read_run

pytestmark = pytest.mark.slow


def test_finish_export_from_the_page_writes_ready_without_training(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    assert train_with_a_file_size_limit(csv_path, tmp_path / "output")["ended"] != "returned"
    (run_dir,) = (tmp_path / "output").glob("en-tiny-*")
    steps = train_steps(run_dir)
    with running_app(tmp_path) as server:
        client = server.client()
        with pytest.raises(Exception, match="Pick a run whose export failed"):
            client.predict("", api_name="/finish_export")
        message = client.predict(run_dir.name, api_name="/finish_export")
        assert "Finishing the export of" in message and "without training" in message, message
        deadline = time.monotonic() + 300
        status = {}
        while time.monotonic() < deadline:
            status = client.predict(api_name="/training_status")
            if status["status"] not in ("starting", "running", "stopping"):
                break
            time.sleep(1.0)
        assert status["status"] == "finished", status
        assert ready_complete(run_dir) and train_steps(run_dir) == steps, "ready/ written, nothing trained"
        assert read_run(run_dir)["status"] == "finished"
        archive, said = client.predict(str(run_dir), False, api_name="/export_model")
        assert "Exported" in said and archive.endswith(".zip"), said
        with pytest.raises(Exception, match="has no export left to finish"):
            client.predict(run_dir.name, api_name="/finish_export")
