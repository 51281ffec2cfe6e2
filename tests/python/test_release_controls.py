"""The release thread's controls from Python: ReleaseThreadOptions set from code and read back,
the environment winning over code, refusals naming the field with nothing changed, and producer
deleters that throw, contained and counted by failed_releases()."""

import datetime

import pytest

import holoscan_dlpack as hd
from conftest import run_python

US = datetime.timedelta(microseconds=1)
MS = datetime.timedelta(milliseconds=1)
ENV_POLL = "HOLOSCAN_DLPACK_RELEASE_POLL_US"
ENV_DRAIN = "HOLOSCAN_DLPACK_EXIT_DRAIN_MS"
ENV_BACKLOG = "HOLOSCAN_DLPACK_RELEASE_BACKLOG"


@pytest.fixture
def restored_options():
    """The options in effect before the test, set again after it."""
    before = hd.release_thread_options()
    yield before
    hd.set_release_thread_options(before)


@pytest.fixture
def no_option_environment(monkeypatch):
    monkeypatch.delenv(ENV_POLL, raising=False)
    monkeypatch.delenv(ENV_DRAIN, raising=False)
    monkeypatch.delenv(ENV_BACKLOG, raising=False)


def test_the_defaults_are_the_cpp_ones():
    options = hd.ReleaseThreadOptions()
    assert options.poll_interval == 50 * US and options.exit_drain == 5000 * MS
    assert options.backlog_limit == 4096
    assert repr(options) == ("ReleaseThreadOptions(poll_interval=50 us, exit_drain=5000 ms, "
                             "backlog_limit=4096)")
    assert options == hd.ReleaseThreadOptions(poll_interval=50 * US, exit_drain=5.0,
                                              backlog_limit=4096)
    assert options != hd.ReleaseThreadOptions(exit_drain=0)
    assert options != hd.ReleaseThreadOptions(backlog_limit=0)
    assert options != "ReleaseThreadOptions()"


def test_durations_take_timedeltas_and_seconds_in_whole_units():
    options = hd.ReleaseThreadOptions(poll_interval=0.000250, exit_drain=datetime.timedelta(
        seconds=2, microseconds=1999))
    assert options.poll_interval == 250 * US
    assert options.exit_drain == 2001 * MS, "whole milliseconds, rounded down"
    options.poll_interval = datetime.timedelta(milliseconds=3)
    options.exit_drain = 1
    assert (options.poll_interval, options.exit_drain) == (3000 * US, 1000 * MS)
    with pytest.raises(TypeError, match="poll_interval must be a datetime.timedelta or seconds"):
        options.poll_interval = "50us"
    with pytest.raises(TypeError, match="exit_drain must be"):
        hd.ReleaseThreadOptions(exit_drain=[1])


@pytest.mark.parametrize("seconds, expected", [
    (2**70, 2**63 - 1), (float("inf"), 2**63 - 1), (1e15, 2**63 - 1),
    (-(2**70), -(2**63)), (float("-inf"), -(2**63)),
], ids=["huge-int", "infinity", "huge-float", "huge-negative-int", "negative-infinity"])
def test_seconds_past_a_timedelta_are_kept_past_the_range_for_the_setter_to_refuse(
        restored_options, seconds, expected):
    # Numbers of seconds went through datetime.timedelta, which raised OverflowError for what it
    # cannot hold, where every other value out of range is refused by name when set.
    options = hd.ReleaseThreadOptions(poll_interval=seconds, exit_drain=seconds)
    assert repr(options) == (f"ReleaseThreadOptions(poll_interval={expected} us, "
                             f"exit_drain={expected} ms, backlog_limit=4096)")
    with pytest.raises(hd.errors.InvalidArgumentError, match="ReleaseThreadOptions::poll_interval"):
        hd.set_release_thread_options(options)
    assert hd.release_thread_options() == restored_options


@pytest.mark.parametrize("value, error, message", [
    (float("nan"), hd.errors.InvalidArgumentError,
     "kInvalidArgument: exit_drain must be a number of seconds, not nan"),
    (True, TypeError, "exit_drain must be a datetime.timedelta or seconds, not a bool"),
], ids=["nan", "bool"])
def test_a_duration_that_is_no_number_of_seconds_is_refused(value, error, message):
    # NaN raised timedelta's ValueError, and True was one second.
    with pytest.raises(error) as raised:
        hd.ReleaseThreadOptions(exit_drain=value)
    assert str(raised.value) == message


def test_a_timedelta_whose_division_gives_no_integer_is_a_type_error():
    # The whole units are the duration // one unit: an error there is the argument's, raised as
    # such, not left set behind a result (SystemError).
    class Odd(datetime.timedelta):
        def __floordiv__(self, other):
            return "not a count"

    with pytest.raises(TypeError, match="poll_interval must be a datetime.timedelta or seconds"):
        hd.ReleaseThreadOptions(poll_interval=Odd(microseconds=5))
    options = hd.ReleaseThreadOptions()
    with pytest.raises(TypeError, match="exit_drain must be a datetime.timedelta or seconds"):
        options.exit_drain = Odd(milliseconds=5)


def test_the_backlog_limit_is_a_whole_count_of_releases(restored_options, no_option_environment):
    options = hd.ReleaseThreadOptions(backlog_limit=0)
    assert options.backlog_limit == 0, "0: no limit"
    options.backlog_limit = 100_000
    hd.set_release_thread_options(options)
    assert hd.release_thread_options().backlog_limit == 100_000
    for wrong in (True, 1.5, "64"):
        with pytest.raises(TypeError, match="backlog_limit must be an int"):
            options.backlog_limit = wrong
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        hd.ReleaseThreadOptions(backlog_limit=-1)
    assert str(raised.value) == ("kInvalidArgument: ReleaseThreadOptions::backlog_limit must be "
                                 "0 to 100000, not -1")

    class Unprintable(int):  # its str() has no UTF-8 form: the message falls back to ascii()
        def __str__(self):
            return "\udc80"

    with pytest.raises(hd.errors.InvalidArgumentError, match="backlog_limit must be 0 to 100000"):
        hd.ReleaseThreadOptions(backlog_limit=Unprintable(-1))
    for too_many, shown in ((100_001, "100001"), (2**80, str(2**64 - 1))):
        options.backlog_limit = too_many
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            hd.set_release_thread_options(options)
        assert str(raised.value) == ("kInvalidArgument: ReleaseThreadOptions::backlog_limit must "
                                     f"be 0 to 100000, not {shown}")
        assert hd.release_thread_options().backlog_limit == 100_000, "nothing changed"


def test_options_set_from_code_read_back_as_set(restored_options, no_option_environment):
    # What the options do to the release thread is C++'s to test (release_options_test.cpp):
    # a host capsule's deleter runs at once, whatever the thread's options.
    wanted = hd.ReleaseThreadOptions(poll_interval=200 * US, exit_drain=1500 * MS,
                                     backlog_limit=64)
    assert hd.set_release_thread_options(wanted) is None
    assert hd.release_thread_options() == wanted


@pytest.mark.parametrize("field, value, message", [
    ("poll_interval", 0 * US,
     "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not 0 us"),
    ("poll_interval", datetime.timedelta(seconds=1, microseconds=1),
     "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not 1000001 us"),
    ("poll_interval", -1 * US,
     "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not -1 us"),
    ("exit_drain", datetime.timedelta(hours=24, milliseconds=1),
     "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not 86400001 ms"),
    ("exit_drain", -1 * MS,
     "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not -1 ms"),
    ("exit_drain", datetime.timedelta.max,
     "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not 86399999999999999 ms"),
    ("poll_interval", datetime.timedelta.max,  # past int64 microseconds: saturated, not wrapped
     "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not 9223372036854775807 us"),
], ids=["poll-zero", "poll-too-long", "poll-negative", "drain-too-long", "drain-negative",
        "drain-max", "poll-max"])
def test_out_of_range_values_are_refused_and_change_nothing(restored_options, field, value,
                                                            message):
    options = hd.ReleaseThreadOptions(**{field: value})
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        hd.set_release_thread_options(options)
    assert str(raised.value) == "kInvalidArgument: " + message
    assert hd.release_thread_options() == restored_options


def test_the_environment_wins_over_code():
    result = run_python(f"""
        import datetime, os
        os.environ["{ENV_POLL}"] = "300"
        os.environ["{ENV_BACKLOG}"] = "0"
        import holoscan_dlpack as hd
        us = datetime.timedelta(microseconds=1)
        hd.set_release_thread_options(hd.ReleaseThreadOptions(poll_interval=100 * us,
                                                              exit_drain=2.0, backlog_limit=9))
        options = hd.release_thread_options()
        assert options.poll_interval == 300 * us, options
        assert options.exit_drain == datetime.timedelta(seconds=2), options
        assert options.backlog_limit == 0, options
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_a_throwing_producer_deleter_is_contained_and_counted():
    # A C++ producer may throw through its (C) deleter; the release path is noexcept, so an
    # uncontained exception would end the process with std::terminate.
    result = run_python("""
        import gc
        import holoscan_dlpack as hd
        import holoscan_dlpack_testing as testing
        before = hd.failed_releases()
        calls = testing.deleter_calls()
        t = hd.from_dlpack(testing.make_capsule(shape=[4], throwing_deleter=True))
        del t
        gc.collect()
        hd.flush_deferred_releases()
        assert testing.deleter_calls() == calls + 1, "the deleter ran once"
        assert hd.failed_releases() == before + 1, hd.failed_releases()
        print("ok")
    """)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    assert result.stdout == "ok\n"
    assert ("holoscan-dlpack: a DLPack producer's deleter threw: the test producer's deleter "
            "throws; contained, what it did not free leaks") in result.stderr
