"""holoscan_dlpack.errors against Holoscan 5.0's holoscan.errors: the ErrorCode table, one class
per code with its name, `code` and `token` on every instance, and every library failure raised
as the class of its code."""

import pytest

import holoscan_dlpack as hd
from holoscan_dlpack import errors

np = pytest.importorskip("numpy")

# Holoscan 5.0's errors.pyi, in its order: (ErrorCode name, value, exception class name).
HOLOSCAN_50 = [
    ("SUCCESS", 0, None),
    ("FAILURE", 1, "FailureError"),
    ("RECEIVE_ERROR", 2, "ReceiveError"),
    ("CODEC_ERROR", 3, "CodecError"),
    ("INVALID_ARGUMENT", 4, "InvalidArgumentError"),
    ("NOT_FOUND", 5, "NotFoundError"),
    ("DUPLICATE_NAME", 6, "DuplicateNameError"),
    ("NOT_IMPLEMENTED", 7, "HoloscanNotImplementedError"),
    ("BACKPRESSURED", 8, "BackpressuredError"),
    ("NOT_READY", 9, "NotReadyError"),
    ("STALE_ENDPOINT", 10, "StaleEndpointError"),
    ("CLOSED", 11, "ClosedError"),
    ("RESOURCE_EXHAUSTED", 12, "ResourceExhaustedError"),
    ("TIMEOUT", 13, "HoloscanTimeoutError"),
    ("PERMISSION_DENIED", 14, "PermissionDeniedError"),
    ("INTERRUPTED", 15, "HoloscanInterruptedError"),
    ("PROTOCOL_ERROR", 16, "ProtocolError"),
    ("INCOMPATIBLE", 17, "IncompatibleError"),
    ("INPUT_EMPTY", 18, "InputEmptyError"),
    ("INPUT_NOT_SELECTED", 19, "InputNotSelectedError"),
    ("INPUT_UNDECLARED", 20, "InputUndeclaredError"),
    ("INPUT_SELECTION_CARDINALITY_MISMATCH", 21, "InputSelectionCardinalityMismatchError"),
    ("PUBLICATION_INDETERMINATE", 22, "PublicationIndeterminateError"),
    ("NOT_SUPPORTED", 23, "NotSupportedError"),
    ("LIFECYCLE_INVALID_RESTART_STAGE", 24, "LifecycleInvalidRestartStageError"),
    ("LIFECYCLE_TRANSACTIONS_DISABLED", 25, "LifecycleTransactionsDisabledError"),
    ("STALE_OPERATOR_REF", 26, "StaleOperatorRefError"),
    ("CROSS_SESSION_OPERATOR_REF", 27, "CrossSessionOperatorRefError"),
    ("LIFECYCLE_RESTART_UNAUTHORIZED", 28, "LifecycleRestartUnauthorizedError"),
    ("LIFECYCLE_RESTART_QUEUE_FULL", 29, "LifecycleRestartQueueFullError"),
    ("LIFECYCLE_RESTART_UNSUPPORTED_IN_PROFILE", 30,
     "LifecycleRestartUnsupportedInProfileError"),
    ("LIFECYCLE_INVALID_CALLING_CONTEXT", 31, "LifecycleInvalidCallingContextError"),
    ("LIFECYCLE_RUN_STATE", 32, "LifecycleRunStateError"),
    ("LIFECYCLE_QUIESCE_FAILED", 33, "LifecycleQuiesceFailedError"),
    ("LIFECYCLE_STAGE_FAILED", 34, "LifecycleStageFailedError"),
    ("LIFECYCLE_ROLLBACK_FAILED", 35, "LifecycleRollbackFailedError"),
    ("PUBLICATION_PARTIAL", 36, "PublicationPartialError"),
    ("RATE_BINDING_INVALID", 37, "RateBindingInvalidError"),
    ("RATE_BINDING_ABOVE_MAXIMUM", 38, "RateBindingAboveMaximumError"),
    ("RATE_BINDING_CONFLICT", 39, "RateBindingConflictError"),
    ("ARITHMETIC_OVERFLOW", 40, "ArithmeticOverflowError"),
    ("PREPARED_STORAGE_INVALID", 41, "PreparedStorageInvalidError"),
]
CLASSES = [(name, value, cls) for name, value, cls in HOLOSCAN_50 if cls]


def test_error_code_is_holoscan_50s_table():
    assert issubclass(errors.ErrorCode, int)
    assert [(c.name, c.value) for c in errors.ErrorCode] == [(n, v) for n, v, _ in HOLOSCAN_50]
    assert hd.ErrorCode is errors.ErrorCode


@pytest.mark.parametrize("name, value, cls_name", CLASSES, ids=[c[2] for c in CLASSES])
def test_one_class_per_code(name, value, cls_name):
    cls = getattr(errors, cls_name)
    assert cls.__bases__ == (errors.HoloscanError,), "5.0's classes derive from HoloscanError only"
    assert cls.code is errors.ErrorCode[name] and cls.code == value
    error = errors._exception_for(value, "what failed")
    assert type(error) is cls
    assert (error.code, error.token, str(error)) == (errors.ErrorCode(value), name, "what failed")
    with pytest.raises(errors.HoloscanError) as raised:
        raise error
    assert raised.value.code == value


def test_holoscan_error_is_an_exception_with_code_and_token():
    assert errors.HoloscanError.__bases__ == (Exception,)
    assert not issubclass(errors.InvalidArgumentError, ValueError)
    for builtin in ("NotImplementedError", "TimeoutError", "InterruptedError"):
        assert not hasattr(errors, builtin), "the three prefixed classes leave the builtins alone"
    error = errors.HoloscanError("plain")
    assert (error.code, error.token) == (errors.ErrorCode.FAILURE, "FAILURE")
    error = errors.NotFoundError("named", token="CUSTOM_TOKEN")
    assert (error.code, error.token) == (errors.ErrorCode.NOT_FOUND, "CUSTOM_TOKEN")
    assert type(errors._exception_for(0, "no error")) is errors.HoloscanError
    assert type(errors._exception_for(999, "outside the table")) is errors.HoloscanError


# Holoscan 5.0's classes that no ErrorCode names, last in its __all__.
WITHOUT_CODE = ["ConsumedLoanError", "CompileError"]


def test_all_names_every_class_in_holoscan_50s_order():
    assert errors.__all__ == ["ErrorCode", "HoloscanError", *(cls for _, _, cls in CLASSES),
                              *WITHOUT_CODE]
    assert hd.HoloscanError is errors.HoloscanError


@pytest.mark.parametrize("cls_name", WITHOUT_CODE)
def test_classes_without_a_code_of_their_own(cls_name):
    cls = getattr(errors, cls_name)
    assert cls.__bases__ == (errors.HoloscanError,)
    assert cls.__doc__
    error = cls("what failed")
    assert (error.code, error.token, str(error)) == (errors.ErrorCode.FAILURE, "FAILURE",
                                                     "what failed")
    error = cls("named", code=errors.ErrorCode.NOT_READY, token="CUSTOM_TOKEN")
    assert (error.code, error.token) == (errors.ErrorCode.NOT_READY, "CUSTOM_TOKEN")
    # A library failure of FAILURE is still FailureError.
    assert type(errors._exception_for(errors.ErrorCode.FAILURE, "failed")) is errors.FailureError


@pytest.mark.parametrize("call, error, code", [
    (lambda: hd.from_dlpack(np.arange(3), stream=0), errors.InvalidArgumentError,
     "INVALID_ARGUMENT"),
    (lambda: hd.TensorPool(memory="disk", block_bytes=256, block_count=1),
     errors.InvalidArgumentError, "INVALID_ARGUMENT"),
    (lambda: hd.TensorPool(memory="host", block_bytes=256, block_count=1).allocate([64], "float64"),
     errors.InvalidArgumentError, "INVALID_ARGUMENT"),
], ids=["stream-zero", "pool-memory", "never-fits"])
def test_library_failures_raise_the_class_of_their_code(call, error, code):
    with pytest.raises(error) as raised:
        call()
    assert raised.value.token == code
    assert raised.value.code == errors.ErrorCode[code]


def test_python_conventions_keep_their_builtins(testing):
    t = hd.from_dlpack(np.arange(3.0))
    with pytest.raises(TypeError):
        hd.from_dlpack(np.arange(3), stream="default")  # a wrong type
    with pytest.raises(BufferError):
        t.__dlpack__()  # the DLPack protocol's refusal
    with pytest.raises(BufferError):
        hd.from_dlpack(testing.make_capsule(major=2))  # a rejected import
    device = hd.as_tensor(testing.make_capsule(device=(2, 0)))
    with pytest.raises(AttributeError):
        device.__array_interface__  # noqa: B018: the absent interface
