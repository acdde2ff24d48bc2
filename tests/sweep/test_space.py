"""The sweep's search space and budget: what a sweep may draw, and bad input refused with the reason, before any
trial."""

from __future__ import annotations

import optuna
import pytest

from utils.sweep.space import SearchSpace
from utils.sweep.sweep import Budget, sweep_gpt


def test_text_and_mapping_give_the_same_space():
    text = SearchSpace.of("learning_rate=1e-6:1e-4\nnum_epochs=2:8\nlora_rank=0,16  # full or LoRA", num_epochs=10)
    mapping = SearchSpace.of({"learning_rate": (1e-6, 1e-4), "num_epochs": (2, 8), "lora_rank": [0, 16]}, num_epochs=10)
    assert text == mapping
    rate, epochs, rank = text.dimensions
    assert rate.log and not epochs.log  # a rate spanning 100x is drawn on a log scale
    assert (epochs.low, epochs.high) == (2, 8) and isinstance(epochs.low, int)
    assert rank.choices == (0, 16)


def test_the_default_space_opens_the_rate_the_epochs_and_lora():
    space = SearchSpace.of(None, num_epochs=9)
    assert space.names() == ["learning_rate", "num_epochs", "lora_rank"]
    assert [(d.low, d.high) for d in space.dimensions[1:2]] == [(3, 9)]


@pytest.mark.parametrize(
    ("space", "said"),
    [
        ("seed=1:3", "seed is the same for every trial"),
        ("train_csv=a.csv,b.csv", "train_csv is the same for every trial"),
        ("learning_rate=1e-3:1e-6", "range 0.001:1e-06 is empty"),
        ("learning_rate=0.5:1", "learning_rate must be at most"),
        ("lora_rank=0,-4", "lora_rank must be a whole number of at least 0"),
        ("num_epochs=two:3", "num_epochs takes numbers"),
        ("optimizer=adamw,sgd", "optimizer must be one of adamw, adamw_8bit"),
        ("bogus=1:2", "'bogus' is not an option of train_gpt"),
        ("learning_rate", "is not name=low:high"),
        ("", None),
        ("# only a comment", "it is empty"),
        ("lora_alpha=8,16", "lora_alpha means something only with LoRA"),
    ],
)
def test_an_impossible_space_is_refused_with_the_reason(space, said):
    if said is None:  # empty text: the default space
        assert SearchSpace.of(space, num_epochs=4).names()
        return
    with pytest.raises(ValueError, match=said):
        SearchSpace.of(space, num_epochs=4).check_with({"lora_rank": 0})


def test_lora_settings_are_drawn_only_for_a_lora_trial():
    space = SearchSpace.of(["lora_rank=0,16", "lora_alpha=16,32"], num_epochs=4)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    drawn = [space.suggest(study.ask(), {}) for _ in range(12)]
    assert {d["lora_rank"] for d in drawn} == {0, 16}
    assert all(("lora_alpha" in d) == (d["lora_rank"] > 0) for d in drawn)


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        ({"trials": 0}, "trials must be above 0"),
        ({"trials": None}, "needs a budget"),
        ({"trials": None, "minutes": -5}, "minutes must be above 0"),
        ({"trials": 3, "gpu_hours": float("nan")}, "gpu_hours must be above 0"),
        ({"trials": 2.5}, "whole number"),
    ],
)
def test_a_budget_of_nothing_is_refused(budget, said):
    with pytest.raises(ValueError, match=said):
        Budget(**budget)


def test_bad_sweep_calls_are_refused_before_any_trial(tmp_path):
    common = {"train_csv": str(tmp_path / "missing.csv"), "output_path": str(tmp_path / "out"), "version": "tiny"}
    with pytest.raises(ValueError, match="set quality_eval to 1 or more"):
        sweep_gpt(rule="combined", quality_eval=0, **common)
    with pytest.raises(ValueError, match="resume_from is the sweep's to set"):
        sweep_gpt(resume_from=str(tmp_path), **common)
    with pytest.raises(ValueError, match="Unknown option"):
        sweep_gpt(learning_rat=1e-5, **common)
    with pytest.raises(ValueError, match="unknown best-checkpoint rule"):
        sweep_gpt(rule="loudness", **common)
    with pytest.raises(ValueError, match="missing.csv"):
        sweep_gpt(**common)
    with pytest.raises(ValueError, match="study_name takes letters"):
        sweep_gpt(study_name="my sweep", **common)
    with pytest.raises(ValueError, match="devices names GPU numbers or 'cpu'"):
        sweep_gpt(devices="0,x", **{**common, "train_csv": ""})
    with pytest.raises(ValueError, match="first_trials: lora_rank=8 is outside the space"):
        sweep_gpt(space=["lora_rank=0,16"], first_trials=[{"lora_rank": 8}], **{**common, "train_csv": ""})
    with pytest.raises(ValueError, match="first_trials: seed is not a dimension"):
        sweep_gpt(first_trials=[{"seed": 3}], **{**common, "train_csv": ""})
    with pytest.raises(ValueError, match="lora_targets: q_proj not known"):
        sweep_gpt(space={"lora_rank": [0, 8], "lora_targets": ["c_attn", "q_proj"]}, **{**common, "train_csv": ""})
    with pytest.raises(ValueError, match="holds one setting"):
        sweep_gpt(space={"num_epochs": (2, 2)}, trials=3, **{**common, "train_csv": ""})
    assert not (tmp_path / "out").exists()  # nothing written for a refused sweep


def test_a_storage_password_never_shows():
    from utils.sweep.study import redacted

    assert redacted("postgresql://me:secret@db.example:5432/studies") == "postgresql://me:***@db.example:5432/studies"
    assert "secret" not in redacted("postgres:/me:secret@host")
    assert redacted("sqlite:////tmp/out/sweeps/sweep.db") == "sqlite:////tmp/out/sweeps/sweep.db"
