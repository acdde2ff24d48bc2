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


def test_the_check_says_which_speakers_become_voices_and_which_have_too_little(tmp_path):
    from tests.helpers import write_dataset
    from utils.data.validation import validate_dataset
    from webui.dataset_handlers import voices_line

    def speakers(csv, names):
        lines = csv.read_text().splitlines()
        csv.write_text("\n".join([lines[0], *(row.replace("speaker_a", n) for row, n in zip(lines[1:], names))]) + "\n")
        return csv

    train = speakers(write_dataset(tmp_path / "data", n=18), ["speaker_a"] * 8 + ["speaker_b <b>"] * 8 + ["c"] * 2)
    held = speakers(
        write_dataset(tmp_path / "data", n=3, csv_name="eval.csv", seed_offset=40), ["speaker_a", "speaker_b <b>", "c"]
    )
    said = voices_line(validate_dataset(train, held, "en"))
    assert "**2 voices**" in said and "speaker\\_a (en, 18 s)" in said and "&lt;b&gt;" in said, said  # as Markdown
    assert "Speaker 'c':" in said and "below 10 s: trained with the others" in said, said
