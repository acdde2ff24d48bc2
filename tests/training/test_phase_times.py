"""run.json `timings`: exclusive seconds per phase that add up to the wall time, background work apart."""

from __future__ import annotations

import threading

from utils.training.recording.phase_times import OTHER, STARTUP, PhaseTimes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nested_phases_are_exclusive_and_add_up_to_the_wall_time():
    clock = Clock()
    times = PhaseTimes(clock)
    clock.now = 5.0
    times.training_started()  # 5 s before the loop: the startup
    with times.phase("train_steps"):
        clock.now += 3.0
        with times.phase("saves"):  # a checkpoint written from the step's callback
            clock.now += 2.0
        clock.now += 1.0
    clock.now += 0.5  # counted by no phase
    with times.phase("train_steps"):
        clock.now += 4.0
    times.add("export", 1.5)
    clock.now += 1.5
    times.end()
    record = times.as_dict()
    phases = {name: entry["seconds"] for name, entry in record["phases"].items()}
    assert phases == {STARTUP: 5.0, "train_steps": 8.0, "saves": 2.0, "export": 1.5, OTHER: 0.5}
    assert record["wall_s"] == sum(phases.values()) == 17.0
    assert record["phases"]["train_steps"]["count"] == 2
    assert record["phases"]["train_steps"]["share"] == round(8 / 17, 4)


def test_work_on_another_thread_is_background_and_not_in_the_sum():
    clock = Clock()
    times = PhaseTimes(clock)

    def scoring() -> None:
        with times.phase("scoring"):
            clock.now += 0.0  # the other thread's time is measured on the same clock
        times.add_background("scoring", 7.0)

    worker = threading.Thread(target=scoring)
    worker.start()
    worker.join()
    clock.now = 3.0
    times.end()
    record = times.as_dict()
    assert record["background"] == {"scoring": 7.0}
    assert "scoring" not in record["phases"] and record["phases"][OTHER]["seconds"] == 3.0
