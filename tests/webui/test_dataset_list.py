"""The Dataset tab's list of the run's datasets: each checked dataset added as a line at its rate, the Fine-tune form's
Train and Eval CSV the whole list, a bad rate refused with the reason."""

from __future__ import annotations

import gradio as gr
import pytest

from utils.options.arguments import TrainArguments
from webui.dataset_list import added_dataset
from webui.form import dataset_lines


def test_checked_datasets_are_added_one_by_one_and_the_form_holds_the_list(tmp_path):
    listed, evals, train, evaluation = added_dataset("", [], "/data/de/metadata.csv", "", "de", "1")
    assert listed == train == "de=/data/de/metadata.csv" and evaluation == ""
    french, french_eval = "/data/fr/metadata.csv", "/data/fr/eval.csv"
    listed, evals, train, evaluation = added_dataset(listed, evals, french, french_eval, "fr", "20%")
    assert train == "de=/data/de/metadata.csv\nfr:20%=/data/fr/metadata.csv"
    assert evaluation == "-\n/data/fr/eval.csv"
    arguments = TrainArguments(
        train_csv=dataset_lines("train_csv", train), eval_csv=dataset_lines("eval_csv", evaluation), language="de"
    )
    assert arguments.train_csv == ("de=/data/de/metadata.csv", "fr:20%=/data/fr/metadata.csv")
    assert arguments.eval_csv == ("", "/data/fr/eval.csv")
    # Adding the same dataset again changes its line (here its rate), not the list's length.
    listed, evals, train, _ = added_dataset(listed, evals, "/data/fr/metadata.csv", "", "fr", "2")
    assert train.splitlines() == ["de=/data/de/metadata.csv", "fr:2=/data/fr/metadata.csv"]


def test_nothing_checked_or_a_bad_rate_is_refused_with_the_reason():
    with pytest.raises(gr.Error, match="Check a dataset first"):
        added_dataset("", [], "", "", "de", "1")
    with pytest.raises(gr.Error, match="not how often its rows are drawn"):
        added_dataset("", [], "/data/a.csv", "", "de", "often")
