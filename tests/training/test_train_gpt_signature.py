"""train_gpt's typed signature and the TrainArguments declaration say the same thing: its positional parameters are
the declaration's first fields, with their names, order, defaults and types; every other option is a keyword."""

from __future__ import annotations

import inspect
import typing
from dataclasses import fields

from utils.gpt_train import train_gpt
from utils.options.arguments import TrainArguments

CALL_ONLY = ("progress_callback", "stop_event", "audio_roots", "options")  # how to run it, not what to train


def test_the_positional_parameters_are_the_declarations_first_fields():
    signature = inspect.signature(train_gpt, eval_str=True)
    declared = {f.name: f for f in fields(TrainArguments)}
    hints = typing.get_type_hints(TrainArguments)
    positional = [p for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == TrainArguments.positional_names() == list(declared)[: len(positional)]
    for parameter in positional:
        assert parameter.default == declared[parameter.name].default, parameter.name
        assert parameter.annotation == hints[parameter.name], parameter.name
    assert hints["batch_size"] == int | str, "batch_size takes 'auto' too"


def test_the_rest_are_keywords_of_the_declaration():
    signature = inspect.signature(train_gpt)
    extra = [name for name in signature.parameters if name not in TrainArguments.positional_names()]
    assert extra == list(CALL_ONLY)
    assert signature.parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    assert not set(CALL_ONLY) & set(TrainArguments.__dataclass_fields__), "no option shadows a call parameter"
