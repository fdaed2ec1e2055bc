"""One record type per result: the worker pipe carries the profile record itself, nothing else.

The case is relu's, exact in any dtype: torch's float32 exp, used here before, now and then returned 1.5e-4
relative errors on one 2-core Xeon, a fact of that machine the test must not depend on."""

from bringup.probes.ops.catalog import load_catalog, select_cases
from bringup.probes.ops.runner import op_task
from bringup.probes.ops.stage import key_of, merge_results, records_for, worker_env
from bringup.probes.ops.worker import InProcessExecutor, IsolatedExecutor
from bringup.profiles.schema import Profile
from bringup.profiles.sections.ops import OpCaseRecord


def test_the_worker_returns_the_same_profile_record_as_an_in_process_run():
    (key,) = select_cases(load_catalog(), ["relu"], ["float32"], "odd")
    task = op_task(key)
    isolated = IsolatedExecutor("cpu", 120.0, worker_env(None))
    try:
        across_the_pipe = isolated.run(task)
    finally:
        isolated.close()
    in_process = InProcessExecutor("cpu").run(task)
    assert type(across_the_pipe) is OpCaseRecord and type(in_process) is OpCaseRecord
    assert across_the_pipe.status == "pass"
    assert across_the_pipe.model_dump(exclude={"seconds"}) == in_process.model_dump(exclude={"seconds"})


def test_records_go_into_the_profile_and_come_back_for_resume_unchanged():
    (key,) = select_cases(load_catalog(), ["relu"], ["float32"], "odd")
    record = InProcessExecutor("cpu").run(op_task(key))
    profile = Profile()
    merge_results(profile, [record])
    assert profile.ops == [record]
    assert records_for([key_of(op_task(key))], profile) == [record]
