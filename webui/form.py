"""The Fine-tune form, derived from the TrainArguments declaration and its layout (webui/form_spec.py):
components, API parameters and values.

Every field with a form_spec entry becomes one component whose id is also the `/start_training` parameter
name. Values travel in the form's units (the longest clip in seconds) and become a checked
`TrainArguments` in `arguments_from_form`, the one place the web side builds a run's arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from utils.data.mix import DatasetEntry, dataset_entries
from utils.options.arguments import TrainArguments, fold_precision_alias, option_of
from utils.options.option import Option, checked_value
from webui.form_spec import FORM, UI
from webui.paths import AppRoots

# Set by the app, never by the form: where runs are written.
APP_OWNED = ("output_path",)


def form_fields() -> list[tuple[str, UI]]:
    """(field name, how the form shows it) of every field the form shows, in declaration order."""
    return [(f.name, FORM[f.name]) for f in fields(TrainArguments) if f.name in FORM]


def component_id(name: str) -> str:
    return FORM[name].name or name


def form_ids() -> list[str]:
    """The component ids, which are also the /start_training parameters, in order."""
    return [component_id(name) for name, _ in form_fields()]


def to_display(name: str, value: Any) -> Any:
    ui = FORM[name]
    if ui.widget == "datasets":  # several datasets: one per line ("-": that dataset's eval rows are held out)
        return "\n".join(v or "-" for v in value) if isinstance(value, (list, tuple)) else value
    if ui.widget == "gpus":  # "0,1" -> ["0", "1"]; CPU processes are not offered by the form
        return [entry for entry in str(value or "").split(",") if entry.strip().isdigit()]
    return round(value / ui.scale, 3) if ui.scale != 1 and isinstance(value, (int, float)) else value


def from_display(name: str, value: Any) -> Any:
    ui = FORM[name]
    if ui.widget == "datasets" and isinstance(value, str):
        return dataset_lines(name, value)
    if ui.widget == "gpus" and isinstance(value, (list, tuple)):
        return ",".join(sorted((str(v) for v in value), key=lambda v: (len(v), v)))
    if ui.scale != 1 and (isinstance(value, bool) or not isinstance(value, (int, float))):
        # In the form's unit, not the option's: the declaration's message would name samples for seconds.
        raise ValueError(f"{component_id(name)} must be a number ({ui.label}); got {str(value)[:40]!r}.")
    if ui.scale == 1:
        return value
    return round(value * ui.scale)


def dataset_lines(name: str, text: str) -> Any:
    """The Train/Eval CSV box: one path, or one dataset per line (train: `LANG[:HOW_OFTEN]=PATH`, utils.data.mix;
    eval: one path per dataset, `-` or an empty line where its rows are held out)."""
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if name == "eval_csv":
        return (lines or [""])[0] if len(lines) <= 1 else ["" if line in ("", "-") else line for line in lines]
    lines = [line for line in lines if line]
    return (lines or [""])[0] if len(lines) <= 1 and "=" not in "".join(lines) else lines


def gpu_choices(device_count: int) -> list[tuple[str, str]]:
    """(label, value) of each GPU for the GPU multi-select; it is shown only when there are two or more."""
    return [(f"GPU {index}", str(index)) for index in range(device_count)]


def form_values(arguments: TrainArguments | dict[str, Any]) -> dict[str, Any]:
    """{component id: value as the form shows it} for a run's arguments (defaults for missing ones)."""
    values = (
        arguments.to_dict()
        if isinstance(arguments, TrainArguments)
        else fold_precision_alias({**TrainArguments().to_dict(), **arguments})  # a record may hold the alias False
    )
    return {component_id(name): to_display(name, values[name]) for name, _ in form_fields()}


def _empty_to_default(name: str, value: Any) -> Any:
    default = TrainArguments.__dataclass_fields__[name].default
    if value is None or (isinstance(value, str) and not value.strip() and not isinstance(default, str)):
        raise ValueError(f"Fill in: {FORM[name].label}.")
    return value.strip() if isinstance(value, str) else value


def checked_flag(name: str, value: Any) -> bool:
    """A checkbox's value as the web sends it, strictly True or False: a script's "false" is a string, and every
    non-empty string is truthy. A ValueError names the field and the value."""
    return checked_value(name, value, False, Option(""))


def arguments_from_form(
    values: dict[str, Any], output_dir: str, roots: AppRoots | None = None, *, need_dataset: bool = True
) -> TrainArguments:
    """The checked TrainArguments of a form submission (keys are component ids); ValueError says what is wrong.
    With `roots`, every path in it must lie inside the app's folders (see webui.paths). `need_dataset=False`:
    arguments to plan with (the memory plan, Fit my GPU), which need no dataset."""
    unknown = sorted(set(values) - set(form_ids()))
    if unknown:
        raise ValueError(f"Unknown form field(s): {', '.join(unknown)}.")
    kwargs = {
        name: from_display(name, _empty_to_default(name, values[component_id(name)]))
        for name, _ in form_fields()
        if component_id(name) in values
    }
    if need_dataset and not str(kwargs.get("train_csv") or "").strip():
        raise ValueError("No dataset yet: check one in the Dataset tab (or type the train CSV path).")
    if roots is not None:
        kwargs.update(confined_paths(kwargs, roots))
    return TrainArguments(**kwargs, output_path=str(output_dir))


def confined_paths(kwargs: dict[str, Any], roots: AppRoots) -> dict[str, str]:
    """The form's paths resolved inside the app's folders (a run may be given by name); PathRefused otherwise."""
    checks = {
        "train_csv": roots.dataset_file,
        "eval_csv": roots.dataset_file,
        "custom_model": roots.model_file,
        "resume_from": roots.run_folder,
        "whisper_model": lambda value, _: roots.whisper_model(value),
    }
    confined: dict[str, Any] = {
        name: str(check(str(kwargs[name]), name))
        for name, check in checks.items()
        if isinstance(kwargs.get(name), str) and kwargs[name].strip()
    }
    if isinstance(kwargs.get("train_csv"), list):  # several datasets: each one's CSVs inside the app's folders
        language = str(kwargs.get("language") or "en")
        entries = dataset_entries(kwargs["train_csv"], kwargs.get("eval_csv") or "", language)
        inside = [str(roots.dataset_file(e.csv, "train_csv")) for e in entries]
        confined["train_csv"] = [DatasetEntry(p, e.language, e.weight, e.share).text() for p, e in zip(inside, entries)]
        if isinstance(kwargs.get("eval_csv"), list):
            evals = [e.eval_csv for e in entries]
            confined["eval_csv"] = [str(roots.dataset_file(e, "eval_csv")) if e else "" for e in evals]
    return confined


def with_form_signature(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Give `handler(*values)` a signature named after the form's ids, so the API documents (and
    gradio_client accepts) `/start_training` parameters by name."""
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in form_ids()]
    handler.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return handler


def _passing_non_numbers(component: Any) -> Any:
    """A gr.Number or gr.Slider that passes a value that is not a number, as a script may send it ("3", "abc"), to
    the declaration's check, which names the field and says what it takes. Gradio's own preprocessing failed on it
    with a TypeError, which a client sees as the generic "Error". (An instance attribute: a subclass of a
    component makes Gradio write a .pyi stub beside this file.)"""
    numeric = component.preprocess

    def preprocess(payload: Any) -> Any:
        if payload is not None and (isinstance(payload, bool) or not isinstance(payload, (int, float))):
            return payload
        return numeric(payload)

    component.preprocess = preprocess
    return component


def create_component(
    name: str, *, choices: Any = None, render: bool = False, elem_id: str | None = None, gpu_count: int | None = None
) -> Any:
    """The Gradio component of one option, as its declaration says (label, bounds, help, widget).
    A dropdown's options come in `choices`; the clip slider stops at the default length (what XTTS
    was trained with), while the API accepts up to the option's maximum. The GPU multi-select lists the
    machine's GPUs (`gpu_count`, default: detected) and is hidden unless there are two or more."""
    import gradio as gr

    spec, ui, cid = option_of(name), FORM[name], component_id(name)
    default = TrainArguments.__dataclass_fields__[name].default
    value = to_display(name, default)
    common = dict(label=ui.label, value=value, render=render, elem_id=elem_id or f"form-{cid}", info=ui.info or None)
    widget = ui.widget or (
        "checkbox" if isinstance(default, bool) else "number" if isinstance(default, (int, float)) else "textbox"
    )
    if widget == "checkbox":
        return gr.Checkbox(**common)
    if widget == "datasets":
        return gr.Textbox(**common, lines=1, max_lines=16)
    if widget == "hidden":  # an API parameter the page does not show (an alias of a shown option)
        return gr.Checkbox(**common, visible=False)
    if widget == "gpus":
        if gpu_count is None:
            from utils.device.gpu import detect_gpu

            gpu_count = detect_gpu().device_count
        return gr.CheckboxGroup(gpu_choices(gpu_count), **common, visible=gpu_count > 1)
    if widget == "radio":
        return gr.Radio(list(spec.choices or ()), **common)
    if widget == "dropdown":
        return gr.Dropdown(choices or [], allow_custom_value=True, **common)
    if widget == "slider":
        return _passing_non_numbers(gr.Slider(max(2.0, to_display(name, spec.minimum)), value, step=ui.step, **common))
    if widget == "number":
        # No `precision`: Gradio would round 2.7 to 3 before the declaration's whole-number check could refuse it.
        return _passing_non_numbers(gr.Number(minimum=spec.minimum, maximum=spec.maximum, **common))
    return gr.Textbox(**common)


def create_components(choices: dict[str, Any] | None = None, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """One unrendered component per form field, by id; the tabs render them where they belong.
    `choices` fills dropdowns, `values` replaces declared defaults that depend on the machine."""
    choices, values = choices or {}, values or {}
    components = {}
    for name, _ in form_fields():
        cid = component_id(name)
        components[cid] = create_component(name, choices=choices.get(cid))
        if cid in values:
            components[cid].value = values[cid]
    return components
