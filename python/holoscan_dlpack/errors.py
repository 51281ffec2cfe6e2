"""Error codes and exception types, as Holoscan 5.0's ``holoscan.errors`` names them.

Every failure the library reports is raised as the subclass of :class:`HoloscanError` for its
:class:`ErrorCode`; each instance carries ``code`` (an :class:`ErrorCode`) and ``token`` (a stable
string: the code's name, e.g. ``"INVALID_ARGUMENT"``). Branch on those, not on the message. As in
Holoscan 5.0, the classes derive from :class:`HoloscanError` only (not from ``ValueError`` or
``RuntimeError``); the DLPack protocol's own failures stay ``BufferError``, a wrong argument type
stays ``TypeError`` and an absent array interface ``AttributeError``, as Python expects.
"""

from ._core import ErrorCode


class HoloscanError(Exception):
    """Base exception for holoscan-dlpack failures.

    Every instance carries a stable ``code`` and ``token``. Branch on those fields instead of
    matching the human-readable message.
    """

    #: The category of the failure; each subclass names its own.
    code: ErrorCode = ErrorCode.FAILURE

    def __init__(self, *args: object, code: "ErrorCode | int | None" = None,
                 token: "str | None" = None) -> None:
        super().__init__(*args)
        self.code = ErrorCode(code) if code is not None else type(self).code
        #: Stable identifier of the failure: the code's name (holoscan-dlpack has no finer one).
        self.token = token if token is not None else self.code.name


class FailureError(HoloscanError):
    """A generic failure, every failed CUDA call among them."""

    code = ErrorCode.FAILURE


class ReceiveError(HoloscanError):
    """A receive operation failed."""

    code = ErrorCode.RECEIVE_ERROR


class CodecError(HoloscanError):
    """Serialization or deserialization failed."""

    code = ErrorCode.CODEC_ERROR


class InvalidArgumentError(HoloscanError):
    """An argument or an imported DLPack field is invalid."""

    code = ErrorCode.INVALID_ARGUMENT


class NotFoundError(HoloscanError):
    """Something looked up does not exist."""

    code = ErrorCode.NOT_FOUND


class DuplicateNameError(HoloscanError):
    """A name is already taken."""

    code = ErrorCode.DUPLICATE_NAME


class HoloscanNotImplementedError(HoloscanError):
    """Not implemented (prefixed so as not to shadow the builtin)."""

    code = ErrorCode.NOT_IMPLEMENTED


class BackpressuredError(HoloscanError):
    """A consumer cannot take more now."""

    code = ErrorCode.BACKPRESSURED


class NotReadyError(HoloscanError):
    """The operation would block, or the state it needs does not exist yet."""

    code = ErrorCode.NOT_READY


class StaleEndpointError(HoloscanError):
    """The endpoint no longer refers to a live peer."""

    code = ErrorCode.STALE_ENDPOINT


class ClosedError(HoloscanError):
    """The channel or peer is closed."""

    code = ErrorCode.CLOSED


class ResourceExhaustedError(HoloscanError):
    """A pool or the heap has nothing left to give."""

    code = ErrorCode.RESOURCE_EXHAUSTED


class HoloscanTimeoutError(HoloscanError):
    """A bounded wait ran out (prefixed so as not to shadow the builtin)."""

    code = ErrorCode.TIMEOUT


class PermissionDeniedError(HoloscanError):
    """The caller lacks the authority asked for (for example writing a read-only tensor)."""

    code = ErrorCode.PERMISSION_DENIED


class HoloscanInterruptedError(HoloscanError):
    """A wait was interrupted (prefixed so as not to shadow the builtin)."""

    code = ErrorCode.INTERRUPTED


class ProtocolError(HoloscanError):
    """A peer broke the wire protocol."""

    code = ErrorCode.PROTOCOL_ERROR


class IncompatibleError(HoloscanError):
    """The peer or data uses an incompatible version or layout."""

    code = ErrorCode.INCOMPATIBLE


class InputEmptyError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.INPUT_EMPTY


class InputNotSelectedError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.INPUT_NOT_SELECTED


class InputUndeclaredError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.INPUT_UNDECLARED


class InputSelectionCardinalityMismatchError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.INPUT_SELECTION_CARDINALITY_MISMATCH


class PublicationIndeterminateError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.PUBLICATION_INDETERMINATE


class NotSupportedError(HoloscanError):
    """The request is understood but refused."""

    code = ErrorCode.NOT_SUPPORTED


class LifecycleInvalidRestartStageError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_INVALID_RESTART_STAGE


class LifecycleTransactionsDisabledError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_TRANSACTIONS_DISABLED


class StaleOperatorRefError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.STALE_OPERATOR_REF


class CrossSessionOperatorRefError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.CROSS_SESSION_OPERATOR_REF


class LifecycleRestartUnauthorizedError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_RESTART_UNAUTHORIZED


class LifecycleRestartQueueFullError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_RESTART_QUEUE_FULL


class LifecycleRestartUnsupportedInProfileError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_RESTART_UNSUPPORTED_IN_PROFILE


class LifecycleInvalidCallingContextError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_INVALID_CALLING_CONTEXT


class LifecycleRunStateError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_RUN_STATE


class LifecycleQuiesceFailedError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_QUIESCE_FAILED


class LifecycleStageFailedError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_STAGE_FAILED


class LifecycleRollbackFailedError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.LIFECYCLE_ROLLBACK_FAILED


class PublicationPartialError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.PUBLICATION_PARTIAL


class RateBindingInvalidError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.RATE_BINDING_INVALID


class RateBindingAboveMaximumError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.RATE_BINDING_ABOVE_MAXIMUM


class RateBindingConflictError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.RATE_BINDING_CONFLICT


class ArithmeticOverflowError(HoloscanError):
    """A size or offset computation overflowed."""

    code = ErrorCode.ARITHMETIC_OVERFLOW


class PreparedStorageInvalidError(HoloscanError):
    """Holoscan 5.0's error of this name (its operator framework raises it)."""

    code = ErrorCode.PREPARED_STORAGE_INVALID


# Holoscan 5.0's two classes that no ErrorCode of their own names (holoscan-dlpack raises neither):
# they inherit ``code`` and stay out of the table, so that a code still raises its own class.


class ConsumedLoanError(HoloscanError):
    """A single-use Tensor loan was accessed after commit or abandonment."""


class CompileError(HoloscanError):
    """Holoscan 5.0's error of this name (compiling its Graphs raises it)."""


_WITHOUT_CODE = (ConsumedLoanError, CompileError)
_BY_CODE = {cls.code: cls for cls in HoloscanError.__subclasses__() if cls not in _WITHOUT_CODE}


def _exception_for(code: int, message: str) -> HoloscanError:
    """The exception of ``code`` (the extension raises it for every library failure)."""
    try:
        error_code = ErrorCode(code)
    except ValueError:  # outside the table: still a HoloscanError, never a lost failure
        return HoloscanError(message)
    return _BY_CODE.get(error_code, HoloscanError)(message, code=error_code)


__all__ = ["ErrorCode", "HoloscanError",
           *(cls.__name__ for cls in (*_BY_CODE.values(), *_WITHOUT_CODE))]
