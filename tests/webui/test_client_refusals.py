"""What a script sends /start_training that the form would never send gets the product's own message naming the
field, not Gradio's generic "Error" (issue 30): a version that is a path (a regression: it was clear before) and
numbers sent as strings."""

from __future__ import annotations

import pytest

from tests.helpers import write_dataset
from tests.webui.app_server import running_app
from utils.options.arguments import TrainArguments
from webui.form import form_values

pytestmark = pytest.mark.slow


def test_a_path_as_version_and_numbers_as_strings_are_refused_by_name(tmp_path, tiny_base):
    with running_app(tmp_path) as server:
        client = server.client()
        csv_path = write_dataset(tmp_path / "data")
        form = form_values(TrainArguments(version="tiny", train_csv=str(csv_path), quality_eval=0))
        refusals = {
            "version": ("../../etc", "version '../../etc' is not a folder name"),
            "num_epochs": ("abc", "num_epochs must be a whole number; got 'abc'"),
            "grad_acumm": ("3", "grad_acumm must be a whole number; got '3'"),
            "learning_rate": ("1e-5", "learning_rate must be a number; got '1e-5'"),
            "max_seconds": ("long", "max_seconds must be a number (Longest clip (seconds)); got 'long'"),
        }
        for field, (value, message) in refusals.items():
            with pytest.raises(Exception) as refused:
                client.predict(**{**form, field: value}, api_name="/start_training")
            assert message in str(refused.value), (field, str(refused.value))
            # The memory plan answers in its Markdown (data escaped: num\_epochs).
            plan = client.predict(**{**form, field: value}, api_name="/estimate_memory")
            assert message in plan.replace("\\", ""), (field, plan)
        assert client.predict(api_name="/training_status")["status"] == "idle", "nothing started"
        assert not list((tmp_path / "output").glob("*/run.json")), "no run folder"
